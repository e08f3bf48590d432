"""Whole-warp register access for the `.aligned` tensor-core instructions.

`mma.sync`, `wmma.*`, `ldmatrix` and `stmatrix` are warp-collective and `.aligned`:
every thread of the warp must execute the same instruction together (PTX ISA,
"mandatory .aligned qualifier"). `converged_warps` checks that and returns the slot ids
as a `[warps, 32]` grid; the readers and writers here move a fragment (a `{...}` vector
of registers) between the register files and `[warps, 32, n_regs]` arrays, so the
semantics can index by lane without any per-lane Python loop.

Not modelled: which lanes a warp lost (exited or diverged) is reported, not emulated;
PTX calls the result undefined there, and the interpreter stops with a fault.
"""

from __future__ import annotations

import numpy as np

from isa.operands import DVec
from isa.semantics.common import as_array

WARP = 32


def converged_warps(m, ins, lanes) -> np.ndarray:
    """Slot ids `[warps, 32]` of the executing lanes; fault unless every warp is complete."""
    ids = m.lane_ids(lanes)
    if ids.size and ids.size % WARP == 0:
        grid = ids.reshape(-1, WARP)
        if not (grid[:, 0] % WARP).any() and (grid[:, -1] - grid[:, 0] == WARP - 1).all():
            return grid
    warps, counts = np.unique(ids >> 5, return_counts=True)
    bad = int(warps[np.flatnonzero(counts != WARP)[0]])
    in_warp = ids[(ids >> 5) == bad]
    mask = int(np.bitwise_or.reduce(np.left_shift(1, in_warp & 31, dtype=np.int64)))
    raise m.fault(ins, f"warp-collective .aligned instruction executed by {in_warp.size} of "
                  f"32 lanes of a warp (active mask {mask:#010x})", in_warp,
                  np.zeros(in_warp.size, dtype=bool),
                  expected="all 32 lanes of the warp converged at this instruction")


def items_of(op) -> tuple:
    """The registers of a fragment operand: `{a, b, ...}` or a single register."""
    return op.items if isinstance(op, DVec) else (op,)


def read_fragment(m, op, ty, lanes, warps: int) -> np.ndarray:
    """Fragment registers read as `ty`, shaped `[warps, 32, n_regs]`."""
    n = warps * WARP
    cols = [as_array(it.read(m, ty, lanes), n) for it in items_of(op)]
    return np.stack(cols, axis=-1).astype(ty.dtype, copy=False).reshape(warps, WARP, -1)


def write_fragment(m, op, values: np.ndarray, ty, lanes) -> None:
    """Write `[warps, 32, n_regs]` values (of `ty`) into the fragment's registers."""
    flat = values.reshape(-1, values.shape[-1])
    for k, it in enumerate(items_of(op)):
        it.write(m, np.ascontiguousarray(flat[:, k]), ty, lanes)


_FIELD = {8: np.dtype("<u1"), 16: np.dtype("<u2")}
_WORD = np.dtype("<u4")


def unpack(raw: np.ndarray, bits: int) -> np.ndarray:
    """Split 32-bit words `[..., r]` into `[..., r * 32 // bits]` fields, low bits first.

    A little-endian view: the first field of a word is its low-order one on any host."""
    return np.ascontiguousarray(raw, dtype=_WORD).view(_FIELD[bits])


def pack(fields: np.ndarray, bits: int) -> np.ndarray:
    """Inverse of `unpack`: `[..., e]` fields of `bits` into `[..., e * bits // 32]` words."""
    return np.ascontiguousarray(fields, dtype=_FIELD[bits]).view(_WORD)
