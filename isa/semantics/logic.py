"""Bitwise logic, shifts, bit manipulation, comparisons, selects and `mov`.

What is modelled: shifts clamp the amount at the register width (PTX: amounts greater
than the width are clamped to it), `shr.s*` fills with the sign. `bfe`/`bfi` follow
the PTX pseudo-code (pos and len are the low bytes of their operands; bits past the
msb come from the sign bit or are dropped); `prmt` implements the default selector
mode and `.f4e/.b4e/.rc8/.ecl/.ecr/.rc16`. Ordered float comparisons are false on NaN,
the unordered `equ/neu/ltu/leu/gtu/geu` are true on NaN. `mov` also packs and
unpacks vector operands (`mov.b32 %r, {lo, hi}`, `mov.b64 {lo, hi}, %rd`), first
element in the low bits.

Left out: the SIMD video forms (`vadd`, `.u16x2` min/max) and `shf` on 64 bits.
"""

from __future__ import annotations

import numpy as np

from isa.operands import DVec
from isa.semantics.common import PRED, as_array, dst, src, unsigned
from isa.semantics.registry import semantics
from isa.types import TYPES, UINT_OF_BITS


def _u(ins):
    ty = ins.types[0]
    return ty if ty.kind == "pred" else unsigned(ty)


def _bitop(m, ins, lanes, fn):
    ty = _u(ins)
    dst(m, ins, fn(src(m, ins, 1, ty, lanes), src(m, ins, 2, ty, lanes)), ty, lanes)


@semantics("and")
def and_(m, ins, lanes):
    _bitop(m, ins, lanes, np.bitwise_and)


@semantics("or")
def or_(m, ins, lanes):
    _bitop(m, ins, lanes, np.bitwise_or)


@semantics("xor")
def xor_(m, ins, lanes):
    _bitop(m, ins, lanes, np.bitwise_xor)


@semantics("not")
def not_(m, ins, lanes):
    ty = _u(ins)
    dst(m, ins, np.invert(src(m, ins, 1, ty, lanes)), ty, lanes)


@semantics("cnot")
def cnot(m, ins, lanes):
    ty = _u(ins)
    a = src(m, ins, 1, ty, lanes)
    dst(m, ins, (np.asarray(a) == 0).astype(ty.dtype), ty, lanes)


def _shift_amount(m, ins, lanes, width):
    b = np.asarray(src(m, ins, 2, TYPES["u32"], lanes)).astype(np.uint64)
    return np.minimum(b, np.uint64(width))


@semantics("shl")
def shl(m, ins, lanes):
    ty = unsigned(ins.types[0])
    a = np.asarray(src(m, ins, 1, ty, lanes)).astype(np.uint64)
    n = _shift_amount(m, ins, lanes, ty.bits)
    r = np.where(n >= ty.bits, np.uint64(0), a << np.minimum(n, np.uint64(63)))
    dst(m, ins, r.astype(ty.dtype, casting="unsafe"), ty, lanes)


@semantics("shr")
def shr(m, ins, lanes):
    ty = ins.types[0]
    n = _shift_amount(m, ins, lanes, ty.bits)
    if ty.is_signed:
        a = np.asarray(src(m, ins, 1, ty, lanes)).astype(np.int64)
        r = a >> np.minimum(n, np.uint64(63)).astype(np.int64)
        dst(m, ins, r.astype(ty.dtype, casting="unsafe"), ty, lanes)
    else:
        uty = unsigned(ty)
        a = np.asarray(src(m, ins, 1, uty, lanes)).astype(np.uint64)
        r = np.where(n >= ty.bits, np.uint64(0), a >> np.minimum(n, np.uint64(63)))
        dst(m, ins, r.astype(uty.dtype), uty, lanes)


