"""Exact references and value generators for the semantics property tests.

`round_exact(q, fmt, mode)` rounds an exact rational (`fractions.Fraction`) once to a
binary format under `rn`/`rz`/`rm`/`rp`/`rna` with IEEE 754 overflow rules; it is
written from the format parameters alone, independently of `isa.fpround`. The float
generators mix the lanes a rounding bug hides in: special values, subnormals, random
bit patterns, cancellation, wide exponent gaps (sticky bits) and products that land
exactly on a rounding midpoint. The integer generator mixes range edges, small values
and full-range random values; `wrap` reduces a Python integer to a PTX type.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import ml_dtypes
import numpy as np
from hypothesis import settings
from hypothesis import strategies as st
from ptx_snippets import run_instruction

SEEDS = st.integers(0, 2 ** 32 - 1)
"""Seeds of the property tests' value generators."""
FEW = settings(max_examples=6, derandomize=True, deadline=None, database=None)
"""Hypothesis settings of the property tests: few, derandomized examples (each runs PTX)."""

N_LANES = 256


@dataclass(frozen=True)
class Format:
    name: str
    precision: int          # significand bits including the implicit one
    emin: int               # exponent of the smallest normal
    max_finite: float
    has_inf: bool
    dtype: np.dtype


FORMATS = {f.name: f for f in (
    Format("f64", 53, -1022, float(np.finfo(np.float64).max), True, np.dtype(np.float64)),
    Format("f32", 24, -126, float(np.finfo(np.float32).max), True, np.dtype(np.float32)),
    Format("f16", 11, -14, 65504.0, True, np.dtype(np.float16)),
    Format("bf16", 8, -126, float(ml_dtypes.finfo(ml_dtypes.bfloat16).max), True,
           np.dtype(ml_dtypes.bfloat16)),
    Format("e4m3", 4, -6, 448.0, False, np.dtype(ml_dtypes.float8_e4m3fn)),
    Format("e5m2", 3, -14, 57344.0, True, np.dtype(ml_dtypes.float8_e5m2)),
    Format("tf32", 11, -126, (2 - 2.0 ** -10) * 2.0 ** 127, True, np.dtype(np.float32)),
)}


def _floor_log2(a: Fraction) -> int:
    e = a.numerator.bit_length() - a.denominator.bit_length()
    return e - 1 if Fraction(2) ** e > a else e


def round_exact(q: Fraction, fmt: Format, mode: str, negative_zero: bool = False) -> float:
    """The value of `q` rounded once to `fmt` (as a Python float)."""
    if q == 0:
        return -0.0 if negative_zero else 0.0
    sign = -1.0 if q < 0 else 1.0
    a = abs(q)
    e = max(_floor_log2(a), fmt.emin)
    quantum = Fraction(2) ** (e - fmt.precision + 1)
    n, rem = divmod(a, quantum)
    half = quantum / 2
    up = {"rn": rem > half or (rem == half and n % 2 == 1), "rna": rem >= half,
          "rz": False, "rp": rem > 0 and sign > 0, "rm": rem > 0 and sign < 0}[mode]
    val = (n + up) * quantum
    if val > Fraction(fmt.max_finite):
        to_inf = mode in ("rn", "rna") or (mode == "rp" and sign > 0) or \
            (mode == "rm" and sign < 0)
        if not to_inf:
            return sign * fmt.max_finite
        return sign * float("inf") if fmt.has_inf else float("nan")
    return sign * float(val)


def exact(x) -> Fraction:
    return Fraction(float(x))


def as_float64(values) -> np.ndarray:
    return np.asarray(values).astype(np.float64)


