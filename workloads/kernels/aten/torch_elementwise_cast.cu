// ATen's dynamic-casting element-wise paths (CUDALoops.cuh `gpu_kernel_impl`, taken when an
// operand's dtype differs from the functor's argument or result type, `needs_dynamic_casting`),
// written again with their launch geometry, so that a trace's casting copy or op runs the
// program ATen ran:
//
//   unrcast  unrolled_elementwise_kernel<..., LoadWithCast<NIN>, StoreWithCast<1>>
//            (contiguous operands): 128 threads x 4 elements as torch_elementwise.cu's unr;
//            a thread loads its 4 elements, computes, then stores them, every access
//            through c10::fetch_and_cast / cast_and_store at base + element size * index.
//   gencast4 elementwise_kernel<128, 4, gpu_kernel_impl<...>> (any strides): per element
//            the OffsetCalculator, each input through fetch_and_cast at its byte offset,
//            the functor, and the output through cast_and_store.
//
// fetch_and_cast and cast_and_store switch over the operand's ScalarType, a kernel
// parameter, on every access; the data pointers carry no __restrict__ (ATen's
// std::array<char*, N>). The functors take and return f32 (ATen's opmath for these dtypes;
// a copy's functor is the output dtype's identity in ATen, here f32's: the same loads,
// switches and stores, the conversion at the other end), so one entry serves every
// operand dtype. Functors as torch_elementwise.cuh's apply.
// Entries: pw_<unrcast|gencast4>_<op><inputs>_f_f. Arguments: n, alpha, beta, out, in0, in1,
// in2 (unused inputs 0), for gencast4 the Geometry struct by value, then the Casts struct
// by value (each operand's ScalarType and element size, the output first).
// ptx: nvcc -ptx -O3 -arch=sm_90 torch_elementwise_cast.cu -o torch_elementwise_cast.ptx
// ptx: nvcc -ptx -O3 -arch=sm_80 torch_elementwise_cast.cu -o torch_elementwise_cast.sm_80.ptx
#include <cuda_fp16.h>

#include "torch_elementwise.cuh"

// c10::fetch_and_cast / c10::cast_and_store (c10/core/DynamicCast.h), written from memory of
// their structure: one switch case per type of AT_FORALL_SCALAR_TYPES_WITH_COMPLEX plus the
// unsigned 16/32/64-bit types, each a load (store) of that type and a conversion; an
// unsupported type traps (ERROR_UNSUPPORTED_CAST). ScalarType codes as c10/core/ScalarType.h
// numbers them. Left out: Float8_e8m0fnu and the quantized and bits types. The fp8
// conversions are c10's bit-manipulation routines (Float8_*-inl.h), the fnuz stores the fn
// routine with their bias.
enum ScalarType {
    Byte = 0, Char = 1, Short = 2, Int = 3, Long = 4, Half = 5, Float = 6, Double = 7,
    ComplexHalf = 8, ComplexFloat = 9, ComplexDouble = 10, Bool = 11, BFloat16 = 15,
    Float8_e5m2 = 23, Float8_e4m3fn = 24, Float8_e5m2fnuz = 25, Float8_e4m3fnuz = 26,
    UInt16 = 27, UInt32 = 28, UInt64 = 29
};

struct Casts {                     // LoadWithCast / StoreWithCast: operand 0 is the output
    unsigned char dtype[4];        // ScalarType
    unsigned size[4];              // element size in bytes (the unrolled path's addresses)
};

__device__ __forceinline__ float bits_f32(unsigned b) { return __uint_as_float(b); }
__device__ __forceinline__ unsigned f32_bits(float f) { return __float_as_uint(f); }

__device__ __forceinline__ float fp8e4m3fn_to_f32(unsigned char x) {
    unsigned w = (unsigned)x << 24;
    unsigned sign = w & 0x80000000u;
    unsigned nonsign = w & 0x7FFFFFFFu;
    unsigned renorm = __clz(nonsign);
    renorm = renorm > 4 ? renorm - 4 : 0;
    int inf_nan = ((int)(nonsign + 0x01000000) >> 8) & 0x7F800000;
    int zero = (int)(nonsign - 1) >> 31;
    return bits_f32(sign | ((((nonsign << renorm >> 4) + ((0x78 - renorm) << 23)) | inf_nan)
                           & ~zero));
}

__device__ __forceinline__ float fp8e5m2_to_f32(unsigned char x) {
    return __half2float(__ushort_as_half((unsigned short)x << 8));
}

template <unsigned WE, unsigned WM>
__device__ __forceinline__ float fp8_fnuz_to_f32(unsigned char x) {
    if (x == 0) return 0.0f;
    if (x == 0x80) return bits_f32(0x7F800001u);
    unsigned mantissa = x & ((1u << WM) - 1);
    unsigned exponent = (x & 0x7Fu) >> WM;
    if (exponent == 0) {
        unsigned sh = 1 + __clz(mantissa) - (32 - WM);
        mantissa = (mantissa << sh) & ((1u << WM) - 1);
        exponent += 1 - sh;
    }
    exponent += (1u << 7) - (1u << (WE - 1)) - 1;
    return bits_f32(((unsigned)(x >> 7) << 31) | (exponent << 23) | (mantissa << (23 - WM)));
}

