// SwiGLU over a fused gate/up projection, bf16 in/out with f32 arithmetic. Row r of `gu`
// holds [gate (cols) | up (cols)]; forward out[r, c] = silu(gate) * up, backward takes
// dout and writes d(gate) and d(up) into the same [gate | up] layout. Each thread moves
// 8 elements (16 bytes) per access; cols must be a multiple of 8. Grid: x = row,
// y = chunk of blockDim.x vectors of that row.
// ptx: nvcc -ptx -O3 -arch=sm_90 swiglu.cu -o swiglu.ptx
// ptx: nvcc -ptx -O3 -arch=sm_80 swiglu.cu -o swiglu.sm_80.ptx
#include <cuda_bf16.h>

union Pack8 {
    uint4 u;
    __nv_bfloat162 h[4];
};

__device__ __forceinline__ float sigmoid(float g) { return 1.0f / (1.0f + __expf(-g)); }

extern "C" __global__ void swiglu_bf16(const __nv_bfloat16* __restrict__ gu,
                                       __nv_bfloat16* __restrict__ out, int rows, int cols) {
    int v = blockIdx.y * blockDim.x + threadIdx.x;
    long long r = blockIdx.x;
    if (r >= rows || v * 8 >= cols) return;
    const __nv_bfloat16* row = gu + r * 2 * cols;
    Pack8 g, u, o;
    g.u = reinterpret_cast<const uint4*>(row)[v];
    u.u = reinterpret_cast<const uint4*>(row + cols)[v];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        float2 gf = __bfloat1622float2(g.h[j]);
        float2 uf = __bfloat1622float2(u.h[j]);
        o.h[j] = __floats2bfloat162_rn(gf.x * sigmoid(gf.x) * uf.x, gf.y * sigmoid(gf.y) * uf.y);
    }
    reinterpret_cast<uint4*>(out + r * cols)[v] = o.u;
}

extern "C" __global__ void swiglu_bwd_bf16(const __nv_bfloat16* __restrict__ gu,
                                           const __nv_bfloat16* __restrict__ dout,
                                           __nv_bfloat16* __restrict__ dgu, int rows, int cols) {
    int v = blockIdx.y * blockDim.x + threadIdx.x;
    long long r = blockIdx.x;
    if (r >= rows || v * 8 >= cols) return;
    const __nv_bfloat16* row = gu + r * 2 * cols;
    Pack8 g, u, d, dg, du;
    g.u = reinterpret_cast<const uint4*>(row)[v];
    u.u = reinterpret_cast<const uint4*>(row + cols)[v];
    d.u = reinterpret_cast<const uint4*>(dout + r * cols)[v];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        float2 gf = __bfloat1622float2(g.h[j]);
        float2 uf = __bfloat1622float2(u.h[j]);
        float2 df = __bfloat1622float2(d.h[j]);
        float sx = sigmoid(gf.x), sy = sigmoid(gf.y);
        dg.h[j] = __floats2bfloat162_rn(df.x * uf.x * sx * (1.0f + gf.x * (1.0f - sx)),
                                        df.y * uf.y * sy * (1.0f + gf.y * (1.0f - sy)));
        du.h[j] = __floats2bfloat162_rn(df.x * gf.x * sx, df.y * gf.y * sy);
    }
    __nv_bfloat16* drow = dgu + r * 2 * cols;
    reinterpret_cast<uint4*>(drow)[v] = dg.u;
    reinterpret_cast<uint4*>(drow + cols)[v] = du.u;
}
