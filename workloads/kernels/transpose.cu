// Matrix transpose through a padded 32x33 shared tile (no bank conflicts); block (32, 8),
// each thread moves 4 elements; 2-D grid over 32x32 tiles with bounds checks.
// ptx: nvcc -ptx -O3 -arch=sm_90 transpose.cu -o transpose.ptx
// ptx: nvcc -ptx -O3 -arch=sm_80 transpose.cu -o transpose.sm_80.ptx

#define TILE 32
#define ROWS_PER_PASS 8

extern "C" __global__ void transpose_tiled(const float* __restrict__ in, float* __restrict__ out,
                                           int rows, int cols) {
    __shared__ float tile[TILE][TILE + 1];
    int x = blockIdx.x * TILE + threadIdx.x;
    int y = blockIdx.y * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS_PER_PASS) {
        if (x < cols && y + j < rows) tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * cols + x];
    }
    __syncthreads();
    x = blockIdx.y * TILE + threadIdx.x;
    y = blockIdx.x * TILE + threadIdx.y;
    for (int j = 0; j < TILE; j += ROWS_PER_PASS) {
        if (x < rows && y + j < cols) out[(y + j) * rows + x] = tile[threadIdx.x][threadIdx.y + j];
    }
}