// c10's fp8e4m3fn_from_fp32_value / fp8e5m2_from_fp32_value: round to nearest even,
// saturating at MAX_BITS; WM mantissa bits, exponent bias BIAS.
template <unsigned WM, unsigned BIAS, unsigned MAX_BITS, unsigned MIN_NORMAL_BITS,
          unsigned DENORM_BITS, unsigned char SATURATED>
__device__ __forceinline__ unsigned char fp8_from_f32(float f) {
    unsigned bits = f32_bits(f);
    unsigned sign = bits & 0x80000000u;
    bits ^= sign;
    unsigned char result;
    if (bits >= MAX_BITS) {
        result = SATURATED;
    } else if (bits < MIN_NORMAL_BITS) {
        bits = f32_bits(bits_f32(bits) + bits_f32(DENORM_BITS));
        result = (unsigned char)(bits - DENORM_BITS);
    } else {
        unsigned odd = (bits >> (23 - WM)) & 1u;
        bits += ((unsigned)(BIAS - 127) << 23) + ((1u << (22 - WM)) - 1) + odd;
        result = (unsigned char)(bits >> (23 - WM));
    }
    return result | (unsigned char)(sign >> 24);
}

#define FP8_E4M3_FROM_F32(f, bias) \
    fp8_from_f32<3, bias, 1087u << 20, 121u << 23, 141u << 23, 0x7f>(f)
#define FP8_E5M2_FROM_F32(f, bias) \
    fp8_from_f32<2, bias, 143u << 23, 113u << 23, 134u << 23, 0x7c>(f)

__device__ __forceinline__ float fetch_and_cast(int type, const void* ptr) {
    switch (type) {
        case Byte: return (float)*(const unsigned char*)ptr;
        case Char: return (float)*(const signed char*)ptr;
        case Short: return (float)*(const short*)ptr;
        case Int: return (float)*(const int*)ptr;
        case Long: return (float)*(const long long*)ptr;
        case Half: return __half2float(*(const __half*)ptr);
        case Float: return *(const float*)ptr;
        case Double: return (float)*(const double*)ptr;
        case ComplexHalf: return __half2float(*(const __half*)ptr);       // the real part
        case ComplexFloat: return *(const float*)ptr;
        case ComplexDouble: return (float)*(const double*)ptr;
        case Bool: return (float)*(const bool*)ptr;
        case BFloat16: return __bfloat162float(*(const b16*)ptr);
        case Float8_e5m2: return fp8e5m2_to_f32(*(const unsigned char*)ptr);
        case Float8_e4m3fn: return fp8e4m3fn_to_f32(*(const unsigned char*)ptr);
        case Float8_e5m2fnuz: return fp8_fnuz_to_f32<5, 2>(*(const unsigned char*)ptr);
        case Float8_e4m3fnuz: return fp8_fnuz_to_f32<4, 3>(*(const unsigned char*)ptr);
        case UInt16: return (float)*(const unsigned short*)ptr;
        case UInt32: return (float)*(const unsigned*)ptr;
        case UInt64: return (float)*(const unsigned long long*)ptr;
        default: __trap();
    }
    return 0.0f;
}

__device__ __forceinline__ void cast_and_store(int type, void* ptr, float v) {
    switch (type) {
        case Byte: *(unsigned char*)ptr = (unsigned char)(long long)v; return;
        case Char: *(signed char*)ptr = (signed char)v; return;
        case Short: *(short*)ptr = (short)v; return;
        case Int: *(int*)ptr = (int)v; return;
        case Long: *(long long*)ptr = (long long)v; return;
        case Half: *(__half*)ptr = __float2half(v); return;
        case Float: *(float*)ptr = v; return;
        case Double: *(double*)ptr = (double)v; return;
        case ComplexHalf: *(__half2*)ptr = __halves2half2(__float2half(v), __float2half(0.0f));
            return;
        case ComplexFloat: *(float2*)ptr = make_float2(v, 0.0f); return;
        case ComplexDouble: *(double2*)ptr = make_double2((double)v, 0.0); return;
        case Bool: *(bool*)ptr = v != 0.0f; return;
        case BFloat16: *(b16*)ptr = __float2bfloat16(v); return;
        case Float8_e5m2: *(unsigned char*)ptr = FP8_E5M2_FROM_F32(v, 15); return;
        case Float8_e4m3fn: *(unsigned char*)ptr = FP8_E4M3_FROM_F32(v, 7); return;
        case Float8_e5m2fnuz: *(unsigned char*)ptr = FP8_E5M2_FROM_F32(v, 16); return;
        case Float8_e4m3fnuz: *(unsigned char*)ptr = FP8_E4M3_FROM_F32(v, 8); return;
        case UInt16: *(unsigned short*)ptr = (unsigned short)v; return;
        case UInt32: *(unsigned*)ptr = (unsigned)v; return;
        case UInt64: *(unsigned long long*)ptr = (unsigned long long)v; return;
        default: break;
    }
    __trap();
}

