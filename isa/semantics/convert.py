"""`cvt`: conversions between integer, float, half, bfloat, tf32 and fp8 types.

What is modelled:
* int -> int: the source is sign- or zero-extended by its type, then truncated to the
  destination width, or with `.sat` clamped to the destination range. A destination
  register wider than the type is extended by the destination type (operand rules).
* float -> int: `.rni/.rzi/.rmi/.rpi` rounding (`.rzi` when absent), clamped to the
  destination range (infinities included). NaN gives 0 for an f32/f16/bf16 source
  and a destination of at most 32 bits, as PTX specifies; for an f64 source or a
  64-bit destination PTX does not say what NaN gives, and the model returns the
  pattern with only the sign bit set (0x80..0).
* int -> float and float -> float: one rounding under `.rn/.rz/.rm/.rp` (64-bit
  integers are split into exact 32-bit halves first). `.ftz` flushes f32 subnormal
  inputs and results; `.sat` clamps to [+0, 1] with NaN -> +0; `.relu` clamps negative
  values to +0 and keeps NaN (canonical); `.satfinite` clamps to the largest finite
  value and keeps NaN. `.rni` etc. on float -> float round to an integer in the format.
* f32 -> tf32: `.rna` (ties away from zero), `.rn` or `.rz` on the 10 fraction bits,
  stored in an f32 container with the low 13 bits zero.
* packed: `cvt.rn.f16x2.f32 d, a, b` and `cvt.rn.satfinite.e4m3x2.f32 d, a, b` put
  `a` in the upper half; `cvt.rn.f16x2.e4m3x2 d, a` widens each byte, low byte to low
  half; e4m3x2 from f16x2 keeps the half order.

Left out: `.e4m3x4`/`.e5m2x4`, `.rs`, `.ue8m0` and the f4/f6 formats (a fault names
them).
"""

from __future__ import annotations

import numpy as np

from isa.fpround import round_pair, round_value, two_sum
from isa.semantics.common import dst
from isa.semantics.float_arith import pack2, relu, saturate, unpack2
from isa.semantics.registry import semantics
from isa.types import BF16, E4M3, E5M2, SINT_OF_BITS, TYPES, UINT_OF_BITS

F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
_FP8 = {"e4m3x2": E4M3, "e5m2x2": E5M2}
_HALF = {"f16x2": F16, "bf16x2": BF16}
_MAX_FINITE = {E4M3: 448.0, E5M2: 57344.0, F16: 65504.0, BF16: 3.3895313892515355e38,
               F32: float(np.finfo(np.float32).max)}
_TO_INTEGER = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}
_FLOAT_MODES = ("rn", "rz", "rm", "rp")


def _flush_f32(x: np.ndarray) -> np.ndarray:
    tiny = float(np.finfo(np.float32).smallest_normal)
    return np.where(np.abs(x) < tiny, np.copysign(np.zeros_like(x), x), x).astype(x.dtype)


def _finish_float(r: np.ndarray, dtype, ins) -> np.ndarray:
    """`.ftz` (f32 results), `.sat` and `.relu` on a rounded result."""
    if "ftz" in ins.flags and dtype == F32:
        r = _flush_f32(r)
    if "sat" in ins.flags:
        r = saturate(r)
    if "relu" in ins.flags:
        r = relu(r)
    return r


def to_float(x64: np.ndarray, dtype, ins, lo: np.ndarray | None = None) -> np.ndarray:
    """Round the exact value x64 (+ lo) to `dtype` with the instruction's modifiers."""
    dtype = np.dtype(dtype)
    if "satfinite" in ins.flags and dtype in _MAX_FINITE:
        lim = _MAX_FINITE[dtype]
        x64 = np.where(np.isnan(x64), x64, np.clip(x64, -lim, lim))
    mode = ins.rnd if ins.rnd in _FLOAT_MODES else "rn"
    if lo is not None:
        r = round_pair(x64, lo, dtype, mode)
    else:
        r = round_value(x64, dtype, mode)
    if "satfinite" in ins.flags and dtype in _MAX_FINITE:   # a rounding past the largest value
        lim = _MAX_FINITE[dtype]
        r64 = r.astype(F64)
        over = ~np.isnan(x64) & (np.isnan(r64) | (np.abs(r64) > lim))
        r = np.where(over, np.copysign(lim, x64), r64).astype(dtype)
    return _finish_float(r, dtype, ins)


def _float_to_int(x64: np.ndarray, ty, src_ty, ins) -> np.ndarray:
    r = _TO_INTEGER.get(ins.rnd or "rzi", np.trunc)(x64)
    info = np.iinfo(ty.dtype)
    nan = np.isnan(r)
    hi, lo = r >= float(info.max), r <= float(info.min)      # exact float bounds
    safe = np.where(hi | lo | nan, 0, r).astype(ty.dtype)
    out = np.where(hi, info.max, np.where(lo, info.min, safe)).astype(ty.dtype)
    if src_ty.name == "f64" or ty.bits == 64:
        nan_value = np.asarray(1 << (max(ty.bits, 8) - 1), UINT_OF_BITS[max(ty.bits, 8)])
        out = np.where(nan, nan_value.view(ty.dtype), out)
    return out.astype(ty.dtype)


def _int_to_int(v, dt_ty, src_ty, ins) -> np.ndarray:
    bits = max(src_ty.bits, 8)
    w = np.asarray(v).astype(SINT_OF_BITS[bits] if src_ty.is_signed else UINT_OF_BITS[bits])
    if "sat" in ins.flags:
        info = np.iinfo(dt_ty.dtype)
        if w.dtype == np.uint64:
            return np.minimum(w, np.uint64(info.max)).astype(dt_ty.dtype)
        return np.clip(w.astype(np.int64), max(info.min, -2 ** 63),
                       min(info.max, 2 ** 63 - 1)).astype(dt_ty.dtype)
    wide = w.astype(np.int64) if src_ty.is_signed else w.astype(np.uint64)
    return wide.astype(UINT_OF_BITS[max(dt_ty.bits, 8)], casting="unsafe").view(dt_ty.dtype)


