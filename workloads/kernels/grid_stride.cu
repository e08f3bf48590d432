// Grid-stride loop: each thread handles every (gridDim.x * blockDim.x)-th element.
// ptx: nvcc -ptx -O3 -arch=sm_90 grid_stride.cu -o grid_stride.ptx
// ptx: nvcc -ptx -O3 -arch=sm_80 grid_stride.cu -o grid_stride.sm_80.ptx

extern "C" __global__ void scale_shift_grid_stride(const float* __restrict__ x,
                                                   float* __restrict__ y, float scale,
                                                   float shift, int n) {
    int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        y[i] = x[i] * scale + shift;
    }
}
