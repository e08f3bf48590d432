"""`cvt`: conversions between integer, float, half, bfloat and fp8 types.

* int -> int: truncation or sign/zero extension by the source type; `.sat` clamps
  to the destination range.
* float -> int: rounding `.rni/.rzi/.rmi/.rpi` (required by PTX), clamped to the
  destination range, NaN -> 0.
* int -> float and float -> float: rounded once with `.rn/.rz/.rm/.rp`; `.ftz`,
  `.sat` (clamp to [0,1], NaN -> 0), `.relu`, `.satfinite` (clamp to the largest
  finite value; NaN stays NaN). `.rni` etc. on float -> float round to an integer.
* packed: `cvt.rn.f16x2.f32 d, a, b` and `cvt.rn.satfinite.e4m3x2.f32 d, a, b` put
  `a` in the upper half; `cvt.rn.f16x2.e4m3x2 d, a` widens both bytes.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from isa.fpround import flush_subnormal, round_value
from isa.semantics.common import dst
from isa.semantics.float_arith import pack2, unpack2
from isa.semantics.registry import semantics
from isa.types import BF16, E4M3, E5M2, SINT_OF_BITS, TYPES, UINT_OF_BITS

_NARROW = {"e4m3": E4M3, "e5m2": E5M2}
_HALF = {"f16x2": np.dtype(np.float16), "bf16x2": BF16}
_MAXFIN = {E4M3: 448.0, E5M2: 57344.0, np.dtype(np.float16): 65504.0,
           BF16: float(ml_dtypes.finfo(BF16).max),
           np.dtype(np.float32): float(np.finfo(np.float32).max)}


def _to_float(x64, dtype, ins):
    """Round float64 values to `dtype` with the instruction's modifiers."""
    dtype = np.dtype(dtype)
    if "satfinite" in ins.flags:
        lim = _MAXFIN.get(dtype)
        if lim is not None:
            x64 = np.where(np.isnan(x64), x64, np.clip(x64, -lim, lim))
    if "relu" in ins.flags:
        x64 = np.where(np.isnan(x64) | (x64 < 0), 0.0, x64)
    mode = ins.rnd if ins.rnd in ("rn", "rz", "rm", "rp") else "rn"
    if dtype in (E4M3, E5M2):
        r = x64.astype(np.float32).astype(dtype) if mode == "rn" else \
            round_value(x64, dtype, mode)
    elif dtype == np.float64:
        r = x64
    else:
        r = round_value(x64, dtype, mode)
    if "ftz" in ins.flags and dtype == np.float32:
        r = flush_subnormal(r)
    if "sat" in ins.flags:
        r = np.where(np.isnan(r), 0, np.clip(r, 0, 1)).astype(dtype)
    return r


def _float_to_int(x64, ty, ins):
    mode = ins.rnd or "rzi"
    if mode == "rni":
        r = np.rint(x64)
    elif mode == "rmi":
        r = np.floor(x64)
    elif mode == "rpi":
        r = np.ceil(x64)
    else:
        r = np.trunc(x64)
    info = np.iinfo(ty.dtype)
    nan = np.isnan(r)
    r = np.where(nan, 0, r)
    if ty.bits == 64:   # exact clamp for 64-bit ranges
        hi = r >= float(info.max)
        lo = r <= float(info.min)
        safe = np.where(hi | lo, 0, r).astype(ty.dtype)
        return np.where(hi, info.max, np.where(lo, info.min, safe)).astype(ty.dtype)
    return np.clip(r, info.min, info.max).astype(ty.dtype)


def _int_to_int(v, dt_ty, src_ty, ins):
    v = np.asarray(v)
    if "sat" in ins.flags:
        info = np.iinfo(dt_ty.dtype)
        wide = v.astype(np.int64) if not (src_ty.kind == "u" and src_ty.bits == 64) else v
        if src_ty.kind == "u" and src_ty.bits == 64:
            return np.minimum(wide, np.uint64(info.max)).astype(dt_ty.dtype)
        return np.clip(wide, info.min, info.max).astype(dt_ty.dtype)
    if src_ty.is_signed:
        w = v.astype(SINT_OF_BITS[max(src_ty.bits, 8)]).astype(np.int64)
    else:
        w = v.astype(UINT_OF_BITS[max(src_ty.bits, 8)]).astype(np.uint64)
    return w.astype(UINT_OF_BITS[max(dt_ty.bits, 8)], casting="unsafe").view(dt_ty.dtype)


def _read_src_float(m, ins, src_ty, lanes, k=1):
    v = ins.ops[k].read(m, src_ty, lanes)
    x = np.asarray(v).astype(np.float64)
    if "ftz" in ins.flags and src_ty.name == "f32":
        x = flush_subnormal(x)
    return x


