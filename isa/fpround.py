"""Exact floating-point rounding for PTX rounding modifiers.

What is modelled: an exact real result, carried either as one float64 value that is
exact (products of f32 values, f32 quotients and square roots that cannot sit on a
rounding boundary) or as an unevaluated float64 pair `hi + lo` from TwoSum/TwoProd,
is rounded once to f64, f32, f16, bf16, e4m3 or e5m2 under `.rn` (nearest, ties to
even), `.rz`, `.rm` or `.rp`, with IEEE 754 overflow (nearest -> inf, directed -> inf
or the largest finite value, depending on direction).

Method: round-to-odd. A pair is first rounded to odd at float64 precision; rounding
that value to any format of at most 51 significand bits, in any mode, gives the
correctly rounded exact value (Boldo & Melquiond, "Emulation of FMA and correctly
rounded sums: proved algorithms using rounding to odd", IEEE TC 2008). Nearest goes
through numpy (float64 -> f32 and -> f16 are single correct roundings) or, for the
ml_dtypes formats whose float64 conversion passes through float32, through an odd
rounding to f32 first. Directed modes take the nearest value and step one unit where
it lies on the wrong side of the exact value; for f64 the side comes from exact
residual signs on frexp-scaled operands (`mul_side`, `div_side`, `sqrt_side`).

Compiled single-pass kernels (numba ufuncs, compiled on first use) cover the hot
cases: `fma_rn_f32` (GEMM), `FMA_DIRECTED_F32` (`fma.rm.f32` inside `expf`, directed
f32 add/sub), `fma_rn_f64` and `fma_odd_f64` (f16/bf16 fma). Pass them arrays:
`materialize` expands scalar operands, whose stride-0 loops run several times slower.

Left out: `.rna` and `.rs` (callers handle `.rna` where PTX allows it); e4m3 has no
infinity, so its overflow without `.satfinite` gives NaN as ml_dtypes encodes it.
Exactness of pairs assumes TwoProd did not underflow (products above 2^-969 in f64).
"""

from __future__ import annotations

import math

import numba
import numpy as np

from isa.types import UINT_OF_BITS

F64 = np.dtype(np.float64)
F32 = np.dtype(np.float32)
F16 = np.dtype(np.float16)


def two_sum(a, b) -> tuple[np.ndarray, np.ndarray]:
    """s + e == a + b exactly, s = RN(a + b) (float64, barring overflow)."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


def _split(a):
    c = a * 134217729.0  # 2**27 + 1, Veltkamp split
    hi = c - (c - a)
    return hi, a - hi


def two_prod(a, b) -> tuple[np.ndarray, np.ndarray]:
    """p + e == a * b exactly, p = RN(a * b) (Dekker on frexp-scaled significands).

    Exact whenever the product and its error term are normal: |a * b| >= 2^-969.
    """
    ma, ea = np.frexp(a)
    mb, eb = np.frexp(b)
    p, e = _two_prod_unit(ma, mb)
    k = ea + eb
    return np.ldexp(p, k), np.ldexp(e, k)


def mul_side(a, b, r) -> np.ndarray:
    """sign(a*b - r), exactly, for finite a, b and r = RN(a*b) finite (any exponents)."""
    ma, ea = np.frexp(a)
    mb, eb = np.frexp(b)
    rs = np.ldexp(r, -(ea + eb))
    p, e = _two_prod_unit(ma, mb)
    return np.sign((p - rs) + e)


def div_side(a, b, r) -> np.ndarray:
    """sign(a/b - r), exactly, for finite a, nonzero finite b and r = RN(a/b) finite."""
    ma, ea = np.frexp(a)
    mb, eb = np.frexp(b)
    rs = np.ldexp(r, -(ea - eb))
    p, e = _two_prod_unit(rs, mb)
    return np.sign((ma - p) - e) * np.sign(mb)


def sqrt_side(a, r) -> np.ndarray:
    """sign(sqrt(a) - r), exactly, for finite a >= 0 and r = RN(sqrt(a))."""
    ma, ea = np.frexp(a)
    odd = ea & 1
    ma, ea = np.ldexp(ma, -odd), ea + odd        # even exponent, ma in [0.25, 1)
    rs = np.ldexp(r, -(ea // 2))
    p, e = _two_prod_unit(rs, rs)
    return np.sign((ma - p) - e)


def _two_prod_unit(a, b):
    """Dekker's product for operands of magnitude below 4 (no scaling needed)."""
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def round_to_odd(hi, lo) -> np.ndarray:
    """The float64 odd rounding of hi + lo, for hi = RN(hi + lo) (a TwoSum pair)."""
    hi = np.asarray(hi, dtype=F64)
    lo = np.asarray(lo, dtype=F64)
    inexact = (lo != 0) & np.isfinite(hi)
    if not inexact.any():
        return hi
    toward_zero = np.where(np.signbit(lo) != np.signbit(hi), np.nextafter(hi, 0.0), hi)
    odd = (toward_zero.view(np.int64) | 1).view(F64)
    return np.where(inexact, odd, hi)


