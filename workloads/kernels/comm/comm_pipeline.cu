// comm_pipeline: the data mover of the expert-parallel all-to-all (dispatch / combine) and of
// the ring and tree all-reduce, run by rank 0 on the SMs reserved for communication.
// ptx: nvcc -ptx -O3 -arch=sm_90 comm_pipeline.cu -o comm_pipeline.ptx
//
// Three entries differ only in the cache qualifiers of the chunk copies and combines
// (`kernels.comm_cache_hints`): `comm_pipeline` plain loads and stores; `comm_pipeline_deepep`
// DeepEP's `ld.global.nc.L1::no_allocate.L2::256B` loads and `st.global.L1::no_allocate`
// stores (its LD_NC_FUNC / ST_NA_FUNC macros); `comm_pipeline_deepep_evict_first` the same
// with an `L2::evict_first` cache policy (`createpolicy.fractional`, `.L2::cache_hint`) on
// every chunk access, so the streamed chunks are the L2's first victims. Signal words keep
// their acquire/release accesses in all three.
//
// Buffers that belong to other ranks are address windows (models/link_memory.py routes them
// over NVLink or InfiniBand); rank 0's own buffers are ordinary global memory, so chunks pass
// through L2. A CTA is one channel; all its threads move one chunk of `chunk_vecs` 16-byte
// vectors together (four vectors in flight per thread), CTA b takes chunks b, b + grid, ...
// of its role. Roles per channel: the first `ib_ctas` channels carry the chunks that cross
// nodes (RDMA write to the GPU with the same local index in the target node, wait for it,
// then NVLink forwarding inside that node: `fwd_num / fwd_den` forwards per chunk on
// average), the other channels the chunks that go straight over NVLink (`fanout` sends).
// Within a channel, thread 0 signals and waits; all threads copy and combine.
// After each send the channel waits for the peer's signal (by symmetry, the peer's chunk has
// then arrived in rank 0's receive buffer) and combines the received chunk locally:
// `reduce_inputs` received vectors are added into one output vector (1: a plain copy into
// the output layout, 0: nothing). Ring all-reduce: `steps` rounds per chunk, the first
// `reduce_steps` of them add the received chunk to the local one. Tree: `wait_hops` extra
// signal waits per round stand for the depth of the tree below.
// A signal word of ~0 is a peer's abort: the channel stops (the check makes the wait a real
// dependence).
#include <cuda_bf16.h>

#define SIGNAL_ABORT 0xFFFFFFFFu

// Every thread of the channel returns once thread 0 has read the peer's signal word.
__device__ __forceinline__ unsigned wait_signal(const unsigned* sig, unsigned* shared_word) {
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned v;
        asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(sig) : "memory");
        *shared_word = v;
    }
    __syncthreads();
    return *shared_word;
}

// Thread 0 posts the signal word once every thread's stores of the chunk are issued.
__device__ __forceinline__ void post_signal(unsigned* sig, unsigned value) {
    __syncthreads();
    if (threadIdx.x == 0) {
        asm volatile("st.release.sys.global.u32 [%0], %1;" :: "l"(sig), "r"(value) : "memory");
    }
}

enum Hints { PLAIN = 0, DEEPEP = 1, DEEPEP_EVICT_FIRST = 2 };

__device__ __forceinline__ unsigned long long evict_first_policy() {
    unsigned long long policy;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    return policy;
}

template <int H>
__device__ __forceinline__ uint4 load_vec(const uint4* p, unsigned long long policy) {
    uint4 v;
    if (H == PLAIN) {
        v = *p;
    } else if (H == DEEPEP) {
        asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    } else {
        asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.L2::256B.v4.u32 "
                     "{%0, %1, %2, %3}, [%4], %5;"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p), "l"(policy));
    }
    return v;
}

