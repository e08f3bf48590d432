"""Integer arithmetic (wrap-around, .lo/.hi/.wide, .sat) and the opcode-level dispatch
of add/sub/mul/mad/div/min/max/abs/neg to float semantics for float types.

PTX integer arithmetic wraps modulo 2^n; computations use unsigned views so numpy
never warns. Division truncates toward zero and the remainder takes the dividend's
sign, both computed on unsigned magnitudes, so signed MIN / -1 wraps to MIN with
remainder 0. Division by zero, which PTX leaves unspecified, gives all ones as the
quotient and the dividend as the remainder (the model's choice).

Left out: the carry chain of `add.cc`/`addc` (`.cc` is accepted, the carry is not
kept).
"""

from __future__ import annotations

import numpy as np

from isa.semantics import float_arith as F
from isa.semantics.common import dst, src, unsigned
from isa.semantics.registry import semantics
from isa.types import SINT_OF_BITS, TYPES, UINT_OF_BITS


def _is_float(ins) -> bool:
    return ins.types[0].kind in ("f", "pk")


def _wide_type(ty):
    return TYPES[f"{'s' if ty.is_signed else 'u'}{ty.bits * 2}"]


def _mul_parts(a, b, ty):
    """(lo, hi) halves of the full 2n-bit product of n-bit a, b (as unsigned arrays)."""
    n = ty.bits
    if n <= 32:
        wt = SINT_OF_BITS[2 * n] if ty.is_signed else UINT_OF_BITS[2 * n]
        p = np.asarray(a).astype(wt) * np.asarray(b).astype(wt)
        p = p.astype(wt).view(UINT_OF_BITS[2 * n])
        mask = np.uint64((1 << n) - 1)
        lo = (p.astype(np.uint64) & mask).astype(UINT_OF_BITS[n])
        hi = (p.astype(np.uint64) >> np.uint64(n)).astype(UINT_OF_BITS[n])
        return lo, hi
    au = np.asarray(a).view(np.uint64) if np.asarray(a).dtype != np.uint64 else np.asarray(a)
    bu = np.asarray(b).view(np.uint64) if np.asarray(b).dtype != np.uint64 else np.asarray(b)
    m32 = np.uint64(0xFFFFFFFF)
    s32 = np.uint64(32)
    a0, a1, b0, b1 = au & m32, au >> s32, bu & m32, bu >> s32
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = (p00 >> s32) + (p01 & m32) + (p10 & m32)
    lo = (p00 & m32) | ((mid & m32) << s32)
    hi = p11 + (p01 >> s32) + (p10 >> s32) + (mid >> s32)
    if ty.is_signed:   # signed high part: subtract b (a) where a (b) is negative
        hi = hi - np.where(np.asarray(a) < 0, bu, np.uint64(0)) \
            - np.where(np.asarray(b) < 0, au, np.uint64(0))
    return lo, hi


def _wrap(values, ty):
    return np.asarray(values).astype(UINT_OF_BITS[ty.bits], casting="unsafe").view(ty.dtype)


def _sat32(x):
    return np.clip(x, -(2 ** 31), 2 ** 31 - 1).astype(np.int32)


@semantics("add")
def add(m, ins, lanes):
    if _is_float(ins):
        return F.binary(m, ins, lanes, "add")
    ty = ins.types[0]
    a, b = src(m, ins, 1, ty, lanes), src(m, ins, 2, ty, lanes)
    if "sat" in ins.flags:
        return dst(m, ins, _sat32(a.astype(np.int64) + np.int64(b)), ty, lanes)
    u = unsigned(ty).dtype
    dst(m, ins, (np.asarray(a).view(u) + np.asarray(b).view(u)).view(ty.dtype), ty, lanes)


@semantics("sub")
def sub(m, ins, lanes):
    if _is_float(ins):
        return F.binary(m, ins, lanes, "sub")
    ty = ins.types[0]
    a, b = src(m, ins, 1, ty, lanes), src(m, ins, 2, ty, lanes)
    if "sat" in ins.flags:
        return dst(m, ins, _sat32(a.astype(np.int64) - np.int64(b)), ty, lanes)
    u = unsigned(ty).dtype
    dst(m, ins, (np.asarray(a).view(u) - np.asarray(b).view(u)).view(ty.dtype), ty, lanes)


def _int_mul(m, ins, lanes, ty, a, b):
    if "wide" in ins.flags:
        wt = _wide_type(ty)
        return wt, np.asarray(a).astype(wt.dtype) * np.asarray(b).astype(wt.dtype)
    lo, hi = _mul_parts(a, b, ty)
    return ty, (hi if "hi" in ins.flags else lo).view(ty.dtype)


@semantics("mul")
def mul(m, ins, lanes):
    if _is_float(ins):
        return F.binary(m, ins, lanes, "mul")
    ty = ins.types[0]
    out_ty, v = _int_mul(m, ins, lanes, ty, src(m, ins, 1, ty, lanes), src(m, ins, 2, ty, lanes))
    dst(m, ins, v, out_ty, lanes)