@semantics("shf")
def shf(m, ins, lanes):
    u32 = TYPES["u32"]
    a = np.asarray(src(m, ins, 1, u32, lanes)).astype(np.uint64)
    b = np.asarray(src(m, ins, 2, u32, lanes)).astype(np.uint64)
    c = np.asarray(src(m, ins, 3, u32, lanes)).astype(np.uint64)
    n = np.minimum(c, 32) if "clamp" in ins.flags else c & np.uint64(31)
    pair = (b << np.uint64(32)) | a
    if "l" in ins.flags:
        r = (pair << n) >> np.uint64(32)
    else:
        r = pair >> n
    dst(m, ins, (r & np.uint64(0xFFFFFFFF)).astype(np.uint32), u32, lanes)


@semantics("popc")
def popc(m, ins, lanes):
    ty = unsigned(ins.types[0])
    a = np.asarray(src(m, ins, 1, ty, lanes))
    dst(m, ins, np.bitwise_count(a).astype(np.uint32), TYPES["u32"], lanes)


@semantics("clz")
def clz(m, ins, lanes):
    ty = unsigned(ins.types[0])
    a = np.asarray(src(m, ins, 1, ty, lanes)).astype(np.uint64)
    bits = np.zeros(a.shape, dtype=np.int64)
    x = a.copy()
    for k in (32, 16, 8, 4, 2, 1):
        big = x >= (np.uint64(1) << np.uint64(k))
        bits += np.where(big, k, 0)
        x = np.where(big, x >> np.uint64(k), x)
    width = np.where(a == 0, 0, bits + 1)
    dst(m, ins, (ty.bits - width).astype(np.uint32), TYPES["u32"], lanes)


@semantics("brev")
def brev(m, ins, lanes):
    ty = unsigned(ins.types[0])
    a = np.asarray(src(m, ins, 1, ty, lanes)).astype(np.uint64)
    r = np.zeros_like(a)
    for k in range(ty.bits):
        r |= ((a >> np.uint64(k)) & np.uint64(1)) << np.uint64(ty.bits - 1 - k)
    dst(m, ins, r.astype(ty.dtype), ty, lanes)


@semantics("bfind")
def bfind(m, ins, lanes):
    ty = ins.types[0]
    a = np.asarray(src(m, ins, 1, ty, lanes))
    v = a.astype(np.int64)
    if ty.is_signed:
        v = np.where(v < 0, ~v, v)
    u = v.astype(np.uint64)
    pos = np.full(u.shape, -1, dtype=np.int64)
    for k in range(ty.bits):
        pos = np.where((u >> np.uint64(k)) & np.uint64(1) != 0, k, pos)
    if "shiftamt" in ins.flags:
        pos = np.where(pos >= 0, ty.bits - 1 - pos, pos)
    dst(m, ins, (pos & 0xFFFFFFFF).astype(np.uint32), TYPES["u32"], lanes)


_ALL_ONES = np.uint64(0xFFFFFFFFFFFFFFFF)


def _low_mask(n) -> np.ndarray:
    """Masks of the low n bits (0 <= n <= 64) as uint64."""
    n = np.asarray(n, dtype=np.int64)
    part = (np.uint64(1) << np.minimum(n, 63).astype(np.uint64)) - np.uint64(1)
    return np.where(n >= 64, _ALL_ONES, part)


@semantics("bfe")
def bfe(m, ins, lanes):
    """PTX bfe: d[i] = a[pos+i] for i < len and pos+i <= msb, else the sign bit
    a[min(pos+len-1, msb)] (signed types) or 0; pos = b & 0xff, len = c & 0xff."""
    ty = ins.types[0]
    u32 = TYPES["u32"]
    pos = (np.asarray(src(m, ins, 2, u32, lanes)) & np.uint32(0xFF)).astype(np.int64)
    ln = np.minimum((np.asarray(src(m, ins, 3, u32, lanes)) & np.uint32(0xFF)).astype(np.int64),
                    64)
    if ty.is_signed:   # arithmetic shifts of the sign-extended value replicate a[msb]
        x = np.asarray(src(m, ins, 1, ty, lanes)).astype(np.int64)
        shifted = x >> np.minimum(pos, 63)
        up = np.minimum(64 - ln, 63)
        r = np.where(ln == 0, 0, (shifted << up) >> up).view(np.uint64)
    else:
        x = np.asarray(src(m, ins, 1, ty, lanes)).astype(np.uint64)
        shifted = np.where(pos >= 64, np.uint64(0), x >> np.minimum(pos, 63).astype(np.uint64))
        r = shifted & _low_mask(ln)
    dst(m, ins, r.astype(UINT_OF_BITS[ty.bits]).view(ty.dtype), ty, lanes)


