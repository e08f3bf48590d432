// Streaming kernels for memory bandwidth over float4 (16-byte) elements, one element per
// thread, consecutive threads on consecutive elements (fully coalesced 512-byte warp
// accesses). stream_copy: dst[i] = src[i]. stream_read: counts the elements whose component
// sum (x + y) + (z + w) is below `threshold` into *count (atomicAdd); with no element below
// it, the launch only reads. stream_write: dst[i] = (v, v, v, v).
// ptx: nvcc -ptx -O3 -arch=sm_80 stream.cu -o stream.ptx

extern "C" __global__ void stream_copy(const float4* __restrict__ src, float4* __restrict__ dst,
                                       long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) dst[i] = src[i];
}

extern "C" __global__ void stream_read(const float4* __restrict__ src, float threshold,
                                       unsigned* __restrict__ count, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) {
        float4 v = src[i];
        if ((v.x + v.y) + (v.z + v.w) < threshold) atomicAdd(count, 1u);
    }
}

extern "C" __global__ void stream_write(float4* __restrict__ dst, float v, long long n) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) dst[i] = make_float4(v, v, v, v);
}
