// PyTorch's generic element-wise kernels (ATen's CUDA Loops.cuh / CUDALoops.cuh), written
// again with their launch geometry and memory access pattern, so that an aten element-wise
// op of a trace can be timed from its shapes, dtypes and strides:
//
//   vec    vectorized_elementwise_kernel<VEC>: contiguous operands; a block of 128 threads
//          takes 1024 elements, each thread VEC-element aligned vectors (8 elements per
//          thread); a block with fewer than 1024 elements left runs the unrolled loop.
//   unr    unrolled_elementwise_kernel: contiguous operands that need a cast on load or
//          store; 128 threads x 4 elements, one scalar access per element.
//   gen<V> elementwise_kernel<128, V> (gpu_kernel_impl / _nocast): any strides; 128 threads
//          x V elements; every element's byte offsets come from the OffsetCalculator: one
//          magic-number division (IntDivider: umulhi, add, shift) per dimension.
//   idx    elementwise_kernel_with_index (arange): 64 threads x 4 elements, no inputs.
//
// Arithmetic is in f32 (ATen's opmath type for these dtypes): COPY casts, ADD is
// x0 + alpha * (x1 [+ x2]) (one input: x0 + alpha), MUL is x0 * x1 [* x2] (one input:
// x0 * alpha; negation and division by a scalar are MUL, as ATen's BUnaryFunctor),
// SILU x / (1 + exp(-x)), COS/SIN/POW the full-precision libm functions, FILL alpha,
// ARANGE alpha + beta * index. i64 values pass through f32 (exact below 2^24).
// Entries: pw_<path>_<op><inputs>_<input dtype>_<output dtype>, dtypes b (bf16), f (f32),
// d (f64), l (i64); the vec entries end in _v<VEC>, the gen entries name V in the path.
// Arguments: n, alpha, beta, out, in0, in1, in2 (unused inputs 0), and for gen the
// Geometry struct by value. The launch constants, Geometry, the functors and the offset
// calculator are torch_elementwise.cuh's, shared with the run-time casts of
// torch_elementwise_cast.cu.
// ptx: nvcc -ptx -O3 -arch=sm_90 torch_elementwise.cu -o torch_elementwise.ptx
// ptx: nvcc -ptx -O3 -arch=sm_80 torch_elementwise.cu -o torch_elementwise.sm_80.ptx
#include "torch_elementwise.cuh"

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(b16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f32(double x) { return (float)x; }
__device__ __forceinline__ float to_f32(long long x) { return (float)x; }

template <typename T> __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <> __device__ __forceinline__ b16 from_f32<b16>(float x) { return __float2bfloat16(x); }
template <> __device__ __forceinline__ double from_f32<double>(float x) { return (double)x; }
template <> __device__ __forceinline__ long long from_f32<long long>(float x) {
    return (long long)x;
}

// One element: a COPY of equal types moves the value untouched; everything else goes
// through f32.
template <int OP, int NIN, typename Ti, typename To>
__device__ __forceinline__ To element(const Ti* v, float alpha, float beta, unsigned i) {
    float x[3] = {0.0f, 0.0f, 0.0f};
#pragma unroll
    for (int k = 0; k < NIN; ++k) x[k] = to_f32(v[k]);
    return from_f32<To>(apply<OP, NIN>(x, alpha, beta, i));
}

template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
    T v[N];
};

// Scalar loop over the `remaining` elements of a block: thread t takes t, t + 128, ...
template <int OP, int NIN, typename Ti, typename To, int ELEMS>
__device__ __forceinline__ void unrolled_block(int base, int remaining, float alpha,
                                               float beta, To* __restrict__ out,
                                               const Ti* const* in) {
    Ti v[ELEMS][3];
#pragma unroll
    for (int e = 0; e < ELEMS; ++e) {
        int j = threadIdx.x + e * THREADS;
        if (j < remaining) {
#pragma unroll
            for (int k = 0; k < NIN; ++k) v[e][k] = in[k][base + j];
        }
    }
#pragma unroll
    for (int e = 0; e < ELEMS; ++e) {
        int j = threadIdx.x + e * THREADS;
        if (j < remaining) out[base + j] = element<OP, NIN, Ti, To>(v[e], alpha, beta, base + j);
    }
}

template <int OP, int NIN, typename Ti, typename To, int VEC>
__device__ __forceinline__ void vectorized(int n, float alpha, float beta, To* __restrict__ out,
                                           const Ti* const* in) {
    constexpr int BLOCK_WORK = THREADS * VEC_ELEMS_PER_THREAD;
    constexpr int LOOPS = VEC_ELEMS_PER_THREAD / VEC;
    int base = blockIdx.x * BLOCK_WORK;
    int remaining = n - base;
    if (remaining < BLOCK_WORK) {
        unrolled_block<OP, NIN, Ti, To, VEC_ELEMS_PER_THREAD>(base, remaining, alpha, beta,
                                                               out, in);
        return;
    }
    Vec<Ti, VEC> x[LOOPS][NIN > 0 ? NIN : 1];
#pragma unroll
    for (int l = 0; l < LOOPS; ++l) {
        int vi = threadIdx.x + l * THREADS;
#pragma unroll
        for (int k = 0; k < NIN; ++k)
            x[l][k] = reinterpret_cast<const Vec<Ti, VEC>*>(in[k] + base)[vi];
    }
#pragma unroll
    for (int l = 0; l < LOOPS; ++l) {
        int vi = threadIdx.x + l * THREADS;
        Vec<To, VEC> y;
#pragma unroll
        for (int e = 0; e < VEC; ++e) {
            Ti v[3];
#pragma unroll
            for (int k = 0; k < NIN; ++k) v[k] = x[l][k].v[e];
            y.v[e] = element<OP, NIN, Ti, To>(v, alpha, beta, base + vi * VEC + e);
        }
        reinterpret_cast<Vec<To, VEC>*>(out + base)[vi] = y;
    }
}