@semantics("bfi")
def bfi(m, ins, lanes):
    """PTX bfi: copy a[0..len) into b at pos, bits past the msb dropped."""
    ty = unsigned(ins.types[0])
    u32 = TYPES["u32"]
    a = np.asarray(src(m, ins, 1, ty, lanes)).astype(np.uint64)
    b = np.asarray(src(m, ins, 2, ty, lanes)).astype(np.uint64)
    pos = (np.asarray(src(m, ins, 3, u32, lanes)) & np.uint32(0xFF)).astype(np.int64)
    ln = (np.asarray(src(m, ins, 4, u32, lanes)) & np.uint32(0xFF)).astype(np.int64)
    width = np.clip(np.minimum(pos + ln, ty.bits) - pos, 0, 64)
    shift = np.minimum(pos, 63).astype(np.uint64)
    fmask = np.where(pos >= ty.bits, np.uint64(0), _low_mask(width) << shift)
    r = (b & ~fmask) | ((a << shift) & fmask)
    dst(m, ins, r.astype(ty.dtype), ty, lanes)


# byte of {b, a} feeding d.b0..d.b3 for each selector value c[1:0], per prmt mode
_PRMT_MODES = {
    "f4e": ((0, 1, 2, 3), (1, 2, 3, 4), (2, 3, 4, 5), (3, 4, 5, 6)),
    "b4e": ((0, 7, 6, 5), (1, 0, 7, 6), (2, 1, 0, 7), (3, 2, 1, 0)),
    "rc8": ((0, 0, 0, 0), (1, 1, 1, 1), (2, 2, 2, 2), (3, 3, 3, 3)),
    "ecl": ((0, 1, 2, 3), (1, 1, 2, 3), (2, 2, 2, 3), (3, 3, 3, 3)),
    "ecr": ((0, 0, 0, 0), (0, 1, 1, 1), (0, 1, 2, 2), (0, 1, 2, 3)),
    "rc16": ((0, 1, 0, 1), (2, 3, 2, 3), (0, 1, 0, 1), (2, 3, 2, 3)),
}


@semantics("prmt")
def prmt(m, ins, lanes):
    """Byte permute of the pair {b, a}: by selector nibbles (bit 3 replicates the byte's
    sign) in the default mode, or by the fixed patterns of .f4e/.b4e/.rc8/.ecl/.ecr/.rc16."""
    u32 = TYPES["u32"]
    a = np.asarray(src(m, ins, 1, u32, lanes)).astype(np.uint64)
    b = np.asarray(src(m, ins, 2, u32, lanes)).astype(np.uint64)
    c = np.asarray(src(m, ins, 3, u32, lanes)).astype(np.uint64)
    a, b, c = np.broadcast_arrays(a, b, c)
    pool = (b << np.uint64(32)) | a
    mode = next((f for f in ins.flags if f in _PRMT_MODES), None)
    table = np.array(_PRMT_MODES[mode], dtype=np.uint64) if mode else None
    out = np.zeros(a.shape, dtype=np.uint64)
    for k in range(4):
        if table is None:
            sel = (c >> np.uint64(4 * k)) & np.uint64(0xF)
            idx = sel & np.uint64(7)
        else:
            idx = table[(c & np.uint64(3)).astype(np.int64), k]
        val = (pool >> (np.uint64(8) * idx)) & np.uint64(0xFF)
        if table is None:
            sign = (val >> np.uint64(7)) & np.uint64(1)
            val = np.where(sel & np.uint64(8), sign * np.uint64(0xFF), val)
        out |= val << np.uint64(8 * k)
    dst(m, ins, out.astype(np.uint32), u32, lanes)


