// Pointer chase for load-to-use latency. `chain` holds absolute device addresses: element i
// points at the element the chase visits next, so one hop is one dependent ld.global.u64 with
// no address arithmetic. Optionally every thread of the (single) CTA first streams over the
// first `warm_pairs` 16-byte pairs of `chain` (pair tid, tid + blockDim, ...; four
// independent loads per thread and loop step), touching every line of that footprint, then
// thread 0 follows `hops` links from chain[0]. out[0] = final pointer, out[1] = address of
// chain (lets the host learn where the buffer lives), out[2 + tid] = XOR of the words thread
// tid streamed (keeps the warm-up loads alive).
// `pointer_chase_cycle` warms in chase order instead: the CTA's threads load the words
// order[0..lines-1] (word indices of chain, the order the chase visits them; thread tid takes
// order[tid], order[tid + blockDim], ...), so the lines' last uses before the chase follow the
// chase's own order, as after one full lap of a cyclic chase. Outputs as pointer_chase.
// ptx: nvcc -ptx -O3 -arch=sm_80 pointer_chase.cu -o pointer_chase.ptx

extern "C" __global__ void pointer_chase(const unsigned long long* __restrict__ chain,
                                         long long warm_pairs, int hops,
                                         unsigned long long* __restrict__ out) {
    const ulonglong2* pairs = reinterpret_cast<const ulonglong2*>(chain);
    const long long step = blockDim.x;
    unsigned long long acc = 0;
    long long i = threadIdx.x;
#pragma unroll 1
    for (; i + 3 * step < warm_pairs; i += 4 * step) {
        ulonglong2 v0 = pairs[i], v1 = pairs[i + step], v2 = pairs[i + 2 * step];
        ulonglong2 v3 = pairs[i + 3 * step];
        acc ^= (v0.x ^ v0.y) ^ (v1.x ^ v1.y) ^ (v2.x ^ v2.y) ^ (v3.x ^ v3.y);
    }
#pragma unroll 1
    for (; i < warm_pairs; i += step) {
        ulonglong2 v = pairs[i];
        acc ^= v.x ^ v.y;
    }
    out[2 + threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.x != 0) return;
    unsigned long long p = reinterpret_cast<unsigned long long>(chain);
    for (int i = 0; i < hops; ++i) {
        asm volatile("ld.global.u64 %0, [%0];" : "+l"(p));
    }
    out[0] = p;
    out[1] = reinterpret_cast<unsigned long long>(chain);
}

extern "C" __global__ void pointer_chase_cycle(const unsigned long long* __restrict__ chain,
                                               const unsigned int* __restrict__ order,
                                               int lines, int hops,
                                               unsigned long long* __restrict__ out) {
    unsigned long long acc = 0;
#pragma unroll 1
    for (int k = threadIdx.x; k < lines; k += blockDim.x) {
        acc ^= chain[order[k]];
    }
    out[2 + threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.x != 0) return;
    unsigned long long p = reinterpret_cast<unsigned long long>(chain);
    for (int i = 0; i < hops; ++i) {
        asm volatile("ld.global.u64 %0, [%0];" : "+l"(p));
    }
    out[0] = p;
    out[1] = reinterpret_cast<unsigned long long>(chain);
}
