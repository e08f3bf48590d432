// bf16 -> fp8 e4m3. With DeepSeek-V3's fine-grained scales: one f32 scale per 1 x 128 strip
// of a row (scale = max(amax, 1e-4) / 448, q = x / scale, round to nearest, saturate), and
// the transposed copy a wgrad GEMM reads K-major: qt[c, r] with one scale per 128 x 1
// strip of a column (scales_t[c, r / 128]).
// quantize_e4m3_1x128: a half-warp per strip, 8 elements (16 bytes) per lane, block (32, 4)
//   = 8 strips; grid x = row, y = group of 8 strips; cols a multiple of 8 (a last partial
//   strip is masked).
// quantize_e4m3_128x1_t: a CTA per 128-row x 64-column tile, block (32, 8): lane = a column
//   pair (bf16x2 loads, 128 bytes per warp row), threadIdx.y = 16 consecutive rows, all 16
//   loads issued before their use; amax over the 128 rows through shared memory; each
//   thread stores its 16 quantized rows of each column as one 16-byte vector; rows a
//   multiple of 16, cols even.
// quantize_e4m3_tensor: one f32 scale for the whole tensor, read from device memory (a
//   static scale, as an FP8 linear layer with a calibrated input scale quantizes its bf16
//   activation before its per-tensor-scaled GEMM): q = x * (1 / scale); 8 elements (16
//   bytes in, 8 out) per thread, one vector per thread of a 1-D grid; n a multiple of 8,
//   below 2^31.
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
    int half = threadIdx.x >> 4, lane = threadIdx.x & 15;
    int strip = (blockIdx.y * blockDim.y + threadIdx.y) * 2 + half;
    int strips = (cols + 127) / 128;
    if (r >= rows || blockIdx.y * blockDim.y + threadIdx.y >= (strips + 1) / 2) return;
    int col = strip * 128 + lane * 8;
    bool in = strip < strips && col < cols;
    uint4 raw = make_uint4(0u, 0u, 0u, 0u);
    if (in) raw = *reinterpret_cast<const uint4*>(x + r * cols + col);
    float2 a = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&raw.x));
    float2 b = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&raw.y));
    float2 c = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&raw.z));
    float2 d = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&raw.w));
    float amax = fmaxf(fmaxf(fmaxf(fabsf(a.x), fabsf(a.y)), fmaxf(fabsf(b.x), fabsf(b.y))),
                       fmaxf(fmaxf(fabsf(c.x), fabsf(c.y)), fmaxf(fabsf(d.x), fabsf(d.y))));
    for (int mask = 8; mask > 0; mask >>= 1)  // within each half-warp (one strip)
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, mask));
    float scale = fmaxf(amax, AMAX_FLOOR) / E4M3_MAX;
    float inv = 1.0f / scale;
    if (!in) return;
    uint2 out;
    out.x = pack4(a.x * inv, a.y * inv, b.x * inv, b.y * inv);
    out.y = pack4(c.x * inv, c.y * inv, d.x * inv, d.y * inv);
    *reinterpret_cast<uint2*>(q + r * cols + col) = out;
    if (lane == 0) scales[r * strips + strip] = scale;
}

extern "C" __global__ void quantize_e4m3_128x1_t(const __nv_bfloat16* __restrict__ x,
                                                 unsigned char* __restrict__ qt,
                                                 float* __restrict__ scales_t, int rows,
                                                 int cols) {
    __shared__ float2 partial[8][32];
    int c = blockIdx.x * 64 + threadIdx.x * 2;
    int r0 = blockIdx.y * 128 + threadIdx.y * 16;
    bool in = c < cols && r0 < rows;
    __nv_bfloat162 raw[16];
    const __nv_bfloat162* src = reinterpret_cast<const __nv_bfloat162*>(x + (long long)r0 * cols + c);
    if (in) {
#pragma unroll
        for (int i = 0; i < 16; ++i) raw[i] = src[(long long)i * (cols / 2)];
    } else {
#pragma unroll
        for (int i = 0; i < 16; ++i) raw[i] = __floats2bfloat162_rn(0.0f, 0.0f);
    }
    float2 v[16];
    float2 amax = make_float2(0.0f, 0.0f);
#pragma unroll
    for (int i = 0; i < 16; ++i) {
        v[i] = __bfloat1622float2(raw[i]);
        amax.x = fmaxf(amax.x, fabsf(v[i].x));
        amax.y = fmaxf(amax.y, fabsf(v[i].y));
    }
    partial[threadIdx.y][threadIdx.x] = amax;
    __syncthreads();
#pragma unroll
    for (int j = 0; j < 8; ++j) {
        amax.x = fmaxf(amax.x, partial[j][threadIdx.x].x);
        amax.y = fmaxf(amax.y, partial[j][threadIdx.x].y);
    }
    float2 scale = make_float2(fmaxf(amax.x, AMAX_FLOOR) / E4M3_MAX,
                               fmaxf(amax.y, AMAX_FLOOR) / E4M3_MAX);
    float2 inv = make_float2(1.0f / scale.x, 1.0f / scale.y);
    if (!in) return;
    uint4 lo, hi;
    lo.x = pack4(v[0].x * inv.x, v[1].x * inv.x, v[2].x * inv.x, v[3].x * inv.x);
    lo.y = pack4(v[4].x * inv.x, v[5].x * inv.x, v[6].x * inv.x, v[7].x * inv.x);
    lo.z = pack4(v[8].x * inv.x, v[9].x * inv.x, v[10].x * inv.x, v[11].x * inv.x);
    lo.w = pack4(v[12].x * inv.x, v[13].x * inv.x, v[14].x * inv.x, v[15].x * inv.x);
    hi.x = pack4(v[0].y * inv.y, v[1].y * inv.y, v[2].y * inv.y, v[3].y * inv.y);
    hi.y = pack4(v[4].y * inv.y, v[5].y * inv.y, v[6].y * inv.y, v[7].y * inv.y);
    hi.z = pack4(v[8].y * inv.y, v[9].y * inv.y, v[10].y * inv.y, v[11].y * inv.y);
    hi.w = pack4(v[12].y * inv.y, v[13].y * inv.y, v[14].y * inv.y, v[15].y * inv.y);
    *reinterpret_cast<uint4*>(qt + (long long)c * rows + r0) = lo;
    *reinterpret_cast<uint4*>(qt + (long long)(c + 1) * rows + r0) = hi;
    if (threadIdx.y == 0) {
        int strips = (rows + 127) / 128;
        scales_t[(long long)c * strips + blockIdx.y] = scale.x;
        scales_t[(long long)(c + 1) * strips + blockIdx.y] = scale.y;
    }
}

extern "C" __global__ void quantize_e4m3_tensor(const __nv_bfloat16* __restrict__ x,
                                                unsigned char* __restrict__ q,
                                                const float* __restrict__ scale, int n) {
    long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * 8;
    if (i >= n) return;
    float inv = 1.0f / scale[0];
    uint4 raw = *reinterpret_cast<const uint4*>(x + i);
    float2 a = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&raw.x));
    float2 b = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&raw.y));
    float2 c = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&raw.z));
    float2 d = __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&raw.w));
    uint2 out;
    out.x = pack4(a.x * inv, a.y * inv, b.x * inv, b.y * inv);
    out.y = pack4(c.x * inv, c.y * inv, d.x * inv, d.y * inv);
    *reinterpret_cast<uint2*>(q + i) = out;
}
