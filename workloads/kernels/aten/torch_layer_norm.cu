// PyTorch's fp16 LayerNorm forward over the last dim (ATen's aten/src/ATen/native/cuda/
// layer_norm_kernel.cu, LayerNormKernelImplInternal), written again from its structure
// with the launch geometry PyTorch 2.0 chose, so a torch.layer_norm(x_fp16, (N,)) can be
// timed. Statistics and arithmetic in f32 (T_ACC), x, gamma, beta and y in fp16; mean and
// rstd (f32, one per row) are written as ATen's native_layer_norm returns them.
//
//   vectorized_layer_norm_f16  (vectorized_layer_norm_kernel, used when N % 4 == 0 and
//          every tensor is 8-byte aligned): a block of (32, 8) threads per row; compute_stats
//          reads the row in 8-byte vectors of 4 halfs (vec_size 4 for every dtype in ATen),
//          a Welford online update per element (the mean step multiplies by 1.f / count),
//          a shfl.down Welford combine across the warp, then the 8 warps combine in halves
//          through 3 floats per warp of dynamic shared memory (mean and m2 side by side,
//          the counts after them); thread 0 stores mean and m2 / N for the block. The
//          second pass reads the row again in vectors of 4 and writes
//          gamma * (rstd * (x - mean)) + beta, rstd = rsqrt(var + eps).
//   rowwise_moments_f16 + layer_norm_forward_f16  (RowwiseMomentsCUDAKernel and
//          LayerNormForwardCUDAKernel, the fallback for other N): 512 threads per row
//          (kCUDABlockReduceNumThreads) fold the row into a Welford state (mean, m2, n, nf)
//          with a true division per element and combine it with cuda_utils::BlockReduce
//          (shfl.down within each warp, one state per warp in shared memory, the first warp
//          folds those); thread 0 writes mean and rstd. Then 256 threads per row
//          (kCUDANumThreads) write (x - mean) * rstd * gamma + beta, one scalar element
//          each step.
//
// Simplified: gamma and beta are always given (ATen also runs without them); N and the
// offsets are int (int64_t in ATen's fallback kernels). Reproduced from memory of PyTorch
// 2.0's sources, not copied.
// ptx: nvcc -ptx -O3 -arch=sm_90 torch_layer_norm.cu -o torch_layer_norm.ptx
// ptx: nvcc -ptx -O3 -arch=sm_80 torch_layer_norm.cu -o torch_layer_norm.sm_80.ptx
#include <cuda_fp16.h>

#define WARP 32
#define VEC_SIZE 4

template <typename T, int N>
struct alignas(sizeof(T) * N) aligned_vector {
    T val[N];
};

// ---- vectorized_layer_norm_kernel -------------------------------------------------------

struct WelfordDataLN {
    float mean;
    float sigma2;
    float count;
};

__device__ __forceinline__ WelfordDataLN cuWelfordOnlineSum(float val,
                                                            const WelfordDataLN& curr) {
    float delta = val - curr.mean;
    float new_count = curr.count + 1.f;
    float new_mean = curr.mean + delta * (1.f / new_count);
    return {new_mean, curr.sigma2 + delta * (val - new_mean), new_count};
}

__device__ __forceinline__ WelfordDataLN cuWelfordCombine(const WelfordDataLN dataB,
                                                         const WelfordDataLN dataA) {
    float delta = dataB.mean - dataA.mean;
    float count = dataA.count + dataB.count;
    float mean, sigma2;
    if (count > 0.f) {
        float coef = 1.f / count;
        float nA = dataA.count * coef;
        float nB = dataB.count * coef;
        mean = nA * dataA.mean + nB * dataB.mean;
        sigma2 = dataA.sigma2 + dataB.sigma2 + delta * delta * dataA.count * nB;
    } else {
        mean = 0.f;
        sigma2 = 0.f;
    }
    return {mean, sigma2, count};
}