def _int_as_pair(v: np.ndarray, src_ty) -> tuple[np.ndarray, np.ndarray]:
    """An integer as an exact float64 pair (64-bit values split into 32-bit halves)."""
    if src_ty.bits < 64:
        return v.astype(F64), None
    raw = v.view(np.uint64)
    low = (raw & np.uint64(0xFFFFFFFF)).astype(F64)
    high = (v.view(np.int64) >> 32 if src_ty.is_signed else raw >> np.uint64(32)).astype(F64)
    return two_sum(high * 4294967296.0, low)


def _read_float(m, ins, src_ty, lanes, k=1) -> np.ndarray:
    x = np.asarray(ins.ops[k].read(m, src_ty, lanes)).astype(F64)
    if "ftz" in ins.flags and src_ty.name == "f32":
        x = _flush_f32(x)
    return x


def _to_tf32(x: np.ndarray, mode: str | None) -> np.ndarray:
    """Round f32 to tf32 (10 fraction bits) on the bit pattern, in an f32 container."""
    bits = x.astype(F32).view(np.uint32).astype(np.uint64)
    if mode == "rz":
        out = bits
    elif mode == "rn":       # ties to even: add 0xFFF plus the bit that becomes the lsb
        out = bits + np.uint64(0xFFF) + ((bits >> np.uint64(13)) & np.uint64(1))
    else:                    # .rna: ties away from zero (magnitude grows with the pattern)
        out = bits + np.uint64(0x1000)
    out = out & ~np.uint64(0x1FFF)
    finite = np.isfinite(x)
    return np.where(finite, out, bits).astype(np.uint32).view(F32)


def _packed(m, ins, lanes, d: str, s: str) -> None:
    """Conversions with a packed destination or source."""
    if d in _HALF and s in _FP8:                          # fp8x2 -> f16x2, exact widening
        raw = np.asarray(ins.ops[1].read(m, TYPES["u16"], lanes)).astype(np.uint16)
        lo = (raw & np.uint16(0xFF)).astype(np.uint8).view(_FP8[s]).astype(F32)
        hi = (raw >> np.uint16(8)).astype(np.uint8).view(_FP8[s]).astype(F32)
        hd = _HALF[d]
        return dst(m, ins, pack2(lo.astype(hd), hi.astype(hd)), TYPES["b32"], lanes)
    if s != "f32" and not (d in _FP8 and s in _HALF):
        raise m.fault(ins, f"conversion {d} <- {s} is not supported")
    if d in _HALF:                                        # (a, b) f32 -> (hi, lo) halves
        src_ty = ins.types[1]
        a, b = _read_float(m, ins, src_ty, lanes, 1), _read_float(m, ins, src_ty, lanes, 2)
        hd = _HALF[d]
        return dst(m, ins, pack2(to_float(b, hd, ins), to_float(a, hd, ins)), TYPES["b32"], lanes)
    n8 = _FP8[d]
    if s in _HALF:                                        # halves keep their order
        lo, hi = unpack2(ins.ops[1].read(m, TYPES["u32"], lanes), _HALF[s])
        a, b = hi.astype(F64), lo.astype(F64)
    else:
        src_ty = ins.types[1]
        a, b = _read_float(m, ins, src_ty, lanes, 1), _read_float(m, ins, src_ty, lanes, 2)
    ra = to_float(a, n8, ins).view(np.uint8).astype(np.uint16)
    rb = to_float(b, n8, ins).view(np.uint8).astype(np.uint16)
    return dst(m, ins, (ra << np.uint16(8)) | rb, TYPES["u16"], lanes)


@semantics("cvt")
def cvt(m, ins, lanes):
    dt_ty, src_ty = ins.types[0], ins.types[1]
    d, s = dt_ty.name, src_ty.name
    if d in _HALF or d in _FP8:
        return _packed(m, ins, lanes, d, s)
    if dt_ty.kind == "pk" or src_ty.kind == "pk":
        raise m.fault(ins, f"conversion {d} <- {s} is not supported")
    if dt_ty.kind == "f" and src_ty.kind == "f":
        x = _read_float(m, ins, src_ty, lanes)
        if d == "tf32":
            return dst(m, ins, _to_tf32(x, ins.rnd), TYPES["f32"], lanes)
        if ins.rnd in _TO_INTEGER:
            r = _TO_INTEGER[ins.rnd](x).astype(dt_ty.dtype)
            return dst(m, ins, _finish_float(r, dt_ty.dtype, ins), dt_ty, lanes)
        return dst(m, ins, to_float(x, dt_ty.dtype, ins), dt_ty, lanes)
    if dt_ty.kind == "f":                                  # int -> float
        hi, lo = _int_as_pair(np.asarray(ins.ops[1].read(m, src_ty, lanes)), src_ty)
        return dst(m, ins, to_float(hi, dt_ty.dtype, ins, lo), dt_ty, lanes)
    if src_ty.kind == "f":                                 # float -> int
        x = _read_float(m, ins, src_ty, lanes)
        return dst(m, ins, _float_to_int(x, dt_ty, src_ty, ins), dt_ty, lanes)
    v = ins.ops[1].read(m, src_ty, lanes)
    dst(m, ins, _int_to_int(v, dt_ty, src_ty, ins), dt_ty, lanes)
