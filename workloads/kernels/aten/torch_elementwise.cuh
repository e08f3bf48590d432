// What PyTorch's generic element-wise kernels share (torch_elementwise.cu, the compile-time
// casts, and torch_elementwise_cast.cu, ATen's dynamic casting): the launch constants, the
// functors in f32 (ATen's opmath type for these dtypes) and the OffsetCalculator.
#pragma once
#include <cuda_bf16.h>

#define THREADS 128
#define VEC_ELEMS_PER_THREAD 8
#define UNROLL_ELEMS_PER_THREAD 4
#define INDEX_THREADS 64
#define MAX_DIMS 6

enum Op { COPY, ADD, MUL, SILU, COS, SIN, POW, FILL, ARANGE };

struct Geometry {                  // ATen's OffsetCalculator<NIN + 1>, dims fastest first
    int dims;
    unsigned divisor[MAX_DIMS];
    unsigned magic[MAX_DIMS];      // IntDivider: q = (umulhi(n, magic) + n) >> shift
    unsigned shift[MAX_DIMS];
    unsigned stride[MAX_DIMS][4];  // bytes; operand 0 is the output
};

typedef __nv_bfloat16 b16;

template <int OP, int NIN>
__device__ __forceinline__ float apply(const float* x, float alpha, float beta, unsigned i) {
    if (OP == COPY) return x[0];
    if (OP == ADD) {
        if (NIN == 1) return x[0] + alpha;
        if (NIN == 2) return x[0] + alpha * x[1];
        return x[0] + alpha * (x[1] + x[2]);
    }
    if (OP == MUL) {
        if (NIN == 1) return x[0] * alpha;
        if (NIN == 2) return x[0] * x[1];
        return x[0] * x[1] * x[2];
    }
    if (OP == SILU) return x[0] / (1.0f + expf(-x[0]));
    if (OP == COS) return cosf(x[0]);
    if (OP == SIN) return sinf(x[0]);
    if (OP == POW) return powf(x[0], x[1]);
    if (OP == FILL) return alpha;
    return alpha + beta * (float)i;   // ARANGE
}

// OffsetCalculator::get: each operand's byte offset of element `linear`, one magic-number
// division per dimension.
template <int NIN>
__device__ __forceinline__ void offsets(const Geometry& g, unsigned linear, unsigned* offset) {
#pragma unroll
    for (int k = 0; k < 4; ++k) offset[k] = 0u;
#pragma unroll
    for (int d = 0; d < MAX_DIMS; ++d) {
        if (d == g.dims) break;
        unsigned q = (__umulhi(linear, g.magic[d]) + linear) >> g.shift[d];
        unsigned r = linear - q * g.divisor[d];
        linear = q;
#pragma unroll
        for (int k = 0; k <= NIN; ++k) offset[k] += r * g.stride[d][k];
    }
}
