// MoE router selection after the gate GEMM (DeepSeek-V3 style): for each token, sigmoid of
// its bf16 expert logits, a per-expert f32 bias added for the choice only, the top-k
// experts by that biased score (ties to the lower expert id), and their unbiased sigmoid
// scores normalized to sum 1 times route_scale. A warp per token (block (32, 4), grid x =
// ceil(tokens / 4)); each lane holds experts lane, lane + 32, ... (at most 256 experts)
// in registers; each of the k rounds is a warp arg-max over shfl.bfly.
// ptx: nvcc -ptx -O3 -arch=sm_90 moe_topk.cu -o moe_topk.ptx
// ptx: nvcc -ptx -O3 -arch=sm_80 moe_topk.cu -o moe_topk.sm_80.ptx
#include <cuda_bf16.h>

#define PER_LANE 8

extern "C" __global__ void moe_topk_sigmoid(const __nv_bfloat16* __restrict__ logits,
                                            const float* __restrict__ bias,
                                            int* __restrict__ ids, float* __restrict__ weights,
                                            int tokens, int experts, int topk,
                                            float route_scale) {
    int t = blockIdx.x * blockDim.y + threadIdx.y;
    if (t >= tokens) return;
    int lane = threadIdx.x;
    float score[PER_LANE], choice[PER_LANE];
#pragma unroll
    for (int j = 0; j < PER_LANE; ++j) {
        int e = lane + 32 * j;
        bool in = e < experts;
        float l = in ? __bfloat162float(logits[(long long)t * experts + e]) : 0.0f;
        score[j] = 1.0f / (1.0f + __expf(-l));
        choice[j] = in ? score[j] + bias[e] : -INFINITY;
    }
    float total = 0.0f;
    int my_id = 0;
    float my_weight = 0.0f;
    for (int k = 0; k < topk; ++k) {
        float best = -INFINITY, best_score = 0.0f;
        int best_e = 0x7fffffff;
#pragma unroll
        for (int j = 0; j < PER_LANE; ++j) {
            if (choice[j] > best) {
                best = choice[j];
                best_e = lane + 32 * j;
                best_score = score[j];
            }
        }
        for (int mask = 16; mask > 0; mask >>= 1) {
            float ob = __shfl_xor_sync(0xffffffffu, best, mask);
            int oe = __shfl_xor_sync(0xffffffffu, best_e, mask);
            float os = __shfl_xor_sync(0xffffffffu, best_score, mask);
            if (ob > best || (ob == best && oe < best_e)) {
                best = ob;
                best_e = oe;
                best_score = os;
            }
        }
#pragma unroll
        for (int j = 0; j < PER_LANE; ++j)
            if (lane + 32 * j == best_e) choice[j] = -INFINITY;
        total += best_score;
        if (lane == k) {
            my_id = best_e;
            my_weight = best_score;
        }
    }
    if (lane < topk) {
        ids[(long long)t * topk + lane] = my_id;
        weights[(long long)t * topk + lane] = my_weight / total * route_scale;
    }
}
