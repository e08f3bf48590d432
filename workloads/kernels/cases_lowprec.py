"""Case builders for low-precision kernels: half2 math and fp8 e4m3 (de)quantization.

These results are bit-exact: an f16 product or fused multiply-add of f16 values is exact
in float64, so one rounding of the float64 value to f16 is what fma.rn.f16x2 / mul.f16x2
produce; e4m3 conversion is round-to-nearest-even with saturation to +-448
(`.satfinite`), which ml_dtypes reproduces once values are clipped to that range.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from .case import Expected, ceil_div, make_case

E4M3 = ml_dtypes.float8_e4m3fn
E4M3_MAX = 448.0


def _to_e4m3_satfinite(v: np.ndarray) -> np.ndarray:
    """cvt.rn.satfinite.e4m3x2.f32 on f32 values: clip finite overflow, then round."""
    return np.clip(v, -E4M3_MAX, E4M3_MAX).astype(E4M3)


def half2_fma_relu_mul(rng: np.random.Generator, n_pairs: int, block: int):
    x, w, b = (rng.uniform(-4.0, 4.0, 2 * n_pairs).astype(np.float16) for _ in range(3))
    x64 = x.astype(np.float64)
    t = (x64 * w.astype(np.float64) + b.astype(np.float64)).astype(np.float16)
    t = np.maximum(t, np.float16(0.0)).astype(np.float64)
    want = (t * x64).astype(np.float16)
    return make_case("half2_math.cu", "half2_fma_relu_mul", ceil_div(n_pairs, block), block,
                     [x, w, b, np.zeros_like(x), n_pairs], {3: Expected(want)})


def quantize_e4m3(rng: np.random.Generator, n: int, block: int):
    # |x| * inv_scale reaches ~900, so the tails exercise saturation; tiny values round to
    # e4m3 subnormals or zero; satfinite clamps +-inf to +-448 and keeps NaN.
    x = (rng.standard_normal(n) * 60.0).astype(np.float32)
    special = [0.0, -0.0, 1e-4, -3e-3, 1e30, -1e30, np.inf, -np.inf, np.nan, 0.0703125]
    x[: min(n, len(special))] = special[: min(n, len(special))]
    inv_scale = np.float32(4.0)
    want = _to_e4m3_satfinite(x * inv_scale)
    return make_case("fp8_convert.cu", "quantize_e4m3", ceil_div(n, block), block,
                     [x, np.zeros(n, E4M3), inv_scale, n], {1: Expected(want)})


def quantize_e4m3_pairs(rng: np.random.Generator, n_pairs: int, block: int):
    x = (rng.standard_normal(2 * n_pairs) * 60.0).astype(np.float32)
    inv_scale = np.float32(4.0)
    # Element 2i must land in the low byte of pair i (so at index 2i of the e4m3 array).
    want = _to_e4m3_satfinite(x * inv_scale)
    return make_case("fp8_convert.cu", "quantize_e4m3_pairs", ceil_div(n_pairs, block), block,
                     [x, np.zeros(2 * n_pairs, E4M3), inv_scale, n_pairs], {1: Expected(want)})


def dequantize_e4m3(rng: np.random.Generator, n: int, block: int):
    # Every bit pattern, NaN included, then random ones.
    codes = np.concatenate([np.arange(256, dtype=np.uint8),
                            rng.integers(0, 256, max(n - 256, 0), dtype=np.uint8)])[:n]
    q = codes.view(E4M3)
    scale = np.float32(0.37)
    want = q.astype(np.float32) * scale  # one f32 rounding, as mul.f32 does
    return make_case("fp8_convert.cu", "dequantize_e4m3", ceil_div(n, block), block,
                     [q, np.zeros(n, np.float32), scale, n], {1: Expected(want)})