def _odd_to_f32(x: np.ndarray) -> np.ndarray:
    """float64 -> float32 rounding to odd (keeps every bit a later narrower rounding needs)."""
    r = x.astype(F32)
    r64 = r.astype(F64)
    inexact = (r64 != x) & np.isfinite(x)
    if not inexact.any():
        return r
    away = np.abs(r64) > np.abs(x)          # nearest went away from zero (maybe to inf)
    bits = r.view(np.uint32) - away.astype(np.uint32)
    return np.where(inexact, bits | np.uint32(1), r.view(np.uint32)).view(F32)


def nearest(x, dtype) -> np.ndarray:
    """Round float64 values (exact, or odd-rounded) to nearest-even in `dtype`."""
    dtype = np.dtype(dtype)
    x = np.asarray(x, dtype=F64)
    if dtype == F64:
        return x
    if dtype in (F32, F16):
        return x.astype(dtype)
    return _odd_to_f32(x).astype(dtype)


def step(r: np.ndarray, up, down) -> np.ndarray:
    """Move `r` one representable value toward +inf where `up`, toward -inf where `down`."""
    r = np.asarray(r)
    ut = UINT_OF_BITS[r.dtype.itemsize * 8]
    bits = r.view(ut)
    sign_bit = ut.type(1 << (r.dtype.itemsize * 8 - 1))
    neg = (bits & sign_bit) != 0
    zero = r == 0
    # magnitude grows when moving away from zero, shrinks toward it
    grow = (up & ~neg) | (down & neg)
    shrink = (up & neg) | (down & ~neg)
    one = ut.type(1)
    out = np.where(grow & ~zero, bits + one, np.where(shrink & ~zero, bits - one, bits))
    out = np.where(zero & up, one, out)                 # nextUp(+-0) = +min subnormal
    out = np.where(zero & down, sign_bit | one, out)    # nextDown(+-0) = -min subnormal
    return out.astype(ut).view(r.dtype)


def directed(r: np.ndarray, below, above, mode: str) -> np.ndarray:
    """Correct the nearest value `r` given where the exact value lies below/above it."""
    if mode in ("rm", "rmi"):
        return step(r, np.zeros_like(below), below)
    if mode in ("rp", "rpi"):
        return step(r, above, np.zeros_like(above))
    if mode in ("rz", "rzi"):
        pos = r.astype(F64) > 0
        neg = r.astype(F64) < 0
        return step(r, above & neg, below & pos)
    raise ValueError(f"unknown rounding mode {mode!r}; expected rn, rz, rm or rp")


def round_value(x, dtype, mode: str | None = "rn") -> np.ndarray:
    """Round float64 values to `dtype` under `mode`.

    `x` must be exact, or lie strictly between the same two `dtype` values as the exact
    result and never on one of them (an odd rounding, or a float64 quotient of narrower
    floats).
    """
    x = np.asarray(x, dtype=F64)
    r = nearest(x, dtype)
    if mode in (None, "rn", "rni"):
        return r
    r64 = r.astype(F64)
    return directed(r, x < r64, x > r64, mode)


def round_pair(hi, lo, dtype, mode: str | None = "rn") -> np.ndarray:
    """Round the exact value hi + lo once to `dtype` with PTX rounding `mode`."""
    dtype = np.dtype(dtype)
    hi = np.asarray(hi, dtype=F64)
    lo = np.asarray(lo, dtype=F64)
    lo = np.where(np.isfinite(lo), lo, 0.0)     # an error term lost to overflow
    s, e = two_sum(hi, lo)
    s = np.where(lo == 0, hi, s)                # keeps the sign of an exact zero
    if dtype != F64:
        return round_value(round_to_odd(s, e), dtype, mode)
    if mode in (None, "rn", "rni"):
        return s
    overflow = np.isinf(s) & np.isfinite(hi) & np.isfinite(lo)
    below = np.where(overflow, s > 0, e < 0)
    above = np.where(overflow, s < 0, e > 0)
    return directed(s, below, above, mode)


def fix_overflow(r: np.ndarray, exact_finite, mode: str | None) -> np.ndarray:
    """Where nearest overflowed to +-inf but the exact value is finite, directed modes
    that round toward zero from it give the largest finite value instead."""
    if mode in (None, "rn", "rni"):
        return r
    over = np.isinf(r) & exact_finite
    if not np.any(over):
        return r
    return np.where(over, directed(r, r > 0, r < 0, mode), r)


@numba.vectorize(cache=True)
def fma_rn_f32(a, b, c):  # pragma: no cover - compiled
    """fma.rn.f32: a*b is exact in float64; the sum is TwoSum'ed and rounded once.

    Nearest-even of the float64 sum s is wrong only when s is a float32 midpoint and
    the TwoSum error e pushes the exact value past it: then the other neighbour wins.
    """
    p = np.float64(a) * np.float64(b)
    cc = np.float64(c)
    s = p + cc
    bb = s - p
    e = (p - (s - bb)) + (cc - bb)
    r = np.float32(s)
    if e == 0.0 or not (s - s == 0.0):
        return r
    r64 = np.float64(r)
    if r64 - r64 != 0.0:                 # nearest overflowed; 2^128 is the next "value"
        r64 = 2.0 ** 128 if s > 0.0 else -(2.0 ** 128)
    d = s - r64
    if d == 0.0:
        return r
    other = r64 + 2.0 * d               # the neighbour on the far side, if s is a midpoint
    if np.float64(np.float32(other)) == other and (d > 0.0) == (e > 0.0):
        return np.float32(other)
    return r


