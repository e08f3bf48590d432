// Rotary position embedding on bf16 [rows, cols] (rows = batch x seqlen tokens, cols =
// heads x rot_dim rotated columns), interleaved pairs (x[2i], x[2i+1]) rotated by the
// angle of pair i in a precomputed f32 (cos, sin) table [seqlen, rot_dim / 2]; the token
// of row r sits at position r % seqlen. sin_sign = -1 rotates back (the backward pass).
// Each thread moves 8 elements (4 pairs, 16 bytes); rot_dim a multiple of 8 dividing cols.
// Grid: x = row, y = chunk of blockDim.x vectors of that row.
// ptx: nvcc -ptx -O3 -arch=sm_90 rope.cu -o rope.ptx
// ptx: nvcc -ptx -O3 -arch=sm_80 rope.cu -o rope.sm_80.ptx
#include <cuda_bf16.h>

union Pack8 {
    uint4 u;
    __nv_bfloat162 h[4];
};

extern "C" __global__ void rope_bf16(const __nv_bfloat16* __restrict__ x,
                                     const float2* __restrict__ cos_sin,
                                     __nv_bfloat16* __restrict__ y, int rows, int cols,
                                     int rot_dim, int seqlen, float sin_sign) {
    int v = blockIdx.y * blockDim.x + threadIdx.x;
    long long r = blockIdx.x;
    if (r >= rows || v * 8 >= cols) return;
    int pos = r % seqlen;
    int pair = (v * 8 % rot_dim) / 2;
    const float4* table = reinterpret_cast<const float4*>(cos_sin + (long long)pos * (rot_dim / 2) + pair);
    float4 cs01 = table[0], cs23 = table[1];
    float c[4] = {cs01.x, cs01.z, cs23.x, cs23.z};
    float s[4] = {cs01.y * sin_sign, cs01.w * sin_sign, cs23.y * sin_sign, cs23.w * sin_sign};
    Pack8 a, o;
    a.u = reinterpret_cast<const uint4*>(x + r * cols)[v];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        float2 f = __bfloat1622float2(a.h[j]);
        o.h[j] = __floats2bfloat162_rn(f.x * c[j] - f.y * s[j], f.x * s[j] + f.y * c[j]);
    }
    reinterpret_cast<uint4*>(y + r * cols)[v] = o.u;
}
