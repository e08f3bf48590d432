"""Variable-precision compute unit (VPCU): `vpcu.setprec` and `vmma` (our ISA extension).

The VPCU is a tensor unit whose input precision is chosen at run time. A program keeps the
precision code in an ordinary `.b32` register (the *precision register*), sets it with
`vpcu.setprec`, and names it as the last operand of every `vmma`:

    vpcu.setprec.b32 %p, 4;                                   // %p = e4m3 (code 4)
    vmma.sync.aligned.m16n8k32.row.col.f32.dyn.dyn.f32 {d0..d3}, {a0..a15}, {b0..b7},
                                                       {c0..c3}, %p;

`vpcu.setprec.b32 d, code` checks that `code` (immediate or register) is one of
`PRECISION_CODES` and writes it to `d`. `.dyn` stands where `mma` names the A/B type: the
A/B register bits are read as the precision in the precision register when the `vmma`
executes (every lane of a warp must hold the same code).

Codes: 0 fp32, 1 tf32, 2 fp16, 3 bf16, 4 e4m3, 5 e5m2 (`PRECISIONS`).

Fragments: D and C are f32 as in `mma ... .f32.<t>.<t>.f32` (4 registers). A and B hold
M*K/32 and K*8/32 elements per lane, packed as in `mma` (`tensor_mma.layouts`, p = 32/bits
elements per register, low bits first); the fragment names as many registers as fp32 needs
(8/4 for m16n8k16, 16/8 for m16n8k32) and a narrower precision reads only the leading
ones (fp16/bf16 half of them, fp8 a quarter). Shapes: m16n8k16 and m16n8k32 (the ones
every precision packs into whole registers).

Numerics: inputs are decoded exactly (fp16, bf16, e4m3, e5m2 through ml_dtypes; tf32 = f32
bits with the low 13 mantissa bits ignored, as `mma` does), products and their sum with C
are formed in float64 and rounded once to f32 (round to nearest even), as `tensor_mma`
documents for `mma`. A program gets values *into* a precision with `cvt` (ml_dtypes
rounding, `isa.fpround`).

Timing lives in `models.vpcu`; `event_detail` gives it each warp's precision code per
executed `vmma`. Left out: per-lane mixed precisions (a fault), f16 accumulators, layouts
other than `.row.col`, block-scaled formats.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from isa.operands import DImm, DReg
from isa.semantics.common import as_array
from isa.semantics.registry import semantics
from isa.semantics.tensor_frame import (
    WARP,
    converged_warps,
    items_of,
    read_fragment,
    unpack,
    write_fragment,
)
from isa.semantics.tensor_mma import layouts
from isa.types import TYPES

PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "e4m3", "e5m2")
PRECISION_CODES = {name: code for code, name in enumerate(PRECISIONS)}
PRECISION_BITS = {"fp32": 32, "tf32": 32, "fp16": 16, "bf16": 16, "e4m3": 8, "e5m2": 8}
NUMPY_DTYPES = {"fp32": np.dtype(np.float32), "tf32": np.dtype(np.float32),
                "fp16": np.dtype(np.float16), "bf16": np.dtype(ml_dtypes.bfloat16),
                "e4m3": np.dtype(ml_dtypes.float8_e4m3fn), "e5m2": np.dtype(ml_dtypes.float8_e5m2)}
SHAPES = ("m16n8k16", "m16n8k32")
FORM = "vmma.sync.aligned.<m16n8k16|m16n8k32>.row.col.f32.dyn.dyn.f32"
_U32, _F32 = TYPES["u32"], TYPES["f32"]
_ACCEPTED_CODES = ", ".join(f"{c} ({n})" for n, c in PRECISION_CODES.items())


def _fragment_regs(shape: str) -> tuple[int, int]:
    """(A, B) registers a `vmma` of `shape` names: what fp32 operands need."""
    la, lb, _ = layouts(shape, 32, 32)
    return la.regs, lb.regs


def form_problem(ins) -> tuple[str, str] | None:
    """Why this `vmma` cannot run (message, accepted form); None when it is supported."""
    if not ins.text.endswith(".row.col.f32.dyn.dyn.f32") or \
            not {"sync", "aligned"} <= ins.flags:
        return f"unsupported vmma form '{ins.text}'", FORM
    if ins.shape not in SHAPES:
        return f"vmma shape '.{ins.shape}' is not supported", FORM
    a_regs, b_regs = _fragment_regs(ins.shape)
    for k, name, want in ((0, "D", 4), (1, "A", a_regs), (2, "B", b_regs), (3, "C", 4)):
        got = len(items_of(ins.ops[k]))
        if got != want:
            return (f"vmma {name} fragment has {got} registers",
                    f"{want} registers for {name} of {ins.shape} (the fp32 size)")
    if not isinstance(ins.ops[4], DReg | DImm):
        return "vmma precision operand must be a register", "a .b32 precision register"
    return None


def _decode(raw: np.ndarray, precision: str) -> np.ndarray:
    """Register words `[w, 32, r]` to element values `[w, 32, e]` (float64)."""
    if precision == "fp32":
        return raw.view(np.float32).astype(np.float64)
    if precision == "tf32":
        return (raw & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    fields = unpack(raw, PRECISION_BITS[precision])
    return fields.view(NUMPY_DTYPES[precision]).astype(np.float64)


def _matrix(raw: np.ndarray, shape: str, precision: str, which: int) -> np.ndarray:
    """A (`which` 0) or B (1) as `[w, rows, cols]` float64 from full-size fragment words."""
    lay = layouts(shape, PRECISION_BITS[precision], 32)[which]
    vals = _decode(np.ascontiguousarray(raw[:, :, :lay.regs]), precision)
    w = vals.shape[0]
    return np.take(vals.reshape(w, -1), lay.inverse, axis=1).reshape(w, lay.rows, lay.cols)


def warp_codes(m, ins, lanes, warps: int) -> np.ndarray:
    """The precision code of each executing warp (`[warps]`); fault on mixed or bad codes."""
    codes = as_array(ins.ops[4].read(m, _U32, lanes), warps * WARP).reshape(warps, WARP)
    mixed = (codes != codes[:, :1]).any(axis=1)
    if mixed.any():
        raise m.fault(ins, "lanes of a warp hold different precision codes",
                      expected="one code per warp in the precision register")
    first = codes[:, 0].astype(np.int64)
    bad = first >= len(PRECISIONS)
    if bad.any():
        raise m.fault(ins, f"precision code {int(first[bad][0])} is not defined",
                      expected=f"one of {_ACCEPTED_CODES}")
    return first


@semantics("vmma")
def vmma(m, ins, lanes):
    problem = form_problem(ins)
    if problem:
        raise m.fault(ins, problem[0], expected=problem[1])
    w = converged_warps(m, ins, lanes).shape[0]
    codes = warp_codes(m, ins, lanes, w)
    raw_a = read_fragment(m, ins.ops[1], _U32, lanes, w)
    raw_b = read_fragment(m, ins.ops[2], _U32, lanes, w)
    la, lb, lc = layouts(ins.shape, 32, 32)
    a = np.empty((w, la.rows, la.cols))
    b = np.empty((w, lb.rows, lb.cols))
    for code in np.unique(codes).tolist():
        sel = codes == code
        a[sel] = _matrix(raw_a[sel], ins.shape, PRECISIONS[code], 0)
        b[sel] = _matrix(raw_b[sel], ins.shape, PRECISIONS[code], 1)
    c_vals = read_fragment(m, ins.ops[3], _F32, lanes, w).astype(np.float64)
    c = np.take(c_vals.reshape(w, -1), lc.inverse, axis=1).reshape(w, lc.rows, lc.cols)
    d = np.matmul(a, b) + c
    out = np.take(d.reshape(w, -1), lc.forward, axis=1).reshape(w, WARP, -1)
    write_fragment(m, ins.ops[0], out.astype(np.float32), _F32, lanes)


@semantics("vpcu.setprec")
def setprec(m, ins, lanes):
    ids = m.lane_ids(lanes)
    codes = as_array(ins.ops[1].read(m, _U32, lanes), ids.size)
    bad = codes >= len(PRECISIONS)
    if bad.any():
        raise m.fault(ins, f"precision code {int(codes[bad][0])} is not defined", lanes, ~bad,
                      expected=f"one of {_ACCEPTED_CODES}")
    ins.ops[0].write(m, codes.astype(np.uint32), _U32, lanes)


def event_detail(m, ins, lanes) -> np.ndarray:
    """Per executing warp, the precision code a `vmma` ran at (for the timing trace)."""
    n = m.lane_ids(lanes).size // WARP
    return warp_codes(m, ins, lanes, n).astype(np.int32)
