// Hardware-only microbenchmarks (not run by the simulator): pointer chase with %clock64 and
// %globaltimer, and wgmma throughput. Built by benchmarks/hardware/microbench.py with
//   nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -cubin microbench_hw.cu
//
// chase_ca / chase_cg: one thread follows `warm_hops` links (untimed), then `hops` links
// between two reads of %clock64 and %globaltimer; each hop is one dependent 64-bit load
// (ld.global.ca: cached in L1; ld.global.cg: L2 only). out = {final pointer, cycles, ns}.
//
// wgmma_bf16 / wgmma_e4m3: one warpgroup per CTA issues UNROLL wgmma.mma_async m64n128 per
// iteration (k16 bf16, k32 e4m3) from shared-memory operands of all ones (no-swizzle
// descriptors; with all-ones data the result does not depend on the layout), commit, wait.
// Every accumulator ends at iters * UNROLL * K. out[2 * thread] = min, [2 * thread + 1] = max
// over the thread's 64 accumulators.
// shared_volatile: as workloads/kernels/microbench/shared_bandwidth.cu, but the loads are
// ld.volatile.shared.u32, which ptxas must keep: each iteration issues UNROLL loads per thread
// of word (lane * stride) % 1024.
// fence_cost: one thread per CTA runs `iters` rounds of `stores` 4-byte stores to distinct
// 128-byte lines, then `membar.gl` (mode 1) or nothing (mode 0), then an atomic add on a
// counter (the in-kernel combine's handshake), between two reads of %clock64. out[cta] =
// cycles per round; mode 1 - mode 0 is what the fence costs (`sm.gpu_fence_cycles` after the
// stores' completion, tests/test_fence_timing.py for the simulator's).
// store_halves: thread t owns the 8-byte pair t of `out` (a grid-stride loop over `pairs`) and
// writes it as one 8-byte store (mode 0: every 32-byte sector written whole by one warp
// instruction), as two 4-byte stores, low word then high word (mode 1: each warp instruction
// writes half of 8 sectors and the next completes them, as the GEMM epilogue's 4-byte stores
// of a wgmma fragment do), or its low word only (mode 2: every sector left half written).
// Bytes over time for each mode; with ncu, `lts__t_sectors_srcunit_tex_op_write` and
// `dram__bytes_read` tell whether the L2 pays per partial write and whether a half-written
// sector is filled from DRAM when it is evicted (the kv_b GEMM's gap, docs/accuracy.md).
#include <cstdint>

#define UNROLL 8

#define CHASE(NAME, LOAD)                                                                     \
extern "C" __global__ void NAME(const unsigned long long* __restrict__ chain, int warm_hops,  \
                                int hops, unsigned long long* __restrict__ out) {            \
    if (threadIdx.x != 0 || blockIdx.x != 0) return;                                         \
    unsigned long long p = reinterpret_cast<unsigned long long>(chain);                      \
    for (int i = 0; i < warm_hops; ++i) asm volatile(LOAD " %0, [%0];" : "+l"(p));         \
    unsigned long long g0, g1;                                                               \
    long long c0 = clock64();                                                                \
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g0));                                   \
    _Pragma("unroll 8")                                                                      \
    for (int i = 0; i < hops; ++i) asm volatile(LOAD " %0, [%0];" : "+l"(p));              \
    long long c1 = clock64();                                                                \
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g1));                                   \
    out[0] = p;                                                                              \
    out[1] = static_cast<unsigned long long>(c1 - c0);                                       \
    out[2] = g1 - g0;                                                                        \
}

CHASE(chase_ca, "ld.global.ca.u64")
CHASE(chase_cg, "ld.global.cg.u64")

extern "C" __global__ void shared_volatile(unsigned* __restrict__ out, int stride, int iters) {
    __shared__ unsigned words[1024];
    for (int w = threadIdx.x; w < 1024; w += blockDim.x) words[w] = w;
    __syncthreads();
    unsigned addr = static_cast<unsigned>(
        __cvta_generic_to_shared(&words[((threadIdx.x & 31) * stride) % 1024]));
    unsigned sum = 0;
#pragma unroll 1
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int u = 0; u < 16; ++u) {
            unsigned v;
            asm volatile("ld.volatile.shared.u32 %0, [%1];" : "=r"(v) : "r"(addr) : "memory");
            sum += v;
        }
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

