// RMSNorm with bf16 input, weight and output, f32 arithmetic; one warp per row
// (threadIdx.y picks the row), sum of squares across the warp with shfl.bfly.
// ptx: nvcc -ptx -O3 -arch=sm_90 rmsnorm.cu -o rmsnorm.ptx
// ptx: nvcc -ptx -O3 -arch=sm_80 rmsnorm.cu -o rmsnorm.sm_80.ptx
#include <cuda_bf16.h>

extern "C" __global__ void rmsnorm_bf16(const __nv_bfloat16* __restrict__ x,
                                        const __nv_bfloat16* __restrict__ w,
                                        __nv_bfloat16* __restrict__ y, int rows, int cols,
                                        float eps) {
    int row = blockIdx.x * blockDim.y + threadIdx.y;
    if (row >= rows) return;
    int lane = threadIdx.x;
    const __nv_bfloat16* xr = x + (long long)row * cols;
    __nv_bfloat16* yr = y + (long long)row * cols;
    float sq = 0.0f;
    for (int c = lane; c < cols; c += 32) {
        float v = __bfloat162float(xr[c]);
        sq += v * v;
    }
    for (int mask = 16; mask > 0; mask >>= 1) sq += __shfl_xor_sync(0xffffffffu, sq, mask);
    float rstd = rsqrtf(sq / cols + eps);
    for (int c = lane; c < cols; c += 32) {
        float v = __bfloat162float(xr[c]) * rstd * __bfloat162float(w[c]);
        yr[c] = __float2bfloat16(v);
    }
}
