// L2 -> SM read bandwidth on the real GPU: TMA bulk copies (`cp.async.bulk`, the engine the
// GEMM template's tensor copies use) and plain `ld.global.cg` loads, from an L2-resident
// footprint. Standalone (no Python): prints CSV rows on stdout.
//   nvcc -O3 -gencode=arch=compute_90a,code=sm_90a -o l2_bw l2_bandwidth_hw.cu && ./l2_bw
// PTX for the simulator (benchmarks/hardware/l2_ld_sim.py runs its ld_read):
//   nvcc -ptx -O3 -arch=sm_90a l2_bandwidth_hw.cu -o l2_bandwidth_hw.ptx
//
// bulk_read: one thread per CTA keeps `stages` bulk copies of `chunk` bytes in flight into a
// shared-memory ring (mbarrier expect_tx / complete_tx per stage, as a GEMM producer does).
// mode 0 "distinct": CTA c reads its own `region` bytes at c * region; mode 1 "shared": every
// CTA reads the same `region` bytes, each starting at a different chunk (a GEMM operand panel
// read by many CTAs). One CTA per SM (the ring takes >= 128 KiB of shared memory).
// ld_read: 1024 threads per CTA, 16-byte `ld.global.cg` loads over the CTA's region (four in
// flight per thread). ld_stride: the same loads `stride` bytes apart (below), the L2's rate
// in line requests of one sector.
// Each CTA writes its %clock64 cycles; the host times launches of N and 2N iterations with
// events: bandwidth = delta bytes / delta seconds, SM clock = delta cycles (max over CTAs) /
// delta seconds, bytes per SM cycle = delta bytes / delta cycles.
#include <cstdint>
#include <cstdio>
#include <vector>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
    fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); return 1; } } while (0)

__device__ __forceinline__ void bar_wait(uint32_t bar, uint32_t parity) {
    asm volatile("{\n .reg .pred p;\n WAIT:\n"
                 " mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
                 " @!p bra WAIT;\n}\n" :: "r"(bar), "r"(parity) : "memory");
}

extern "C" __global__ void bulk_read(const char* __restrict__ src, long long region, int mode,
                                     int chunk, int iters, int stages,
                                     long long* __restrict__ cycles) {
    extern __shared__ __align__(128) char ring[];
    __shared__ __align__(8) unsigned long long bars[16];
    if (threadIdx.x != 0) return;
    uint32_t bar0 = static_cast<uint32_t>(__cvta_generic_to_shared(&bars[0]));
    uint32_t ring0 = static_cast<uint32_t>(__cvta_generic_to_shared(ring));
    for (int s = 0; s < stages; ++s)
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(bar0 + 8 * s));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    const char* base = mode == 0 ? src + blockIdx.x * region : src;
    long long chunks = region / chunk;
    long long first = mode == 0 ? 0 : blockIdx.x % chunks;
    long long t0 = clock64();
    for (int i = 0; i < iters; ++i) {
        int s = i % stages;
        uint32_t bar = bar0 + 8 * s;
        if (i >= stages) bar_wait(bar, ((i / stages) - 1) & 1);
        const char* from = base + ((first + i) % chunks) * chunk;
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                     :: "r"(bar), "r"(chunk) : "memory");
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                     " [%0], [%1], %2, [%3];"
                     :: "r"(ring0 + s * chunk), "l"(from), "r"(chunk), "r"(bar) : "memory");
    }
    for (int i = iters > stages ? iters - stages : 0; i < iters; ++i)
        bar_wait(bar0 + 8 * (i % stages), (i / stages) & 1);
    cycles[blockIdx.x] = clock64() - t0;
}

extern "C" __global__ void ld_read(const uint4* __restrict__ src, long long region, int iters,
                                   long long* __restrict__ cycles, uint4* __restrict__ sink) {
    long long words = region / 16;
    const uint4* base = src + blockIdx.x * words;
    uint32_t acc = 0;
    long long t0 = clock64();
    for (int i = 0; i < iters; ++i) {
        for (long long w = threadIdx.x; w < words; w += 4 * blockDim.x) {
            uint4 v[4];
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                long long at = w + u * blockDim.x;
                if (at >= words) at = w;
                asm volatile("ld.global.cg.v4.u32 {%0,%1,%2,%3}, [%4];"
                             : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w)
                             : "l"(base + at));
            }
#pragma unroll
            for (int u = 0; u < 4; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) cycles[blockIdx.x] = clock64() - t0;
    if (acc == 0x12345678u) sink[threadIdx.x] = make_uint4(acc, 0, 0, 0);
}