@semantics("cvt")
def cvt(m, ins, lanes):
    dt_ty, src_ty = ins.types[0], ins.types[1]
    d, s = dt_ty.name, src_ty.name
    if d in _HALF:                                   # f32 pair -> packed half
        hd = _HALF[d]
        if s in ("e4m3x2", "e5m2x2"):
            raw = np.asarray(ins.ops[1].read(m, TYPES["u16"], lanes)).astype(np.uint16)
            n8 = E4M3 if s == "e4m3x2" else E5M2
            lo = (raw & np.uint16(0xFF)).astype(np.uint8).view(n8).astype(np.float32)
            hi = (raw >> np.uint16(8)).astype(np.uint8).view(n8).astype(np.float32)
            return dst(m, ins, pack2(lo.astype(hd), hi.astype(hd)), TYPES["b32"], lanes)
        a = _read_src_float(m, ins, src_ty, lanes, 1)
        b = _read_src_float(m, ins, src_ty, lanes, 2)
        return dst(m, ins, pack2(_to_float(b, hd, ins), _to_float(a, hd, ins)), TYPES["b32"],
                   lanes)
    if d in ("e4m3x2", "e5m2x2"):                    # pair -> packed fp8
        n8 = E4M3 if d == "e4m3x2" else E5M2
        if s in _HALF:
            v = ins.ops[1].read(m, TYPES["u32"], lanes)
            lo, hi = unpack2(v, _HALF[s])
            a, b = hi.astype(np.float64), lo.astype(np.float64)
        else:
            a = _read_src_float(m, ins, src_ty, lanes, 1)
            b = _read_src_float(m, ins, src_ty, lanes, 2)
        ra = _to_float(a, n8, ins).view(np.uint8).astype(np.uint16)
        rb = _to_float(b, n8, ins).view(np.uint8).astype(np.uint16)
        return dst(m, ins, (ra << np.uint16(8)) | rb, TYPES["u16"], lanes)
    if s in ("e4m3x2", "e5m2x2") or d in ("e4m3x4", "e5m2x4"):
        raise m.fault(ins, f"conversion {d} <- {s} is not supported")
    if dt_ty.kind == "f":
        if src_ty.kind == "f":
            x = _read_src_float(m, ins, src_ty, lanes)
            if ins.rnd in ("rni", "rzi", "rmi", "rpi"):
                fn = {"rni": np.rint, "rzi": np.trunc, "rmi": np.floor, "rpi": np.ceil}[ins.rnd]
                r = fn(x).astype(dt_ty.dtype)
                if "ftz" in ins.flags and dt_ty.name == "f32":
                    r = flush_subnormal(r)
                if "sat" in ins.flags:
                    r = np.where(np.isnan(r), 0, np.clip(r, 0, 1)).astype(dt_ty.dtype)
                return dst(m, ins, r, dt_ty, lanes)
            if d == "tf32":
                r = _to_tf32(x, ins)
                return dst(m, ins, r, TYPES["f32"], lanes)
            return dst(m, ins, _to_float(x, dt_ty.dtype, ins), dt_ty, lanes)
        v = np.asarray(ins.ops[1].read(m, src_ty, lanes))
        if src_ty.bits == 64:
            hi = v.astype(np.float64)
            back = np.where(np.abs(hi) >= 2.0 ** 63, 0, hi).astype(v.dtype)
            lo = (v - back).astype(np.float64)
            lo = np.where(np.abs(hi) >= 2.0 ** 63, 0.0, lo)
            from isa.fpround import round_pair
            mode = ins.rnd if ins.rnd in ("rn", "rz", "rm", "rp") else "rn"
            r = round_pair(hi, lo, dt_ty.dtype, mode)
            return dst(m, ins, r, dt_ty, lanes)
        return dst(m, ins, _to_float(v.astype(np.float64), dt_ty.dtype, ins), dt_ty, lanes)
    if src_ty.kind == "f":
        x = _read_src_float(m, ins, src_ty, lanes)
        return dst(m, ins, _float_to_int(x, dt_ty, ins), dt_ty, lanes)
    v = ins.ops[1].read(m, src_ty, lanes)
    dst(m, ins, _int_to_int(v, dt_ty, src_ty, ins), dt_ty, lanes)


def _to_tf32(x, ins):
    """Round f32 to tf32 (10 explicit mantissa bits), kept in an f32 container."""
    f = x.astype(np.float32)
    bits = f.view(np.uint32).astype(np.uint64)
    if ins.rnd == "rz":
        out = bits & ~np.uint64(0x1FFF)
    else:   # .rna: round half away from zero
        out = (bits + np.uint64(0x1000)) & ~np.uint64(0x1FFF)
    out = np.where(np.isfinite(f), out, bits).astype(np.uint32)
    return out.view(np.float32)