@semantics("lop3")
def lop3(m, ins, lanes):
    u32 = TYPES["u32"]
    a, b, c = (np.asarray(src(m, ins, k, u32, lanes)) for k in (1, 2, 3))
    lut = int(np.asarray(src(m, ins, 4, u32, lanes)).reshape(-1)[0]) & 0xFF
    r = np.zeros(np.broadcast(a, b, c).shape, dtype=np.uint32)
    for i in range(8):
        if lut >> i & 1:
            ta = a if i & 4 else ~a
            tb = b if i & 2 else ~b
            tc = c if i & 1 else ~c
            r |= ta & tb & tc
    dst(m, ins, r, u32, lanes)


@semantics("dp4a")
def dp4a(m, ins, lanes):
    ta, tb = ins.types[0], ins.types[1]
    a = np.asarray(src(m, ins, 1, TYPES["u32"], lanes)).astype(np.int64)
    b = np.asarray(src(m, ins, 2, TYPES["u32"], lanes)).astype(np.int64)
    c = np.asarray(src(m, ins, 3, TYPES["s32"], lanes)).astype(np.int64)
    acc = c
    for k in range(4):
        ea = (a >> (8 * k)) & 0xFF
        eb = (b >> (8 * k)) & 0xFF
        if ta.is_signed:
            ea = np.where(ea >= 128, ea - 256, ea)
        if tb.is_signed:
            eb = np.where(eb >= 128, eb - 256, eb)
        acc = acc + ea * eb
    dst(m, ins, (acc & 0xFFFFFFFF).astype(np.uint32), TYPES["u32"], lanes)


@semantics("dp2a")
def dp2a(m, ins, lanes):
    """d = c + a.h0 * b.bK + a.h1 * b.bK+1 with K = 0 (.lo) or 2 (.hi): 16-bit by 8-bit."""
    ta, tb = ins.types[0], ins.types[1]
    a = np.asarray(src(m, ins, 1, TYPES["u32"], lanes)).astype(np.int64)
    b = np.asarray(src(m, ins, 2, TYPES["u32"], lanes)).astype(np.int64)
    acc = np.asarray(src(m, ins, 3, TYPES["s32"], lanes)).astype(np.int64)
    first = 2 if "hi" in ins.flags else 0
    for k in range(2):
        ea = (a >> (16 * k)) & 0xFFFF
        eb = (b >> (8 * (first + k))) & 0xFF
        if ta.is_signed:
            ea = np.where(ea >= 1 << 15, ea - (1 << 16), ea)
        if tb.is_signed:
            eb = np.where(eb >= 128, eb - 256, eb)
        acc = acc + ea * eb
    dst(m, ins, (acc & 0xFFFFFFFF).astype(np.uint32), TYPES["u32"], lanes)


def compare(a, b, cmp: str, is_float: bool):
    if is_float:
        nan = np.isnan(a) | np.isnan(b)
        base = cmp.rstrip("u") if cmp not in ("num", "nan") else cmp
        if cmp == "num":
            return ~nan
        if cmp == "nan":
            return nan
        r = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
             "gt": np.greater, "ge": np.greater_equal}[base](a, b)
        if cmp.endswith("u"):
            return r | nan
        return r & ~nan if base == "ne" else r
    fn = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
          "gt": np.greater, "ge": np.greater_equal, "lo": np.less, "ls": np.less_equal,
          "hi": np.greater, "hs": np.greater_equal}[cmp]
    return fn(a, b)


