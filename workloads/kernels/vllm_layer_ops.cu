// fp16 layer kernels written the way vLLM's (and so Vidur's profiled LLaMA) were in 2024:
// one CTA per token, one scalar 2-byte element per thread access, f32 arithmetic where vLLM
// has it (csrc/layernorm_kernels.cu rms_norm_kernel, csrc/activation_kernels.cu
// act_and_mul_kernel with silu, csrc/pos_encoding_kernels.cu rotary_embedding_kernel,
// GPT-NeoX style as LLaMA uses it). Our re-implementations from those kernels' structure,
// not copies: the block reduction is vLLM's shape (warp xor-shuffles, one f32 per warp in
// shared memory, the first warp reduces those), strides are int here (int64_t there).
// rms_norm_f16: grid = tokens, block = min(hidden, 1024); reads its row twice (the second
//   pass re-reads from global memory), out = half(x * rsqrt(mean(x^2) + eps)) * weight.
// silu_and_mul_f16: grid = tokens, block = min(d, 1024); input [tokens, 2d] = gate | up,
//   out = half(silu(gate)) * up (the product in half).
// rotary_neox_f16: grid = tokens, block = min(heads * rot_dim / 2, 512); q [tokens, heads,
//   head_size] and k [tokens, kv_heads, head_size] rotated in place, cos | sin cache
//   [max_position, rot_dim] in half, positions int32.
// ptx: nvcc -ptx -O3 -arch=sm_90 vllm_layer_ops.cu -o vllm_layer_ops.ptx
// ptx: nvcc -ptx -O3 -arch=sm_80 vllm_layer_ops.cu -o vllm_layer_ops.sm_80.ptx
#include <cuda_fp16.h>

__device__ __forceinline__ float warp_sum(float v) {
    for (int mask = 16; mask > 0; mask >>= 1) v += __shfl_xor_sync(0xffffffffu, v, mask);
    return v;
}

__device__ __forceinline__ float block_sum(float v) {
    __shared__ float partial[32];
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) partial[wid] = v;
    __syncthreads();
    v = (threadIdx.x < (blockDim.x + 31) / 32) ? partial[lane] : 0.0f;
    return warp_sum(v);
}

extern "C" __global__ void rms_norm_f16(__half* __restrict__ out,
                                        const __half* __restrict__ input,
                                        const __half* __restrict__ weight, float epsilon,
                                        int num_tokens, int hidden_size) {
    __shared__ float s_variance;
    float variance = 0.0f;
    long long row = (long long)blockIdx.x * hidden_size;
    for (int idx = threadIdx.x; idx < hidden_size; idx += blockDim.x) {
        float x = __half2float(input[row + idx]);
        variance += x * x;
    }
    variance = block_sum(variance);
    if (threadIdx.x == 0) s_variance = rsqrtf(variance / hidden_size + epsilon);
    __syncthreads();
    for (int idx = threadIdx.x; idx < hidden_size; idx += blockDim.x) {
        float x = __half2float(input[row + idx]);
        out[row + idx] = __hmul(__float2half(x * s_variance), weight[idx]);
    }
}

extern "C" __global__ void silu_and_mul_f16(__half* __restrict__ out,
                                            const __half* __restrict__ input, int d) {
    long long token = blockIdx.x;
    for (int idx = threadIdx.x; idx < d; idx += blockDim.x) {
        float x = __half2float(__ldg(&input[token * 2 * d + idx]));
        __half y = __ldg(&input[token * 2 * d + d + idx]);
        out[token * d + idx] = __hmul(__float2half(x / (1.0f + expf(-x))), y);
    }
}

__device__ __forceinline__ void rotate(__half* arr, const __half* cos_ptr, const __half* sin_ptr,
                                       int rot_offset, int embed_dim) {
    int x_index = rot_offset, y_index = embed_dim + rot_offset;
    __half c = __ldg(cos_ptr + x_index), s = __ldg(sin_ptr + x_index);
    __half x = arr[x_index], y = arr[y_index];
    arr[x_index] = __hsub(__hmul(x, c), __hmul(y, s));
    arr[y_index] = __hadd(__hmul(y, c), __hmul(x, s));
}

extern "C" __global__ void rotary_neox_f16(const int* __restrict__ positions,
                                           __half* __restrict__ query,
                                           __half* __restrict__ key,
                                           const __half* __restrict__ cos_sin_cache,
                                           int rot_dim, int query_stride, int key_stride,
                                           int num_heads, int num_kv_heads, int head_size) {
    int token = blockIdx.x;
    const __half* cache = cos_sin_cache + (long long)positions[token] * rot_dim;
    int embed_dim = rot_dim / 2;
    const __half* cos_ptr = cache;
    const __half* sin_ptr = cache + embed_dim;
    int nq = num_heads * embed_dim;
    for (int i = threadIdx.x; i < nq; i += blockDim.x) {
        int head = i / embed_dim;
        long long offset = (long long)token * query_stride + head * head_size;
        rotate(query + offset, cos_ptr, sin_ptr, i % embed_dim, embed_dim);
    }
    int nk = num_kv_heads * embed_dim;
    for (int i = threadIdx.x; i < nk; i += blockDim.x) {
        int head = i / embed_dim;
        long long offset = (long long)token * key_stride + head * head_size;
        rotate(key + offset, cos_ptr, sin_ptr, i % embed_dim, embed_dim);
    }
}
