// bf16 tensor-core GEMM tile with inline PTX: C(f32, M x N) = A(bf16, M x K, row-major)
// @ B, where B is given as Bt (bf16, N x K, row-major, i.e. B column-major). Each warp makes
// one 16x8 tile of C: cp.async (16-byte chunks, zero-fill past the M/N edge) stages A and B
// through a two-stage shared buffer with commit_group / wait_group 1, ldmatrix .x4 / .x2
// loads the fragments, mma.sync.m16n8k16.row.col.f32.bf16.bf16.f32 accumulates.
// Block (32, W) with W <= 4 warps along M; grid (ceil(N/8), ceil(M/(16 W))); K % 16 == 0.
// ptx: nvcc -ptx -O3 -arch=sm_90 mma_bf16.cu -o mma_bf16.ptx
// ptx: nvcc -ptx -O3 -arch=sm_80 mma_bf16.cu -o mma_bf16.sm_80.ptx
#include <cuda_bf16.h>

#define MAX_WARPS 4

__device__ __forceinline__ void cp_async_16(unsigned dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(src_bytes));
}

__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

extern "C" __global__ void mma_bf16_gemm(const __nv_bfloat16* __restrict__ A,
                                         const __nv_bfloat16* __restrict__ Bt,
                                         float* __restrict__ C, int M, int N, int K) {
    __shared__ __align__(16) __nv_bfloat16 a_s[MAX_WARPS][2][16 * 16];
    __shared__ __align__(16) __nv_bfloat16 b_s[MAX_WARPS][2][8 * 16];
    int lane = threadIdx.x;
    int warp = threadIdx.y;
    int m0 = (blockIdx.y * blockDim.y + warp) * 16;
    int n0 = blockIdx.x * 8;
    int chunk_row = lane >> 1;
    int chunk_col = (lane & 1) * 8;
    bool a_ok = m0 + chunk_row < M;
    bool b_ok = lane < 16 && n0 + chunk_row < N;
    const __nv_bfloat16* a_src = A + (a_ok ? (m0 + chunk_row) * K : 0) + chunk_col;
    const __nv_bfloat16* b_src = Bt + (b_ok ? (n0 + chunk_row) * K : 0) + chunk_col;
    int n_k = K / 16;

    auto load_stage = [&](int stage, int k0) {
        cp_async_16(smem_addr(&a_s[warp][stage][chunk_row * 16 + chunk_col]), a_src + k0,
                    a_ok ? 16 : 0);
        if (lane < 16) {
            cp_async_16(smem_addr(&b_s[warp][stage][chunk_row * 16 + chunk_col]), b_src + k0,
                        b_ok ? 16 : 0);
        }
    };

    float c0 = 0.0f, c1 = 0.0f, c2 = 0.0f, c3 = 0.0f;
    load_stage(0, 0);
    asm volatile("cp.async.commit_group;\n" ::);
    for (int kt = 0; kt < n_k; ++kt) {
        if (kt + 1 < n_k) load_stage((kt + 1) & 1, (kt + 1) * 16);
        asm volatile("cp.async.commit_group;\n" ::);
        asm volatile("cp.async.wait_group 1;\n" ::);
        __syncwarp();
        int stage = kt & 1;
        int a_row = (lane & 7) + ((lane >> 3) & 1) * 8;
        int a_col = (lane >> 4) * 8;
        unsigned a0, a1, a2, a3, b0, b1;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(a0), "=r"(a1), "=r"(a2), "=r"(a3)
                     : "r"(smem_addr(&a_s[warp][stage][a_row * 16 + a_col])));
        int b_row = lane & 7;
        int b_col = ((lane >> 3) & 1) * 8;
        asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                     : "=r"(b0), "=r"(b1)
                     : "r"(smem_addr(&b_s[warp][stage][b_row * 16 + b_col])));
        asm volatile(
            "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
            "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
        __syncwarp();
    }
    int g = lane >> 2;
    int col = n0 + (lane & 3) * 2;
    int r0 = m0 + g;
    int r1 = m0 + g + 8;
    if (r0 < M && col < N) C[r0 * N + col] = c0;
    if (r0 < M && col + 1 < N) C[r0 * N + col + 1] = c1;
    if (r1 < M && col < N) C[r1 * N + col] = c2;
    if (r1 < M && col + 1 < N) C[r1 * N + col + 1] = c3;
}
