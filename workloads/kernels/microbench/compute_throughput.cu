// Arithmetic-pipe throughput: each thread runs CHAINS independent dependency chains,
// FMA_UNROLL (SFU_UNROLL) steps of all chains per loop iteration, `iters` iterations. The
// steps are inline PTX (`asm volatile` keeps them in source order, chain-interleaved) because
// the simulator issues PTX in program order and nvcc's own PTX order may put dependent steps
// back to back.
// fma_throughput: x_k <- fma.rn.f32(x_k, 0.5, 1.0) (immediates, so no operand has to be
// reloaded inside the loop), x_k starts at thread index + k.
// sfu_throughput: x_k <- -ex2.approx.ftz.f32(x_k): per step the CHAINS ex2 (SFU) first, then
// the CHAINS negations (FP32), so in-order issue never waits on an ex2 result inside a step.
// The map is a contraction on [-1, 0], so values stay bounded; x_k starts at -(k + 1) / 16.
// pack_throughput: x_k <- bits of cvt.rn.bf16x2.f32(x_k, x_k) (ptxas: one F2FP.BF16.F32.PACK_AB
// per step, the bit move is free; in the PTX the CHAINS packs come first, then the CHAINS
// moves, so in-order issue never waits on a pack inside a step), the f32 -> bf16 conversion whose rate the CUDA guide does
// not give; from x_k = k + 1 the chain is fixed after one step (bf16(x) packed twice is x
// rounded to bf16 with its low half repeated, which rounds back to the same bf16).
// out[global thread * CHAINS + k] = x_k.
// int_mix_throughput: even chains x_k <- mad.lo.u32(x_k, 3, 1) (IMAD, the FMA pipe), odd
// chains x_k <- lop3.b32(x_k, 0x5bd1e995, 0x2545f491, 0x96) (LOP3, the ALU), interleaved: with
// the two pipes apart the mix runs at twice either pipe's rate (128 results/clk/SM on
// sm_90 against 64 for one), on one integer unit at that unit's rate. x_k starts at
// thread index + k; out holds the u32 bits.
// ptx: nvcc -ptx -O3 -arch=sm_80 compute_throughput.cu -o compute_throughput.ptx

#define CHAINS 8
#define FMA_UNROLL 32
#define SFU_UNROLL 8
#define PACK_UNROLL 16
#define INT_UNROLL 16

extern "C" __global__ void fma_throughput(float* __restrict__ out, int iters) {
    int tid = blockIdx.x * blockDim.x + threadIdx.x;
    float x[CHAINS];
#pragma unroll
    for (int k = 0; k < CHAINS; ++k) x[k] = (float)(threadIdx.x + k);
#pragma unroll 1
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int u = 0; u < FMA_UNROLL; ++u) {
#pragma unroll
            for (int k = 0; k < CHAINS; ++k) {
                asm volatile("fma.rn.f32 %0, %0, 0f3F000000, 0f3F800000;" : "+f"(x[k]));
            }
        }
    }
#pragma unroll
    for (int k = 0; k < CHAINS; ++k) out[tid * CHAINS + k] = x[k];
}

extern "C" __global__ void sfu_throughput(float* __restrict__ out, int iters) {
    int tid = blockIdx.x * blockDim.x + threadIdx.x;
    float x[CHAINS];
#pragma unroll
    for (int k = 0; k < CHAINS; ++k) x[k] = -(float)(k + 1) * 0.0625f;
#pragma unroll 1
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int u = 0; u < SFU_UNROLL; ++u) {
#pragma unroll
            for (int k = 0; k < CHAINS; ++k) {
                asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x[k]));
            }
#pragma unroll
            for (int k = 0; k < CHAINS; ++k) asm volatile("neg.f32 %0, %0;" : "+f"(x[k]));
        }
    }
#pragma unroll
    for (int k = 0; k < CHAINS; ++k) out[tid * CHAINS + k] = x[k];
}

extern "C" __global__ void pack_throughput(float* __restrict__ out, int iters) {
    int tid = blockIdx.x * blockDim.x + threadIdx.x;
    float x[CHAINS];
#pragma unroll
    for (int k = 0; k < CHAINS; ++k) x[k] = (float)(k + 1);
#pragma unroll 1
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int u = 0; u < PACK_UNROLL; ++u) {
            unsigned p[CHAINS];
#pragma unroll
            for (int k = 0; k < CHAINS; ++k)
                asm volatile("cvt.rn.bf16x2.f32 %0, %1, %1;" : "=r"(p[k]) : "f"(x[k]));
#pragma unroll
            for (int k = 0; k < CHAINS; ++k) asm volatile("mov.b32 %0, %1;" : "=f"(x[k]) : "r"(p[k]));
        }
    }
#pragma unroll
    for (int k = 0; k < CHAINS; ++k) out[tid * CHAINS + k] = x[k];
}

extern "C" __global__ void int_mix_throughput(unsigned* __restrict__ out, int iters) {
    int tid = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned x[CHAINS];
#pragma unroll
    for (int k = 0; k < CHAINS; ++k) x[k] = threadIdx.x + k;
#pragma unroll 1
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int u = 0; u < INT_UNROLL; ++u) {
#pragma unroll
            for (int k = 0; k < CHAINS; k += 2) {
                asm volatile("mad.lo.u32 %0, %0, 3, 1;" : "+r"(x[k]));
                asm volatile("lop3.b32 %0, %0, 0x5bd1e995, 0x2545f491, 0x96;" : "+r"(x[k + 1]));
            }
        }
    }
#pragma unroll
    for (int k = 0; k < CHAINS; ++k) out[tid * CHAINS + k] = x[k];
}
