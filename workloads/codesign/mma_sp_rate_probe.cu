#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>
// dense-equivalent tensor throughput: dense mma.sync m16n8k16 vs sparse mma.sp m16n8k32 (f16 in, f32 acc)
template <int SPARSE, int TYPE>
__global__ void loop(float* out, int iters, uint32_t seed) {
  uint32_t a0 = seed ^ threadIdx.x, a1 = a0 * 3, a2 = a0 * 5, a3 = a0 * 7, b0 = a0 * 11, b1 = a0 * 13, b2 = a0 * 17, b3 = a0 * 19;
  a0 &= 0x3C003C00u; a1 &= 0x3C003C00u; a2 &= 0x3C003C00u; a3 &= 0x3C003C00u; b0 &= 0x3C003C00u; b1 &= 0x3C003C00u; b2 &= 0x3C003C00u; b3 &= 0x3C003C00u;
  uint32_t e = 0x44444444u;
  float d[8][4] = {};
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int c = 0; c < 8; ++c) {
      if (SPARSE)
        asm volatile("mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9,%10,%11}, {%0,%1,%2,%3}, %12, 0;"
          : "+f"(d[c][0]), "+f"(d[c][1]), "+f"(d[c][2]), "+f"(d[c][3]) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(b2), "r"(b3), "r"(e));
      else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
          : "+f"(d[c][0]), "+f"(d[c][1]), "+f"(d[c][2]), "+f"(d[c][3]) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
  }
  float s = 0; for (int c = 0; c < 8; ++c) s += d[c][0] + d[c][1] + d[c][2] + d[c][3];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
int main() {
  int sms; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  int clk; cudaDeviceGetAttribute(&clk, cudaDevAttrClockRate, 0);
  float* out; cudaMalloc(&out, sms * 8 * 512 * 4);
  int iters = 4096;
  for (int warps = 4; warps <= 16; warps *= 2) for (int sp = 0; sp < 2; ++sp) {
    cudaEvent_t t0, t1; cudaEventCreate(&t0); cudaEventCreate(&t1);
    for (int rep = 0; rep < 2; ++rep) {
      cudaEventRecord(t0);
      if (sp) loop<1, 0><<<sms, 32 * warps>>>(out, iters, 7); else loop<0, 0><<<sms, 32 * warps>>>(out, iters, 7);
      cudaEventRecord(t1); cudaEventSynchronize(t1);
    }
    float ms; cudaEventElapsedTime(&ms, t0, t1);
    double fma = (double)sms * warps * iters * 8 * 16.0 * 8 * (sp ? 32 : 16);
    printf("%s warps/SM %2d: %.3f ms, dense-equivalent %.1f TFLOP/s, %.0f FMA/clk/SM at %d MHz (clock-rate attribute)\n",
           sp ? "mma.sp  m16n8k32" : "mma.sync m16n8k16", warps, ms, 2 * fma / ms / 1e9, fma / (ms * 1e-3) / sms / (clk * 1e3), clk / 1000);
  }
  return 0;
}
