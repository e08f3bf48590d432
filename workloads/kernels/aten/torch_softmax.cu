// PyTorch's fp16 softmax forward over the last dim (ATen's aten/src/ATen/native/cuda/
// SoftMax.cu host_softmax and PersistentSoftmax.cuh), written again from their structure
// with the launch geometry PyTorch 2.0 chose, so a torch.softmax(x_fp16, -1) can be timed:
//
//   softmax_warp_forward_f16_<L>  (PersistentSoftmax.cuh softmax_warp_forward, L = log2 of
//          the next power of two of the row length, 0..10) for rows of at most 1024 columns
//          (and at most 4096 bytes): each warp takes WARP_BATCH rows (2 up to 128 columns,
//          1 above), a row lives in registers, WARP_ITERATIONS = next_pow2 / WARP_SIZE
//          elements per thread, one scalar 2-byte load per element (lane l reads columns
//          l, l + 32, ...), max and sum by xor shuffles across WARP_SIZE lanes
//          (min(next_pow2, 32)), exp and the division in f32; 128 threads per block as
//          (WARP_SIZE, 128 / WARP_SIZE); the host launches one such kernel per 2^30 / cols
//          rows.
//   cunn_softmax_forward_f16  (SoftMax.cu cunn_SoftMaxForward<ILP = 8>) for longer rows: a
//          block per row, three passes over the row in global memory (max, sum of exp,
//          write), each pass 16-byte loads of 8 halfs (ilpReduce) after a scalar head for a
//          row not 16-byte aligned and before a scalar tail; blockReduce through
//          blockDim.x floats of dynamic shared memory (every thread stores its value, the
//          first warp's lanes each fold 32 of them, thread 0 folds the per-warp values);
//          blockDim.x from SoftMax_getBlockSize (the host side, in workloads.ops.norms).
//
// Simplified: the masked and log-softmax variants and the non-last-dim (inner size > 1)
// kernels are left out (and with them the NaN a fully masked row stores); strides are int
// (int64_t in ATen for the block kernel's offsets). The persistent kernel's guarded loads are
// predicated loads (load_if), its conversions follow all of the row's loads.
// Reproduced from memory of PyTorch 2.0's sources, not copied.
// ptx: nvcc -ptx -O3 -arch=sm_90 torch_softmax.cu -o torch_softmax.ptx
// ptx: nvcc -ptx -O3 -arch=sm_80 torch_softmax.cu -o torch_softmax.sm_80.ptx
#include <cuda_fp16.h>

#define WARP 32
#define ILP 8                 // sizeof(float4) / sizeof(half)
#define ALIGN_BYTES 16
#define NEG_INF_F16 0xfc00    // -infinity in fp16 (converts to -infinity in f32)

template <typename T, int N>
struct alignas(sizeof(T) * N) aligned_vector {
    T val[N];
};

// ---- softmax_warp_forward ---------------------------------------------------------------

// `*p` if `pred`, else an undefined value, as one predicated load. ptxas turns ATen's guarded
// loads (`if (element_index < batch_element_count) elements = src[...]`) into predicated LDGs
// issued back to back ahead of their conversions (its -arch=sm_80 SASS of this kernel); nvcc's
// PTX keeps a branch around each, which a machine running the PTX in order would wait on one
// load at a time. Written as the predicated load, the PTX issues as the SASS does.
__device__ __forceinline__ unsigned short load_if(const __half* p, bool pred) {
    unsigned short v;
    asm("{\n\t.reg .pred q;\n\tsetp.ne.b32 q, %2, 0;\n\t@q ld.global.u16 %0, [%1];\n\t}"
        : "=h"(v)
        : "l"(__cvta_generic_to_global(p)), "r"((int)pred));
    return v;
}

template <int WARP_BATCH, int WARP_SIZE, bool IS_MAX>
__device__ __forceinline__ void warp_reduce(float* v) {
#pragma unroll
    for (int offset = WARP_SIZE / 2; offset > 0; offset /= 2) {
#pragma unroll
        for (int i = 0; i < WARP_BATCH; ++i) {
            float b = __shfl_xor_sync(0xffffffffu, v[i], offset, WARP_SIZE);
            v[i] = IS_MAX ? (v[i] < b ? b : v[i]) : v[i] + b;
        }
    }
}

