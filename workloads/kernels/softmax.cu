// Row softmax, one warp per row (threadIdx.y picks the row inside a block): max and sum
// across the warp with shfl.bfly (__shfl_xor_sync), exponentials with __expf.
// ptx: nvcc -ptx -O3 -arch=sm_90 softmax.cu -o softmax.ptx
// ptx: nvcc -ptx -O3 -arch=sm_80 softmax.cu -o softmax.sm_80.ptx

extern "C" __global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y,
                                        int rows, int cols) {
    int row = blockIdx.x * blockDim.y + threadIdx.y;
    if (row >= rows) return;
    int lane = threadIdx.x;
    const float* xr = x + (long long)row * cols;
    float* yr = y + (long long)row * cols;
    float m = -INFINITY;
    for (int c = lane; c < cols; c += 32) m = fmaxf(m, xr[c]);
    for (int mask = 16; mask > 0; mask >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, mask));
    float s = 0.0f;
    for (int c = lane; c < cols; c += 32) s += __expf(xr[c] - m);
    for (int mask = 16; mask > 0; mask >>= 1) s += __shfl_xor_sync(0xffffffffu, s, mask);
    float inv = 1.0f / s;
    for (int c = lane; c < cols; c += 32) yr[c] = __expf(xr[c] - m) * inv;
}
