// Non-inlined device function call (call.uni into a .func) with a per-thread local array:
// each thread builds the derivative coefficients of a degree-7 polynomial in a local array,
// then calls a __noinline__ Horner evaluator whose degree comes from the data.
// ptx: nvcc -ptx -O3 -arch=sm_90 device_call.cu -o device_call.ptx
// ptx: nvcc -ptx -O3 -arch=sm_80 device_call.cu -o device_call.sm_80.ptx

#define N_COEFFS 8

__device__ __noinline__ float horner(float x, const float* coeffs, int degree) {
    float acc = coeffs[degree];
    for (int k = degree - 1; k >= 0; --k) acc = acc * x + coeffs[k];
    return acc;
}

extern "C" __global__ void poly_derivative_call(const float* __restrict__ x,
                                                const float* __restrict__ coeffs,
                                                const int* __restrict__ degree,
                                                float* __restrict__ y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float deriv[N_COEFFS];
    for (int k = 0; k < N_COEFFS - 1; ++k) deriv[k] = coeffs[k + 1] * (k + 1);
    deriv[N_COEFFS - 1] = 0.0f;
    y[i] = horner(x[i], deriv, degree[i]);
}