def ulp_distance(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Distance in units of the last place between same-dtype float arrays (NaN-free)."""
    ut = np.dtype(f"i{got.dtype.itemsize}")
    def ordered(x):
        i = x.view(ut).astype(np.int64)
        return np.where(i < 0, np.iinfo(ut).min - i, i)
    return np.abs(ordered(got) - ordered(want))


def assert_same_floats(got, want, *inputs, what: str = "") -> None:
    """Bit-equal lanes (both-NaN counts as equal); report failing lanes with their inputs."""
    got, want = np.asarray(got), np.asarray(want).astype(np.asarray(got).dtype)
    g64, w64 = got.astype(np.float64), want.astype(np.float64)
    ut = np.dtype(f"u{got.dtype.itemsize}")
    same = (got.view(ut) == want.view(ut)) | (np.isnan(g64) & np.isnan(w64))
    if same.all():
        return
    bad = np.flatnonzero(~same)[:6]
    lines = [f"{what}: {(~same).sum()} of {same.size} lanes differ"]
    for i in bad:
        ins = ", ".join(f"{float(np.asarray(x)[i])!r}" for x in inputs)
        lines.append(f"  lane {i}: inputs ({ins}) got {float(g64[i])!r} "
                     f"want {float(w64[i])!r}")
    raise AssertionError("\n".join(lines))


def assert_same_ints(got, want, *inputs, what: str = "") -> None:
    got, want = np.asarray(got), np.asarray(want)
    same = got == want
    if same.all():
        return
    bad = np.flatnonzero(~same)[:6]
    lines = [f"{what}: {(~same).sum()} of {same.size} lanes differ"]
    for i in bad:
        ins = ", ".join(f"{np.asarray(x)[i]!r}" for x in inputs)
        lines.append(f"  lane {i}: inputs ({ins}) got {got[i]!r} want {want[i]!r}")
    raise AssertionError("\n".join(lines))


# -- generators ---------------------------------------------------------------------------

def specials(dtype, tiny: bool = True) -> np.ndarray:
    """Zeros, +-1, +-max, NaN, +-inf and (with `tiny`) the smallest normal and subnormal."""
    dtype = np.dtype(dtype)
    fi = ml_dtypes.finfo(dtype)
    vals = [0.0, -0.0, 1.0, -1.0, float(fi.max), -float(fi.max), np.nan, 0.5, 2.0, 3.0]
    if tiny:
        vals += [float(fi.smallest_normal), -float(fi.smallest_normal),
                 float(fi.smallest_subnormal), -float(fi.smallest_subnormal)]
    if dtype != np.dtype(ml_dtypes.float8_e4m3fn):
        vals += [np.inf, -np.inf]
    return np.array(vals, dtype=np.float64).astype(dtype)


def _random_bits(rng, dtype, n) -> np.ndarray:
    ut = np.dtype(f"u{np.dtype(dtype).itemsize}")
    return rng.integers(0, np.iinfo(ut).max, n, dtype=ut, endpoint=True).view(dtype)


def moderate(rng, dtype, n, span: int = 8) -> np.ndarray:
    """Random significands with exponents in [-span, span], random signs."""
    fmt = next(f for f in FORMATS.values() if f.dtype == np.dtype(dtype))
    mant = rng.integers(1 << (fmt.precision - 1), 1 << fmt.precision, n).astype(np.float64)
    exp = rng.integers(-span, span + 1, n) - (fmt.precision - 1)
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return (sign * np.ldexp(mant, exp)).astype(dtype)


def mixed(rng, dtype, n: int = N_LANES, extremes: bool = True) -> np.ndarray:
    """A lane mix: 1/8 special values, 3/8 random bit patterns (or, without `extremes`,
    values with exponents in [-60, 60]), 1/2 values with exponents in [-8, 8]."""
    out = moderate(rng, dtype, n)
    kind = rng.random(n)
    bits = _random_bits(rng, dtype, n) if extremes else moderate(rng, dtype, n, span=60)
    out = np.where(kind < 0.375, bits, out)
    sp = specials(dtype, tiny=extremes)
    out = np.where(kind > 0.875, sp[rng.integers(0, sp.size, n)], out)
    return out.astype(dtype)


def related(rng, a: np.ndarray, extremes: bool = True) -> np.ndarray:
    """A second operand close to -a, or a scaled by 2^k (cancellation and sticky bits)."""
    dtype = a.dtype
    n = a.size
    a64 = a.astype(np.float64)
    fmt = next(f for f in FORMATS.values() if f.dtype == dtype)
    shift = rng.integers(-fmt.precision - 4, fmt.precision + 4, n)
    wiggle = 1.0 + rng.integers(-8, 9, n) * 2.0 ** (1 - fmt.precision)
    cand = np.where(rng.random(n) < 0.5, -a64 * wiggle, np.ldexp(a64, shift))
    cand = cand * np.where(rng.random(n) < 0.5, -1.0, 1.0)
    pick = rng.random(n)
    b = np.where(pick < 0.6, cand, mixed(rng, dtype, n, extremes).astype(np.float64))
    return b.astype(dtype)


def midpoint_products(rng, fmt: Format, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Pairs a, b with about half the precision each, so a*b often sits on a midpoint."""
    k = fmt.precision // 2 + 1
    ma = rng.integers(1 << (k - 1), 1 << k, n) | 1
    mb = rng.integers(1 << (k - 1), 1 << k, n) | 1
    ea, eb = rng.integers(-6, 7, n) - (k - 1), rng.integers(-6, 7, n) - (k - 1)
    sa = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return ((sa * np.ldexp(ma.astype(np.float64), ea)).astype(fmt.dtype),
            np.ldexp(mb.astype(np.float64), eb).astype(fmt.dtype))


def fma_triples(rng, dtype, n: int = N_LANES, extremes: bool = True):
    """a, b, c lanes: random, c close to -a*b, c tiny next to a midpoint product."""
    dtype = np.dtype(dtype)
    fmt = next(f for f in FORMATS.values() if f.dtype == dtype)
    a = mixed(rng, dtype, n, extremes)
    b = related(rng, mixed(rng, dtype, n, extremes), extremes)
    ma, mb = midpoint_products(rng, fmt, n)
    kind = rng.random(n)
    a = np.where(kind < 0.4, ma, a)
    b = np.where(kind < 0.4, mb, b)
    p = a.astype(np.float64) * b.astype(np.float64)
    tiny = np.ldexp(rng.random(n) + 0.5, rng.integers(-2 * fmt.precision - 20, -fmt.precision - 2,
                                                       n)) * np.abs(p)
    tiny = tiny * np.where(rng.random(n) < 0.5, -1.0, 1.0)
    cancel = -p * (1.0 + rng.integers(-4, 5, n) * 2.0 ** (-fmt.precision))
    c = mixed(rng, dtype, n, extremes).astype(np.float64)
    c = np.where(kind < 0.4, tiny, np.where(kind < 0.6, cancel, c))
    with np.errstate(all="ignore"):
        return a, b, c.astype(dtype)


# -- integers ------------------------------------------------------------------------------

INT_DTYPES = {"s16": np.int16, "u16": np.uint16, "s32": np.int32, "u32": np.uint32,
              "s64": np.int64, "u64": np.uint64, "b16": np.uint16, "b32": np.uint32,
              "b64": np.uint64}


def type_bits(ty: str) -> int:
    return int(ty[1:])


def is_signed(ty: str) -> bool:
    return ty[0] == "s"


def wrap(v: int, ty: str) -> int:
    """v modulo 2^n, as the value of type `ty`."""
    n = type_bits(ty)
    v &= (1 << n) - 1
    return v - (1 << n) if is_signed(ty) and v >> (n - 1) else v


def int_values(rng, ty: str, n: int = N_LANES) -> np.ndarray:
    """Range edges, small values and full-range random values of PTX type `ty`."""
    bits, signed = type_bits(ty), is_signed(ty)
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    edges = [lo, hi, lo + 1, hi - 1, 0, 1, wrap(-1, ty), 2, wrap(-2, ty)]
    edges += [wrap(1 << k, ty) for k in (bits // 2, bits - 2)]
    edges += [wrap((1 << k) - 1, ty) for k in (bits // 2, bits - 1)]
    kind = rng.random(n)
    full = rng.integers(0, 2 ** 64 - 1, n, dtype=np.uint64, endpoint=True)
    small = rng.integers(-6, 7, n)
    edge_pick = rng.integers(0, len(edges), n)
    out = [edges[edge_pick[i]] if kind[i] < 0.3 else
           wrap(int(small[i]), ty) if kind[i] < 0.5 else wrap(int(full[i]), ty)
           for i in range(n)]
    return np.array(out, dtype=INT_DTYPES[ty])


def ints(a) -> list[int]:
    return [int(x) for x in np.asarray(a).tolist()]


def expect(values, ty: str) -> np.ndarray:
    """Python integers wrapped to `ty`, as a numpy array of that type."""
    return np.array([wrap(v, ty) for v in values], dtype=INT_DTYPES[ty])


def run_int(text: str, out_ty: str, *srcs) -> np.ndarray:
    """One integer instruction over the lanes (see `ptx_snippets.run_instruction`), its result
    in the numpy type of PTX type `out_ty`."""
    return run_instruction(text, INT_DTYPES[out_ty], *srcs)
