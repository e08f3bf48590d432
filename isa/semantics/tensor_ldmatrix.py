"""`ldmatrix` / `stmatrix` `.m8n8.{x1,x2,x4}{.trans}.shared.b16`: 8x8 matrices of b16
moved between shared memory and mma fragments.

For `.xN`, threads 8i .. 8i+7 give the addresses of rows 0..7 of matrix i (each row is
16 contiguous bytes, 16-byte aligned); the other lanes' addresses are not used. Register
i of lane l holds, for matrix i, row l >> 2, columns 2 (l % 4) and 2 (l % 4) + 1 (first
column in the low half), the mma A/B/C fragment layout. `.trans` transposes each matrix
between memory and registers. All warps executing the instruction are handled in one
gather (ldmatrix) or scatter (stmatrix) over `[warps, N, 8, 8]` halfwords.

Left out: the sm_100 shapes (`.m16n16`, `.m8n16`, `.b8`, `.b6x16_p32`, `.b4x16_p64`).
A generic address must point into the shared window; anything else faults.
"""

from __future__ import annotations

import numpy as np

from isa.memory import SHARED_WINDOW, WINDOW_SIZE
from isa.semantics.registry import semantics
from isa.semantics.tensor_frame import (
    WARP,
    converged_warps,
    items_of,
    read_fragment,
    write_fragment,
)
from isa.types import TYPES

_U32 = TYPES["u32"]
_COUNTS = {"x1": 1, "x2": 2, "x4": 4}
_LANE = np.arange(WARP)
_ROW, _COL = _LANE >> 2, 2 * (_LANE & 3)


def form_problem(ins) -> tuple[str, str] | None:
    """Why this ldmatrix/stmatrix cannot run; None when it is supported."""
    accepted = f"{ins.opname}.sync.aligned.m8n8.{{x1,x2,x4}}{{.trans}}.shared.b16"
    counts = [c for c in _COUNTS if c in ins.flags]
    types = tuple(t.name for t in ins.types)
    if (ins.shape != "m8n8" or types != ("b16",) or len(counts) != 1
            or not {"sync", "aligned"} <= ins.flags or ins.space not in (None, "shared")):
        return f"unsupported {ins.opname} form '{ins.text}'", accepted
    frag = ins.ops[0] if ins.opname == "ldmatrix" else ins.ops[1]
    if len(items_of(frag)) != _COUNTS[counts[0]]:
        return (f"{ins.opname}.{counts[0]} needs {_COUNTS[counts[0]]} registers, got "
                f"{len(items_of(frag))}", accepted)
    return None


def _rows(m, ins, addr_op, lanes, grid) -> tuple[np.ndarray, np.ndarray]:
    """Shared memory as halfwords, and the indices `[w, N, 8, 8]` of each matrix row."""
    n_mats = next(v for k, v in _COUNTS.items() if k in ins.flags)
    w = grid.shape[0]
    addr = addr_op.address(m, lanes).reshape(w, WARP)[:, :8 * n_mats].reshape(-1)
    used = grid[:, :8 * n_mats].reshape(-1)
    if ins.space is None:
        inside = (addr >= SHARED_WINDOW) & (addr < SHARED_WINDOW + WINDOW_SIZE)
        if not inside.all():
            raise m.fault(ins, f"generic address {int(addr[~inside][0]):#x} is not in shared "
                          "memory", used, inside, expected="an address in the shared window")
        addr = addr - SHARED_WINDOW
    buf, off = m.locate("shared", addr, used, 16, ins)
    idx = (off // 2)[:, None] + np.arange(8)
    return buf.view(np.uint16), idx.reshape(w, n_mats, 8, 8)


@semantics("ldmatrix")
def ldmatrix(m, ins, lanes):
    problem = form_problem(ins)
    if problem:
        raise m.fault(ins, problem[0], expected=problem[1])
    grid = converged_warps(m, ins, lanes)
    words, idx = _rows(m, ins, ins.ops[1], lanes, grid)
    mats = words[idx]
    if "trans" in ins.flags:
        mats = mats.swapaxes(2, 3)
    lo = mats[:, :, _ROW, _COL].astype(np.uint32)           # [w, N, 32]
    hi = mats[:, :, _ROW, _COL + 1].astype(np.uint32)
    regs = (lo | (hi << np.uint32(16))).transpose(0, 2, 1)  # [w, 32, N]
    write_fragment(m, ins.ops[0], regs, _U32, lanes)


@semantics("stmatrix")
def stmatrix(m, ins, lanes):
    problem = form_problem(ins)
    if problem:
        raise m.fault(ins, problem[0], expected=problem[1])
    grid = converged_warps(m, ins, lanes)
    regs = read_fragment(m, ins.ops[1], _U32, lanes, grid.shape[0]).transpose(0, 2, 1)
    words, idx = _rows(m, ins, ins.ops[0], lanes, grid)
    mats = np.empty(idx.shape, dtype=np.uint16)
    mats[:, :, _ROW, _COL] = regs & np.uint32(0xFFFF)
    mats[:, :, _ROW, _COL + 1] = regs >> np.uint32(16)
    if "trans" in ins.flags:
        mats = mats.swapaxes(2, 3)
    words[idx] = mats