__device__ __forceinline__ uint64_t smem_desc(const void* p) {
    uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(p));
    uint64_t d = (addr & 0x3FFFF) >> 4;      // start address
    d |= uint64_t(128 >> 4) << 16;           // leading-dimension byte offset (next k core matrix)
    d |= uint64_t(256 >> 4) << 32;           // stride byte offset (next 8-row core matrix)
    return d;                                // bits 62-63 = 0: no swizzle
}

__device__ __forceinline__ void store_range(const float* d, float* out) {
    float lo = d[0], hi = d[0];
#pragma unroll
    for (int j = 1; j < 64; ++j) { lo = fminf(lo, d[j]); hi = fmaxf(hi, d[j]); }
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    out[2 * t] = lo;
    out[2 * t + 1] = hi;
}

extern "C" __global__ void __launch_bounds__(128) wgmma_bf16(float* __restrict__ out, int iters) {
    __shared__ __align__(128) uint16_t sa[64 * 16];
    __shared__ __align__(128) uint16_t sb[128 * 16];
    for (int i = threadIdx.x; i < 64 * 16; i += blockDim.x) sa[i] = 0x3F80;   // bf16 1.0
    for (int i = threadIdx.x; i < 128 * 16; i += blockDim.x) sb[i] = 0x3F80;
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    uint64_t da = smem_desc(sa), db = smem_desc(sb);
    float d[64];
#pragma unroll
    for (int j = 0; j < 64; ++j) d[j] = 0.0f;
#pragma unroll 1
    for (int i = 0; i < iters; ++i) {
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(da), "l"(db));
        }
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    }
    store_range(d, out);
}

extern "C" __global__ void __launch_bounds__(128) wgmma_e4m3(float* __restrict__ out, int iters) {
    __shared__ __align__(128) uint8_t sa[64 * 32];
    __shared__ __align__(128) uint8_t sb[128 * 32];
    for (int i = threadIdx.x; i < 64 * 32; i += blockDim.x) sa[i] = 0x38;     // e4m3 1.0
    for (int i = threadIdx.x; i < 128 * 32; i += blockDim.x) sb[i] = 0x38;
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    __syncthreads();
    uint64_t da = smem_desc(sa), db = smem_desc(sb);
    float d[64];
#pragma unroll
    for (int j = 0; j < 64; ++j) d[j] = 0.0f;
#pragma unroll 1
    for (int i = 0; i < iters; ++i) {
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(da), "l"(db));
        }
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
    }
    store_range(d, out);
}

extern "C" __global__ void fence_cost(unsigned* __restrict__ lines, unsigned* __restrict__ counter,
                                      int iters, int stores, int mode,
                                      unsigned long long* __restrict__ out) {
    if (threadIdx.x != 0) return;
    unsigned* mine = lines + blockIdx.x * 32 * 64;
    long long c0 = clock64();
    for (int i = 0; i < iters; ++i) {
        for (int s = 0; s < stores; ++s) asm volatile("st.global.u32 [%0], %1;" :: "l"(mine + 32 * s), "r"(i));
        if (mode) asm volatile("membar.gl;" ::: "memory");
        atomicAdd(counter + blockIdx.x, 1u);
    }
    long long c1 = clock64();
    out[blockIdx.x] = static_cast<unsigned long long>((c1 - c0) / iters);
}

extern "C" __global__ void store_halves(unsigned* __restrict__ out, long long pairs, int mode,
                                        unsigned value) {
    long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
    for (long long t = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; t < pairs;
         t += stride) {
        unsigned* p = out + 2 * t;
        if (mode == 0) {
            asm volatile("st.global.v2.u32 [%0], {%1, %2};" :: "l"(p), "r"(value), "r"(value + 1)
                         : "memory");
        } else {
            asm volatile("st.global.u32 [%0], %1;" :: "l"(p), "r"(value) : "memory");
            if (mode == 1) asm volatile("st.global.u32 [%0], %1;" :: "l"(p + 1), "r"(value + 1)
                                        : "memory");
        }
    }
}
