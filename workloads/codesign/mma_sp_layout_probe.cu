#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cuda_runtime.h>
const int WARPS = 64;
__global__ void k_f16_k16_s0(const uint32_t* A, const uint32_t* B, const uint32_t* E, float* D) {
  int gt = blockIdx.x * blockDim.x + threadIdx.x;
  uint32_t a[2], b[2]; for (int k = 0; k < 2; ++k) a[k] = A[gt * 2 + k];
  for (int k = 0; k < 2; ++k) b[k] = B[gt * 2 + k];
  uint32_t e = E[gt]; float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
  asm volatile("mma.sp::ordered_metadata.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6, %7}, {%0, %1, %2, %3}, %8, 0;" : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "r"(a[0]), "r"(a[1]), "r"(b[0]), "r"(b[1]), "r"(e));
  D[gt * 4 + 0] = d0; D[gt * 4 + 1] = d1; D[gt * 4 + 2] = d2; D[gt * 4 + 3] = d3;
}
__global__ void k_f16_k16_s2(const uint32_t* A, const uint32_t* B, const uint32_t* E, float* D) {
  int gt = blockIdx.x * blockDim.x + threadIdx.x;
  uint32_t a[2], b[2]; for (int k = 0; k < 2; ++k) a[k] = A[gt * 2 + k];
  for (int k = 0; k < 2; ++k) b[k] = B[gt * 2 + k];
  uint32_t e = E[gt]; float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
  asm volatile("mma.sp::ordered_metadata.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6, %7}, {%0, %1, %2, %3}, %8, 2;" : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "r"(a[0]), "r"(a[1]), "r"(b[0]), "r"(b[1]), "r"(e));
  D[gt * 4 + 0] = d0; D[gt * 4 + 1] = d1; D[gt * 4 + 2] = d2; D[gt * 4 + 3] = d3;
}
__global__ void k_f16_k32_s0(const uint32_t* A, const uint32_t* B, const uint32_t* E, float* D) {
  int gt = blockIdx.x * blockDim.x + threadIdx.x;
  uint32_t a[4], b[4]; for (int k = 0; k < 4; ++k) a[k] = A[gt * 4 + k];
  for (int k = 0; k < 4; ++k) b[k] = B[gt * 4 + k];
  uint32_t e = E[gt]; float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
  asm volatile("mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9, %10, %11}, {%0, %1, %2, %3}, %12, 0;" : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]), "r"(e));
  D[gt * 4 + 0] = d0; D[gt * 4 + 1] = d1; D[gt * 4 + 2] = d2; D[gt * 4 + 3] = d3;
}
__global__ void k_f16_k32_s1(const uint32_t* A, const uint32_t* B, const uint32_t* E, float* D) {
  int gt = blockIdx.x * blockDim.x + threadIdx.x;
  uint32_t a[4], b[4]; for (int k = 0; k < 4; ++k) a[k] = A[gt * 4 + k];
  for (int k = 0; k < 4; ++k) b[k] = B[gt * 4 + k];
  uint32_t e = E[gt]; float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
  asm volatile("mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9, %10, %11}, {%0, %1, %2, %3}, %12, 1;" : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]), "r"(e));
  D[gt * 4 + 0] = d0; D[gt * 4 + 1] = d1; D[gt * 4 + 2] = d2; D[gt * 4 + 3] = d3;
}
__global__ void k_bf16_k16_s3(const uint32_t* A, const uint32_t* B, const uint32_t* E, float* D) {
  int gt = blockIdx.x * blockDim.x + threadIdx.x;
  uint32_t a[2], b[2]; for (int k = 0; k < 2; ++k) a[k] = A[gt * 2 + k];
  for (int k = 0; k < 2; ++k) b[k] = B[gt * 2 + k];
  uint32_t e = E[gt]; float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
  asm volatile("mma.sp::ordered_metadata.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6, %7}, {%0, %1, %2, %3}, %8, 3;" : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "r"(a[0]), "r"(a[1]), "r"(b[0]), "r"(b[1]), "r"(e));
  D[gt * 4 + 0] = d0; D[gt * 4 + 1] = d1; D[gt * 4 + 2] = d2; D[gt * 4 + 3] = d3;
}
__global__ void k_bf16_k32_s1(const uint32_t* A, const uint32_t* B, const uint32_t* E, float* D) {
  int gt = blockIdx.x * blockDim.x + threadIdx.x;
  uint32_t a[4], b[4]; for (int k = 0; k < 4; ++k) a[k] = A[gt * 4 + k];
  for (int k = 0; k < 4; ++k) b[k] = B[gt * 4 + k];
  uint32_t e = E[gt]; float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
  asm volatile("mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9, %10, %11}, {%0, %1, %2, %3}, %12, 1;" : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]), "r"(e));
  D[gt * 4 + 0] = d0; D[gt * 4 + 1] = d1; D[gt * 4 + 2] = d2; D[gt * 4 + 3] = d3;
}
__global__ void k_e4m3_k64_s0(const uint32_t* A, const uint32_t* B, const uint32_t* E, float* D) {
  int gt = blockIdx.x * blockDim.x + threadIdx.x;
  uint32_t a[4], b[4]; for (int k = 0; k < 4; ++k) a[k] = A[gt * 4 + k];
  for (int k = 0; k < 4; ++k) b[k] = B[gt * 4 + k];
  uint32_t e = E[gt]; float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
  asm volatile("mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9, %10, %11}, {%0, %1, %2, %3}, %12, 0;" : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(b[2]), "r"(b[3]), "r"(e));
  D[gt * 4 + 0] = d0; D[gt * 4 + 1] = d1; D[gt * 4 + 2] = d2; D[gt * 4 + 3] = d3;
}
static uint32_t s = 12345u; static uint32_t rnd() { s = s * 1664525u + 1013904223u; return s >> 8; }
static const uint16_t F16[7] = {0xC200, 0xC000, 0xBC00, 0x0000, 0x3C00, 0x4000, 0x4200};
static const uint16_t BF16[7] = {0xC040, 0xC000, 0xBF80, 0x0000, 0x3F80, 0x4000, 0x4040};
static const uint8_t E4M3[7] = {0xC4, 0xC0, 0xB8, 0x00, 0x38, 0x40, 0x44};
static uint32_t word(int bits) { uint32_t w = 0;
  if (bits == 16) { w = F16[rnd() % 7] | (uint32_t(F16[rnd() % 7]) << 16); }
  else if (bits == 17) { w = BF16[rnd() % 7] | (uint32_t(BF16[rnd() % 7]) << 16); }
  else { for (int j = 0; j < 4; ++j) w |= uint32_t(E4M3[rnd() % 7]) << (8 * j); }
  return w; }
