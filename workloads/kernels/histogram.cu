// Histogram of uint32 values into `bins` bins (value % bins): per-block counts with
// shared-memory atomics in dynamic shared memory, then one global atomicAdd per bin.
// ptx: nvcc -ptx -O3 -arch=sm_90 histogram.cu -o histogram.ptx
// ptx: nvcc -ptx -O3 -arch=sm_80 histogram.cu -o histogram.sm_80.ptx

extern "C" __global__ void histogram_shared(const unsigned* __restrict__ values,
                                            unsigned* __restrict__ counts, int n, unsigned bins) {
    extern __shared__ unsigned local_counts[];
    for (unsigned b = threadIdx.x; b < bins; b += blockDim.x) local_counts[b] = 0;
    __syncthreads();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        atomicAdd(&local_counts[values[i] % bins], 1u);
    }
    __syncthreads();
    for (unsigned b = threadIdx.x; b < bins; b += blockDim.x) {
        unsigned c = local_counts[b];
        if (c != 0) atomicAdd(&counts[b], c);
    }
}
