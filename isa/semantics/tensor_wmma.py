"""`wmma.load` / `wmma.mma` / `wmma.store` for f16 inputs with f16 or f32 accumulators,
shapes m16n16k16, m8n32k16 and m32n8k16.

PTX leaves the wmma fragment layout unspecified ("target architecture dependent"); only
the register counts are fixed: A and B are 8 `.f16x2` registers (16 halves per lane),
C and D are 8 `.f32` or 4 `.f16x2` registers (8 values per lane). This module's layout:
element e of lane l (the low half of a `.f16x2` register first) is slot s = 16 l + e
(A, B) or 8 l + e (C, D), and holds element s mod (rows * cols) of the operand's
logical matrix in row-major order (A is M x K, B is K x N, C and D are M x N). C and D
fill the 256 slots exactly; A and B repeat their elements (twice for 16x16, four times
for the 8x16 A of m8n32k16 and 16x8 B of m32n8k16), and `wmma.mma` reads the first copy.
Fragments are logical, so the `.row`/`.col` of `wmma.mma` only have to agree with the
loads, as PTX requires, and element-wise code on fragment registers stays correct.

Loads and stores address element (i, j) at p + (i * stride + j) * size for `.row` and
p + (i + j * stride) * size for `.col`; the stride operand counts elements and defaults
to the leading dimension. p and stride must be the same in every lane of the warp (as
the CUDA guide requires of `mptr` and `ldm`); a warp where they differ faults. Numerics
as `mma` (tensor_mma): exact products, float64 sum with C, one rounding to the D type.

Left out: bf16/tf32/integer/sub-byte/f64 wmma, `.satfinite`, and the 256-bit alignment
PTX asks of p (only element alignment is checked).
"""

from __future__ import annotations

import numpy as np

from isa.semantics.common import as_array
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

SHAPES = {"m16n16k16": (16, 16, 16), "m8n32k16": (8, 32, 16), "m32n8k16": (32, 8, 16)}
_U32, _F32 = TYPES["u32"], TYPES["f32"]
_ELEMENTS = {"a": 16, "b": 16, "c": 8, "d": 8}      # values per lane
_ACC = ("f16", "f32")


def _dims(shape: str, which: str) -> tuple[int, int]:
    m, n, k = SHAPES[shape]
    return {"a": (m, k), "b": (k, n), "c": (m, n), "d": (m, n)}[which]


def _regs(which: str, ty: str) -> int:
    return _ELEMENTS[which] // 2 if ty == "f16" else _ELEMENTS[which]


def _which(ins) -> str | None:
    found = [w for w in "abcd" if w in ins.flags]
    return found[0] if len(found) == 1 else None


def form_problem(ins) -> tuple[str, str] | None:
    """Why this wmma instruction cannot run; None when it is supported."""
    name, types = ins.opname, tuple(t.name for t in ins.types)
    shapes = "{" + ",".join(SHAPES) + "}"
    if name == "wmma.mma":
        accepted = (f"wmma.mma.sync.aligned.{{row,col}}.{{row,col}}.{shapes}.<d>.<c> with d, c "
                    "each .f16 or .f32 (f16 A and B)")
        ok = len(types) == 2 and all(t in _ACC for t in types) and "satfinite" not in ins.flags
        counts = (_regs("d", types[0]), 8, 8, _regs("c", types[1])) if ok else ()
    else:
        which = _which(ins)
        verb = name.split(".")[1]
        accepted = (f"wmma.load.{{a,b}}.sync.aligned.{{row,col}}.{shapes}{{.global,.shared}}.f16"
                    f", wmma.load.c / wmma.store.d with .f16 or .f32")
        ok = (len(types) == 1 and which is not None
              and which in ("abc" if verb == "load" else "d")
              and types[0] in (("f16",) if which in "ab" else _ACC)
              and ("row" in ins.flags) != ("col" in ins.flags))
        counts = ((_regs(which, types[0]),) if ok else ())
        counts = counts if verb == "load" else (None,) + counts
    if not ok or ins.shape not in SHAPES or not {"sync", "aligned"} <= ins.flags:
        return f"unsupported wmma form '{ins.text}'", accepted
    for op, want in zip(ins.ops, counts, strict=False):
        if want is not None and len(items_of(op)) != want:
            return (f"wmma fragment has {len(items_of(op))} registers", f"{want} registers")
    return None


