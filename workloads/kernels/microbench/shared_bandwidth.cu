// Shared-memory load bandwidth. Each CTA fills a 1024-word shared array with word w = w; then
// in each of `iters` iterations every thread issues UNROLL 32-bit loads of word
// (lane * stride) % 1024 as inline PTX `ld.shared.u32` (volatile, so each is issued although
// only the last iteration's values are used: the loop is loads and loop control only, and no
// dependency chain competes with the loads for issue). stride 1: the 32 lanes of a warp hit
// 32 different banks (one wavefront per warp load); stride 32: all lanes hit bank 0 at 32
// different words (a 32-way conflict). out[global thread] = sum of the last UNROLL values.
// ptx: nvcc -ptx -O3 -arch=sm_80 shared_bandwidth.cu -o shared_bandwidth.ptx

#define WORDS 1024
#define UNROLL 16

extern "C" __global__ void shared_bandwidth(unsigned* __restrict__ out, int stride, int iters) {
    __shared__ unsigned words[WORDS];
    for (int w = threadIdx.x; w < WORDS; w += blockDim.x) words[w] = w;
    __syncthreads();
    unsigned addr = static_cast<unsigned>(
        __cvta_generic_to_shared(&words[((threadIdx.x & 31) * stride) % WORDS]));
    unsigned v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) v[u] = 0;
#pragma unroll 1
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v[u]) : "r"(addr) : "memory");
        }
    }
    unsigned sum = 0;
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) sum += v[u];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}
