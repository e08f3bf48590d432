// Warp-shuffle block reduction: shfl.down within each warp, warp sums through shared memory,
// then shfl.bfly (xor) across the first warp. Each block writes one sum to out[blockIdx.x].
// ptx: nvcc -ptx -O3 -arch=sm_90 warp_reduce.cu -o warp_reduce.ptx
// ptx: nvcc -ptx -O3 -arch=sm_80 warp_reduce.cu -o warp_reduce.sm_80.ptx

extern "C" __global__ void warp_reduce_sum(const float* __restrict__ x, float* __restrict__ out,
                                           int n) {
    __shared__ float warp_sums[32];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x & 31;
    int warp = threadIdx.x >> 5;
    float v = (i < n) ? x[i] : 0.0f;
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        int n_warps = (blockDim.x + 31) >> 5;
        float w = (lane < n_warps) ? warp_sums[lane] : 0.0f;
        for (int mask = 16; mask > 0; mask >>= 1) w += __shfl_xor_sync(0xffffffffu, w, mask);
        if (lane == 0) out[blockIdx.x] = w;
    }
}