__device__ __forceinline__ WelfordDataLN compute_stats(const __half* __restrict__ X, int N,
                                                      float* buf) {
    using vec_t = aligned_vector<__half, VEC_SIZE>;
    const vec_t* X_vec = reinterpret_cast<const vec_t*>(X);
    const int numx = blockDim.x * blockDim.y;
    const int thrx = threadIdx.x + threadIdx.y * blockDim.x;
    const int n_vec_to_read = N / VEC_SIZE;
    WelfordDataLN wd = {0.f, 0.f, 0.f};
    for (int i = thrx; i < n_vec_to_read; i += numx) {
        vec_t data = X_vec[i];
#pragma unroll
        for (int ii = 0; ii < VEC_SIZE; ii++) {
            wd = cuWelfordOnlineSum(__half2float(data.val[ii]), wd);
        }
    }
    for (int offset = WARP >> 1; offset > 0; offset >>= 1) {
        WelfordDataLN wdB = {__shfl_down_sync(0xffffffffu, wd.mean, offset),
                             __shfl_down_sync(0xffffffffu, wd.sigma2, offset),
                             __shfl_down_sync(0xffffffffu, wd.count, offset)};
        wd = cuWelfordCombine(wd, wdB);
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
                wd = cuWelfordCombine(wd, wdB);
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

extern "C" __global__ void vectorized_layer_norm_f16(int N, float eps,
                                                     const __half* __restrict__ X,
                                                     const __half* gamma, const __half* beta,
                                                     float* mean, float* rstd, __half* Y) {
    extern __shared__ float s_data[];
    const int i1 = blockIdx.x;
    const __half* block_row = X + (long long)i1 * N;
    WelfordDataLN wd = compute_stats(block_row, N, s_data);

    using vec_t = aligned_vector<__half, VEC_SIZE>;
    const vec_t* X_vec = reinterpret_cast<const vec_t*>(block_row);
    const vec_t* gamma_vec = reinterpret_cast<const vec_t*>(gamma);
    const vec_t* beta_vec = reinterpret_cast<const vec_t*>(beta);
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
            out.val[ii] = __float2half(
                __half2float(gamma_vec[i].val[ii]) *
                    (rstd_val * (__half2float(data.val[ii]) - wd.mean)) +
                __half2float(beta_vec[i].val[ii]));
        }
        Y_vec[i] = out;
    }
    if (thrx == 0) {
        mean[i1] = wd.mean;
        rstd[i1] = rstd_val;
    }
}

// ---- RowwiseMomentsCUDAKernel + LayerNormForwardCUDAKernel ------------------------------

struct WelfordData {
    float mean;
    float m2;
    int n;
    float nf;
};

__device__ __forceinline__ WelfordData welford_reduce(WelfordData acc, float data) {
    int new_n = acc.n + 1;
    float new_nf = static_cast<float>(new_n);
    float delta = data - acc.mean;
    float new_mean = acc.mean + delta / new_nf;
    float new_delta = data - new_mean;
    return {new_mean, acc.m2 + delta * new_delta, new_n, new_nf};
}

__device__ __forceinline__ WelfordData welford_combine(WelfordData a, WelfordData b) {
    if (a.nf == 0) return b;
    if (b.nf == 0) return a;
    float delta = b.mean - a.mean;
    float new_count = a.nf + b.nf;
    float nb_over_n = b.nf / new_count;
    return {a.mean + delta * nb_over_n, a.m2 + b.m2 + delta * delta * a.nf * nb_over_n, -1,
            new_count};
}

__device__ __forceinline__ WelfordData welford_shfl_down(WelfordData v, int offset) {
    return {__shfl_down_sync(0xffffffffu, v.mean, offset),
            __shfl_down_sync(0xffffffffu, v.m2, offset),
            __shfl_down_sync(0xffffffffu, v.n, offset),
            __shfl_down_sync(0xffffffffu, v.nf, offset)};
}

__device__ __forceinline__ WelfordData welford_warp_reduce(WelfordData v) {
#pragma unroll
    for (int offset = WARP >> 1; offset > 0; offset >>= 1) {
        v = welford_combine(v, welford_shfl_down(v, offset));
    }
    return v;
}

extern "C" __global__ void rowwise_moments_f16(int N, float eps, const __half* X, float* mean,
                                               float* rstd) {
    __shared__ WelfordData val_shared[WARP];
    const long long i = blockIdx.x;
    WelfordData val = {0.f, 0.f, 0, 0.f};
    for (int j = threadIdx.x; j < N; j += blockDim.x) {
        val = welford_reduce(val, __half2float(X[i * N + j]));
    }
    const int lid = threadIdx.x % WARP;
    const int wid = threadIdx.x / WARP;
    val = welford_warp_reduce(val);
    __syncthreads();
    if (lid == 0) val_shared[wid] = val;
    __syncthreads();
    val = (threadIdx.x < blockDim.x / WARP) ? val_shared[lid] : WelfordData{0.f, 0.f, 0, 0.f};
    if (wid == 0) val = welford_warp_reduce(val);
    if (threadIdx.x == 0) {
        mean[i] = val.mean;
        rstd[i] = rsqrtf(val.m2 / val.nf + eps);
    }
}

extern "C" __global__ void layer_norm_forward_f16(int N, const __half* X, const float* mean,
                                                  const float* rstd, const __half* gamma,
                                                  const __half* beta, __half* Y) {
    const long long i = blockIdx.x;
    for (int j = threadIdx.x; j < N; j += blockDim.x) {
        const long long index = i * N + j;
        const float gamma_v = __half2float(gamma[j]);
        const float beta_v = __half2float(beta[j]);
        Y[index] = __float2half((__half2float(X[index]) - mean[i]) * rstd[i] * gamma_v +
                                beta_v);
    }
}
