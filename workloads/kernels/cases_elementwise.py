"""Case builders for elementwise and data-movement kernels.

saxpy, GELU (tanh form), SiLU, a grid-stride scale/shift, f64 daxpy and the padded-tile
transpose. References are computed in float64 from the exact inputs; each tolerance says
which rounding or approximation it allows for.
"""

from __future__ import annotations

import numpy as np

from .case import Expected, ceil_div, fma_exact, make_case


def _f32(rng: np.random.Generator, n: int, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(n) * scale).astype(np.float32)


def saxpy(rng: np.random.Generator, n: int, block: int):
    # a * x[0] = 2^6 + 2^-30 puts a * x[0] + y[0] just past the f32 midpoint 2^30 + 2^6:
    # rounding the sum to f64 first lands on the midpoint, then on the wrong f32.
    a = np.float32(8390656 * 2.0**-23)
    x, y = _f32(rng, n), _f32(rng, n)
    x[0], y[0] = 16773121 * 2.0**-18, 2.0**30
    # nvcc contracts a * x + y into fma.rn.f32, which rounds once: bit-exact.
    want = fma_exact(a, x, y, np.float32)
    return make_case("saxpy.cu", "saxpy", ceil_div(n, block), block, [n, a, x, y],
                     {3: Expected(want)})


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
    # nvcc contracts x * scale + shift into one fma.rn.f32: bit-exact.
    want = fma_exact(x, scale, shift, np.float32)
    return make_case("grid_stride.cu", "scale_shift_grid_stride", grid, block,
                     [x, np.zeros(n, np.float32), scale, shift, n], {1: Expected(want)})


def daxpy(rng: np.random.Generator, n: int, block: int):
    a = -1.3
    x, y = rng.standard_normal(n), rng.standard_normal(n)
    # fma.rn.f64 rounds once (numpy's a*x + y would round twice): bit-exact.
    want = fma_exact(a, x, y, np.float64)
    return make_case("f64.cu", "daxpy", ceil_div(n, block), block, [n, a, x, y],
                     {3: Expected(want)})


def transpose_tiled(rng: np.random.Generator, rows: int, cols: int):
    a = _f32(rng, rows * cols).reshape(rows, cols)
    grid = (ceil_div(cols, 32), ceil_div(rows, 32))
    # Pure data movement: bit-exact.
    return make_case("transpose.cu", "transpose_tiled", grid, (32, 8),
                     [a, np.zeros((cols, rows), np.float32), rows, cols],
                     {1: Expected(a.T.copy())})
