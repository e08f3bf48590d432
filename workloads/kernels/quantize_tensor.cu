// bf16 -> fp8 e4m3 with one f32 scale for the whole tensor, read from device memory (a
// static scale, as an FP8 linear layer with a calibrated input scale quantizes its bf16
// activation before its per-tensor-scaled GEMM): q = x * (1 / scale), round to nearest,
// saturate to +-448.
// quantize_e4m3_tensor: 8 elements (16 bytes in, 8 bytes out) per thread, one vector per
//   thread of a 1-D grid; n a multiple of 8, below 2^31.
// ptx: nvcc -ptx -O3 -arch=sm_90 quantize_tensor.cu -o quantize_tensor.ptx
#include <cuda_bf16.h>
#include <cuda_fp8.h>

__device__ __forceinline__ unsigned pack4(float a, float b, float c, float d) {
    unsigned lo = __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
    unsigned hi = __nv_cvt_float2_to_fp8x2(make_float2(c, d), __NV_SATFINITE, __NV_E4M3);
    return lo | (hi << 16);
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
