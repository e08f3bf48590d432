"""`mma.sync.aligned`: warp-level matrix multiply-accumulate D = A @ B + C.

Fragment layouts are the PTX ISA's ("Matrix Fragments for mma.m16n8k*", mma.m8n8k4
for .f64), with groupID g = laneid >> 2 and threadID_in_group t = laneid % 4. With
p = elements per 32-bit register (2 for f16/bf16, 4 for 8-bit types, 1 for tf32/f64),
register r of a lane holds, element j in bits [j*32/p, (j+1)*32/p):
  A (M x K): row g + 8 (r & 1), column 4p (r >> 1) + p t + j
  B (K x N): row 4p r + p t + j,     column g
  C/D (M x 8), element i = p r + j: row g + 8 (i >> 1), column 2t + (i & 1)
which reproduces every documented figure (e.g. m16n8k16 f16 A: a0,a1,a4,a5 on row g).
Each instruction gathers the fragments of all executing warps into `[w, M, K]` and
`[w, K, N]` arrays with one precomputed permutation, multiplies with `np.matmul`, and
scatters D back the same way.

Numerics (PTX leaves the accumulation order and intermediate rounding unspecified for
f16/bf16/tf32 and asks fp8 for "at least single precision"): inputs are decoded
exactly (bf16 and fp8 with ml_dtypes; tf32 = the f32 bits with the low 13 mantissa
bits ignored), products and their sum with C are formed in float64 and rounded once,
to nearest even, to the D type. Products of these inputs are exact in float64, and the
sum is exact while the terms' exponents span fewer than about 24 binades (always, for
data of one scale), so D is then the correctly rounded exact result, independent of
summation order; otherwise the float64 sum is rounded in np.matmul's order first. `.f64` (m8n8k4)
rounds each product and each addition, in the fixed order
d = (((c + a0 b0) + a1 b1) + a2 b2) + a3 b3. Integer forms are exact in int64, then
wrap to s32, or clamp with `.satfinite`.

Left out: sparse `mma.sp`, `.kind::*` and block-scaled forms, m8n8k4 f16 (Volta
quad-pair layout), sub-byte (s4/u4/b1) and m16n8k{4,8,16} f64 forms.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from isa.semantics.registry import semantics
from isa.semantics.tensor_frame import (
    WARP,
    converged_warps,
    items_of,
    pack,
    read_fragment,
    unpack,
    write_fragment,
)
from isa.types import TYPES


def _float_forms(shape, ab, dc_pairs):
    return {(shape, d, a, b, c) for a in ab for b in ab for d, c in dc_pairs}


_FP8 = ("e4m3", "e5m2")
_INT8 = ("s8", "u8")
_F16_ACC = [("f16", "f16"), ("f32", "f32")]

# (shape, dtype, atype, btype, ctype) of every accepted form: the sm_90 set `ptxas` (CUDA 13)
# accepts for these shapes, less f64 m16n8k{4,8,16}
FORMS: frozenset = frozenset(
    _float_forms("m16n8k16", ("f16",), _F16_ACC)
    | _float_forms("m16n8k8", ("f16",), _F16_ACC)
    | _float_forms("m16n8k16", ("bf16",), [("f32", "f32")])
    | _float_forms("m16n8k8", ("bf16",), [("f32", "f32")])
    | _float_forms("m16n8k8", ("tf32",), [("f32", "f32")])
    | _float_forms("m16n8k4", ("tf32",), [("f32", "f32")])
    | _float_forms("m16n8k32", _FP8, _F16_ACC)
    | _float_forms("m16n8k16", _FP8, _F16_ACC)
    | _float_forms("m8n8k4", ("f64",), [("f64", "f64")])
    | _float_forms("m16n8k32", _INT8, [("s32", "s32")])
    | _float_forms("m16n8k16", _INT8, [("s32", "s32")])
    | _float_forms("m8n8k16", _INT8, [("s32", "s32")])
)

_BITS = {"f16": 16, "bf16": 16, "tf32": 32, "f32": 32, "f64": 64, "e4m3": 8, "e5m2": 8,
         "s8": 8, "u8": 8, "s32": 32}
_NARROW = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "e4m3": ml_dtypes.float8_e4m3fn,
           "e5m2": ml_dtypes.float8_e5m2, "s8": np.int8, "u8": np.uint8}
_U32, _F64 = TYPES["u32"], TYPES["f64"]


@dataclass(frozen=True, slots=True)
class Layout:
    """Where each fragment element of each lane sits in a row-major matrix."""
    rows: int
    cols: int
    regs: int               # registers per lane
    forward: np.ndarray     # flat (lane, element) position -> flat matrix index
    inverse: np.ndarray     # flat matrix index -> flat (lane, element) position


def _layout(rows: int, cols: int, per_reg: int, where) -> Layout:
    lane = np.arange(WARP)
    g, t = lane >> 2, lane & 3
    per_lane = rows * cols // WARP
    flat = np.empty((WARP, per_lane), dtype=np.int64)
    for e in range(per_lane):
        r, c = where(e, g, t)
        flat[:, e] = r * cols + c
    forward = flat.reshape(-1)
    inverse = np.empty_like(forward)
    inverse[forward] = np.arange(forward.size)
    forward.setflags(write=False)
    inverse.setflags(write=False)
    return Layout(rows, cols, per_lane // per_reg, forward, inverse)


@functools.cache
def layouts(shape: str, in_bits: int, acc_bits: int) -> tuple[Layout, Layout, Layout]:
    """(A, B, C/D) layouts of an `m{M}n8k{K}` form with `in_bits`-wide A/B elements."""
    m_rows, k = int(shape[1:shape.index("n")]), int(shape[shape.index("k") + 1:])
    p = max(32 // in_bits, 1)
    a = _layout(m_rows, k, p, lambda e, g, t: (g + 8 * ((e // p) & 1),
                                               4 * p * (e // p >> 1) + p * t + e % p))
    b = _layout(k, 8, p, lambda e, g, t: (4 * p * (e // p) + p * t + e % p, g))
    c = _layout(m_rows, 8, max(32 // acc_bits, 1),
                lambda e, g, t: (g + 8 * (e >> 1), 2 * t + (e & 1)))
    return a, b, c


def form_key(ins) -> tuple:
    return (ins.shape,) + tuple(t.name for t in ins.types)


def form_problem(ins) -> tuple[str, str] | None:
    """Why this `mma` cannot run, with the accepted forms; None when it is supported."""
    key = form_key(ins)
    if not {"sync", "aligned"} <= ins.flags:
        return "mma needs .sync.aligned", "mma.sync.aligned.<shape>.row.col.<d.a.b.c>"
    if key not in FORMS or ".row.col." not in ins.text + ".":
        shapes = sorted({f[0] for f in FORMS})
        if ins.shape not in shapes:
            return (f"mma shape '.{ins.shape}' is not supported",
                    "mma.sync.aligned.<shape>.row.col.<d>.<a>.<b>.<c> with shape one of: "
                    + ", ".join(shapes))
        accepted = sorted(".".join(f[1:]) for f in FORMS if f[0] == ins.shape)
        return (f"unsupported mma form '{ins.text}'",
                f"mma.sync.aligned.{ins.shape}.row.col.<d.a.b.c> with <d.a.b.c> one of: "
                + ", ".join(accepted))
    if "satfinite" in ins.flags and key[1] != "s32":
        return ".satfinite applies to integer mma only", "no .satfinite on float forms"
    la, lb, lc = layouts(ins.shape, _BITS[key[2]], _BITS[key[1]])
    for k, (name, lay) in enumerate((("D", lc), ("A", la), ("B", lb), ("C", lc))):
        got = len(items_of(ins.ops[k]))
        if got != lay.regs:
            return (f"mma {name} fragment has {got} registers",
                    f"{lay.regs} registers for {name} of this form")
    return None


def _decode(raw: np.ndarray, name: str) -> np.ndarray:
    """A/B register words `[w, 32, r]` to element values `[w, 32, e]` (float64 or int64)."""
    if name == "f64":
        return raw.view(np.float64)
    if name == "tf32":
        return (raw & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    bits = _BITS[name]
    vals = unpack(raw, bits).view(_NARROW[name])
    return vals.astype(np.int64 if name in _INT8 else np.float64)


def _gather(vals: np.ndarray, lay: Layout) -> np.ndarray:
    w = vals.shape[0]
    return np.take(vals.reshape(w, -1), lay.inverse, axis=1).reshape(w, lay.rows, lay.cols)


def _read_acc(m, op, name, lanes, w):
    if name == "f16":
        words = read_fragment(m, op, _U32, lanes, w)
        return unpack(words, 16).view(np.float16).astype(np.float64)
    ty = TYPES[name]
    vals = read_fragment(m, op, ty, lanes, w)
    return vals.astype(np.int64 if name == "s32" else np.float64)


def _write_acc(m, op, d: np.ndarray, name, lanes) -> None:
    if name == "f16":
        words = pack(d.astype(np.float16).view(np.uint16), 16)
        write_fragment(m, op, words, _U32, lanes)
    else:
        write_fragment(m, op, d.astype(TYPES[name].dtype), TYPES[name], lanes)


def _multiply(a, b, c, key, satfinite: bool):
    if key[1] == "s32":
        d = np.matmul(a, b) + c
        if satfinite:
            return np.clip(d, -(1 << 31), (1 << 31) - 1)
        return ((d + (1 << 31)) % (1 << 32)) - (1 << 31)
    if key[1] == "f64":
        d = c.copy()
        for kk in range(a.shape[2]):
            d = d + a[:, :, kk, None] * b[:, None, kk, :]
        return d
    return np.matmul(a, b) + c


@semantics("mma")
def mma(m, ins, lanes):
    problem = form_problem(ins)
    if problem:
        raise m.fault(ins, problem[0], expected=problem[1])
    key = form_key(ins)
    w = converged_warps(m, ins, lanes).shape[0]
    dname, aname, bname, cname = key[1:]
    la, lb, lc = layouts(ins.shape, _BITS[aname], _BITS[dname])
    word = _F64 if aname == "f64" else _U32
    a = _gather(_decode(read_fragment(m, ins.ops[1], word, lanes, w), aname), la)
    b = _gather(_decode(read_fragment(m, ins.ops[2], word, lanes, w), bname), lb)
    c = _gather(_read_acc(m, ins.ops[3], cname, lanes, w), lc)
    d = _multiply(a, b, c, key, "satfinite" in ins.flags)
    _write_acc(m, ins.ops[0], np.take(d.reshape(w, -1), lc.forward, axis=1).reshape(w, WARP, -1),
               dname, lanes)
