// Input gradients of RMSNorm and LayerNorm, bf16 x, weight, dy and dx, f32 arithmetic;
// a warp per row (threadIdx.y picks the row), 2 elements (bf16x2) per lane per access,
// cols even. One pass accumulates the row sums, a second writes dx:
//   RMSNorm:   g = dy w, rstd = 1 / sqrt(mean(x^2) + eps),
//              dx = rstd g - x rstd^3 mean(g x)
//   LayerNorm: g = dy gamma, xhat = (x - mean) rstd,
//              dx = rstd (g - mean(g) - xhat mean(g xhat))
// The weight gradients (column sums over rows) are a separate reduction, not done here.
// ptx: nvcc -ptx -O3 -arch=sm_90 norm_backward.cu -o norm_backward.ptx
// ptx: nvcc -ptx -O3 -arch=sm_80 norm_backward.cu -o norm_backward.sm_80.ptx
#include <cuda_bf16.h>

__device__ __forceinline__ float warp_sum(float v) {
    for (int mask = 16; mask > 0; mask >>= 1) v += __shfl_xor_sync(0xffffffffu, v, mask);
    return v;
}

__device__ __forceinline__ float2 load2(const __nv_bfloat16* p, int c) {
    return __bfloat1622float2(reinterpret_cast<const __nv_bfloat162*>(p)[c]);
}

extern "C" __global__ void rmsnorm_bwd_bf16(const __nv_bfloat16* __restrict__ x,
                                            const __nv_bfloat16* __restrict__ w,
                                            const __nv_bfloat16* __restrict__ dy,
                                            __nv_bfloat16* __restrict__ dx, int rows, int cols,
                                            float eps) {
    int row = blockIdx.x * blockDim.y + threadIdx.y;
    if (row >= rows) return;
    const __nv_bfloat16* xr = x + (long long)row * cols;
    const __nv_bfloat16* dr = dy + (long long)row * cols;
    float sq = 0.0f, gx = 0.0f;
    for (int c = threadIdx.x; c < cols / 2; c += 32) {
        float2 xv = load2(xr, c), wv = load2(w, c), dv = load2(dr, c);
        sq += xv.x * xv.x + xv.y * xv.y;
        gx += dv.x * wv.x * xv.x + dv.y * wv.y * xv.y;
    }
    sq = warp_sum(sq);
    gx = warp_sum(gx);
    float rstd = rsqrtf(sq / cols + eps);
    float k = rstd * rstd * rstd * gx / cols;
    __nv_bfloat162* out = reinterpret_cast<__nv_bfloat162*>(dx + (long long)row * cols);
    for (int c = threadIdx.x; c < cols / 2; c += 32) {
        float2 xv = load2(xr, c), wv = load2(w, c), dv = load2(dr, c);
        out[c] = __floats2bfloat162_rn(rstd * dv.x * wv.x - xv.x * k,
                                       rstd * dv.y * wv.y - xv.y * k);
    }
}

extern "C" __global__ void layernorm_bwd_bf16(const __nv_bfloat16* __restrict__ x,
                                              const __nv_bfloat16* __restrict__ gamma,
                                              const __nv_bfloat16* __restrict__ dy,
                                              __nv_bfloat16* __restrict__ dx, int rows,
                                              int cols, float eps) {
    int row = blockIdx.x * blockDim.y + threadIdx.y;
    if (row >= rows) return;
    const __nv_bfloat16* xr = x + (long long)row * cols;
    const __nv_bfloat16* dr = dy + (long long)row * cols;
    float sx = 0.0f, sq = 0.0f, sg = 0.0f, sgx = 0.0f;
    for (int c = threadIdx.x; c < cols / 2; c += 32) {
        float2 xv = load2(xr, c), wv = load2(gamma, c), dv = load2(dr, c);
        float g0 = dv.x * wv.x, g1 = dv.y * wv.y;
        sx += xv.x + xv.y;
        sq += xv.x * xv.x + xv.y * xv.y;
        sg += g0 + g1;
        sgx += g0 * xv.x + g1 * xv.y;
    }
    sx = warp_sum(sx);
    sq = warp_sum(sq);
    sg = warp_sum(sg);
    sgx = warp_sum(sgx);
    float mean = sx / cols;
    float rstd = rsqrtf(fmaxf(sq / cols - mean * mean, 0.0f) + eps);
    float mean_g = sg / cols;
    float mean_gxhat = rstd * (sgx / cols - mean * mean_g);
    __nv_bfloat162* out = reinterpret_cast<__nv_bfloat162*>(dx + (long long)row * cols);
    for (int c = threadIdx.x; c < cols / 2; c += 32) {
        float2 xv = load2(xr, c), wv = load2(gamma, c), dv = load2(dr, c);
        float h0 = (xv.x - mean) * rstd, h1 = (xv.y - mean) * rstd;
        out[c] = __floats2bfloat162_rn(rstd * (dv.x * wv.x - mean_g - h0 * mean_gxhat),
                                       rstd * (dv.y * wv.y - mean_g - h1 * mean_gxhat));
    }
}