// unrolled_elementwise_kernel with policies::unroll, LoadWithCast and StoreWithCast.
template <int OP, int NIN>
__device__ __forceinline__ void unrolled_cast(int n, float alpha, float beta, char* out,
                                              char* const* in, const Casts& c) {
    constexpr int ELEMS = UNROLL_ELEMS_PER_THREAD;
    int block = blockIdx.x * THREADS * ELEMS;
    int remaining = n - block;
    float x[ELEMS][3];
    int thread_idx = threadIdx.x;
#pragma unroll
    for (int e = 0; e < ELEMS; ++e) {
        if (thread_idx >= remaining) break;
        unsigned linear = thread_idx + block;
#pragma unroll
        for (int k = 0; k < NIN; ++k)
            x[e][k] = fetch_and_cast(c.dtype[k + 1], in[k] + c.size[k + 1] * linear);
        thread_idx += THREADS;
    }
    float y[ELEMS];
#pragma unroll
    for (int e = 0; e < ELEMS; ++e)
        if ((int)threadIdx.x + e * THREADS < remaining)
            y[e] = apply<OP, NIN>(x[e], alpha, beta, block + threadIdx.x + e * THREADS);
    thread_idx = threadIdx.x;
#pragma unroll
    for (int e = 0; e < ELEMS; ++e) {
        if (thread_idx >= remaining) break;
        unsigned linear = thread_idx + block;
        cast_and_store(c.dtype[0], out + c.size[0] * linear, y[e]);
        thread_idx += THREADS;
    }
}

// elementwise_kernel<128, 4> of gpu_kernel_impl.
template <int OP, int NIN>
__device__ __forceinline__ void generic_cast(int n, float alpha, float beta, char* out,
                                             char* const* in, const Geometry& g,
                                             const Casts& c) {
    constexpr int V = 4;
    int idx = blockIdx.x * THREADS * V + threadIdx.x;
#pragma unroll
    for (int e = 0; e < V; ++e) {
        if (idx < n) {
            unsigned offset[4];
            offsets<NIN>(g, idx, offset);
            float x[3] = {0.0f, 0.0f, 0.0f};
#pragma unroll
            for (int k = 0; k < NIN; ++k)
                x[k] = fetch_and_cast(c.dtype[k + 1], in[k] + offset[k + 1]);
            cast_and_store(c.dtype[0], out + offset[0], apply<OP, NIN>(x, alpha, beta, idx));
            idx += THREADS;
        }
    }
}

#define CAST_INPUTS char* in[3] = {in0, in1, in2}
#define UNRCAST_ENTRY(name, op, nin)                                                         \
    extern "C" __global__ void __launch_bounds__(THREADS) name(                             \
        int n, float alpha, float beta, char* out, char* in0, char* in1, char* in2,          \
        const Casts c) {                                                                     \
        CAST_INPUTS;                                                                         \
        unrolled_cast<op, nin>(n, alpha, beta, out, in, c);                                  \
    }
#define GENCAST_ENTRY(name, op, nin)                                                         \
    extern "C" __global__ void __launch_bounds__(THREADS) name(                             \
        int n, float alpha, float beta, char* out, char* in0, char* in1, char* in2,          \
        const Geometry g, const Casts c) {                                                   \
        CAST_INPUTS;                                                                         \
        generic_cast<op, nin>(n, alpha, beta, out, in, g, c);                                \
    }

// unrolled_elementwise_kernel<..., LoadWithCast<NIN>, StoreWithCast<1>>
UNRCAST_ENTRY(pw_unrcast_copy1_f_f, COPY, 1)
UNRCAST_ENTRY(pw_unrcast_add1_f_f, ADD, 1)
UNRCAST_ENTRY(pw_unrcast_add2_f_f, ADD, 2)
UNRCAST_ENTRY(pw_unrcast_mul1_f_f, MUL, 1)
UNRCAST_ENTRY(pw_unrcast_mul2_f_f, MUL, 2)

// elementwise_kernel<128, 4, gpu_kernel_impl<...>>
GENCAST_ENTRY(pw_gencast4_copy1_f_f, COPY, 1)
GENCAST_ENTRY(pw_gencast4_add2_f_f, ADD, 2)
GENCAST_ENTRY(pw_gencast4_mul1_f_f, MUL, 1)
GENCAST_ENTRY(pw_gencast4_mul2_f_f, MUL, 2)
GENCAST_ENTRY(pw_gencast4_pow2_f_f, POW, 2)
