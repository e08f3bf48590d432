// Tensor-core throughput with mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 (inline
// PTX). Every warp loads the same A (16 x 16 bf16, row-major) and Bt (8 x 16 bf16, row-major,
// i.e. B column-major) into fragments, then runs CHAINS independent accumulators, `iters`
// mma per accumulator. Accumulator k starts at k in every element, so it ends at
// k + iters * (A @ B). out holds, per global warp and chain, the 16 x 8 f32 tile row-major.
// ptx: nvcc -ptx -O3 -arch=sm_80 mma_throughput.cu -o mma_throughput.ptx
#include <cuda_bf16.h>

#define CHAINS 8

extern "C" __global__ void mma_throughput(const __nv_bfloat16* __restrict__ A,
                                          const __nv_bfloat16* __restrict__ Bt,
                                          float* __restrict__ out, int iters) {
    int lane = threadIdx.x & 31;
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int g = lane >> 2;
    int t = lane & 3;
    const unsigned* a32 = reinterpret_cast<const unsigned*>(A);
    const unsigned* b32 = reinterpret_cast<const unsigned*>(Bt);
    unsigned a0 = a32[(g * 16 + 2 * t) / 2];
    unsigned a1 = a32[((g + 8) * 16 + 2 * t) / 2];
    unsigned a2 = a32[(g * 16 + 2 * t + 8) / 2];
    unsigned a3 = a32[((g + 8) * 16 + 2 * t + 8) / 2];
    unsigned b0 = b32[(g * 16 + 2 * t) / 2];
    unsigned b1 = b32[(g * 16 + 2 * t + 8) / 2];
    float c[CHAINS][4];
#pragma unroll
    for (int k = 0; k < CHAINS; ++k) c[k][0] = c[k][1] = c[k][2] = c[k][3] = (float)k;
#pragma unroll 1
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int k = 0; k < CHAINS; ++k) {
            asm volatile(
                "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                : "+f"(c[k][0]), "+f"(c[k][1]), "+f"(c[k][2]), "+f"(c[k][3])
                : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
        }
    }
#pragma unroll
    for (int k = 0; k < CHAINS; ++k) {
        float* tile = out + (warp * CHAINS + k) * 128;
        tile[g * 8 + 2 * t] = c[k][0];
        tile[g * 8 + 2 * t + 1] = c[k][1];
        tile[(g + 8) * 8 + 2 * t] = c[k][2];
        tile[(g + 8) * 8 + 2 * t + 1] = c[k][3];
    }
}
