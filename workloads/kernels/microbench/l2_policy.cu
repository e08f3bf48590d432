// L2 eviction policy: a hot buffer re-read every lap beside a stream larger than the L2.
// ptx: nvcc -ptx -O3 -arch=sm_90a l2_policy.cu -o l2_policy.ptx
//
// Each lap, the grid reads the hot buffer (ld.global.cg: L2 only, so its L2 hit rate is that
// of the "load_cg" accesses) and then the stream (ld.global.nc.L1::no_allocate, DeepEP's
// LD_NC without .L2::256B). hot_stream_evict_first reads the stream under an L2 evict_first
// policy (createpolicy + .L2::cache_hint, as DeepEP and CUTLASS give streamed data);
// hot_stream_plain reads it without one. out[thread] keeps the XOR of what it read.

#include <cstdint>

template <bool kEvictFirst>
__device__ __forceinline__ void hot_stream(const uint4* __restrict__ hot, int hot_n,
                                           const uint4* __restrict__ stream, int stream_n,
                                           int laps, uint32_t* __restrict__ out) {
    uint64_t policy = 0;
    if (kEvictFirst) {
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    }
    const int stride = gridDim.x * blockDim.x;
    const int first = blockIdx.x * blockDim.x + threadIdx.x;
    uint32_t acc = 0;
    for (int lap = 0; lap < laps; ++lap) {
        for (int i = first; i < hot_n; i += stride) {
            const uint4 v = __ldcg(hot + i);
            acc ^= v.x ^ v.y ^ v.z ^ v.w;
        }
        for (int i = first; i < stream_n; i += stride) {
            uint4 v;
            if (kEvictFirst) {
                asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 "
                             "{%0, %1, %2, %3}, [%4], %5;"
                             : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                             : "l"(stream + i), "l"(policy));
            } else {
                asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                             : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                             : "l"(stream + i));
            }
            acc ^= v.x ^ v.y ^ v.z ^ v.w;
        }
    }
    out[first] = acc;
}

extern "C" __global__ void hot_stream_evict_first(const uint4* __restrict__ hot, int hot_n,
                                                  const uint4* __restrict__ stream,
                                                  int stream_n, int laps,
                                                  uint32_t* __restrict__ out) {
    hot_stream<true>(hot, hot_n, stream, stream_n, laps, out);
}

extern "C" __global__ void hot_stream_plain(const uint4* __restrict__ hot, int hot_n,
                                            const uint4* __restrict__ stream, int stream_n,
                                            int laps, uint32_t* __restrict__ out) {
    hot_stream<false>(hot, hot_n, stream, stream_n, laps, out);
}
