// Sum of `inputs` bf16 tensors [rows, cols] stacked `stride` elements apart in one buffer
// (a residual add, the MoE combine of top-k expert outputs plus the shared expert, or the
// accumulation of gradients), f32 accumulation, bf16 out. Each thread moves 8 elements
// (16 bytes) per access, four inputs at a time; cols a multiple of 8. Grid: x = row,
// y = chunk of vectors.
// ptx: nvcc -ptx -O3 -arch=sm_90 residual_add.cu -o residual_add.ptx
// ptx: nvcc -ptx -O3 -arch=sm_80 residual_add.cu -o residual_add.sm_80.ptx
#include <cuda_bf16.h>

union Pack8 {
    uint4 u;
    __nv_bfloat162 h[4];
};

extern "C" __global__ void add_n_bf16(const __nv_bfloat16* __restrict__ x, int inputs,
                                      int stride, __nv_bfloat16* __restrict__ y,
                                      int rows, int cols) {
    int v = blockIdx.y * blockDim.x + threadIdx.x;
    long long r = blockIdx.x;
    if (r >= rows || v * 8 >= cols) return;
    float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    const __nv_bfloat16* src = x + r * cols;
    for (int i = 0; i < inputs; i += 4) {  // up to four loads in flight before their use
        Pack8 a[4];
#pragma unroll
        for (int k = 0; k < 4; ++k)
            a[k].u = i + k < inputs
                         ? reinterpret_cast<const uint4*>(src + (long long)(i + k) * stride)[v]
                         : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
        for (int k = 0; k < 4; ++k) {
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                float2 f = __bfloat1622float2(a[k].h[j]);
                acc[2 * j] += f.x;
                acc[2 * j + 1] += f.y;
            }
        }
    }
    Pack8 o;
#pragma unroll
    for (int j = 0; j < 4; ++j) o.h[j] = __floats2bfloat162_rn(acc[2 * j], acc[2 * j + 1]);
    reinterpret_cast<uint4*>(y + r * cols)[v] = o.u;
}
