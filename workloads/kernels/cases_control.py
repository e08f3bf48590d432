"""Case builders for control-flow kernels: divergent loops, a device-function call, votes.

All three produce integers or a polynomial value, so the references are exact or carry a
Horner rounding bound.
"""

from __future__ import annotations

import numpy as np

from .case import U32, Expected, ceil_div, make_case


def collatz_reference(start: np.ndarray, max_steps: int) -> np.ndarray:
    """Steps until 1 (uint32 arithmetic, wrapping like the kernel), capped at max_steps."""
    v = start.astype(np.uint64)
    steps = np.zeros(start.size, np.int64)
    for _ in range(max_steps):
        live = v > 1
        if not live.any():
            break
        odd = (v & 1) == 1
        v = np.where(live, np.where(odd, (3 * v + 1) & 0xFFFFFFFF, v >> 1), v)
        steps += live
    return steps


def collatz_steps(rng: np.random.Generator, n: int, block: int, max_steps: int):
    start = rng.integers(1, 3000, n).astype(np.uint32)
    start[: min(n, 3)] = [0, 1, 27][: min(n, 3)]  # zero and one take no steps; 27 takes 111
    return make_case("collatz.cu", "collatz_steps", ceil_div(n, block), block,
                     [start, np.zeros(n, np.int32), n, max_steps],
                     {1: Expected(collatz_reference(start, max_steps))})


def poly_derivative_call(rng: np.random.Generator, n: int, block: int):
    x = rng.uniform(-1.5, 1.5, n).astype(np.float32)
    coeffs = rng.uniform(-2.0, 2.0, 8).astype(np.float32)
    degree = rng.integers(0, 8, n).astype(np.int32)
    # The kernel's local array: deriv[k] = coeffs[k + 1] * (k + 1) in f32, deriv[7] = 0.
    deriv = np.zeros(8, np.float32)
    deriv[:7] = coeffs[1:] * np.arange(1, 8, dtype=np.float32)
    d = deriv.astype(np.float64)
    powers = x.astype(np.float64)[:, None] ** np.arange(8)
    used = np.arange(8)[None, :] <= degree[:, None]
    terms = np.where(used, d[None, :] * powers, 0.0)
    # Horner with fma.rn: one rounding per step, degree <= 7 steps, each bounded by u times
    # the sum of |terms|.
    atol = 2 * 8 * U32 * np.abs(terms).sum(axis=1)
    return make_case("device_call.cu", "poly_derivative_call", ceil_div(n, block), block,
                     [x, coeffs, degree, np.zeros(n, np.float32), n],
                     {3: Expected(terms.sum(axis=1), atol=atol)})


def ballot_popc(rng: np.random.Generator, n: int, block: int):
    grid = ceil_div(n, block)
    n_warps = grid * block // 32
    x = rng.standard_normal(n).astype(np.float32)
    x[: min(n, 32)] = np.abs(x[: min(n, 32)]) + 1.0  # warp 0 votes all-true
    threshold = np.float32(0.25)
    votes = np.zeros(n_warps * 32, bool)
    votes[:n] = x > threshold
    bits = votes.reshape(n_warps, 32).astype(np.uint64) << np.arange(32, dtype=np.uint64)
    masks = bits.sum(axis=1)
    counts = votes.reshape(n_warps, 32).sum(axis=1)
    any_all = votes.reshape(n_warps, 32).any(axis=1) | (votes.reshape(n_warps, 32).all(axis=1) << 1)
    return make_case("vote.cu", "ballot_popc", grid, block,
                     [x, threshold, np.zeros(n_warps, np.uint32), np.zeros(n_warps, np.int32),
                      np.zeros(n_warps, np.int32), n],
                     {2: Expected(masks), 3: Expected(counts), 4: Expected(any_all)})