@semantics("mad")
def mad(m, ins, lanes):
    if _is_float(ins):
        return F.fma(m, ins, lanes)
    ty = ins.types[0]
    out_ty, p = _int_mul(m, ins, lanes, ty, src(m, ins, 1, ty, lanes), src(m, ins, 2, ty, lanes))
    c = src(m, ins, 3, out_ty, lanes)
    if "sat" in ins.flags and "hi" in ins.flags:
        return dst(m, ins, _sat32(p.astype(np.int64) + np.int64(c)), out_ty, lanes)
    u = unsigned(out_ty).dtype
    dst(m, ins, (np.asarray(p).view(u) + np.asarray(c).view(u)).view(out_ty.dtype), out_ty, lanes)


@semantics("mul24")
def mul24(m, ins, lanes):
    ty = ins.types[0]
    a = src(m, ins, 1, ty, lanes).astype(np.int64)
    b = src(m, ins, 2, ty, lanes).astype(np.int64)
    if ty.is_signed:
        a, b = (a << 40) >> 40, (b << 40) >> 40
    else:
        a, b = a & 0xFFFFFF, b & 0xFFFFFF
    p = a * b
    out = (p >> 16) if "hi" in ins.flags else p
    dst(m, ins, _wrap(out & 0xFFFFFFFF, ty), ty, lanes)


@semantics("mad24")
def mad24(m, ins, lanes):
    ty = ins.types[0]
    a = src(m, ins, 1, ty, lanes).astype(np.int64)
    b = src(m, ins, 2, ty, lanes).astype(np.int64)
    c = src(m, ins, 3, ty, lanes).astype(np.int64)
    if ty.is_signed:
        a, b = (a << 40) >> 40, (b << 40) >> 40
    else:
        a, b = a & 0xFFFFFF, b & 0xFFFFFF
    p = a * b
    out = ((p >> 16) if "hi" in ins.flags else p) + c
    dst(m, ins, _wrap(out & 0xFFFFFFFF, ty), ty, lanes)


@semantics("sad")
def sad(m, ins, lanes):
    ty = ins.types[0]
    a, b = src(m, ins, 1, ty, lanes).astype(np.int64), src(m, ins, 2, ty, lanes).astype(np.int64)
    c = src(m, ins, 3, ty, lanes).astype(np.int64)
    dst(m, ins, _wrap(np.abs(a - b) + c, ty), ty, lanes)


def _divmod(m, ins, lanes):
    """(a, b, quotient, remainder, b == 0) with C semantics: truncation toward zero,
    remainder with the sign of a, computed on unsigned magnitudes (MIN / -1 wraps)."""
    ty = ins.types[0]
    a, b = np.asarray(src(m, ins, 1, ty, lanes)), np.asarray(src(m, ins, 2, ty, lanes))
    a, b = np.broadcast_arrays(a, b)
    u = unsigned(ty).dtype
    zero = b == 0
    au, bu = a.view(u), np.where(zero, 1, b).astype(ty.dtype).view(u)
    if not ty.is_signed:
        return a, b, au // bu, au % bu, zero
    neg_a, neg_b = a < 0, b < 0
    au = np.where(neg_a, -au, au).astype(u)
    bu = np.where(neg_b, -bu, bu).astype(u)
    qu, ru = au // bu, au % bu
    q = np.where(neg_a ^ neg_b, -qu, qu).astype(u).view(ty.dtype)
    r = np.where(neg_a, -ru, ru).astype(u).view(ty.dtype)
    return a, b, q, r, zero


@semantics("div")
def div(m, ins, lanes):
    if _is_float(ins):
        return F.divide(m, ins, lanes)
    ty = ins.types[0]
    _, _, q, _, zero = _divmod(m, ins, lanes)
    dst(m, ins, np.where(zero, _wrap(np.int64(-1), ty), q.view(ty.dtype)).astype(ty.dtype), ty,
        lanes)


@semantics("rem")
def rem(m, ins, lanes):
    ty = ins.types[0]
    a, _, _, r, zero = _divmod(m, ins, lanes)
    dst(m, ins, np.where(zero, a, r.view(ty.dtype)).astype(ty.dtype), ty, lanes)


@semantics("abs")
def abs_(m, ins, lanes):
    if _is_float(ins):
        return F.unary(m, ins, lanes, "abs")
    ty = ins.types[0]
    a = np.asarray(src(m, ins, 1, ty, lanes))
    u = unsigned(ty).dtype
    dst(m, ins, np.where(a < 0, (-(a.view(u))).view(ty.dtype), a), ty, lanes)


@semantics("neg")
def neg(m, ins, lanes):
    if _is_float(ins):
        return F.unary(m, ins, lanes, "neg")
    ty = ins.types[0]
    u = unsigned(ty).dtype
    a = np.asarray(src(m, ins, 1, ty, lanes))
    dst(m, ins, (-(a.view(u))).view(ty.dtype), ty, lanes)


def _min_max(m, ins, lanes, op: str):
    """Integer min/max (`.relu` clamps at 0); floats go to the NaN-aware float version."""
    if _is_float(ins):
        return F.binary(m, ins, lanes, op)
    ty = ins.types[0]
    fn = np.minimum if op == "min" else np.maximum
    v = fn(src(m, ins, 1, ty, lanes), src(m, ins, 2, ty, lanes))
    if "relu" in ins.flags:
        v = np.maximum(v, 0)
    dst(m, ins, v, ty, lanes)


@semantics("min")
def min_(m, ins, lanes):
    _min_max(m, ins, lanes, "min")


@semantics("max")
def max_(m, ins, lanes):
    _min_max(m, ins, lanes, "max")
