"""Floating-point arithmetic with PTX semantics.

* add/sub/mul/div/sqrt in `.rn` are computed in float64 and rounded once: exact for
  f32, f16 and bf16 (float64 has more than 2p+2 bits). Directed rounding (`.rz`,
  `.rm`, `.rp`) and `fma` go through `isa.fpround` (exact pair, one rounding).
  f64 `fma` uses error-free transformations; a double-rounding case remains possible
  when the three-term sum is inexact (rare; documented limitation).
* `.ftz` flushes subnormal inputs and results (f32 only), `.sat` clamps to [0, 1]
  with NaN -> +0. `min`/`max` return the non-NaN operand (NaN only if both are NaN)
  and order -0 < +0; `.NaN` propagates NaN.
* Approximate SFU ops (`ex2`, `lg2`, `sin`, `cos`, `rcp.approx`, `rsqrt`, `tanh`)
  are float64 evaluations rounded to f32, within PTX's stated error bounds.
* Packed `.f16x2` / `.bf16x2` operate on both halves of a 32-bit register.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from isa.fpround import flush_subnormal, round_pair, round_value, two_prod, two_sum
from isa.semantics.common import dst, src
from isa.semantics.registry import semantics
from isa.types import BF16, TYPES

_PACKED = {"f16x2": np.dtype(np.float16), "bf16x2": BF16}


def unpack2(v, half_dtype) -> tuple[np.ndarray, np.ndarray]:
    v = np.asarray(v, dtype=np.uint32)
    lo = (v & np.uint32(0xFFFF)).astype(np.uint16).view(half_dtype)
    hi = (v >> np.uint32(16)).astype(np.uint16).view(half_dtype)
    return lo, hi


def pack2(lo, hi) -> np.ndarray:
    lo = np.asarray(lo).view(np.uint16).astype(np.uint32)
    hi = np.asarray(hi).view(np.uint16).astype(np.uint32)
    return lo | (hi << np.uint32(16))


def _read_f(m, ins, k, lanes):
    """Operand k as float64 list of components (1 for scalars, 2 for packed)."""
    ty = ins.types[0]
    v = ins.ops[k].read(m, ty, lanes)
    if ty.name in _PACKED:
        lo, hi = unpack2(v, _PACKED[ty.name])
        return [lo.astype(np.float64), hi.astype(np.float64)]
    return [np.asarray(v).astype(np.float64)]


def _in(x, ins):
    """Input flush for .ftz (f32 only)."""
    if "ftz" in ins.flags and ins.types[0].name == "f32":
        tiny = np.finfo(np.float32).smallest_normal
        return np.where(np.abs(x) < tiny, np.copysign(0.0, x), x)
    return x


def _finish(ins, parts) -> np.ndarray:
    """Apply .sat/.relu/.ftz to rounded component results and pack them."""
    ty = ins.types[0]
    out = []
    for r in parts:
        if "ftz" in ins.flags and ty.name == "f32":
            r = flush_subnormal(r)
        if "sat" in ins.flags:
            r = np.where(np.isnan(r), 0, np.clip(r, 0, 1)).astype(r.dtype)
        if "relu" in ins.flags:
            r = np.where(np.isnan(r) | (r < 0), 0, r).astype(r.dtype)
        out.append(r)
    if ty.name in _PACKED:
        return pack2(out[0], out[1])
    return out[0]


def _comp_dtype(ins):
    ty = ins.types[0]
    return _PACKED.get(ty.name, ty.dtype)


def _round(ins, hi, lo=None):
    dt = _comp_dtype(ins)
    if lo is None:
        return round_value(hi, dt, ins.rnd)
    return round_pair(hi, lo, dt, ins.rnd)


def binary(m, ins, lanes, op: str):
    a_parts, b_parts = _read_f(m, ins, 1, lanes), _read_f(m, ins, 2, lanes)
    res = []
    for a, b in zip(a_parts, b_parts, strict=True):
        a, b = _in(a, ins), _in(b, ins)
        if op in ("add", "sub"):
            s, e = two_sum(a, -b if op == "sub" else b)
            r = _round(ins, s, e)
        elif op == "mul":
            if ins.types[0].name == "f64":
                p, e = two_prod(a, b)
                r = _round(ins, p, e)
            else:
                r = _round(ins, a * b)
        elif op in ("min", "max"):
            r = _minmax(a, b, op, ins).astype(_comp_dtype(ins))
        else:
            raise AssertionError(op)
        res.append(r)
    dst(m, ins, _finish(ins, res), ins.types[0], lanes)


def _minmax(a, b, op, ins):
    if "NaN" in ins.flags:
        r = np.minimum(a, b) if op == "min" else np.maximum(a, b)
    else:
        r = np.fmin(a, b) if op == "min" else np.fmax(a, b)
    # order -0 < +0 when both are zero
    both_zero = (a == 0) & (b == 0)
    if np.any(both_zero):
        neg = np.signbit(a) | np.signbit(b) if op == "min" else np.signbit(a) & np.signbit(b)
        r = np.where(both_zero, np.where(neg, -0.0, 0.0), r)
    return r


def unary(m, ins, lanes, op: str):
    res = []
    for a in _read_f(m, ins, 1, lanes):
        a = _in(a, ins)
        r = np.abs(a) if op == "abs" else -a
        res.append(r.astype(_comp_dtype(ins)))
    dst(m, ins, _finish(ins, res), ins.types[0], lanes)


@semantics("fma")
def fma(m, ins, lanes):
    pa, pb, pc = (_read_f(m, ins, k, lanes) for k in (1, 2, 3))
    res = []
    for a, b, c in zip(pa, pb, pc, strict=True):
        a, b, c = _in(a, ins), _in(b, ins), _in(c, ins)
        if ins.types[0].name == "f64":
            p, pe = two_prod(a, b)
            s, se = two_sum(p, c)
            r = _round(ins, s, se + pe)
        else:
            s, e = two_sum(a * b, c)
            r = _round(ins, s, e)
        res.append(r)
    dst(m, ins, _finish(ins, res), ins.types[0], lanes)


def divide(m, ins, lanes):
    a, b = _in(_read_f(m, ins, 1, lanes)[0], ins), _in(_read_f(m, ins, 2, lanes)[0], ins)
    ty = ins.types[0]
    q = a / b
    if ins.rnd in (None, "rn") or "approx" in ins.flags or "full" in ins.flags:
        r = q.astype(ty.dtype)
    else:
        r = q.astype(ty.dtype)
        exact_sign = np.sign(a - r.astype(np.float64) * b) * np.sign(b)   # sign(a/b - r)
        r = _directed_step(r, exact_sign, ins.rnd)
    dst(m, ins, _finish(ins, [r]), ty, lanes)


def _directed_step(r, sign, mode):
    if mode == "rm":
        return np.where(sign < 0, np.nextafter(r, np.array(-np.inf, r.dtype)), r)
    if mode == "rp":
        return np.where(sign > 0, np.nextafter(r, np.array(np.inf, r.dtype)), r)
    step = ((r > 0) & (sign < 0)) | ((r < 0) & (sign > 0))
    return np.where(step, np.nextafter(r, np.array(0, r.dtype)), r)


def _sfu(m, ins, lanes, fn):
    res = []
    for a in _read_f(m, ins, 1, lanes):
        a = _in(a, ins)
        r = fn(a)
        res.append(r.astype(_comp_dtype(ins)))
    dst(m, ins, _finish(ins, res), ins.types[0], lanes)


@semantics("rcp")
def rcp(m, ins, lanes):
    if ins.rnd in ("rz", "rm", "rp"):
        a = _in(_read_f(m, ins, 1, lanes)[0], ins)
        r = (1.0 / a).astype(ins.types[0].dtype)
        sign = np.sign(1.0 - r.astype(np.float64) * a) * np.sign(a)
        return dst(m, ins, _finish(ins, [_directed_step(r, sign, ins.rnd)]), ins.types[0],
                   lanes)
    _sfu(m, ins, lanes, lambda a: 1.0 / a)


@semantics("sqrt")
def sqrt(m, ins, lanes):
    if ins.rnd in ("rz", "rm", "rp"):
        a = _in(_read_f(m, ins, 1, lanes)[0], ins)
        r = np.sqrt(a).astype(ins.types[0].dtype)
        r64 = r.astype(np.float64)
        sign = np.sign(a - r64 * r64)
        return dst(m, ins, _finish(ins, [_directed_step(r, sign, ins.rnd)]), ins.types[0],
                   lanes)
    _sfu(m, ins, lanes, np.sqrt)


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


@semantics("copysign")
def copysign(m, ins, lanes):
    ty = ins.types[0]
    a, b = src(m, ins, 1, ty, lanes), src(m, ins, 2, ty, lanes)
    dst(m, ins, np.copysign(b, a).astype(ty.dtype), ty, lanes)   # PTX: sign of a, value of b


@semantics("testp")
def testp(m, ins, lanes):
    a = np.asarray(src(m, ins, 1, ins.types[0], lanes)).astype(np.float64)
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
