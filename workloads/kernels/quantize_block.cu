// bf16 -> fp8 e4m3 with DeepSeek-V3's fine-grained scales: one f32 scale per 1 x 128 strip
// of a row (scale = max(amax, 1e-4) / 448, q = x / scale, round to nearest, saturate), and
// the transposed copy a wgrad GEMM reads K-major: qt[c, r] with one scale per 128 x 1
// strip of a column (scales_t[c, r / 128]).
// quantize_e4m3_1x128: a warp per strip, 4 elements (8 bytes) per lane, block (32, 4);
//   grid x = row, y = group of 4 strips; cols a multiple of 4 (a last partial strip is
//   masked).
// quantize_e4m3_128x1_t: a CTA per 128-row x 32-column tile, block (32, 8): lane = column,
//   threadIdx.y = 16 consecutive rows; amax over the 128 rows through shared memory; each
//   thread stores its 16 quantized rows as one 16-byte vector; rows a multiple of 16.
// ptx: nvcc -ptx -O3 -arch=sm_90 quantize_block.cu -o quantize_block.ptx
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#define E4M3_MAX 448.0f
#define AMAX_FLOOR 1e-4f

__device__ __forceinline__ unsigned pack4(float a, float b, float c, float d) {
    unsigned lo = __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
    unsigned hi = __nv_cvt_float2_to_fp8x2(make_float2(c, d), __NV_SATFINITE, __NV_E4M3);
    return lo | (hi << 16);
}

extern "C" __global__ void quantize_e4m3_1x128(const __nv_bfloat16* __restrict__ x,
                                               unsigned char* __restrict__ q,
                                               float* __restrict__ scales, int rows, int cols) {
    long long r = blockIdx.x;
    int strip = blockIdx.y * blockDim.y + threadIdx.y;
    int strips = (cols + 127) / 128;
    if (r >= rows || strip >= strips) return;
    int col = strip * 128 + threadIdx.x * 4;
    bool in = col < cols;
    float2 a = make_float2(0.0f, 0.0f), b = a;
    if (in) {
        uint2 raw = *reinterpret_cast<const uint2*>(x + r * cols + col);
        a = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&raw.x));
        b = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&raw.y));
    }
    float amax = fmaxf(fmaxf(fabsf(a.x), fabsf(a.y)), fmaxf(fabsf(b.x), fabsf(b.y)));
    for (int mask = 16; mask > 0; mask >>= 1)
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, mask));
    float scale = fmaxf(amax, AMAX_FLOOR) / E4M3_MAX;
    float inv = 1.0f / scale;
    if (in)
        *reinterpret_cast<unsigned*>(q + r * cols + col) =
            pack4(a.x * inv, a.y * inv, b.x * inv, b.y * inv);
    if (threadIdx.x == 0) scales[r * strips + strip] = scale;
}

extern "C" __global__ void quantize_e4m3_128x1_t(const __nv_bfloat16* __restrict__ x,
                                                 unsigned char* __restrict__ qt,
                                                 float* __restrict__ scales_t, int rows,
                                                 int cols) {
    __shared__ float partial[8][32];
    int c = blockIdx.x * 32 + threadIdx.x;
    int r0 = blockIdx.y * 128 + threadIdx.y * 16;
    bool in = c < cols && r0 < rows;
    float v[16];
    float amax = 0.0f;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
        v[i] = in ? __bfloat162float(x[(long long)(r0 + i) * cols + c]) : 0.0f;
        amax = fmaxf(amax, fabsf(v[i]));
    }
    partial[threadIdx.y][threadIdx.x] = amax;
    __syncthreads();
    amax = partial[0][threadIdx.x];
#pragma unroll
    for (int j = 1; j < 8; ++j) amax = fmaxf(amax, partial[j][threadIdx.x]);
    float scale = fmaxf(amax, AMAX_FLOOR) / E4M3_MAX;
    float inv = 1.0f / scale;
    if (!in) return;
    uint4 out;
    out.x = pack4(v[0] * inv, v[1] * inv, v[2] * inv, v[3] * inv);
    out.y = pack4(v[4] * inv, v[5] * inv, v[6] * inv, v[7] * inv);
    out.z = pack4(v[8] * inv, v[9] * inv, v[10] * inv, v[11] * inv);
    out.w = pack4(v[12] * inv, v[13] * inv, v[14] * inv, v[15] * inv);
    *reinterpret_cast<uint4*>(qt + (long long)c * rows + r0) = out;
    int strips = (rows + 127) / 128;
    if (threadIdx.y == 0) scales_t[(long long)c * strips + blockIdx.y] = scale;
}
