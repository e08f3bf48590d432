// LayerNorm over the last axis, one block per row: two-pass mean and variance, each pass a
// shfl.down warp reduction plus shared partials; rsqrtf; per-column gamma and beta.
// ptx: nvcc -ptx -O3 -arch=sm_90 layernorm.cu -o layernorm.ptx
// ptx: nvcc -ptx -O3 -arch=sm_80 layernorm.cu -o layernorm.sm_80.ptx

__device__ float block_sum(float v, float* partials) {
    int lane = threadIdx.x & 31;
    int warp = threadIdx.x >> 5;
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    if (lane == 0) partials[warp] = v;
    __syncthreads();
    float total = 0.0f;
    int n_warps = (blockDim.x + 31) >> 5;
    for (int w = 0; w < n_warps; ++w) total += partials[w];
    __syncthreads();
    return total;
}

extern "C" __global__ void layernorm_rows(const float* __restrict__ x,
                                          const float* __restrict__ gamma,
                                          const float* __restrict__ beta, float* __restrict__ y,
                                          int cols, float eps) {
    __shared__ float partials[32];
    const float* xr = x + (long long)blockIdx.x * cols;
    float* yr = y + (long long)blockIdx.x * cols;
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += xr[c];
    float mean = block_sum(s, partials) / cols;
    float sq = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        float d = xr[c] - mean;
        sq += d * d;
    }
    float rstd = rsqrtf(block_sum(sq, partials) / cols + eps);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        yr[c] = (xr[c] - mean) * rstd * gamma[c] + beta[c];
    }
}