@numba.njit(cache=True, inline="always")
def _odd_sum(x, y):  # pragma: no cover - compiled
    """Round-to-odd of x + y in float64 (TwoSum, then an odd last bit when inexact)."""
    s = x + y
    bb = s - x
    e = (x - (s - bb)) + (y - bb)
    if e == 0.0 or not (s - s == 0.0):
        return s
    bits = np.float64(s).view(np.int64)
    if (e < 0.0) != (s < 0.0):              # RN went away from zero: step back toward it
        bits -= 1
    return np.int64(bits | 1).view(np.float64)


@numba.njit(cache=True, inline="always")
def _dekker(a, b):  # pragma: no cover - compiled
    p = a * b
    c1 = a * 134217729.0
    ah = c1 - (c1 - a)
    c2 = b * 134217729.0
    bh = c2 - (c2 - b)
    al, bl = a - ah, b - bh
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


@numba.vectorize(cache=True)
def fma_rn_f64(a, b, c):  # pragma: no cover - compiled
    """fma.rn.f64 by round-to-odd emulation (Boldo & Melquiond): exact product as a
    pair, TwoSum with c, the low parts summed to odd, one final nearest rounding."""
    if not (a - a == 0.0 and b - b == 0.0 and c - c == 0.0):      # inf or NaN operand
        return a * b + c
    if abs(a) < 1e290 and abs(b) < 1e290:
        uh, ul = _dekker(a, b)
    else:                                   # scale so the Veltkamp split cannot overflow
        ma, ea = math.frexp(a)
        mb, eb = math.frexp(b)
        p, e = _dekker(ma, mb)
        uh, ul = math.ldexp(p, ea + eb), math.ldexp(e, ea + eb)
    if not (uh - uh == 0.0 and ul - ul == 0.0):
        return a * b + c
    th = c + uh
    bb = th - c
    tl = (c - (th - bb)) + (uh - bb)
    return th + _odd_sum(tl, ul)


@numba.vectorize(cache=True)
def fma_odd_f64(a, b, c):  # pragma: no cover - compiled
    """a*b + c rounded to odd in float64, for a*b exact in float64 (operands of at most
    26 significand bits: f16, bf16, fp8). Any later rounding to those formats is exact."""
    return _odd_sum(a * b, c)


def _directed_fma_kernel(mode: int):
    """fma.{rz,rm,rp}.f32 (mode 1, 2, 3, a compile-time constant of the kernel).

    The nearest float32 of the float64 sum is one of the two neighbours of the exact
    value; the exact sign of (exact - nearest) from the TwoSum pair picks the directed
    one. Overflow and the sign of an exact zero follow IEEE 754.
    """
    @numba.vectorize(cache=True)
    def kernel(a, b, c):  # pragma: no cover - compiled
        p = np.float64(a) * np.float64(b)
        cc = np.float64(c)
        s = p + cc
        bb = s - p
        e = (p - (s - bb)) + (cc - bb)
        if s == 0.0 and e == 0.0:         # exact zero: -0 under rm unless both are +0
            if mode == 2 and (np.float64(p).view(np.int64) < 0
                              or np.float64(cc).view(np.int64) < 0):
                return np.float32(-0.0)
            return np.float32(s)
        r = np.float32(s)
        if not (s - s == 0.0):            # inf or NaN operands
            return r
        side = (s - np.float64(r)) + e    # sign(exact - r); -inf when r overflowed up
        pos, neg = np.int32(r > 0), np.int32(r < 0)
        down = np.int32(side < 0.0) * (np.int32(mode == 2) | (np.int32(mode == 1) & pos))
        up = np.int32(side > 0.0) * (np.int32(mode == 3) | (np.int32(mode == 1) & neg))
        delta = up - down                 # +1 toward +inf, -1 toward -inf (branch-free)
        if r == 0 and delta != 0:         # +-smallest subnormal
            return np.int32(1 if delta > 0 else -2147483647).view(np.float32)
        bits = np.float32(r).view(np.int32) + delta * (pos - neg)
        return np.int32(bits).view(np.float32)
    return kernel


FMA_DIRECTED_F32 = {"rz": _directed_fma_kernel(1), "rm": _directed_fma_kernel(2),
                    "rp": _directed_fma_kernel(3)}


def materialize(*xs) -> list[np.ndarray]:
    """Operands as arrays of one common shape: compiled ufunc loops run several times
    slower on a broadcast scalar (stride 0) than on a real array."""
    shape = np.broadcast_shapes(*(np.shape(x) for x in xs))
    return [np.full(shape, x) if np.ndim(x) == 0 and shape else np.asarray(x) for x in xs]
