"""Floating-point arithmetic with PTX semantics.

What is modelled:
* add/sub/mul/fma/div/sqrt/rcp are correctly rounded under `.rn` (and no modifier),
  `.rz`, `.rm`, `.rp` for f64, f32, f16, bf16 and the packed `.f16x2`/`.bf16x2`
  (each half on its own). Nearest f32/f64 add/sub/mul run natively in numpy (IEEE
  correct rounding); f16/bf16 ones run in float32 and round once more, which is
  exact because float32 has more than twice their precision plus two bits.
  `fma.rn.f32`/`.f64` are one compiled pass each (`isa.fpround.fma_rn_f32/_f64`);
  other modes and formats round an exact float64 pair through `isa.fpround`. f64
  `fma` follows Boldo and Melquiond's round-to-odd emulation. An exact zero sum is -0
  under `.rm`.
* `.ftz` flushes subnormal inputs and results to sign-preserving zero (f32 and the
  half formats). `.sat` clamps to [+0, 1] with NaN -> +0. `.relu` clamps negative
  results to +0 and turns NaN into the canonical NaN.
* min/max return the non-NaN operand (NaN only when both are NaN) and order
  -0 < +0; `.NaN` propagates NaN; `.xorsign.abs` gives the XOR of the signs to the
  min/max of the magnitudes.
* Approximate ops (`div.approx`/`.full`, `rcp.approx`, `sqrt.approx`, `rsqrt`, `ex2`,
  `lg2`, `sin`, `cos`, `tanh`) are float64 evaluations rounded to nearest: within
  PTX's stated error bounds, but not bit-identical with the hardware's tables.

Left out: the contraction of plain mul/add pairs into fma that hardware may do; `.rs`
stochastic rounding. f64 `fma` is exact only while the product a*b is at least 2^-969
in magnitude (its TwoProd error term is then a normal number) and does not overflow;
below that, results near the subnormal range may be off by one unit, and a product
beyond the f64 range gives inf even where c would bring the sum back into range.
f64 mul/div/sqrt/rcp are exact in every mode over the whole range.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from isa.fpround import (
    F32,
    F64,
    FMA_DIRECTED_F32,
    directed,
    div_side,
    fix_overflow,
    fma_odd_f64,
    fma_rn_f32,
    fma_rn_f64,
    materialize,
    mul_side,
    nearest,
    round_pair,
    round_to_odd,
    round_value,
    sqrt_side,
    two_prod,
    two_sum,
)
from isa.semantics.common import dst, src
from isa.semantics.registry import semantics
from isa.types import BF16, E4M3, E5M2, TYPES

F16 = np.dtype(np.float16)
_PACKED = {"f16x2": F16, "bf16x2": BF16}
_NEAREST = (None, "rn")
_CANONICAL_NAN = {F16: 0x7FFF, BF16: 0x7FFF, F32: 0x7FFFFFFF, F64: 0x7FFFFFFFFFFFFFFF,
                  E4M3: 0x7F, E5M2: 0x7F}


def unpack2(v, half_dtype) -> tuple[np.ndarray, np.ndarray]:
    """(low half, high half) of 32-bit words as `half_dtype` values."""
    v = np.asarray(v, dtype=np.uint32)
    lo = (v & np.uint32(0xFFFF)).astype(np.uint16).view(half_dtype)
    hi = (v >> np.uint32(16)).astype(np.uint16).view(half_dtype)
    return lo, hi


def pack2(lo, hi) -> np.ndarray:
    lo = np.asarray(lo).view(np.uint16).astype(np.uint32)
    hi = np.asarray(hi).view(np.uint16).astype(np.uint32)
    return lo | (hi << np.uint32(16))


def comp_dtype(ins) -> np.dtype:
    """The dtype of one component (a half for packed types)."""
    ty = ins.types[0]
    return _PACKED.get(ty.name, ty.dtype)


def _parts(m, ins, k, lanes) -> list[np.ndarray]:
    """Operand k as its components in their own dtype (1 for scalars, 2 for packed)."""
    ty = ins.types[0]
    v = np.asarray(ins.ops[k].read(m, ty, lanes))
    if ty.name in _PACKED:
        return list(unpack2(v, _PACKED[ty.name]))
    return [v]


def _work_dtype(dt) -> np.dtype:
    """Where a component is computed natively: f64 stays, the rest widen to float32."""
    return F64 if dt == F64 else F32


def _ftz(ins) -> bool:
    return "ftz" in ins.flags and comp_dtype(ins) != F64


def _flush(x: np.ndarray, dt) -> np.ndarray:
    tiny = float(ml_dtypes.finfo(dt).smallest_normal)
    w = x.astype(_work_dtype(dt))
    return np.where(np.abs(w) < tiny, np.copysign(np.zeros_like(w), w), w).astype(dt)


def _in(x: np.ndarray, ins) -> np.ndarray:
    """Input flush for `.ftz`."""
    return _flush(x, x.dtype) if _ftz(ins) else x


def canonical_nan(dt) -> np.ndarray:
    bits = _CANONICAL_NAN[np.dtype(dt)]
    return np.asarray(bits, dtype=np.dtype(f"u{np.dtype(dt).itemsize}")).view(dt)


def saturate(r: np.ndarray) -> np.ndarray:
    """`.sat`: clamp to [+0, 1]; NaN -> +0."""
    w = r.astype(_work_dtype(r.dtype))
    return np.where(w > 0, np.minimum(w, 1.0), 0.0).astype(r.dtype)


def relu(r: np.ndarray) -> np.ndarray:
    """`.relu`: negative values (and -0) -> +0, NaN -> canonical NaN."""
    w = r.astype(_work_dtype(r.dtype))
    out = np.where(np.signbit(w), np.zeros((), r.dtype), r)
    return np.where(np.isnan(w), canonical_nan(r.dtype), out)


def _finish(ins, parts: list[np.ndarray]) -> np.ndarray:
    """Apply `.ftz`/`.sat`/`.relu` to rounded component results and pack them."""
    flags = ins.flags
    if flags:
        out = []
        for r in parts:
            r = np.asarray(r)
            if _ftz(ins):
                r = _flush(r, r.dtype)
            if "sat" in flags:
                r = saturate(r)
            if "relu" in flags:
                r = relu(r)
            out.append(r)
        parts = out
    if ins.types[0].name in _PACKED:
        return pack2(parts[0], parts[1])
    return parts[0]


def _store(m, ins, lanes, parts) -> None:
    dst(m, ins, _finish(ins, parts), ins.types[0], lanes)


def _exact_zero_sign(r, x, y, zero, mode):
    """Under `.rm` an exact zero sum of x + y is -0 unless both addends are +0."""
    if mode != "rm" or not np.any(zero):
        return r
    neg = np.signbit(x) | np.signbit(y)
    z = np.where(neg, -0.0, 0.0).astype(r.dtype)
    return np.where(zero, z, r)


# -- add, sub, mul, min, max -------------------------------------------------------

def _nearest_binary(a, b, op: str, dt):
    w = _work_dtype(dt)
    a, b = a.astype(w, copy=False), b.astype(w, copy=False)
    r = a + b if op == "add" else a - b if op == "sub" else a * b
    return r if dt == w else r.astype(dt)


def _directed_binary(a, b, op: str, dt, mode):
    if dt == F32 and op != "mul":      # a*1 + (+-b) in the compiled directed fma
        a, b = materialize(a, np.negative(b) if op == "sub" else b)
        return FMA_DIRECTED_F32[mode](a, np.ones_like(a), b)
    a64, b64 = a.astype(F64), b.astype(F64)
    finite = np.isfinite(a64) & np.isfinite(b64)
    if op == "mul":
        if dt == F64:
            r = a64 * b64
            side = np.where(finite & np.isfinite(r), mul_side(a64, b64, r), 0.0)
            return fix_overflow(directed(r, side < 0, side > 0, mode), finite, mode)
        return round_value(a64 * b64, dt, mode)
    if op == "sub":
        b64 = -b64
    s, e = two_sum(a64, b64)
    r = fix_overflow(round_pair(s, e, dt, mode), finite, mode)
    return _exact_zero_sign(r, a64, b64, s == 0, mode)


def binary(m, ins, lanes, op: str):
    """add/sub/mul/min/max on float and packed-half types."""
    dt = comp_dtype(ins)
    res = []
    for a, b in zip(_parts(m, ins, 1, lanes), _parts(m, ins, 2, lanes), strict=True):
        a, b = _in(a, ins), _in(b, ins)
        if op in ("min", "max"):
            r = _minmax(a, b, op, ins)
        elif ins.rnd in _NEAREST:
            r = _nearest_binary(a, b, op, dt)
        else:
            r = _directed_binary(a, b, op, dt, ins.rnd)
        res.append(r)
    _store(m, ins, lanes, res)


def _minmax(a, b, op: str, ins):
    dt = a.dtype
    w = _work_dtype(dt)
    a, b = a.astype(w), b.astype(w)
    if "xorsign.abs" in ins.flags:
        neg = np.signbit(a) ^ np.signbit(b)
        a, b = np.abs(a), np.abs(b)
    pick = (np.minimum if op == "min" else np.maximum) if "NaN" in ins.flags else \
        (np.fmin if op == "min" else np.fmax)
    r = pick(a, b)
    both_zero = (a == 0) & (b == 0)
    if np.any(both_zero):   # -0 < +0
        neg0 = np.signbit(a) | np.signbit(b) if op == "min" else np.signbit(a) & np.signbit(b)
        r = np.where(both_zero, np.where(neg0, -0.0, 0.0), r)
    if "xorsign.abs" in ins.flags:
        r = np.where(np.isnan(r), r, np.copysign(r, np.where(neg, -1.0, 1.0)))
    r = np.asarray(r).astype(dt)
    return np.where(np.isnan(r.astype(w)), canonical_nan(dt), r)


def unary(m, ins, lanes, op: str):
    """abs/neg: the sign bit only (NaN payloads kept), after the `.ftz` input flush."""
    res = []
    for a in _parts(m, ins, 1, lanes):
        a = _in(a, ins)
        bits = a.view(np.dtype(f"u{a.dtype.itemsize}"))
        sign = bits.dtype.type(1 << (8 * a.dtype.itemsize - 1))
        r = bits & ~sign if op == "abs" else bits ^ sign
        res.append(np.asarray(r).view(a.dtype))
    _store(m, ins, lanes, res)


# -- fma ------------------------------------------------------------------------------

def _fma_f64(a, b, c, mode):
    """Correctly rounded a*b + c in f64 (round-to-odd emulation of a fused multiply-add)."""
    uh, ul = two_prod(a, b)
    th, tl = two_sum(c, uh)
    sh, sl = two_sum(tl, ul)
    v = np.where(np.isfinite(sh) & np.isfinite(sl), sl, 0.0)
    v = round_to_odd(sh, v)
    ok = np.isfinite(th) & np.isfinite(v)
    r = np.where(ok, round_pair(th, np.where(ok, v, 0.0), F64, mode), a * b + c)
    finite = np.isfinite(a) & np.isfinite(b) & np.isfinite(c)
    r = fix_overflow(r, finite, mode)
    return _exact_zero_sign(r, uh, c, (th == 0) & (v == 0), mode)


@semantics("fma")
def fma(m, ins, lanes):
    dt = comp_dtype(ins)
    mode = ins.rnd
    if dt == F32 or (dt == F64 and mode in _NEAREST):   # one compiled pass (GEMM, expf)
        a, b, c = materialize(*(_in(np.asarray(ins.ops[k].read(m, ins.types[0], lanes)), ins)
                                for k in (1, 2, 3)))
        if mode in _NEAREST:
            kernel = fma_rn_f32 if dt == F32 else fma_rn_f64
        else:
            kernel = FMA_DIRECTED_F32[mode]
        return _store(m, ins, lanes, [kernel(a, b, c)])
    res = []
    for a, b, c in zip(*(_parts(m, ins, k, lanes) for k in (1, 2, 3)), strict=True):
        a, b, c = (_in(x, ins).astype(F64) for x in (a, b, c))
        if dt == F64:
            res.append(_fma_f64(a, b, c, mode))
            continue
        x = fma_odd_f64(*materialize(a, b, c))       # a*b exact: at most 2 x 11 bits
        r = round_value(x, dt, mode)
        res.append(_exact_zero_sign(r, a * b, c, x == 0, mode) if mode == "rm" else r)
    _store(m, ins, lanes, res)


# -- div, rcp, sqrt ---------------------------------------------------------------------

def _quotient(a, b, dt, mode):
    """a / b rounded once; for f64 directed modes the exact sign of a/b - q gives the side."""
    a64, b64 = a.astype(F64), b.astype(F64)
    q = a64 / b64
    if dt != F64:        # the float64 quotient of narrower floats never sits on a boundary
        return round_value(q, dt, mode if mode in ("rz", "rm", "rp") else "rn")
    if mode not in ("rz", "rm", "rp"):
        return q
    finite = np.isfinite(a64) & np.isfinite(b64) & (b64 != 0)
    side = np.where(finite & np.isfinite(q), div_side(a64, b64, q), 0.0)
    return fix_overflow(directed(q, side < 0, side > 0, mode), finite, mode)


def divide(m, ins, lanes):
    dt = comp_dtype(ins)
    a, b = _in(_parts(m, ins, 1, lanes)[0], ins), _in(_parts(m, ins, 2, lanes)[0], ins)
    _store(m, ins, lanes, [_quotient(a, b, dt, ins.rnd)])


@semantics("rcp")
def rcp(m, ins, lanes):
    dt = comp_dtype(ins)
    res = []
    for a in _parts(m, ins, 1, lanes):
        a = _in(a, ins)
        res.append(_quotient(np.ones_like(a), a, dt, ins.rnd))
    _store(m, ins, lanes, res)


@semantics("sqrt")
def sqrt(m, ins, lanes):
    dt = comp_dtype(ins)
    mode = ins.rnd if ins.rnd in ("rz", "rm", "rp") else "rn"
    res = []
    for a in _parts(m, ins, 1, lanes):
        a64 = _in(a, ins).astype(F64)
        r = np.sqrt(a64)
        if dt != F64:
            res.append(round_value(r, dt, mode))
            continue
        if mode != "rn":
            side = np.where(np.isfinite(r) & (r > 0), sqrt_side(a64, r), 0.0)
            r = directed(r, side < 0, side > 0, mode)
        res.append(r)
    _store(m, ins, lanes, res)


# -- approximate SFU functions ------------------------------------------------------------

def _sfu(m, ins, lanes, fn):
    dt = comp_dtype(ins)
    res = [nearest(fn(_in(a, ins).astype(F64)), dt) for a in _parts(m, ins, 1, lanes)]
    _store(m, ins, lanes, res)


@semantics("rsqrt")
def rsqrt(m, ins, lanes):
    _sfu(m, ins, lanes, lambda a: 1.0 / np.sqrt(a))


@semantics("sin")
def sin(m, ins, lanes):
    _sfu(m, ins, lanes, np.sin)


@semantics("cos")
def cos(m, ins, lanes):
    _sfu(m, ins, lanes, np.cos)


@semantics("lg2")
def lg2(m, ins, lanes):
    _sfu(m, ins, lanes, np.log2)


@semantics("ex2")
def ex2(m, ins, lanes):
    _sfu(m, ins, lanes, np.exp2)


@semantics("tanh")
def tanh(m, ins, lanes):
    _sfu(m, ins, lanes, np.tanh)


# -- sign and classification --------------------------------------------------------------

@semantics("copysign")
def copysign(m, ins, lanes):
    """copysign d, a, b: the value of b with the sign of a."""
    ty = ins.types[0]
    a, b = np.asarray(src(m, ins, 1, ty, lanes)), np.asarray(src(m, ins, 2, ty, lanes))
    ut = np.dtype(f"u{ty.dtype.itemsize}")
    sign = ut.type(1 << (ty.bits - 1))
    r = (b.view(ut) & ~sign) | (a.view(ut) & sign)
    dst(m, ins, np.asarray(r).view(ty.dtype), ty, lanes)


@semantics("testp")
def testp(m, ins, lanes):
    a = np.asarray(src(m, ins, 1, ins.types[0], lanes)).astype(F64)
    f = ins.flags
    tiny = float(ml_dtypes.finfo(ins.types[0].dtype).smallest_normal)
    if "finite" in f:
        r = np.isfinite(a)
    elif "infinite" in f:
        r = np.isinf(a)
    elif "number" in f:
        r = ~np.isnan(a)
    elif "notanumber" in f:
        r = np.isnan(a)
    elif "normal" in f:
        r = np.isfinite(a) & (np.abs(a) >= tiny)
    else:
        r = (a != 0) & (np.abs(a) < tiny)
    dst(m, ins, r, TYPES["pred"], lanes)
