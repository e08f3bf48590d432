// The ld_read kernel of l2_bandwidth_hw.cu alone (1024 threads per CTA, 16-byte
// ld.global.cg loads over the CTA's own region, four in flight per thread), for the
// simulator: benchmarks/hardware/l2_ld_sim.py times it as the hardware run timed it.
// ptx: nvcc -ptx -O3 -arch=sm_90a l2_ld_read.cu -o l2_ld_read.ptx
#include <cstdint>

extern "C" __global__ void ld_read(const uint4* __restrict__ src, long long region, int iters,
                                   long long* __restrict__ cycles, uint4* __restrict__ sink) {
    long long words = region / 16;
    const uint4* base = src + blockIdx.x * words;
    uint32_t acc = 0;
    long long t0 = clock64();
    for (int i = 0; i < iters; ++i) {
        for (long long w = threadIdx.x; w < words; w += 4 * blockDim.x) {
            uint4 v[4];
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                long long at = w + u * blockDim.x;
                if (at >= words) at = w;
                asm volatile("ld.global.cg.v4.u32 {%0,%1,%2,%3}, [%4];"
                             : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w)
                             : "l"(base + at));
            }
#pragma unroll
            for (int u = 0; u < 4; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) cycles[blockIdx.x] = clock64() - t0;
    if (acc == 0x12345678u) sink[threadIdx.x] = make_uint4(acc, 0, 0, 0);
}
