// saxpy: y = a * x + y, one thread per element with a bounds check.
// ptx: nvcc -ptx -O3 -arch=sm_90 saxpy.cu -o saxpy.ptx
// ptx: nvcc -ptx -O3 -arch=sm_80 saxpy.cu -o saxpy.sm_80.ptx

extern "C" __global__ void saxpy(int n, float a, const float* __restrict__ x,
                                 float* __restrict__ y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        y[i] = a * x[i] + y[i];
    }
}
