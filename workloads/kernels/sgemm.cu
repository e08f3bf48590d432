// Tiled SGEMM, C = alpha * A @ B + beta * C (row-major, any M, N, K): 16x16 shared tiles of
// A and B, zero-filled at the edges; block (16, 16), 2-D grid (ceil(N/16), ceil(M/16)).
// ptx: nvcc -ptx -O3 -arch=sm_90 sgemm.cu -o sgemm.ptx
// ptx: nvcc -ptx -O3 -arch=sm_80 sgemm.cu -o sgemm.sm_80.ptx

#define TILE 16

extern "C" __global__ void sgemm_tiled(int M, int N, int K, float alpha,
                                       const float* __restrict__ A, const float* __restrict__ B,
                                       float beta, float* __restrict__ C) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        int ka = k0 + threadIdx.x;
        int kb = k0 + threadIdx.y;
        As[threadIdx.y][threadIdx.x] = (row < M && ka < K) ? A[row * K + ka] : 0.0f;
        Bs[threadIdx.y][threadIdx.x] = (kb < K && col < N) ? B[kb * N + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) C[row * N + col] = alpha * acc + beta * C[row * N + col];
}