template <int OP, int NIN, typename Ti, typename To>
__device__ __forceinline__ void unrolled(int n, float alpha, float beta, To* __restrict__ out,
                                         const Ti* const* in) {
    int base = blockIdx.x * THREADS * UNROLL_ELEMS_PER_THREAD;
    unrolled_block<OP, NIN, Ti, To, UNROLL_ELEMS_PER_THREAD>(base, n - base, alpha, beta, out,
                                                             in);
}

template <int OP, int NIN, typename Ti, typename To, int V>
__device__ __forceinline__ void generic(int n, float alpha, float beta, char* __restrict__ out,
                                        const char* const* in, const Geometry& g) {
    int idx = blockIdx.x * THREADS * V + threadIdx.x;
#pragma unroll
    for (int e = 0; e < V; ++e) {
        if (idx < n) {
            unsigned offset[4];
            offsets<NIN>(g, idx, offset);
            Ti v[3];
#pragma unroll
            for (int k = 0; k < NIN; ++k)
                v[k] = *reinterpret_cast<const Ti*>(in[k] + offset[k + 1]);
            *reinterpret_cast<To*>(out + offset[0]) = element<OP, NIN, Ti, To>(v, alpha, beta, idx);
            idx += THREADS;
        }
    }
}

#define INPUTS(Ti) const Ti* in[3] = {in0, in1, in2}
#define VEC_ENTRY(name, op, nin, Ti, To, vec)                                                \
    extern "C" __global__ void __launch_bounds__(THREADS) name(                             \
        int n, float alpha, float beta, To* __restrict__ out, const Ti* __restrict__ in0,   \
        const Ti* __restrict__ in1, const Ti* __restrict__ in2) {                            \
        INPUTS(Ti);                                                                          \
        vectorized<op, nin, Ti, To, vec>(n, alpha, beta, out, in);                           \
    }
#define UNR_ENTRY(name, op, nin, Ti, To)                                                     \
    extern "C" __global__ void __launch_bounds__(THREADS) name(                             \
        int n, float alpha, float beta, To* __restrict__ out, const Ti* __restrict__ in0,   \
        const Ti* __restrict__ in1, const Ti* __restrict__ in2) {                            \
        INPUTS(Ti);                                                                          \
        unrolled<op, nin, Ti, To>(n, alpha, beta, out, in);                                  \
    }
#define GEN_ENTRY(name, op, nin, Ti, To, v)                                                  \
    extern "C" __global__ void __launch_bounds__(THREADS) name(                             \
        int n, float alpha, float beta, To* __restrict__ out, const Ti* __restrict__ in0,   \
        const Ti* __restrict__ in1, const Ti* __restrict__ in2, const Geometry g) {          \
        const char* in[3] = {reinterpret_cast<const char*>(in0),                             \
                             reinterpret_cast<const char*>(in1),                             \
                             reinterpret_cast<const char*>(in2)};                            \
        generic<op, nin, Ti, To, v>(n, alpha, beta, reinterpret_cast<char*>(out), in, g);    \
    }

