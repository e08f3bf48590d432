// RMSNorm with bf16 input, weight and output, f32 arithmetic, the way production kernels
// (vLLM / FlashInfer rmsnorm) are written: one thread block per row, 16-byte loads of 8
// bf16 each, up to 4 such vectors per thread kept in registers between the two passes
// (rows up to 4 x 8 x blockDim columns are read once), sum of squares by warp shuffles and
// a shared-memory exchange between warps. Columns must be a multiple of 8; cols8 = cols / 8.
// ptx: nvcc -ptx -O3 -arch=sm_90 rmsnorm_rows.cu -o rmsnorm_rows.ptx
// ptx: nvcc -ptx -O3 -arch=sm_80 rmsnorm_rows.cu -o rmsnorm_rows.sm_80.ptx
#include <cuda_bf16.h>

#define VECS 4

__device__ __forceinline__ float sum_squares8(uint4 v) {
    const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&v);
    float s = 0.0f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        float2 f = __bfloat1622float2(h[i]);
        s += f.x * f.x + f.y * f.y;
    }
    return s;
}

__device__ __forceinline__ uint4 scale8(uint4 v, uint4 w, float rstd) {
    const __nv_bfloat162* hv = reinterpret_cast<const __nv_bfloat162*>(&v);
    const __nv_bfloat162* hw = reinterpret_cast<const __nv_bfloat162*>(&w);
    uint4 out;
    __nv_bfloat162* ho = reinterpret_cast<__nv_bfloat162*>(&out);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        float2 f = __bfloat1622float2(hv[i]);
        float2 g = __bfloat1622float2(hw[i]);
        ho[i] = __floats2bfloat162_rn(f.x * rstd * g.x, f.y * rstd * g.y);
    }
    return out;
}

extern "C" __global__ void rmsnorm_bf16_rows(const uint4* __restrict__ x,
                                             const uint4* __restrict__ w,
                                             uint4* __restrict__ y, int cols8, float eps) {
    __shared__ float partial[32];
    const uint4* xr = x + (long long)blockIdx.x * cols8;
    uint4* yr = y + (long long)blockIdx.x * cols8;
    uint4 held[VECS];
    float sq = 0.0f;
#pragma unroll
    for (int i = 0; i < VECS; ++i) {
        int c = threadIdx.x + i * blockDim.x;
        if (c < cols8) {
            held[i] = xr[c];
            sq += sum_squares8(held[i]);
        }
    }
    for (int c = threadIdx.x + VECS * blockDim.x; c < cols8; c += blockDim.x)
        sq += sum_squares8(xr[c]);
    for (int mask = 16; mask > 0; mask >>= 1) sq += __shfl_xor_sync(0xffffffffu, sq, mask);
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    if (lane == 0) partial[warp] = sq;
    __syncthreads();
    if (warp == 0) {
        int warps = (blockDim.x + 31) >> 5;
        sq = lane < warps ? partial[lane] : 0.0f;
        for (int mask = 16; mask > 0; mask >>= 1) sq += __shfl_xor_sync(0xffffffffu, sq, mask);
        if (lane == 0) partial[0] = sq;
    }
    __syncthreads();
    float rstd = rsqrtf(partial[0] / (8.0f * cols8) + eps);
#pragma unroll
    for (int i = 0; i < VECS; ++i) {
        int c = threadIdx.x + i * blockDim.x;
        if (c < cols8) yr[c] = scale8(held[i], w[c], rstd);
    }
    for (int c = threadIdx.x + VECS * blockDim.x; c < cols8; c += blockDim.x)
        yr[c] = scale8(xr[c], w[c], rstd);
}
