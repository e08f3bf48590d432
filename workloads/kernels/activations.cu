// Elementwise activations: GELU (tanh form, uses tanhf) and SiLU (uses __expf).
// ptx: nvcc -ptx -O3 -arch=sm_90 activations.cu -o activations.ptx
// ptx: nvcc -ptx -O3 -arch=sm_80 activations.cu -o activations.sm_80.ptx

extern "C" __global__ void gelu_tanh(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        float inner = 0.7978845608f * (v + 0.044715f * v * v * v);
        y[i] = 0.5f * v * (1.0f + tanhf(inner));
    }
}

extern "C" __global__ void silu(const float* __restrict__ x, float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = v / (1.0f + __expf(-v));
    }
}
