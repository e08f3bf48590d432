// Global atomics: a float atomicAdd sum (every thread adds to one address) and an absolute
// maximum built from an atomicCAS loop on the float's bit pattern.
// ptx: nvcc -ptx -O3 -arch=sm_90 atomics.cu -o atomics.ptx
// ptx: nvcc -ptx -O3 -arch=sm_80 atomics.cu -o atomics.sm_80.ptx

extern "C" __global__ void atomic_sum_f32(const float* __restrict__ x, float* total, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(total, x[i]);
}

__device__ void atomic_max_nonneg(float* addr, float v) {
    int* bits = reinterpret_cast<int*>(addr);
    int old = *bits;
    while (__int_as_float(old) < v) {
        int assumed = old;
        old = atomicCAS(bits, assumed, __float_as_int(v));
        if (old == assumed) break;
    }
}

extern "C" __global__ void absmax_cas(const float* __restrict__ x, float* result, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomic_max_nonneg(result, fabsf(x[i]));
}
