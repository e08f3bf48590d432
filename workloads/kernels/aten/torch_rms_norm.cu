// PyTorch's bf16 RMSNorm forward over the last dim as PyTorch 2.11 runs torch.rms_norm on
// CUDA (aten::_fused_rms_norm): `vectorized_layer_norm_kernel<c10::BFloat16, float, true>`
// of ATen's aten/src/ATen/native/cuda/layer_norm_kernel.cu, the layer-norm kernel built
// with its `rms_norm` template flag, written again from its structure so that the kernel a
// trace names can be timed. x, gamma and y in bf16; statistics and arithmetic in f32 (T_ACC).
//
//   vectorized_rms_norm_bf16  a block of (32, 4) threads per row (warp size x
//          num_threads() / warp size, num_threads() = 128); compute_stats<T, true> reads the
//          row in 8-byte vectors of 4 bf16 (vec_size 4), cuWelfordOnlineSum<true> adds x * x
//          to sigma2 (mean and count stay 0), a shfl.down combine<true> across the warp
//          (sigma2 summed; mean and count shuffled too, as the WelfordDataLN struct is), then
//          the 4 warps combine in halves through 3 floats per warp of dynamic shared memory
//          (threads.y * 3 / 2 floats: mean and sigma2 side by side, the counts after them);
//          thread 0 stores sigma2 / N for the block. The second pass reads the row again in
//          vectors of 4 and writes gamma * (rstd * x), rstd = rsqrt(sigma2 / N + eps); thread
//          0 writes rstd (rms_norm: no mean).
//
// Simplified: gamma is always given and beta never (torch.rms_norm's weight is optional
// and it has no bias; ATen branches on both pointers at run time); N is int as in ATen's
// vectorized kernel, the row offset 64-bit. Reproduced from memory of ATen's sources, not
// copied; not verified against PyTorch 2.11's file: vec_size 4 for every dtype and
// num_threads() = 128 (the trace's launch is (32, 4, 1) threads with 24 bytes of dynamic
// shared memory, which both agree with), and whether rms_norm's combine still shuffles
// mean and count (it moves them unused here; ptxas may drop them).
// ptx: nvcc -ptx -O3 -arch=sm_90a torch_rms_norm.cu -o torch_rms_norm.ptx
// ptx: nvcc -ptx -O3 -arch=sm_80 torch_rms_norm.cu -o torch_rms_norm.sm_80.ptx
#include <cuda_bf16.h>

#define WARP 32
#define VEC_SIZE 4

template <typename T, int N>
struct alignas(sizeof(T) * N) aligned_vector {
    T val[N];
};

struct WelfordDataLN {
    float mean;
    float sigma2;
    float count;
};

__device__ __forceinline__ WelfordDataLN rmsOnlineSum(float val, const WelfordDataLN& curr) {
    return {0.f, curr.sigma2 + val * val, 0.f};
}

__device__ __forceinline__ WelfordDataLN rmsCombine(const WelfordDataLN dataB,
                                                   const WelfordDataLN dataA) {
    return {0.f, dataB.sigma2 + dataA.sigma2, 0.f};
}

__device__ __forceinline__ WelfordDataLN compute_rms_stats(
        const __nv_bfloat16* __restrict__ X, int N, float* buf) {
    using vec_t = aligned_vector<__nv_bfloat16, VEC_SIZE>;
    const vec_t* X_vec = reinterpret_cast<const vec_t*>(X);
    const int numx = blockDim.x * blockDim.y;
    const int thrx = threadIdx.x + threadIdx.y * blockDim.x;
    const int n_vec_to_read = N / VEC_SIZE;
    WelfordDataLN wd = {0.f, 0.f, 0.f};
    for (int i = thrx; i < n_vec_to_read; i += numx) {
        vec_t data = X_vec[i];
#pragma unroll
        for (int ii = 0; ii < VEC_SIZE; ii++) {
            wd = rmsOnlineSum(__bfloat162float(data.val[ii]), wd);
        }
    }
    for (int offset = WARP >> 1; offset > 0; offset >>= 1) {
        WelfordDataLN wdB = {__shfl_down_sync(0xffffffffu, wd.mean, offset),
                             __shfl_down_sync(0xffffffffu, wd.sigma2, offset),
                             __shfl_down_sync(0xffffffffu, wd.count, offset)};
        wd = rmsCombine(wd, wdB);
    }
    if (blockDim.y > 1) {
        float* meansigmabuf = buf;
        float* countbuf = buf + blockDim.y;
        for (int offset = blockDim.y / 2; offset > 0; offset /= 2) {
            if (threadIdx.x == 0 && threadIdx.y >= offset && threadIdx.y < 2 * offset) {
                const int wrt_y = threadIdx.y - offset;
                meansigmabuf[2 * wrt_y] = wd.mean;
                meansigmabuf[2 * wrt_y + 1] = wd.sigma2;
                countbuf[wrt_y] = wd.count;
            }
            __syncthreads();
            if (threadIdx.x == 0 && threadIdx.y < offset) {
                WelfordDataLN wdB = {meansigmabuf[2 * threadIdx.y],
                                     meansigmabuf[2 * threadIdx.y + 1], countbuf[threadIdx.y]};
                wd = rmsCombine(wd, wdB);
            }
            __syncthreads();
        }
        if (threadIdx.x == 0 && threadIdx.y == 0) {
            meansigmabuf[0] = wd.mean;
            meansigmabuf[1] = wd.sigma2 / float(N);
        }
        __syncthreads();
        return WelfordDataLN{meansigmabuf[0], meansigmabuf[1], 0.f};
    }
    return WelfordDataLN{__shfl_sync(0xffffffffu, wd.mean, 0),
                         __shfl_sync(0xffffffffu, wd.sigma2, 0) / float(N), 0.f};
}

extern "C" __global__ void vectorized_rms_norm_bf16(int N, float eps,
                                                    const __nv_bfloat16* __restrict__ X,
                                                    const __nv_bfloat16* gamma,
                                                    float* rstd, __nv_bfloat16* Y) {
    extern __shared__ float s_data[];
    const int i1 = blockIdx.x;
    const __nv_bfloat16* block_row = X + (long long)i1 * N;
    WelfordDataLN wd = compute_rms_stats(block_row, N, s_data);

    using vec_t = aligned_vector<__nv_bfloat16, VEC_SIZE>;
    const vec_t* X_vec = reinterpret_cast<const vec_t*>(block_row);
    const vec_t* gamma_vec = reinterpret_cast<const vec_t*>(gamma);
    vec_t* Y_vec = reinterpret_cast<vec_t*>(Y + (long long)i1 * N);

    const int numx = blockDim.x * blockDim.y;
    const int thrx = threadIdx.x + threadIdx.y * blockDim.x;
    const int n_vec_to_read = N / VEC_SIZE;
    float rstd_val = rsqrtf(wd.sigma2 + eps);
    for (int i = thrx; i < n_vec_to_read; i += numx) {
        vec_t data = X_vec[i];
        vec_t out;
#pragma unroll
        for (int ii = 0; ii < VEC_SIZE; ii++) {
            out.val[ii] = __float2bfloat16(__bfloat162float(gamma_vec[i].val[ii]) *
                                           (rstd_val * __bfloat162float(data.val[ii])));
        }
        Y_vec[i] = out;
    }
    if (thrx == 0) {
        rstd[i1] = rstd_val;
    }
}
