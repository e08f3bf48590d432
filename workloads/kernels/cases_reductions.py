"""Case builders for reductions, normalisations, scans and atomics.

Summation error bounds follow the standard result for floating-point sums: adding m terms
in any order errs by at most (m - 1) * u * sum(|terms|) (u the unit roundoff); a tree of
depth d errs by at most d * u * sum(|terms|). Integer results are exact.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from .case import U32, U64, Expected, ceil_div, make_case


def _segments(x: np.ndarray, width: int, count: int) -> np.ndarray:
    """x zero-padded to count * width and reshaped to (count, width)."""
    padded = np.zeros(count * width, np.float64)
    padded[: x.size] = x
    return padded.reshape(count, width)


def block_reduce_sum(rng: np.random.Generator, n: int, block: int):
    x = rng.standard_normal(n).astype(np.float32)
    grid = ceil_div(n, 2 * block)
    seg = _segments(x, 2 * block, grid)
    depth = int(np.log2(block)) + 1  # one pairwise add per thread, then the tree
    return make_case("block_reduce.cu", "block_reduce_sum", grid, block,
                     [x, np.zeros(grid, np.float32), n],
                     {1: Expected(seg.sum(axis=1), atol=depth * U32 * np.abs(seg).sum(axis=1))},
                     shared_bytes=4 * block)


def warp_reduce_sum(rng: np.random.Generator, n: int, block: int):
    x = rng.standard_normal(n).astype(np.float32)
    grid = ceil_div(n, block)
    seg = _segments(x, block, grid)
    depth = 5 + 5  # shfl.down tree over 32 lanes, then shfl.bfly tree over warp sums
    return make_case("warp_reduce.cu", "warp_reduce_sum", grid, block,
                     [x, np.zeros(grid, np.float32), n],
                     {1: Expected(seg.sum(axis=1), atol=depth * U32 * np.abs(seg).sum(axis=1))})


def atomic_sum_f32(rng: np.random.Generator, n: int, block: int):
    x = rng.standard_normal(n).astype(np.float32)
    v = x.astype(np.float64)
    # Atomic adds land in an unspecified order: the sequential-sum bound (n - 1) u sum|x|.
    return make_case("atomics.cu", "atomic_sum_f32", ceil_div(n, block), block,
                     [x, np.zeros(1, np.float32), n],
                     {1: Expected(np.array([v.sum()]), atol=(n - 1) * U32 * np.abs(v).sum())})


def absmax_cas(rng: np.random.Generator, n: int, block: int):
    x = (rng.standard_normal(n) * 3.0).astype(np.float32)
    # A max is exact whatever the order in which the CAS loop wins.
    return make_case("atomics.cu", "absmax_cas", ceil_div(n, block), block,
                     [x, np.zeros(1, np.float32), n],
                     {1: Expected(np.array([np.abs(x).max()], np.float64))})


def softmax_rows(rng: np.random.Generator, rows: int, cols: int, rows_per_block: int):
    x = (rng.standard_normal((rows, cols)) * 2.0).astype(np.float32)
    v = x.astype(np.float64)
    e = np.exp(v - v.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)
    # __expf: ex2.approx (2 ulp) of (x - max) * log2(e) rounded to f32, |x - max| < 20, so
    # about 30 ulp; the sum adds cols/32 + 5 roundings; rcp.rn and the product one each.
    return make_case("softmax.cu", "softmax_rows", ceil_div(rows, rows_per_block),
                     (32, rows_per_block), [x, np.zeros_like(x), rows, cols],
                     {1: Expected(want, atol=1e-9, rtol=1e-5)})


def layernorm_rows(rng: np.random.Generator, rows: int, cols: int, block: int):
    x = (rng.standard_normal((rows, cols)) * 2.0 + 0.5).astype(np.float32)
    gamma = rng.uniform(0.5, 1.5, cols).astype(np.float32)
    beta = rng.uniform(-0.5, 0.5, cols).astype(np.float32)
    eps = np.float32(1e-5)
    v = x.astype(np.float64)
    mean = v.mean(axis=1, keepdims=True)
    var = ((v - mean) ** 2).mean(axis=1, keepdims=True)
    want = (v - mean) / np.sqrt(var + float(eps)) * gamma + beta
    # rsqrt.approx.f32 is within 2^-22.9 relative; the f32 sums of cols terms (cols < 400)
    # put a few 1e-6 relative into mean and variance; outputs are O(3).
    return make_case("layernorm.cu", "layernorm_rows", rows, block,
                     [x, gamma, beta, np.zeros_like(x), cols, eps],
                     {3: Expected(want, atol=2e-5, rtol=1e-5)})


def _rmsnorm_inputs(rng: np.random.Generator, rows: int, cols: int):
    """bf16 x [rows, cols], weight w [cols], eps and the exact result rounded to bf16."""
    bf16 = ml_dtypes.bfloat16
    x = rng.standard_normal((rows, cols)).astype(bf16)
    w = rng.uniform(0.5, 1.5, cols).astype(bf16)
    eps = np.float32(1e-6)
    v = x.astype(np.float64)
    rstd = 1.0 / np.sqrt((v * v).mean(axis=1, keepdims=True) + float(eps))
    want = (v * rstd * w.astype(np.float64)).astype(bf16).astype(np.float64)
    return x, w, eps, want


def rmsnorm_bf16(rng: np.random.Generator, rows: int, cols: int, rows_per_block: int):
    x, w, eps, want = _rmsnorm_inputs(rng, rows, cols)
    # The f32 result is within ~1e-6 relative of the exact one, which can move the final
    # rounding to bf16 (8 significant bits) by one ulp: at most 2^-7 relative.
    return make_case("rmsnorm.cu", "rmsnorm_bf16", ceil_div(rows, rows_per_block),
                     (32, rows_per_block), [x, w, np.zeros_like(x), rows, cols, eps],
                     {2: Expected(want, atol=0.0, rtol=2.0**-7)})


def rmsnorm_bf16_rows(rng: np.random.Generator, rows: int, cols: int, block: int):
    x, w, eps, want = _rmsnorm_inputs(rng, rows, cols)
    # As rmsnorm_bf16: f32 sums in another order, one bf16 ulp (2^-7 relative) at most.
    return make_case("rmsnorm_rows.cu", "rmsnorm_bf16_rows", rows, block,
                     [x, w, np.zeros_like(x), cols // 8, eps],
                     {2: Expected(want, atol=0.0, rtol=2.0**-7)})


def scan_inclusive_block(rng: np.random.Generator, n: int, block: int):
    x = rng.integers(-50, 51, n).astype(np.int32)
    grid = ceil_div(n, block)
    seg = np.zeros(grid * block, np.int64)
    seg[:n] = x
    scans = np.cumsum(seg.reshape(grid, block), axis=1)
    # Integer adds: exact.
    return make_case("scan.cu", "scan_inclusive_block", grid, block,
                     [x, np.zeros(n, np.int32), np.zeros(grid, np.int32), n],
                     {1: Expected(scans.reshape(-1)[:n]), 2: Expected(scans[:, -1])})


def histogram_shared(rng: np.random.Generator, n: int, bins: int, grid: int, block: int):
    values = rng.integers(0, 2**32, n, dtype=np.uint32)
    want = np.bincount(values % np.uint32(bins), minlength=bins)
    # Integer atomics: exact whatever the order.
    return make_case("histogram.cu", "histogram_shared", grid, block,
                     [values, np.zeros(bins, np.uint32), n, np.uint32(bins)],
                     {1: Expected(want)}, shared_bytes=4 * bins)


def ddot_atomic(rng: np.random.Generator, n: int, grid: int, block: int):
    x, y = rng.standard_normal(n), rng.standard_normal(n)
    p = x * y
    # Each product rounds once, then at most n additions (per-thread loop, shared tree,
    # atomics in any order) each add u * sum|x y|.
    return make_case("f64.cu", "ddot_atomic", grid, block, [x, y, np.zeros(1), n],
                     {2: Expected(np.array([p.sum()]), atol=(n + 1) * U64 * np.abs(p).sum())})
