// Double precision: daxpy (y = a * x + y) and a dot product whose per-block partial sums
// (shared-memory tree) are combined with atomicAdd on a double.
// ptx: nvcc -ptx -O3 -arch=sm_90 f64.cu -o f64.ptx
// ptx: nvcc -ptx -O3 -arch=sm_80 f64.cu -o f64.sm_80.ptx

extern "C" __global__ void daxpy(int n, double a, const double* __restrict__ x,
                                 double* __restrict__ y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

extern "C" __global__ void ddot_atomic(const double* __restrict__ x,
                                       const double* __restrict__ y, double* result, int n) {
    __shared__ double partial[256];
    int tid = threadIdx.x;
    double acc = 0.0;
    for (int i = blockIdx.x * blockDim.x + tid; i < n; i += gridDim.x * blockDim.x) {
        acc += x[i] * y[i];
    }
    partial[tid] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) partial[tid] += partial[tid + s];
        __syncthreads();
    }
    if (tid == 0) atomicAdd(result, partial[0]);
}