static const uint32_t PAIRS[6] = {0x4, 0x8, 0xC, 0x9, 0xD, 0xE}; // (i0 | i1 << 2), i0 < i1
static void run(const char* name, void (*k)(const uint32_t*, const uint32_t*, const uint32_t*, float*), int ra, int rb, int bits, FILE* f) {
  int n = WARPS * 32; uint32_t *hA = (uint32_t*)malloc(4*n*ra), *hB = (uint32_t*)malloc(4*n*rb), *hE = (uint32_t*)malloc(4*n); float* hD = (float*)malloc(16*n);
  for (int i = 0; i < n * ra; ++i) hA[i] = word(bits);
  for (int i = 0; i < n * rb; ++i) hB[i] = word(bits);
  for (int i = 0; i < n; ++i) { uint32_t e = 0; for (int q = 0; q < 8; ++q) e |= PAIRS[rnd() % 6] << (4 * q); hE[i] = e; }
  uint32_t *dA, *dB, *dE; float* dD; cudaMalloc(&dA, 4*n*ra); cudaMalloc(&dB, 4*n*rb); cudaMalloc(&dE, 4*n); cudaMalloc(&dD, 16*n);
  cudaMemcpy(dA, hA, 4*n*ra, cudaMemcpyHostToDevice); cudaMemcpy(dB, hB, 4*n*rb, cudaMemcpyHostToDevice); cudaMemcpy(dE, hE, 4*n, cudaMemcpyHostToDevice);
  k<<<WARPS, 32>>>(dA, dB, dE, dD); cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) { printf("%s: %s\n", name, cudaGetErrorString(err)); exit(1); }
  cudaMemcpy(hD, dD, 16*n, cudaMemcpyDeviceToHost);
  fprintf(f, "%s %d %d %d\n", name, ra, rb, n); fwrite(hA, 4, n*ra, f); fwrite(hB, 4, n*rb, f); fwrite(hE, 4, n, f); fwrite(hD, 4, 4*n, f);
  printf("%s ok\n", name); }
int main(int argc, char** argv) { FILE* f = fopen(argv[1], "wb");
  run("f16_k16_s0", k_f16_k16_s0, 2, 2, 16, f);
  run("f16_k16_s2", k_f16_k16_s2, 2, 2, 16, f);
  run("f16_k32_s0", k_f16_k32_s0, 4, 4, 16, f);
  run("f16_k32_s1", k_f16_k32_s1, 4, 4, 16, f);
  run("bf16_k16_s3", k_bf16_k16_s3, 2, 2, 17, f);
  run("bf16_k32_s1", k_bf16_k32_s1, 4, 4, 17, f);
  run("e4m3_k64_s0", k_e4m3_k64_s0, 4, 4, 8, f);
  fclose(f); return 0; }
