// Block sum reduction through a shared-memory tree: each block sums 2 * blockDim.x inputs
// into partial[blockIdx.x]. Uses dynamic shared memory (blockDim.x floats).
// ptx: nvcc -ptx -O3 -arch=sm_90 block_reduce.cu -o block_reduce.ptx
// ptx: nvcc -ptx -O3 -arch=sm_80 block_reduce.cu -o block_reduce.sm_80.ptx

extern "C" __global__ void block_reduce_sum(const float* __restrict__ x,
                                            float* __restrict__ partial, int n) {
    extern __shared__ float sdata[];
    unsigned tid = threadIdx.x;
    unsigned i = blockIdx.x * (blockDim.x * 2) + tid;
    float v = 0.0f;
    if (i < n) v = x[i];
    if (i + blockDim.x < n) v += x[i + blockDim.x];
    sdata[tid] = v;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) partial[blockIdx.x] = sdata[0];
}
