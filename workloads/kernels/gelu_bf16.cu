// GELU (tanh form) forward and backward on bf16 [rows, cols] with f32 arithmetic; each
// thread moves 8 elements (16 bytes) per access, cols a multiple of 8. Grid: x = row,
// y = chunk of blockDim.x vectors of that row.
// ptx: nvcc -ptx -O3 -arch=sm_90 gelu_bf16.cu -o gelu_bf16.ptx
// ptx: nvcc -ptx -O3 -arch=sm_80 gelu_bf16.cu -o gelu_bf16.sm_80.ptx
#include <cuda_bf16.h>

union Pack8 {
    uint4 u;
    __nv_bfloat162 h[4];
};

__device__ __forceinline__ float gelu(float v) {
    float inner = 0.7978845608f * (v + 0.044715f * v * v * v);
    return 0.5f * v * (1.0f + tanhf(inner));
}

__device__ __forceinline__ float gelu_grad(float v) {
    float inner = 0.7978845608f * (v + 0.044715f * v * v * v);
    float t = tanhf(inner);
    float dinner = 0.7978845608f * (1.0f + 3.0f * 0.044715f * v * v);
    return 0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * dinner;
}

extern "C" __global__ void gelu_bf16(const __nv_bfloat16* __restrict__ x,
                                     __nv_bfloat16* __restrict__ y, int rows, int cols) {
    int v = blockIdx.y * blockDim.x + threadIdx.x;
    long long r = blockIdx.x;
    if (r >= rows || v * 8 >= cols) return;
    Pack8 a, o;
    a.u = reinterpret_cast<const uint4*>(x + r * cols)[v];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        float2 f = __bfloat1622float2(a.h[j]);
        o.h[j] = __floats2bfloat162_rn(gelu(f.x), gelu(f.y));
    }
    reinterpret_cast<uint4*>(y + r * cols)[v] = o.u;
}

extern "C" __global__ void gelu_bwd_bf16(const __nv_bfloat16* __restrict__ x,
                                         const __nv_bfloat16* __restrict__ dy,
                                         __nv_bfloat16* __restrict__ dx, int rows, int cols) {
    int v = blockIdx.y * blockDim.x + threadIdx.x;
    long long r = blockIdx.x;
    if (r >= rows || v * 8 >= cols) return;
    Pack8 a, d, o;
    a.u = reinterpret_cast<const uint4*>(x + r * cols)[v];
    d.u = reinterpret_cast<const uint4*>(dy + r * cols)[v];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        float2 f = __bfloat1622float2(a.h[j]);
        float2 g = __bfloat1622float2(d.h[j]);
        o.h[j] = __floats2bfloat162_rn(g.x * gelu_grad(f.x), g.y * gelu_grad(f.y));
    }
    reinterpret_cast<uint4*>(dx + r * cols)[v] = o.u;
}