template <int H>
__device__ __forceinline__ void store_vec(uint4* p, uint4 v, unsigned long long policy) {
    if (H == PLAIN) {
        *p = v;
    } else if (H == DEEPEP) {
        asm volatile("st.global.L1::no_allocate.v4.u32 [%0], {%1, %2, %3, %4};"
                     :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
    } else {
        asm volatile("st.global.L1::no_allocate.L2::cache_hint.v4.u32 [%0], {%1, %2, %3, %4}, %5;"
                     :: "l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "l"(policy)
                     : "memory");
    }
}

template <int H>
__device__ __forceinline__ void copy_vecs(uint4* dst, const uint4* src, int n,
                                          unsigned long long pol) {
    const int step = blockDim.x;
    int v = threadIdx.x;
    for (; v + 3 * step < n; v += 4 * step) {
        uint4 a = load_vec<H>(src + v, pol), b = load_vec<H>(src + v + step, pol);
        uint4 c = load_vec<H>(src + v + 2 * step, pol), d = load_vec<H>(src + v + 3 * step, pol);
        store_vec<H>(dst + v, a, pol);
        store_vec<H>(dst + v + step, b, pol);
        store_vec<H>(dst + v + 2 * step, c, pol);
        store_vec<H>(dst + v + 3 * step, d, pol);
    }
    for (; v < n; v += step) {
        store_vec<H>(dst + v, load_vec<H>(src + v, pol), pol);
    }
}

__device__ __forceinline__ uint4 add_bf16x8(uint4 a, uint4 b) {
    __nv_bfloat162* pa = reinterpret_cast<__nv_bfloat162*>(&a);
    const __nv_bfloat162* pb = reinterpret_cast<const __nv_bfloat162*>(&b);
    pa[0] = __hadd2(pa[0], pb[0]);
    pa[1] = __hadd2(pa[1], pb[1]);
    pa[2] = __hadd2(pa[2], pb[2]);
    pa[3] = __hadd2(pa[3], pb[3]);
    return a;
}

// out[v] = sum of `inputs` consecutive received vectors (+ local[v] when given).
template <int H>
__device__ __forceinline__ void combine_vecs(uint4* out, const uint4* recv, const uint4* local,
                                             int n_out, int inputs, unsigned long long pol) {
    for (int v = threadIdx.x; v < n_out; v += blockDim.x) {
        uint4 acc = load_vec<H>(recv + v * inputs, pol);
        for (int j = 1; j < inputs; ++j) {
            acc = add_bf16x8(acc, load_vec<H>(recv + v * inputs + j, pol));
        }
        if (local != nullptr) {
            acc = add_bf16x8(acc, load_vec<H>(local + v, pol));
        }
        store_vec<H>(out + v, acc, pol);
    }
}

#define PIPELINE_PARAMS                                                                      \
    const uint4* __restrict__ src, uint4* ib_win, unsigned* ib_sig, const uint4* ib_recv,   \
    uint4* nvl_win, unsigned* nvl_sig, const uint4* nvl_recv, uint4* __restrict__ out,      \
    int n_ib_chunks, int n_direct_chunks, int chunk_vecs, int ib_ctas, int fwd_num,         \
    int fwd_den, int fanout, int steps, int reduce_steps, int wait_hops, int reduce_inputs
#define PIPELINE_ARGS                                                                        \
    src, ib_win, ib_sig, ib_recv, nvl_win, nvl_sig, nvl_recv, out, n_ib_chunks,              \
    n_direct_chunks, chunk_vecs, ib_ctas, fwd_num, fwd_den, fanout, steps, reduce_steps,     \
    wait_hops, reduce_inputs

template <int H>
__device__ __forceinline__ void pipeline(PIPELINE_PARAMS) {
    __shared__ unsigned signal_word;
    const unsigned long long pol = H == DEEPEP_EVICT_FIRST ? evict_first_policy() : 0ull;
    const bool ib_role = (int)blockIdx.x < ib_ctas;
    const int role_ctas = ib_role ? ib_ctas : (int)gridDim.x - ib_ctas;
    const int role_cta = ib_role ? (int)blockIdx.x : (int)blockIdx.x - ib_ctas;
    const int sends = fanout > 1 ? fanout : 1;
    const int max_fwd = fwd_den > 0 ? (fwd_num + fwd_den - 1) / fwd_den : 0;
    const int slots = sends > max_fwd ? sends : max_fwd;
    const int n_chunks = ib_role ? n_ib_chunks : n_direct_chunks;
    const int first = ib_role ? 0 : n_ib_chunks;
    const int n_out = reduce_inputs > 0 ? chunk_vecs / reduce_inputs : 0;

    for (int c = role_cta; c < n_chunks; c += role_ctas) {
        const int chunk = first + c;
        const uint4* send_from = src + (size_t)chunk * chunk_vecs;
        const uint4* recv_from = nvl_recv + (size_t)chunk * slots * chunk_vecs;
        int nvl_sends = sends;
        if (ib_role) {
            // RDMA to the same local index in the target node, then wait for it to land.
            copy_vecs<H>(ib_win + (size_t)c * chunk_vecs, send_from, chunk_vecs, pol);
            post_signal(ib_sig + c, 1u);
            if (wait_signal(ib_sig + c, &signal_word) == SIGNAL_ABORT) return;
            send_from = ib_recv + (size_t)c * chunk_vecs;
            nvl_sends = (int)(((long long)(c + 1) * fwd_num) / fwd_den
                              - ((long long)c * fwd_num) / fwd_den);
            if (nvl_sends == 0) recv_from = send_from;
        }
        for (int s = 0; s < steps; ++s) {
            for (int f = 0; f < nvl_sends; ++f) {
                uint4* to = nvl_win + ((size_t)chunk * slots + f) * chunk_vecs;
                copy_vecs<H>(to, send_from, chunk_vecs, pol);
                post_signal(nvl_sig + chunk * slots + f, (unsigned)(s + 1));
            }
            if (nvl_sends > 0) {
                for (int h = 0; h <= wait_hops; ++h) {
                    if (wait_signal(nvl_sig + chunk * slots, &signal_word) == SIGNAL_ABORT) {
                        return;
                    }
                }
            }
            uint4* dst = out + (size_t)chunk * chunk_vecs;
            if (s < reduce_steps) {
                combine_vecs<H>(dst, recv_from, send_from, chunk_vecs, 1, pol);
                send_from = dst;
            } else if (reduce_inputs > 0) {
                combine_vecs<H>(dst, recv_from, nullptr, n_out, reduce_inputs, pol);
                send_from = dst;
            }
        }
    }
}

extern "C" __global__ void comm_pipeline(PIPELINE_PARAMS) { pipeline<PLAIN>(PIPELINE_ARGS); }

extern "C" __global__ void comm_pipeline_deepep(PIPELINE_PARAMS) {
    pipeline<DEEPEP>(PIPELINE_ARGS);
}

extern "C" __global__ void comm_pipeline_deepep_evict_first(PIPELINE_PARAMS) {
    pipeline<DEEPEP_EVICT_FIRST>(PIPELINE_ARGS);
}
