// WMMA GEMM, C(f32) = A(f16, row-major M x K) @ B(f16, row-major K x N), nvcuda::wmma
// 16x16x16 fragments with f32 accumulation. One warp per 16x16 tile of C; block (32, 2) holds
// two warps stacked along M. M, N, K must be multiples of 16.
// ptx: nvcc -ptx -O3 -arch=sm_90 wmma_gemm.cu -o wmma_gemm.ptx
// ptx: nvcc -ptx -O3 -arch=sm_80 wmma_gemm.cu -o wmma_gemm.sm_80.ptx
#include <cuda_fp16.h>
#include <mma.h>

using namespace nvcuda;

extern "C" __global__ void wmma_gemm_f16(const __half* __restrict__ A,
                                         const __half* __restrict__ B, float* __restrict__ C,
                                         int M, int N, int K) {
    int tile_m = blockIdx.y * blockDim.y + threadIdx.y;
    int tile_n = blockIdx.x;
    if (tile_m * 16 >= M || tile_n * 16 >= N) return;
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> a;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> b;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int k = 0; k < K; k += 16) {
        wmma::load_matrix_sync(a, A + tile_m * 16 * K + k, K);
        wmma::load_matrix_sync(b, B + k * N + tile_n * 16, N);
        wmma::mma_sync(acc, a, b, acc);
    }
    wmma::store_matrix_sync(C + tile_m * 16 * N + tile_n * 16, acc, N, wmma::mem_row_major);
}