def _compare_ins(m, ins, lanes):
    ty = ins.types[-1]
    if ty.kind in ("b",):
        ty = unsigned(ty)
    if ins.cmp in ("lo", "ls", "hi", "hs"):
        ty = unsigned(ty)
    n = m.nlanes(lanes)
    a, b = src(m, ins, 1, ty, lanes), src(m, ins, 2, ty, lanes)
    if ty.kind == "f" or ty.name in ("f16", "bf16"):
        a, b = np.asarray(a).astype(np.float64), np.asarray(b).astype(np.float64)
        if "ftz" in ins.flags:
            tiny = np.finfo(np.float32).smallest_normal
            a = np.where(np.abs(a) < tiny, 0.0, a)
            b = np.where(np.abs(b) < tiny, 0.0, b)
    return as_array(compare(a, b, ins.cmp, ty.kind == "f"), n)


@semantics("setp")
def setp(m, ins, lanes):
    r = _compare_ins(m, ins, lanes)
    first = ins.ops[0]
    q = None
    if ins.bop is not None:
        c = as_array(src(m, ins, len(ins.ops) - 1, PRED, lanes), r.size)
        op = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}[ins.bop]
        r, q = op(r, c), op(~r, c)
    if hasattr(first, "pred"):   # setp p|q
        first.value.write(m, r, PRED, lanes)
        first.pred.write(m, q if q is not None else ~r, PRED, lanes)
    else:
        first.write(m, r, PRED, lanes)


@semantics("set")
def set_(m, ins, lanes):
    r = _compare_ins(m, ins, lanes)
    if ins.bop is not None:
        c = as_array(src(m, ins, len(ins.ops) - 1, PRED, lanes), r.size)
        r = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}[ins.bop](r, c)
    dty = ins.types[0]
    if dty.kind == "f":
        dst(m, ins, r.astype(dty.dtype), dty, lanes)
    else:
        dst(m, ins, np.where(r, np.uint64(0xFFFFFFFFFFFFFFFF), np.uint64(0)).astype(
            unsigned(dty).dtype, casting="unsafe"), unsigned(dty), lanes)


@semantics("selp")
def selp(m, ins, lanes):
    ty = ins.types[0]
    p = src(m, ins, 3, PRED, lanes)
    dst(m, ins, np.where(p, src(m, ins, 1, ty, lanes), src(m, ins, 2, ty, lanes)).astype(
        ty.dtype), ty, lanes)


@semantics("slct")
def slct(m, ins, lanes):
    ty, cty = ins.types[0], ins.types[1]
    c = np.asarray(src(m, ins, 3, cty, lanes))
    dst(m, ins, np.where(c >= 0, src(m, ins, 1, ty, lanes), src(m, ins, 2, ty, lanes)).astype(
        ty.dtype), ty, lanes)


@semantics("mov")
def mov(m, ins, lanes):
    ty = ins.types[0]
    d, s = ins.ops
    if isinstance(s, DVec):          # pack
        part = TYPES[f"b{ty.bits // len(s.items)}"]
        acc = np.zeros(m.nlanes(lanes), dtype=np.uint64)
        for k, item in enumerate(s.items):
            v = np.asarray(item.read(m, part, lanes)).astype(np.uint64)
            acc |= v << np.uint64(k * part.bits)
        return d.write(m, acc.astype(UINT_OF_BITS[ty.bits]), unsigned(ty), lanes)
    if isinstance(d, DVec):          # unpack
        part = TYPES[f"b{ty.bits // len(d.items)}"]
        v = np.asarray(s.read(m, unsigned(ty), lanes)).astype(np.uint64)
        mask = np.uint64((1 << part.bits) - 1)
        for k, item in enumerate(d.items):
            item.write(m, ((v >> np.uint64(k * part.bits)) & mask).astype(part.dtype), part, lanes)
        return None
    if ty.kind == "pred":
        return d.write(m, as_array(s.read(m, ty, lanes), m.nlanes(lanes)), ty, lanes)
    d.write(m, s.read(m, ty, lanes), ty, lanes)
