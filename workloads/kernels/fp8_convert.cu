// fp8 e4m3 conversions with a per-tensor scale: quantize (x * inv_scale, round to nearest,
// saturate to +-448 via cvt.rn.satfinite), a packed pair quantize (e4m3x2, element 2i in the
// low byte), and dequantize (e4m3 -> f32, times scale).
// ptx: nvcc -ptx -O3 -arch=sm_90 fp8_convert.cu -o fp8_convert.ptx
#include <cuda_fp8.h>

extern "C" __global__ void quantize_e4m3(const float* __restrict__ x,
                                         __nv_fp8_e4m3* __restrict__ q, float inv_scale, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) q[i] = __nv_fp8_e4m3(x[i] * inv_scale);
}

extern "C" __global__ void quantize_e4m3_pairs(const float2* __restrict__ x,
                                               __nv_fp8x2_storage_t* __restrict__ q,
                                               float inv_scale, int n_pairs) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n_pairs) {
        float2 v = x[i];
        v.x *= inv_scale;
        v.y *= inv_scale;
        q[i] = __nv_cvt_float2_to_fp8x2(v, __NV_SATFINITE, __NV_E4M3);
    }
}

extern "C" __global__ void dequantize_e4m3(const __nv_fp8_e4m3* __restrict__ q,
                                           float* __restrict__ y, float scale, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = static_cast<float>(q[i]) * scale;
}
