"""Case builders for elementwise and data-movement kernels.

saxpy, GELU (tanh form), SiLU, a grid-stride scale/shift, f64 daxpy and the padded-tile
transpose. References are computed in float64 from the exact inputs; each tolerance says
which rounding or approximation it allows for.
"""

from __future__ import annotations

import numpy as np

from .case import U32, U64, Expected, ceil_div, make_case


def _f32(rng: np.random.Generator, n: int, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(n) * scale).astype(np.float32)


def saxpy(rng: np.random.Generator, n: int, block: int):
    a = np.float32(1.75)
    x, y = _f32(rng, n), _f32(rng, n)
    # fma.rn.f32 rounds once; the f64 reference a*x + y may round twice: at most 1 ulp.
    want = a.astype(np.float64) * x + y
    return make_case("saxpy.cu", "saxpy", ceil_div(n, block), block, [n, a, x, y],
                     {3: Expected(want, atol=0.0, rtol=2 * U32)})


def gelu_tanh(rng: np.random.Generator, n: int, block: int):
    x = rng.uniform(-6.0, 6.0, n).astype(np.float32)
    v = x.astype(np.float64)
    want = 0.5 * v * (1.0 + np.tanh(0.7978845608 * (v + 0.044715 * v**3)))
    # tanhf (ex2.approx.ftz + rcp.approx.ftz sequence) is within a few ulp; for x << 0 the
    # sum 1 + tanh cancels, leaving an absolute error of about |x| * ulp(1) / 2 <= 6 * 6e-8.
    return make_case("activations.cu", "gelu_tanh", ceil_div(n, block), block,
                     [x, np.zeros(n, np.float32), n], {1: Expected(want, atol=2e-6, rtol=1e-5)})


def silu(rng: np.random.Generator, n: int, block: int):
    x = rng.uniform(-8.0, 8.0, n).astype(np.float32)
    v = x.astype(np.float64)
    want = v / (1.0 + np.exp(-v))
    # __expf = ex2.approx (2 ulp) of x*log2(e) rounded to f32, whose rounding error grows
    # with |x| <= 8 (about 12 ulp); div.rn adds half an ulp: 2e-6 relative covers it.
    return make_case("activations.cu", "silu", ceil_div(n, block), block,
                     [x, np.zeros(n, np.float32), n], {1: Expected(want, atol=1e-30, rtol=2e-6)})


def scale_shift_grid_stride(rng: np.random.Generator, n: int, grid: int, block: int):
    x = _f32(rng, n)
    scale, shift = np.float32(-0.625), np.float32(0.3)
    want = x.astype(np.float64) * scale + shift
    # nvcc contracts x * scale + shift into one fma.rn.f32: 1 ulp against the f64 reference.
    return make_case("grid_stride.cu", "scale_shift_grid_stride", grid, block,
                     [x, np.zeros(n, np.float32), scale, shift, n],
                     {1: Expected(want, atol=0.0, rtol=2 * U32)})


def daxpy(rng: np.random.Generator, n: int, block: int):
    a = -1.3
    x, y = rng.standard_normal(n), rng.standard_normal(n)
    # fma.rn.f64 rounds once while numpy's a*x + y rounds twice; the difference is at
    # most one rounding of a*x, i.e. U64 * |a*x|, plus one of the sum.
    want = a * x + y
    atol = 2 * U64 * (np.abs(a * x) + np.abs(y))
    return make_case("f64.cu", "daxpy", ceil_div(n, block), block, [n, a, x, y],
                     {3: Expected(want, atol=atol)})


def transpose_tiled(rng: np.random.Generator, rows: int, cols: int):
    a = _f32(rng, rows * cols).reshape(rows, cols)
    grid = (ceil_div(cols, 32), ceil_div(rows, 32))
    # Pure data movement: bit-exact.
    return make_case("transpose.cu", "transpose_tiled", grid, (32, 8),
                     [a, np.zeros((cols, rows), np.float32), rows, cols],
                     {1: Expected(a.T.copy())})
