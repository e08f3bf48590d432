"""A vectorized `fma_exact` for building the catalog's cases at millions of elements.

`workloads.kernels.case.fma_exact` rounds a * b + c exactly through Python Fractions, one
element at a time: right, but minutes at 16 M elements. Here the same value comes from
error-free transformations in float64 over whole arrays:

* f32 inputs: a * b is exact in f64 (24 + 24 bits); s = p + c with its exact error e
  (TwoSum); round to odd (step s one ulp toward e when e != 0 and s's last bit is even),
  then to f32: correct, as in `fma_exact` (53 >= 24 + 2).
* f64 inputs: p + ep = a * b exactly (Dekker's TwoProduct with Veltkamp splitting),
  s + e = p + c (TwoSum), result s + (e + ep): correctly rounded except when e + ep itself
  rounds across a tie, which random data does not meet.

`patch_fma_exact()` installs it in the case modules that import `fma_exact`.
"""

from __future__ import annotations

import numpy as np


def _two_sum(a, b):
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def _split(a):
    t = 134217729.0 * a  # 2^27 + 1
    hi = t - (t - a)
    return hi, a - hi


def _two_prod(a, b):
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def fma_exact_fast(a, b, c, dtype) -> np.ndarray:
    a, b, c = np.broadcast_arrays(*(np.asarray(v, np.float64) for v in (a, b, c)))
    if dtype == np.float64:
        p, ep = _two_prod(a, b)
        s, e = _two_sum(p, c)
        return s + (e + ep)
    s, e = _two_sum(a * b, c)
    bits = s.view(np.uint64)
    nudge = (e != 0) & ((bits & np.uint64(1)) == 0) & np.isfinite(s)
    toward = np.where(e > 0, np.inf, -np.inf)
    s = np.where(nudge, np.nextafter(s, toward), s)
    return s.astype(dtype)


def patch_fma_exact() -> None:
    from workloads.kernels import cases_elementwise

    cases_elementwise.fma_exact = fma_exact_fast