template <int LOG2_ELEMENTS>
__device__ __forceinline__ void softmax_warp_forward(__half* dst, const __half* src,
                                                     int batch_size, int stride,
                                                     int element_count) {
    constexpr int next_power_of_two = 1 << LOG2_ELEMENTS;
    constexpr int WARP_SIZE = (next_power_of_two < WARP) ? next_power_of_two : WARP;
    constexpr int WARP_ITERATIONS = next_power_of_two / WARP_SIZE;
    constexpr int WARP_BATCH = (next_power_of_two <= 128) ? 2 : 1;

    int first_batch = (blockDim.y * blockIdx.x + threadIdx.y) * WARP_BATCH;
    int local_batches = batch_size - first_batch;
    if (local_batches > WARP_BATCH) local_batches = WARP_BATCH;
    int local_idx = threadIdx.x;
    src += first_batch * stride + local_idx;
    dst += first_batch * stride + local_idx;

    unsigned short bits[WARP_BATCH][WARP_ITERATIONS];
#pragma unroll
    for (int i = 0; i < WARP_BATCH; ++i) {
        int batch_element_count = (i >= local_batches) ? 0 : element_count;
#pragma unroll
        for (int it = 0; it < WARP_ITERATIONS; ++it) {
            int element_index = local_idx + it * WARP_SIZE;
            bits[i][it] = load_if(src + i * element_count + it * WARP_SIZE,
                                  element_index < batch_element_count);
        }
    }
    float elements[WARP_BATCH][WARP_ITERATIONS];
#pragma unroll
    for (int i = 0; i < WARP_BATCH; ++i) {
        int batch_element_count = (i >= local_batches) ? 0 : element_count;
#pragma unroll
        for (int it = 0; it < WARP_ITERATIONS; ++it) {
            int element_index = local_idx + it * WARP_SIZE;
            bool in_row = element_index < batch_element_count;
            elements[i][it] = __half2float(__ushort_as_half(in_row ? bits[i][it] : NEG_INF_F16));
        }
    }

    float max_value[WARP_BATCH];
#pragma unroll
    for (int i = 0; i < WARP_BATCH; ++i) {
        max_value[i] = elements[i][0];
#pragma unroll
        for (int it = 1; it < WARP_ITERATIONS; ++it) {
            max_value[i] = (max_value[i] > elements[i][it]) ? max_value[i] : elements[i][it];
        }
    }
    warp_reduce<WARP_BATCH, WARP_SIZE, true>(max_value);

    float sum[WARP_BATCH] = {0.0f};
#pragma unroll
    for (int i = 0; i < WARP_BATCH; ++i) {
#pragma unroll
        for (int it = 0; it < WARP_ITERATIONS; ++it) {
            elements[i][it] = expf(elements[i][it] - max_value[i]);
            sum[i] += elements[i][it];
        }
    }
    warp_reduce<WARP_BATCH, WARP_SIZE, false>(sum);

#pragma unroll
    for (int i = 0; i < WARP_BATCH; ++i) {
        if (i >= local_batches) break;
#pragma unroll
        for (int it = 0; it < WARP_ITERATIONS; ++it) {
            int element_index = local_idx + it * WARP_SIZE;
            if (element_index < element_count) {
                dst[i * element_count + it * WARP_SIZE] = __float2half(elements[i][it] / sum[i]);
            } else {
                break;
            }
        }
    }
}

#define WARP_FORWARD(L)                                                                    \
    extern "C" __global__ void softmax_warp_forward_f16_##L(                               \
        __half* dst, const __half* src, int batch_size, int stride, int element_count) {   \
        softmax_warp_forward<L>(dst, src, batch_size, stride, element_count);              \
    }
WARP_FORWARD(0)
WARP_FORWARD(1)
WARP_FORWARD(2)
WARP_FORWARD(3)
WARP_FORWARD(4)
WARP_FORWARD(5)
WARP_FORWARD(6)
WARP_FORWARD(7)
WARP_FORWARD(8)
WARP_FORWARD(9)
WARP_FORWARD(10)

// ---- cunn_SoftMaxForward ----------------------------------------------------------------

struct MaxFloat {
    __device__ __forceinline__ float operator()(float acc, __half v) const {
        return fmaxf(acc, __half2float(v));
    }
};

struct SumExpFloat {
    float max_k;
    __device__ __forceinline__ float operator()(float sum, __half v) const {
        return sum + expf(__half2float(v) - max_k);
    }
};

template <class Reduction>
__device__ __forceinline__ float ilpReduce(int shift, const __half* data, int size,
                                           const Reduction& r, float defaultVal) {
    using LoadT = aligned_vector<__half, ILP>;
    float threadVal = defaultVal;
    int offset = threadIdx.x;
    if (shift > 0) {
        data -= shift;
        size += shift;
        if (threadIdx.x >= shift) threadVal = r(threadVal, data[offset]);
        size -= blockDim.x;
        data += blockDim.x;
    }
    int last = size % (ILP * blockDim.x);
    __half v[ILP];
    LoadT* value = reinterpret_cast<LoadT*>(&v);
    for (; offset * ILP < (size - last); offset += blockDim.x) {
        *value = reinterpret_cast<const LoadT*>(data)[offset];
#pragma unroll
        for (int j = 0; j < ILP; ++j) threadVal = r(threadVal, v[j]);
    }
    offset = size - last + threadIdx.x;
    for (; offset < size; offset += blockDim.x) threadVal = r(threadVal, data[offset]);
    return threadVal;
}