// vectorized_elementwise_kernel
VEC_ENTRY(pw_vec_copy1_f_f_v4, COPY, 1, float, float, 4)
VEC_ENTRY(pw_vec_copy1_b_b_v8, COPY, 1, b16, b16, 8)
VEC_ENTRY(pw_vec_copy1_f_b_v8, COPY, 1, float, b16, 8)
VEC_ENTRY(pw_vec_copy1_b_f_v4, COPY, 1, b16, float, 4)
VEC_ENTRY(pw_vec_add1_f_f_v4, ADD, 1, float, float, 4)
VEC_ENTRY(pw_vec_add1_b_b_v8, ADD, 1, b16, b16, 8)
VEC_ENTRY(pw_vec_add2_f_f_v4, ADD, 2, float, float, 4)
VEC_ENTRY(pw_vec_add2_b_b_v8, ADD, 2, b16, b16, 8)
VEC_ENTRY(pw_vec_add2_f_b_v4, ADD, 2, float, b16, 4)
VEC_ENTRY(pw_vec_add3_f_f_v4, ADD, 3, float, float, 4)
VEC_ENTRY(pw_vec_add3_b_b_v8, ADD, 3, b16, b16, 8)
VEC_ENTRY(pw_vec_mul1_f_f_v4, MUL, 1, float, float, 4)
VEC_ENTRY(pw_vec_mul1_b_b_v8, MUL, 1, b16, b16, 8)
VEC_ENTRY(pw_vec_mul1_l_l_v2, MUL, 1, long long, long long, 2)
VEC_ENTRY(pw_vec_mul2_f_f_v4, MUL, 2, float, float, 4)
VEC_ENTRY(pw_vec_mul2_b_b_v8, MUL, 2, b16, b16, 8)
VEC_ENTRY(pw_vec_mul3_f_f_v4, MUL, 3, float, float, 4)
VEC_ENTRY(pw_vec_mul3_b_b_v8, MUL, 3, b16, b16, 8)
VEC_ENTRY(pw_vec_silu1_f_f_v4, SILU, 1, float, float, 4)
VEC_ENTRY(pw_vec_silu1_b_b_v8, SILU, 1, b16, b16, 8)
VEC_ENTRY(pw_vec_cos1_f_f_v4, COS, 1, float, float, 4)
VEC_ENTRY(pw_vec_sin1_f_f_v4, SIN, 1, float, float, 4)
VEC_ENTRY(pw_vec_fill0_f_f_v4, FILL, 0, float, float, 4)
VEC_ENTRY(pw_vec_fill0_b_b_v8, FILL, 0, b16, b16, 8)
VEC_ENTRY(pw_vec_fill0_d_d_v2, FILL, 0, double, double, 2)
VEC_ENTRY(pw_vec_fill0_l_l_v2, FILL, 0, long long, long long, 2)

// unrolled_elementwise_kernel (a cast on load or store)
UNR_ENTRY(pw_unr_copy1_l_f, COPY, 1, long long, float)
UNR_ENTRY(pw_unr_copy1_f_l, COPY, 1, float, long long)
UNR_ENTRY(pw_unr_copy1_b_f, COPY, 1, b16, float)
UNR_ENTRY(pw_unr_copy1_f_b, COPY, 1, float, b16)
UNR_ENTRY(pw_unr_mul1_l_f, MUL, 1, long long, float)
UNR_ENTRY(pw_unr_add1_l_f, ADD, 1, long long, float)
UNR_ENTRY(pw_unr_add2_b_f, ADD, 2, b16, float)
UNR_ENTRY(pw_unr_mul2_b_f, MUL, 2, b16, float)

// elementwise_kernel<128, 4>
GEN_ENTRY(pw_gen4_copy1_b_b, COPY, 1, b16, b16, 4)
GEN_ENTRY(pw_gen4_copy1_b_f, COPY, 1, b16, float, 4)
GEN_ENTRY(pw_gen4_copy1_f_b, COPY, 1, float, b16, 4)
GEN_ENTRY(pw_gen4_copy1_f_f, COPY, 1, float, float, 4)
GEN_ENTRY(pw_gen4_add2_b_b, ADD, 2, b16, b16, 4)
GEN_ENTRY(pw_gen4_mul2_b_b, MUL, 2, b16, b16, 4)
GEN_ENTRY(pw_gen4_mul1_b_b, MUL, 1, b16, b16, 4)
GEN_ENTRY(pw_gen4_silu1_b_b, SILU, 1, b16, b16, 4)
GEN_ENTRY(pw_gen4_pow2_f_f, POW, 2, float, float, 4)
GEN_ENTRY(pw_gen4_add3_b_b, ADD, 3, b16, b16, 4)

// elementwise_kernel<128, 2> (4-byte and wider operands without casts)
GEN_ENTRY(pw_gen2_copy1_f_f, COPY, 1, float, float, 2)
GEN_ENTRY(pw_gen2_add2_f_f, ADD, 2, float, float, 2)
GEN_ENTRY(pw_gen2_mul2_f_f, MUL, 2, float, float, 2)
GEN_ENTRY(pw_gen2_mul1_f_f, MUL, 1, float, float, 2)
GEN_ENTRY(pw_gen2_silu1_f_f, SILU, 1, float, float, 2)
GEN_ENTRY(pw_gen2_pow2_f_f, POW, 2, float, float, 2)
GEN_ENTRY(pw_gen2_add3_f_f, ADD, 3, float, float, 2)

// elementwise_kernel_with_index (arange): 64 threads x 4 elements
template <typename To>
__device__ __forceinline__ void with_index(int n, float alpha, float beta, To* __restrict__ out) {
#pragma unroll
    for (int e = 0; e < UNROLL_ELEMS_PER_THREAD; ++e) {
        int idx = INDEX_THREADS * UNROLL_ELEMS_PER_THREAD * blockIdx.x + INDEX_THREADS * e +
                  threadIdx.x;
        if (idx < n) out[idx] = element<ARANGE, 0, To, To>(nullptr, alpha, beta, idx);
    }
}

extern "C" __global__ void pw_idx_arange0_l_l(int n, float alpha, float beta,
                                              long long* __restrict__ out) {
    with_index<long long>(n, alpha, beta, out);
}

extern "C" __global__ void pw_idx_arange0_f_f(int n, float alpha, float beta,
                                              float* __restrict__ out) {
    with_index<float>(n, alpha, beta, out);
}
