"""`mma.sp` / `mma.sp::ordered_metadata`: warp-level MMA with a 2:4 structured-sparse A.

    mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32
        {d0..d3}, {a0..a3}, {b0..b3}, {c0..c3}, e, f;

A (M x K) is 2:4 sparse: of every 4 consecutive K elements of a row at most 2 are
non-zero, and the fragment holds only those 2 (A is stored as M x K/2, in the layout of the
dense `mma` of shape m16n8k{K/2}). `e` (a .b32 register) holds the metadata: per group of 4
K elements a 4-bit nibble whose bits 0-1 give the position (0..3) of the group's first kept
element and bits 2-3 that of the second (first < second: 0x4, 0x8, 0xC, 0x9, 0xD, 0xE; any
other nibble is a fault). `f` (an immediate, the sparsity selector) names the lanes of
each quad (4 consecutive lanes, groupID g = lane >> 2, t = lane % 4) whose `e` is read.
B, C and D are as in the dense `mma` of shape m16n8k{K}.

Metadata layout, measured on an H100 (sm_90a, CUDA 13: `tests/fixtures/mma_sp_h100.npz`,
`workloads/codesign/probe/mma_sp_probe.py` generates the CUDA program and reads its dump):

* 16-bit A (f16, bf16), m16n8k16 (f 0..3) and m16n8k32 (f 0..1): lane (g, t) with
  t = f (k16) or 2 f + q // 4 (k32) holds group q (K 4q..4q+3) of row g in bits 4 (q % 4)
  and of row g + 8 in bits 16 + 4 (q % 4).
* 8-bit A (e4m3, e5m2), m16n8k64 (f 0): lane (g, t) holds groups 8 (t >> 1) .. +7 of row
  g + 8 (t & 1), group q in bits 4 (q % 8).

Numerics as `mma` (`tensor_mma`): exact inputs, float64 products and sum, one rounding to
the D type. Forms: m16n8k16/m16n8k32 with f16 (D/C f16 or f32) or bf16 (f32), m16n8k64
with e4m3/e5m2 (D/C f16 or f32). Timing (`models.units`): the dense-equivalent FMAs
(M N K) at `units.tensor.sparse_rate_multiplier` times the dense rate. Left out: tf32
(1:2) and integer sparse forms, the 8-bit m16n8k32 forms, selectors ptxas accepts
beyond those listed (f16 m16n8k32 with f 2-3), whose metadata layout was not measured.
"""

from __future__ import annotations

import functools

import numpy as np

from isa.semantics import tensor_mma as dense
from isa.semantics.registry import semantics
from isa.semantics.tensor_frame import WARP, converged_warps, items_of, read_fragment
from isa.types import TYPES

_F16_ACC = (("f16", "f16"), ("f32", "f32"))
_FP8 = ("e4m3", "e5m2")
FORMS: frozenset = frozenset(
    {(s, d, "f16", "f16", c) for s in ("m16n8k16", "m16n8k32") for d, c in _F16_ACC}
    | {(s, "f32", "bf16", "bf16", "f32") for s in ("m16n8k16", "m16n8k32")}
    | {("m16n8k64", d, a, b, c) for a in _FP8 for b in _FP8 for d, c in _F16_ACC})
SELECTORS = {"m16n8k16": 4, "m16n8k32": 2, "m16n8k64": 1}
"""Selectors accepted per shape: 0 .. n-1."""
VALID_NIBBLES = (0x4, 0x8, 0xC, 0x9, 0xD, 0xE)
NAMES = ("mma.sp", "mma.sp::ordered_metadata")
_U32 = TYPES["u32"]
_BITS = {"f16": 16, "bf16": 16, "e4m3": 8, "e5m2": 8, "f32": 32}
_SYNTAX = "mma.sp{::ordered_metadata}.sync.aligned.<shape>.row.col.<d.a.b.c> d, a, b, c, e, f"


def form_key(ins) -> tuple:
    return (ins.shape,) + tuple(t.name for t in ins.types)