template <bool IS_MAX>
__device__ __forceinline__ float blockReduce(float* smem, float val, float defaultVal) {
    __syncthreads();
    smem[threadIdx.x] = val;
    __syncthreads();
    float warpVal = defaultVal;
    unsigned mask = (unsigned)((1ull << (blockDim.x / WARP)) - 1);
    if (threadIdx.x < WARP) {
        int lane = threadIdx.x % WARP;
        if (lane < blockDim.x / WARP) {
#pragma unroll
            for (int i = 0; i < WARP; ++i) {
                float b = smem[lane * WARP + i];
                warpVal = IS_MAX ? fmaxf(warpVal, b) : warpVal + b;
            }
            __syncwarp(mask);
            smem[lane] = warpVal;
        }
    }
    __syncthreads();
    float blockVal = defaultVal;
    if (threadIdx.x == 0) {
        for (int i = 0; i < blockDim.x / WARP; ++i) {
            blockVal = IS_MAX ? fmaxf(blockVal, smem[i]) : blockVal + smem[i];
        }
        smem[0] = blockVal;
    }
    __syncthreads();
    return smem[0];
}

struct SoftMaxForwardEpilogue {
    float max_input;
    float sum;
    __device__ __forceinline__ __half operator()(__half input) const {
        return __float2half(expf(__half2float(input) - max_input) / sum);
    }
};

__device__ __forceinline__ void WriteFpropResultsVectorized(int size, int shift,
                                                            const __half* input,
                                                            __half* output,
                                                            SoftMaxForwardEpilogue epilogue) {
    using LoadT = aligned_vector<__half, ILP>;
    int offset = threadIdx.x;
    if (shift > 0) {
        input -= shift;
        output -= shift;
        size += shift;
        if (threadIdx.x >= shift) output[offset] = epilogue(input[offset]);
        size -= blockDim.x;
        input += blockDim.x;
        output += blockDim.x;
    }
    int last = size % (ILP * blockDim.x);
    __half in_v[ILP];
    LoadT* in_value = reinterpret_cast<LoadT*>(&in_v);
    __half out_v[ILP];
    LoadT* out_value = reinterpret_cast<LoadT*>(&out_v);
    for (int o = threadIdx.x; o * ILP < (size - last); o += blockDim.x) {
        *in_value = reinterpret_cast<const LoadT*>(input)[o];
#pragma unroll
        for (int j = 0; j < ILP; ++j) out_v[j] = epilogue(in_v[j]);
        reinterpret_cast<LoadT*>(output)[o] = *out_value;
    }
    offset = size - last + threadIdx.x;
    for (; offset < size; offset += blockDim.x) output[offset] = epilogue(input[offset]);
}

__device__ __forceinline__ void WriteFpropResults(int classes, const __half* input,
                                                  __half* output,
                                                  SoftMaxForwardEpilogue epilogue) {
    int offset = threadIdx.x;
    int last = classes % (ILP * blockDim.x);
    for (; offset < classes - last; offset += blockDim.x * ILP) {
        __half tmp[ILP];
#pragma unroll
        for (int j = 0; j < ILP; ++j) tmp[j] = input[offset + j * blockDim.x];
#pragma unroll
        for (int j = 0; j < ILP; ++j) output[offset + j * blockDim.x] = epilogue(tmp[j]);
    }
    for (; offset < classes; offset += blockDim.x) output[offset] = epilogue(input[offset]);
}

extern "C" __global__ void cunn_softmax_forward_f16(__half* output, const __half* input,
                                                    int classes) {
    extern __shared__ float sdata[];
    input += (long long)blockIdx.x * classes;
    output += (long long)blockIdx.x * classes;
    const int shift = ((unsigned long long)input) % ALIGN_BYTES / sizeof(__half);
    const int output_shift = ((unsigned long long)output) % ALIGN_BYTES / sizeof(__half);

    float threadMax = ilpReduce(shift, input, classes, MaxFloat(), -3.402823466e+38f);
    float max_k = blockReduce<true>(sdata, threadMax, -3.402823466e+38f);
    float threadExp = ilpReduce(shift, input, classes, SumExpFloat{max_k}, 0.0f);
    float sumAll = blockReduce<false>(sdata, threadExp, 0.0f);

    SoftMaxForwardEpilogue epilogue{max_k, sumAll};
    if (shift == output_shift) {
        WriteFpropResultsVectorized(classes, shift, input, output, epilogue);
    } else {
        WriteFpropResults(classes, input, output, epilogue);
    }
}
