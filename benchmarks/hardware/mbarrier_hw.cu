// mbarrier arrival cost on a Hopper GPU: how long one phase of an mbarrier takes when
// `warps` warps each arrive with `lanes` lanes, locally or on the cluster partner's barrier.
//
// One cluster of 2 CTAs (one per SM). Per iteration every thread with lane < `lanes`
// arrives once, then every thread waits (try_wait.parity) for its own barrier's phase i;
// the barrier expects warps x lanes arrivals, from its own CTA (mode 0, 3) or from the
// partner (mode 1, 2). Cycles per iteration from %clock64 over `iters` and 2 x `iters`
// iterations (the difference, so set-up cancels), thread 0 of CTA 0.
//   mode 0: mbarrier.arrive.shared::cta            (release, CTA scope; own barrier)
//   mode 1: mbarrier.arrive.release.cluster.shared::cluster  (partner's barrier via mapa)
//   mode 2: mbarrier.arrive.shared::cluster        (release, CTA scope; partner's barrier)
//   mode 3: mbarrier.arrive.release.cluster.shared::cta      (own barrier, cluster scope)
//
//   nvcc -O3 -arch=sm_90a -o mbarrier_hw benchmarks/hardware/mbarrier_hw.cu && ./mbarrier_hw
// prints CSV: mode,warps,lanes,arrivals,cycles_per_phase,cycles_per_arrival
#include <cstdio>
#include <cstdint>
#include <cooperative_groups.h>

namespace cg = cooperative_groups;

__global__ void __cluster_dims__(2, 1, 1) mbar_bench(int iters, int lanes, int mode,
                                                     long long* out) {
    __shared__ __align__(8) uint64_t bar;
    cg::cluster_group cluster = cg::this_cluster();
    unsigned tid = threadIdx.x;
    unsigned count = (blockDim.x / 32) * lanes;
    uint32_t own = (uint32_t)__cvta_generic_to_shared(&bar);
    if (tid == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(own), "r"(count));
        asm volatile("fence.mbarrier_init.release.cluster;");
    }
    cluster.sync();
    uint32_t peer;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
                 : "=r"(peer) : "r"(own), "r"(cluster.block_rank() ^ 1));
    bool arrives = (tid & 31) < (unsigned)lanes;
    long long t0 = clock64();
    for (int i = 0; i < iters; i++) {
        if (arrives) {
            if (mode == 0)
                asm volatile("{ .reg .b64 s; mbarrier.arrive.shared::cta.b64 s, [%0]; }"
                             ::"r"(own) : "memory");
            else if (mode == 1)
                asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];"
                             ::"r"(peer) : "memory");
            else if (mode == 2)
                asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(peer) : "memory");
            else
                asm volatile("{ .reg .b64 s; mbarrier.arrive.release.cluster.shared::cta.b64 s, "
                             "[%0]; }" ::"r"(own) : "memory");
        }
        uint32_t done = 0;
        while (!done)
            asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; "
                         "selp.u32 %0, 1, 0, p; }"
                         : "=r"(done) : "r"(own), "r"(i & 1) : "memory");
    }
    long long t1 = clock64();
    cluster.sync();
    if (tid == 0) out[blockIdx.x] = t1 - t0;
}

static long long run(int warps, int lanes, int mode, int iters, long long* d_out) {
    mbar_bench<<<2, warps * 32>>>(iters, lanes, mode, d_out);
    long long h[2] = {0, 0};
    cudaMemcpy(h, d_out, sizeof(h), cudaMemcpyDeviceToHost);
    return h[0];
}

int main() {
    long long* d_out;
    cudaMalloc(&d_out, 2 * sizeof(long long));
    const int iters = 2000;
    printf("mode,warps,lanes,arrivals,cycles_per_phase,cycles_per_arrival\n");
    for (int mode = 0; mode < 4; mode++)
        for (int warps : {1, 2, 4, 8, 16})
            for (int lanes : {1, 32}) {
                run(warps, lanes, mode, 100, d_out);   // warm-up
                long long a = run(warps, lanes, mode, iters, d_out);
                long long b = run(warps, lanes, mode, 2 * iters, d_out);
                cudaError_t err = cudaGetLastError();
                if (err != cudaSuccess) {
                    printf("# mode %d warps %d lanes %d: %s\n", mode, warps, lanes,
                           cudaGetErrorString(err));
                    return 1;
                }
                double per = double(b - a) / iters;
                int arrivals = warps * lanes;
                printf("%d,%d,%d,%d,%.1f,%.2f\n", mode, warps, lanes, arrivals, per,
                       per / arrivals);
            }
    cudaFree(d_out);
    return 0;
}
