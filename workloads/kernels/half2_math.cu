// half2 math: out = relu(fma(x, w, b)) * x on packed fp16 pairs (__hfma2, __hmax2, __hmul2).
// ptx: nvcc -ptx -O3 -arch=sm_90 half2_math.cu -o half2_math.ptx
// ptx: nvcc -ptx -O3 -arch=sm_80 half2_math.cu -o half2_math.sm_80.ptx
#include <cuda_fp16.h>

extern "C" __global__ void half2_fma_relu_mul(const __half2* __restrict__ x,
                                              const __half2* __restrict__ w,
                                              const __half2* __restrict__ b,
                                              __half2* __restrict__ out, int n_pairs) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n_pairs) {
        __half2 xv = x[i];
        __half2 t = __hfma2(xv, w[i], b[i]);
        t = __hmax2(t, __float2half2_rn(0.0f));
        out[i] = __hmul2(t, xv);
    }
}
