// PyTorch's layout kernels (ATen's CUDA Shape.cu and Indexing.cu), written again with their
// launch geometry and access pattern, so that aten::cat / aten::stack and
// aten::index_select / aten::embedding of a trace can be timed from their shapes:
//
//   cat_aligned<B>_d<D>  CatArrayBatchedCopy_alignedK_contig<OpaqueType<B>, unsigned, D, ...,
//                        alignment 16>: blockIdx.y picks the input (up to 8 per launch),
//                        each thread loads 16-byte vectors of its contiguous input
//                        (grid-stride over the input) and stores every element at the
//                        output offset CatArrIndexToOffset computes (one integer division
//                        per output dimension but the outermost), so a cat along the last
//                        dimension writes scattered elements.
//   index_select_rows<B> indexSelectLargeIndex (index is the major dimension): a
//                        grid-stride loop over the output elements; each reads its row's
//                        i64 index, then copies one element from that row of the source.
//
// The inputs of a cat lie in one buffer (`inputs`), each at its `start` element: ATen
// passes their pointers in the kernel's parameters, this kernel their offsets from one
// pointer. Values are moved as opaque B-byte words. Sizes and strides are in elements.
// ptx: nvcc -ptx -O3 -arch=sm_90 torch_layout.cu -o torch_layout.ptx
// ptx: nvcc -ptx -O3 -arch=sm_80 torch_layout.cu -o torch_layout.sm_80.ptx
#include <stdint.h>

#define CAT_MAX_INPUTS 8
#define CAT_MAX_DIMS 4

struct CatInputs {                       // CatArrInputTensorMetadata
    unsigned long long start[CAT_MAX_INPUTS];   // the input's first element in `inputs`
    unsigned offset[CAT_MAX_INPUTS];     // the input's first index along the cat dimension
    unsigned dim_size[CAT_MAX_INPUTS];   // its size along the cat dimension
    unsigned n_elements[CAT_MAX_INPUTS];
};

struct OutGeometry {                     // TensorSizeStride of the output
    unsigned size[CAT_MAX_DIMS];
    unsigned stride[CAT_MAX_DIMS];
};

template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
    T v[N];
};

template <int DIMS>
__device__ __forceinline__ unsigned index_to_offset(const OutGeometry& os, unsigned dim_size,
                                                    int concat_dim, unsigned linear) {
    unsigned offset = 0;
#pragma unroll
    for (int i = DIMS - 1; i >= 1; --i) {
        unsigned cur = i == concat_dim ? dim_size : os.size[i];
        unsigned next = linear / cur;
        offset += (linear - cur * next) * os.stride[i];
        linear = next;
    }
    return offset + linear * os.stride[0];
}

template <typename T, int DIMS>
__device__ __forceinline__ void cat_aligned(T* __restrict__ out, const T* __restrict__ inputs,
                                            const CatInputs& in,
                                            const OutGeometry& os, int concat_dim,
                                            unsigned dim_stride) {
    constexpr int EV = 16 / sizeof(T);
    unsigned n = in.n_elements[blockIdx.y];
    unsigned tid = (blockIdx.x * blockDim.x + threadIdx.x) * EV;
    const T* data = inputs + in.start[blockIdx.y];
    unsigned base = in.offset[blockIdx.y] * dim_stride;
    unsigned dim_size = in.dim_size[blockIdx.y];
    unsigned stride = gridDim.x * blockDim.x * EV;
    while (tid + EV <= n) {
        Vec<T, EV> v = *reinterpret_cast<const Vec<T, EV>*>(data + tid);
#pragma unroll
        for (int e = 0; e < EV; ++e)
            out[base + index_to_offset<DIMS>(os, dim_size, concat_dim, tid + e)] = v.v[e];
        tid += stride;
    }
    for (; tid < n; ++tid)   // the last elements of an input that is no multiple of EV
        out[base + index_to_offset<DIMS>(os, dim_size, concat_dim, tid)] = data[tid];
}

#define CAT_ENTRY(name, T, D)                                                                \
    extern "C" __global__ void __launch_bounds__(128) name(                                 \
        T* __restrict__ out, const T* __restrict__ inputs, const CatInputs in,              \
        const OutGeometry os, int concat_dim, unsigned dim_stride) {                         \
        cat_aligned<T, D>(out, inputs, in, os, concat_dim, dim_stride);                      \
    }

CAT_ENTRY(cat_aligned2_d1, uint16_t, 1)
CAT_ENTRY(cat_aligned2_d2, uint16_t, 2)
CAT_ENTRY(cat_aligned2_d3, uint16_t, 3)
CAT_ENTRY(cat_aligned2_d4, uint16_t, 4)
CAT_ENTRY(cat_aligned4_d1, uint32_t, 1)
CAT_ENTRY(cat_aligned4_d2, uint32_t, 2)
CAT_ENTRY(cat_aligned4_d3, uint32_t, 3)
CAT_ENTRY(cat_aligned4_d4, uint32_t, 4)
CAT_ENTRY(cat_aligned8_d1, uint64_t, 1)
CAT_ENTRY(cat_aligned8_d2, uint64_t, 2)
CAT_ENTRY(cat_aligned8_d3, uint64_t, 3)
CAT_ENTRY(cat_aligned8_d4, uint64_t, 4)

template <typename T>
__device__ __forceinline__ void index_select(T* __restrict__ out, const T* __restrict__ src,
                                             const long long* __restrict__ index,
                                             unsigned total, unsigned inner,
                                             unsigned out_row_stride, unsigned src_row_stride) {
    for (unsigned linear = blockIdx.x * blockDim.x + threadIdx.x; linear < total;
         linear += gridDim.x * blockDim.x) {
        unsigned row = linear / inner;
        unsigned element = linear % inner;
        long long src_row = index[row];
        out[row * out_row_stride + element] = src[src_row * src_row_stride + element];
    }
}

#define INDEX_ENTRY(name, T)                                                                 \
    extern "C" __global__ void __launch_bounds__(128) name(                                 \
        T* __restrict__ out, const T* __restrict__ src, const long long* __restrict__ index, \
        unsigned total, unsigned inner, unsigned out_row_stride, unsigned src_row_stride) {  \
        index_select<T>(out, src, index, total, inner, out_row_stride, src_row_stride);      \
    }

INDEX_ENTRY(index_select_rows2, uint16_t)
INDEX_ENTRY(index_select_rows4, uint32_t)
INDEX_ENTRY(index_select_rows8, uint64_t)
