// Warp votes: per warp, the ballot of (x > threshold), its popcount, and __any / __all
// flags. Lanes past n vote false; every lane of the warp takes part in the vote.
// ptx: nvcc -ptx -O3 -arch=sm_90 vote.cu -o vote.ptx
// ptx: nvcc -ptx -O3 -arch=sm_80 vote.cu -o vote.sm_80.ptx

extern "C" __global__ void ballot_popc(const float* __restrict__ x, float threshold,
                                       unsigned* __restrict__ masks, int* __restrict__ counts,
                                       int* __restrict__ any_all, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    bool pred = i < n && x[i] > threshold;
    unsigned mask = __ballot_sync(0xffffffffu, pred);
    int any = __any_sync(0xffffffffu, pred);
    int all = __all_sync(0xffffffffu, pred);
    if ((threadIdx.x & 31) == 0) {
        int w = i >> 5;
        masks[w] = mask;
        counts[w] = __popc(mask);
        any_all[w] = any | (all << 1);
    }
}
