// Inclusive prefix sum of int32 within each block: shfl.up (Kogge-Stone/Hillis-Steele) scan
// inside each warp, warp totals scanned through shared memory, then added back.
// block_totals[blockIdx.x] receives the block's sum.
// ptx: nvcc -ptx -O3 -arch=sm_90 scan.cu -o scan.ptx
// ptx: nvcc -ptx -O3 -arch=sm_80 scan.cu -o scan.sm_80.ptx

extern "C" __global__ void scan_inclusive_block(const int* __restrict__ x, int* __restrict__ y,
                                                int* __restrict__ block_totals, int n) {
    __shared__ int warp_totals[32];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    int lane = threadIdx.x & 31;
    int warp = threadIdx.x >> 5;
    int v = (i < n) ? x[i] : 0;
    for (int off = 1; off < 32; off <<= 1) {
        int up = __shfl_up_sync(0xffffffffu, v, off);
        if (lane >= off) v += up;
    }
    if (lane == 31) warp_totals[warp] = v;
    __syncthreads();
    if (warp == 0) {
        int n_warps = blockDim.x >> 5;
        int t = (lane < n_warps) ? warp_totals[lane] : 0;
        for (int off = 1; off < 32; off <<= 1) {
            int up = __shfl_up_sync(0xffffffffu, t, off);
            if (lane >= off) t += up;
        }
        warp_totals[lane] = t;
    }
    __syncthreads();
    if (warp > 0) v += warp_totals[warp - 1];
    if (i < n) y[i] = v;
    if (threadIdx.x == blockDim.x - 1) block_totals[blockIdx.x] = v;
}
