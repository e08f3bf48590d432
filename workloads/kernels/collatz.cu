// Divergent data-dependent loop: per-thread Collatz step count (trip count set by the data,
// so lanes of a warp leave the loop at different times), capped at max_steps.
// ptx: nvcc -ptx -O3 -arch=sm_90 collatz.cu -o collatz.ptx
// ptx: nvcc -ptx -O3 -arch=sm_80 collatz.cu -o collatz.sm_80.ptx

extern "C" __global__ void collatz_steps(const unsigned* __restrict__ start,
                                         int* __restrict__ steps, int n, int max_steps) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned v = start[i];
    int count = 0;
    while (v > 1u && count < max_steps) {
        v = (v & 1u) ? 3u * v + 1u : v >> 1;
        ++count;
    }
    steps[i] = count;
}
