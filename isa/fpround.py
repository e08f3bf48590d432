"""Exact floating-point rounding helpers for PTX rounding modifiers.

An exact result is carried as an unevaluated float64 pair `hi + lo` (from TwoSum /
exact f32 products). `round_pair` rounds it once to a target dtype under `rn`, `rz`,
`rm` or `rp`: round-to-nearest goes through round-to-odd at float64 precision, which
is exact for every target of at most 51 significand bits (f32, f16, bf16, fp8);
directed modes compare the exact value with the nearest candidate and step one ulp.
"""

from __future__ import annotations

import numpy as np


def two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """s + e == a + b exactly (float64, barring overflow)."""
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


def _split(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    c = a * 134217729.0  # 2**27 + 1, Veltkamp split
    hi = c - (c - a)
    return hi, a - hi


def two_prod(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """p + e == a * b exactly (float64, Dekker's algorithm, barring over/underflow)."""
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


def round_to_odd(hi: np.ndarray, lo: np.ndarray) -> np.ndarray:
    """The float64 nearest-odd rounding of hi + lo (|lo| <= ulp(hi)/2)."""
    hi = np.asarray(hi, dtype=np.float64)
    lo = np.asarray(lo, dtype=np.float64)
    inexact = (lo != 0) & np.isfinite(hi)
    if not inexact.any():
        return hi
    toward_zero = np.where(np.signbit(lo) != np.signbit(hi), np.nextafter(hi, 0.0), hi)
    odd = (toward_zero.view(np.int64) | 1).view(np.float64)
    return np.where(inexact, odd, hi)


def round_pair(hi, lo, dtype, mode: str | None = "rn") -> np.ndarray:
    """Round the exact value hi + lo once to `dtype` with PTX rounding `mode`."""
    dtype = np.dtype(dtype)
    hi = np.asarray(hi, dtype=np.float64)
    lo = np.asarray(lo, dtype=np.float64)
    if mode in (None, "rn", "rni"):
        if dtype == np.float64:
            return hi + lo
        return round_to_odd(hi, lo).astype(dtype)
    r = round_to_odd(hi, lo).astype(dtype) if dtype != np.float64 else hi + lo
    r64 = r.astype(np.float64)
    d = hi - r64
    sign = np.where(d != 0, np.sign(d), np.sign(lo))   # sign of (exact - r)
    sign = np.where(np.isfinite(r64), sign, 0.0)
    if mode in ("rm", "rmi"):
        step = sign < 0
        return np.where(step, np.nextafter(r, np.array(-np.inf, dtype)), r).astype(dtype)
    if mode in ("rp", "rpi"):
        step = sign > 0
        return np.where(step, np.nextafter(r, np.array(np.inf, dtype)), r).astype(dtype)
    if mode in ("rz", "rzi"):
        step = ((r64 > 0) & (sign < 0)) | ((r64 < 0) & (sign > 0))
        return np.where(step, np.nextafter(r, np.array(0, dtype)), r).astype(dtype)
    raise ValueError(f"unknown rounding mode {mode!r}")


def round_value(x, dtype, mode: str | None = "rn") -> np.ndarray:
    """Round float64 values (taken as exact) to `dtype` under `mode`."""
    x = np.asarray(x, dtype=np.float64)
    return round_pair(x, np.zeros_like(x), dtype, mode)


def flush_subnormal(x: np.ndarray) -> np.ndarray:
    """`.ftz`: subnormal values become sign-preserving zero."""
    x = np.asarray(x)
    tiny = np.finfo(x.dtype).smallest_normal if x.dtype.kind == "f" else 0
    return np.where(np.abs(x) < tiny, np.copysign(np.zeros_like(x), x), x)