def _check(m, ins) -> None:
    problem = form_problem(ins)
    if problem:
        raise m.fault(ins, problem[0], expected=problem[1])


def _addresses(m, ins, lanes, grid, which: str, addr_op, stride_op):
    """The located buffer and element offsets `[w, rows * cols]` of the operand's matrix,
    row-major, from each warp's (uniform) address and stride."""
    rows, cols = _dims(ins.shape, which)
    n, w = grid.size, grid.shape[0]
    base = addr_op.address(m, lanes).reshape(w, WARP)
    lead = cols if "row" in ins.flags else rows
    stride = (as_array(stride_op.read(m, _U32, lanes), n).astype(np.int64).reshape(w, WARP)
              if stride_op is not None else np.full((w, WARP), lead))
    uniform = (base == base[:, :1]).all(axis=1) & (stride == stride[:, :1]).all(axis=1)
    if not uniform.all():
        bad = grid[np.flatnonzero(~uniform)[0]]
        raise m.fault(ins, "wmma address or stride differs between lanes of a warp", bad,
                      np.zeros(WARP, dtype=bool), expected="one address and stride per warp")
    i, j = np.divmod(np.arange(rows * cols), cols)
    elem = i * stride[:, :1] + j if "row" in ins.flags else i + j * stride[:, :1]
    size = ins.types[0].nbytes
    addr = base[:, :1] + elem * size
    buf, off = m.locate(ins.space, addr.reshape(-1), np.repeat(grid[:, 0], rows * cols), size,
                        ins)
    return buf, off.reshape(w, rows * cols) // size


@semantics("wmma.load")
def wmma_load(m, ins, lanes):
    _check(m, ins)
    grid = converged_warps(m, ins, lanes)
    which = _which(ins)
    stride_op = ins.ops[2] if len(ins.ops) > 2 else None
    buf, idx = _addresses(m, ins, lanes, grid, which, ins.ops[1], stride_op)
    f16 = ins.types[0].name == "f16"
    vals = buf.view(np.uint16 if f16 else np.uint32)[idx]
    slots = np.tile(vals, (1, WARP * _ELEMENTS[which] // idx.shape[1]))
    regs = slots.reshape(grid.shape[0], WARP, _ELEMENTS[which])
    write_fragment(m, ins.ops[0], pack(regs, 16) if f16 else regs, _U32, lanes)


@semantics("wmma.store")
def wmma_store(m, ins, lanes):
    _check(m, ins)
    grid = converged_warps(m, ins, lanes)
    regs = read_fragment(m, ins.ops[1], _U32, lanes, grid.shape[0])
    stride_op = ins.ops[2] if len(ins.ops) > 2 else None
    buf, idx = _addresses(m, ins, lanes, grid, "d", ins.ops[0], stride_op)
    if ins.types[0].name == "f16":
        buf.view(np.uint16)[idx] = unpack(regs, 16).reshape(idx.shape)
    else:
        buf.view(np.uint32)[idx] = regs.reshape(idx.shape)


def _values(m, op, ty: str, lanes, w: int) -> np.ndarray:
    """Fragment values `[w, 32 * per_lane]` as float64."""
    if ty == "f16":
        halves = unpack(read_fragment(m, op, _U32, lanes, w), 16)
        return halves.view(np.float16).astype(np.float64).reshape(w, -1)
    return read_fragment(m, op, _F32, lanes, w).astype(np.float64).reshape(w, -1)


@semantics("wmma.mma")
def wmma_mma(m, ins, lanes):
    _check(m, ins)
    w = converged_warps(m, ins, lanes).shape[0]
    (mm, nn, kk), (dty, cty) = SHAPES[ins.shape], (t.name for t in ins.types)
    a = _values(m, ins.ops[1], "f16", lanes, w)[:, :mm * kk].reshape(w, mm, kk)
    b = _values(m, ins.ops[2], "f16", lanes, w)[:, :kk * nn].reshape(w, kk, nn)
    c = _values(m, ins.ops[3], cty, lanes, w).reshape(w, mm, nn)
    d = (np.matmul(a, b) + c).reshape(w, WARP, _ELEMENTS["d"])
    if dty == "f16":
        write_fragment(m, ins.ops[0], pack(d.astype(np.float16).view(np.uint16), 16), _U32,
                       lanes)
    else:
        write_fragment(m, ins.ops[0], d.astype(np.float32), _F32, lanes)
