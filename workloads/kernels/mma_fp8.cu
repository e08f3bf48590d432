// fp8 tensor-core GEMM tile with inline PTX: C(f32, M x N) = scale * A(e4m3, M x K, row-major)
// @ B, where B is given as Bt (e4m3, N x K, row-major). Each warp makes one 16x8 tile of C
// with mma.sync.m16n8k32.row.col.f32.e4m3.e4m3.f32, loading its fragments straight from
// global memory as 32-bit words (4 fp8 values each; rows past M/N read as zero).
// Block (32, W) with W warps along M; grid (ceil(N/8), ceil(M/(16 W))); K % 32 == 0.
// ptx: nvcc -ptx -O3 -arch=sm_90 mma_fp8.cu -o mma_fp8.ptx
#include <cuda_fp8.h>

__device__ __forceinline__ unsigned load_fp8x4(const __nv_fp8_e4m3* row_base, bool ok, int k) {
    return ok ? *reinterpret_cast<const unsigned*>(row_base + k) : 0u;
}

extern "C" __global__ void mma_fp8_gemm(const __nv_fp8_e4m3* __restrict__ A,
                                        const __nv_fp8_e4m3* __restrict__ Bt,
                                        float* __restrict__ C, int M, int N, int K,
                                        float scale) {
    int lane = threadIdx.x;
    int m0 = (blockIdx.y * blockDim.y + threadIdx.y) * 16;
    int n0 = blockIdx.x * 8;
    int g = lane >> 2;
    int t4 = (lane & 3) * 4;
    bool ok0 = m0 + g < M;
    bool ok1 = m0 + g + 8 < M;
    bool okb = n0 + g < N;
    const __nv_fp8_e4m3* a_row0 = A + (ok0 ? (m0 + g) * K : 0);
    const __nv_fp8_e4m3* a_row1 = A + (ok1 ? (m0 + g + 8) * K : 0);
    const __nv_fp8_e4m3* b_row = Bt + (okb ? (n0 + g) * K : 0);
    float c0 = 0.0f, c1 = 0.0f, c2 = 0.0f, c3 = 0.0f;
    for (int k0 = 0; k0 < K; k0 += 32) {
        unsigned a0 = load_fp8x4(a_row0, ok0, k0 + t4);
        unsigned a1 = load_fp8x4(a_row1, ok1, k0 + t4);
        unsigned a2 = load_fp8x4(a_row0, ok0, k0 + 16 + t4);
        unsigned a3 = load_fp8x4(a_row1, ok1, k0 + 16 + t4);
        unsigned b0 = load_fp8x4(b_row, okb, k0 + t4);
        unsigned b1 = load_fp8x4(b_row, okb, k0 + 16 + t4);
        asm volatile(
            "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
            "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
            : "+f"(c0), "+f"(c1), "+f"(c2), "+f"(c3)
            : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
    int col = n0 + (lane & 3) * 2;
    int r0 = m0 + g;
    int r1 = m0 + g + 8;
    if (r0 < M && col < N) C[r0 * N + col] = c0 * scale;
    if (r0 < M && col + 1 < N) C[r0 * N + col + 1] = c1 * scale;
    if (r1 < M && col < N) C[r1 * N + col] = c2 * scale;
    if (r1 < M && col + 1 < N) C[r1 * N + col + 1] = c3 * scale;
}
