"""Case builders for the GEMM kernels: tiled SGEMM, WMMA f16, mma.sync bf16 and e4m3.

Inputs are drawn at their storage precision (f32, f16, bf16, e4m3), so the float64
product of the stored values is the exact reference. The tensor-core kernels accumulate
in f32 in an order the PTX ISA leaves unspecified; any order of K fused or unfused steps
errs by at most (K + 1) * u * (|A| @ |B|) per element, which is the bound used.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from .case import U32, Expected, ceil_div, make_case


def _accumulation_bound(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(K + 1) u |A| @ |B| for f32 accumulation of A (M x K) @ B (K x N) in any order."""
    k = a.shape[1]
    return (k + 1) * U32 * (np.abs(a) @ np.abs(b))


def sgemm_tiled(rng: np.random.Generator, m: int, n: int, k: int):
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = rng.standard_normal((m, n)).astype(np.float32)
    alpha, beta = np.float32(1.5), np.float32(-0.5)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = float(alpha) * (a64 @ b64) + float(beta) * c
    # Accumulation bound on A @ B, then alpha * acc + beta * C rounds at most twice.
    terms = abs(float(alpha)) * np.abs(a64 @ b64) + abs(float(beta)) * np.abs(c)
    atol = abs(float(alpha)) * _accumulation_bound(a64, b64) + 2 * U32 * terms
    grid = (ceil_div(n, 16), ceil_div(m, 16))
    return make_case("sgemm.cu", "sgemm_tiled", grid, (16, 16),
                     [m, n, k, alpha, a, b, beta, c], {7: Expected(want, atol=atol)})


def wmma_gemm_f16(rng: np.random.Generator, m: int, n: int, k: int, warps: int):
    a = rng.uniform(-1.0, 1.0, (m, k)).astype(np.float16)
    b = rng.uniform(-1.0, 1.0, (k, n)).astype(np.float16)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    grid = (n // 16, ceil_div(m // 16, warps))
    return make_case("wmma_gemm.cu", "wmma_gemm_f16", grid, (32, warps),
                     [a, b, np.zeros((m, n), np.float32), m, n, k],
                     {2: Expected(a64 @ b64, atol=_accumulation_bound(a64, b64))})


def mma_bf16_gemm(rng: np.random.Generator, m: int, n: int, k: int, warps: int):
    bf16 = ml_dtypes.bfloat16
    a = rng.uniform(-1.0, 1.0, (m, k)).astype(bf16)
    bt = rng.uniform(-1.0, 1.0, (n, k)).astype(bf16)
    a64, b64 = a.astype(np.float64), bt.astype(np.float64).T
    grid = (ceil_div(n, 8), ceil_div(m, 16 * warps))
    return make_case("mma_bf16.cu", "mma_bf16_gemm", grid, (32, warps),
                     [a, bt, np.zeros((m, n), np.float32), m, n, k],
                     {2: Expected(a64 @ b64, atol=_accumulation_bound(a64, b64))})


def mma_fp8_gemm(rng: np.random.Generator, m: int, n: int, k: int, warps: int):
    e4m3 = ml_dtypes.float8_e4m3fn
    a = rng.uniform(-8.0, 8.0, (m, k)).astype(e4m3)
    bt = rng.uniform(-8.0, 8.0, (n, k)).astype(e4m3)
    scale = np.float32(0.0625)
    a64, b64 = a.astype(np.float64), bt.astype(np.float64).T
    want = float(scale) * (a64 @ b64)
    # The PTX ISA asks e4m3 mma to accumulate "with at least single precision"; the final
    # multiply by scale rounds once more.
    atol = float(scale) * _accumulation_bound(a64, b64) + U32 * np.abs(want)
    grid = (ceil_div(n, 8), ceil_div(m, 16 * warps))
    return make_case("mma_fp8.cu", "mma_fp8_gemm", grid, (32, warps),
                     [a, bt, np.zeros((m, n), np.float32), m, n, k, scale],
                     {2: Expected(want, atol=atol)})