// ld_stride: as ld_read, but a warp load's lanes are `stride` bytes apart: lane i loads 16
// bytes at w * 32 * stride + i * stride + o * 16, for o = 0 .. stride / 16 - 1 (so a pass
// still reads every byte of the CTA's region once, region / 512 warp loads). Stride 16 is
// ld_read's pattern (4 whole lines a warp load), 32 one sector per lane (8 lines of 4
// sectors), 64 (16 lines of 2), 128 one sector of each of 32 lines (32 one-sector line
// requests). The rows measure the L2's rate in line requests: `gb_per_s` counts the 32-byte
// sectors moved (twice the bytes used from stride 32 on), not the bytes used.
extern "C" __global__ void ld_stride(const char* __restrict__ src, long long region,
                                     int stride, int iters, long long* __restrict__ cycles,
                                     uint4* __restrict__ sink) {
    const char* base = src + blockIdx.x * region;
    long long loads = region / 512;                  // warp loads a pass
    int phases = stride / 16;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nwarps = blockDim.x >> 5;
    uint32_t acc = 0;
    long long t0 = clock64();
    for (int i = 0; i < iters; ++i) {
        for (long long j = warp; j < loads; j += 4 * nwarps) {
            uint4 v[4];
#pragma unroll
            for (int u = 0; u < 4; ++u) {
                long long at = j + u * nwarps;
                if (at >= loads) at = j;
                const char* p = base + (at / phases) * 32ll * stride
                                + static_cast<long long>(lane) * stride + (at % phases) * 16;
                asm volatile("ld.global.cg.v4.u32 {%0,%1,%2,%3}, [%4];"
                             : "=r"(v[u].x), "=r"(v[u].y), "=r"(v[u].z), "=r"(v[u].w)
                             : "l"(p));
            }
#pragma unroll
            for (int u = 0; u < 4; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) cycles[blockIdx.x] = clock64() - t0;
    if (acc == 0x12345678u) sink[threadIdx.x] = make_uint4(acc, 0, 0, 0);
}

struct Timed { float ms; long long max_cycles; };

template <class F>
static int timed(F launch, long long* dcyc, int ctas, Timed* out) {
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a)); CHECK(cudaEventCreate(&b));
    launch();                                   // warm: footprint into L2
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaEventRecord(a));
    launch();
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    CHECK(cudaGetLastError());
    CHECK(cudaEventElapsedTime(&out->ms, a, b));
    std::vector<long long> cyc(ctas);
    CHECK(cudaMemcpy(cyc.data(), dcyc, ctas * sizeof(long long), cudaMemcpyDeviceToHost));
    out->max_cycles = 0;
    for (long long c : cyc) out->max_cycles = c > out->max_cycles ? c : out->max_cycles;
    CHECK(cudaEventDestroy(a)); CHECK(cudaEventDestroy(b));
    return 0;
}

static void row(const char* kind, const char* mode, int ctas, int chunk, int stages,
                long long region, double bytes_n, const Timed& t1, const Timed& t2) {
    double ds = (t2.ms - t1.ms) * 1e-3;
    double dc = static_cast<double>(t2.max_cycles - t1.max_cycles);
    printf("%s,%s,%d,%d,%d,%lld,%.1f,%.1f,%.2f,%.1f\n", kind, mode, ctas, chunk, stages, region,
           bytes_n / ds * 1e-9, dc / ds * 1e-6, bytes_n / dc, bytes_n / dc / ctas);
    fflush(stdout);
}

int main() {
    const long long region = 128 << 10;        // per CTA (distinct) or shared by all
    const int n = 4000;
    char* src; long long* cyc; uint4* sink;
    CHECK(cudaMalloc(&src, 512ll << 20));
    CHECK(cudaMemset(src, 1, 512ll << 20));
    CHECK(cudaMalloc(&cyc, 4096 * sizeof(long long)));
    CHECK(cudaMalloc(&sink, 1024 * sizeof(uint4)));
    CHECK(cudaFuncSetAttribute(bulk_read, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 << 10));
    printf("kernel,mode,ctas,chunk_bytes,stages,region_bytes,gb_per_s,sm_clock_mhz,"
           "bytes_per_sm_clk_all,bytes_per_sm_clk_per_cta\n");
    const int ctas_list[] = {1, 8, 33, 66, 132};
    const int chunk_list[] = {16384, 4096};
    for (int mode = 0; mode < 2; ++mode)
        for (int chunk : chunk_list)
            for (int ctas : ctas_list) {
                if (chunk == 4096 && ctas != 132 && ctas != 1) continue;
                int stages = chunk == 16384 ? 8 : 16;
                size_t smem = static_cast<size_t>(stages) * chunk;
                if (smem < (128 << 10)) smem = 128 << 10;
                Timed t1, t2;
                auto go = [&](int it) { bulk_read<<<ctas, 32, smem>>>(src, region, mode, chunk,
                                                                      it, stages, cyc); };
                if (timed([&] { go(n); }, cyc, ctas, &t1)) return 1;
                if (timed([&] { go(2 * n); }, cyc, ctas, &t2)) return 1;
                row("bulk", mode ? "shared" : "distinct", ctas, chunk, stages, region,
                    static_cast<double>(ctas) * chunk * n, t1, t2);
            }
    for (int ctas : {1, 33, 132}) {
        Timed t1, t2;
        int it = 200;
        auto go = [&](int k) { ld_read<<<ctas, 1024>>>(reinterpret_cast<uint4*>(src), region,
                                                        k, cyc, sink); };
        if (timed([&] { go(it); }, cyc, ctas, &t1)) return 1;
        if (timed([&] { go(2 * it); }, cyc, ctas, &t2)) return 1;
        row("ld_cg", "distinct", ctas, 16, 0, region, static_cast<double>(ctas) * region * it,
            t1, t2);
    }
    for (int stride : {16, 32, 64, 128})               // chunk_bytes column = the stride
        for (int ctas : {1, 33, 132}) {
            Timed t1, t2;
            int it = 200;
            auto go = [&](int k) { ld_stride<<<ctas, 1024>>>(src, region, stride, k, cyc,
                                                              sink); };
            if (timed([&] { go(it); }, cyc, ctas, &t1)) return 1;
            if (timed([&] { go(2 * it); }, cyc, ctas, &t2)) return 1;
            long long sectors = (region / 512) * (stride >= 32 ? 32 : 16);   // a pass
            row("ld_stride", "distinct", ctas, stride, 0, region,
                static_cast<double>(ctas) * sectors * 32 * it, t1, t2);
        }
    return 0;
}