def form_problem(ins) -> tuple[str, str] | None:
    """Why this `mma.sp` cannot run (message, accepted forms); None when it is supported."""
    key = form_key(ins)
    if not {"sync", "aligned"} <= ins.flags or ".row.col." not in ins.text + ".":
        return f"unsupported mma.sp form '{ins.text}'", _SYNTAX
    if key not in FORMS:
        accepted = sorted(".".join(f) for f in FORMS)
        return (f"unsupported mma.sp form '{ins.text}'",
                "<shape>.row.col.<d.a.b.c> one of: " + ", ".join(accepted))
    la, lb, lc = layouts(ins.shape, _BITS[key[2]], _BITS[key[1]])
    for k, (name, lay) in enumerate((("D", lc), ("A", la), ("B", lb), ("C", lc))):
        got = len(items_of(ins.ops[k]))
        if got != lay.regs:
            return (f"mma.sp {name} fragment has {got} registers",
                    f"{lay.regs} registers for {name} of this form")
    selector = getattr(ins.ops[5], "value", None)
    if not isinstance(selector, int) or not 0 <= selector < SELECTORS[ins.shape]:
        return (f"mma.sp sparsity selector {selector!r} for {ins.shape}",
                f"an immediate 0..{SELECTORS[ins.shape] - 1}")
    return None


@functools.cache
def layouts(shape: str, in_bits: int, acc_bits: int):
    """(compressed A [M, K/2], B [K, N], C/D) layouts of an `mma.sp` of `shape`."""
    k = int(shape[shape.index("k") + 1:])
    a = dense.layouts(f"m16n8k{k // 2}", in_bits, acc_bits)[0]
    _, b, c = dense.layouts(shape, in_bits, acc_bits)
    return a, b, c


@functools.cache
def metadata_positions(shape: str, in_bits: int, selector: int):
    """(lane [M, G], bit [M, G]): where the nibble of row m, K group q lives (module doc)."""
    k = int(shape[shape.index("k") + 1:])
    rows, groups = 16, k // 4
    lane = np.empty((rows, groups), np.int64)
    bit = np.empty((rows, groups), np.int64)
    for m in range(rows):
        g, half = m % 8, m // 8
        for q in range(groups):
            if in_bits == 16:
                t = selector if k == 16 else 2 * selector + q // 4
                lane[m, q], bit[m, q] = 4 * g + t, 16 * half + 4 * (q % 4)
            else:
                lane[m, q], bit[m, q] = 4 * g + 2 * (q // 8) + half, 4 * (q % 8)
    return lane, bit


def expand(compressed: np.ndarray, nibbles: np.ndarray) -> np.ndarray:
    """Dense A `[w, M, K]` from compressed A `[w, M, K/2]` and nibbles `[w, M, K/4]`."""
    w, rows, half = compressed.shape
    out = np.zeros((w, rows, 2 * half), compressed.dtype)
    base = 4 * np.arange(half // 2)
    for slot, idx in ((0, nibbles & 3), (1, nibbles >> 2)):
        np.put_along_axis(out, base + idx, compressed[:, :, slot::2], axis=2)
    return out


def metadata_nibbles(m, ins, lanes, w: int, in_bits: int) -> np.ndarray:
    """The metadata nibbles `[w, M, K/4]` the selector's lanes hold; fault on bad ones."""
    words = read_fragment(m, ins.ops[4], _U32, lanes, w)[:, :, 0].astype(np.int64)
    lane, bit = metadata_positions(ins.shape, in_bits, int(ins.ops[5].value))
    nibbles = (words[:, lane] >> bit) & 0xF
    bad = ~np.isin(nibbles, VALID_NIBBLES)
    if bad.any():
        wi, row, q = (int(v[0]) for v in np.nonzero(bad))
        raise m.fault(ins, f"metadata nibble {int(nibbles[wi, row, q]):#x} of row {row}, "
                      f"K group {q} (lane {int(lane[row, q])}, bits {int(bit[row, q])}..) "
                      "names no two increasing positions",
                      expected="nibbles 0x4, 0x8, 0xC, 0x9, 0xD or 0xE")
    return nibbles


def _mma_sp(m, ins, lanes):
    problem = form_problem(ins)
    if problem:
        raise m.fault(ins, problem[0], expected=problem[1])
    key = form_key(ins)
    w = converged_warps(m, ins, lanes).shape[0]
    dname, aname, bname, cname = key[1:]
    la, lb, lc = layouts(ins.shape, _BITS[aname], _BITS[dname])
    a_c = dense._gather(dense._decode(read_fragment(m, ins.ops[1], _U32, lanes, w), aname), la)
    a = expand(a_c, metadata_nibbles(m, ins, lanes, w, _BITS[aname]))
    b = dense._gather(dense._decode(read_fragment(m, ins.ops[2], _U32, lanes, w), bname), lb)
    c = dense._gather(dense._read_acc(m, ins.ops[3], cname, lanes, w), lc)
    d = np.matmul(a, b) + c
    out = np.take(d.reshape(w, -1), lc.forward, axis=1).reshape(w, WARP, -1)
    dense._write_acc(m, ins.ops[0], out, dname, lanes)


for _name in NAMES:
    semantics(_name)(_mma_sp)
