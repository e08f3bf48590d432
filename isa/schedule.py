"""Load hoisting: the issue order ptxas gives a basic block's global loads, applied to PTX.

What it models
--------------
nvcc's PTX interleaves each global load with its uses (`ld; cvt; fma; ld; cvt; fma; ...`
in an unrolled loop), but ptxas schedules the machine code so that a block's independent
loads issue back to back ahead of their uses and several are in flight per warp (the SASS
of `rmsnorm_bf16`'s loop, unrolled 4x, issues its four loads first). The simulator runs the
PTX in order, so without this each load of such a loop would be a full memory round trip.
`hoist_loads(program)` moves every plain global load (`ld.global`, `.nc` included; not
`.volatile` or a memory-order qualifier) up inside its basic block past the instructions
that only compute registers (units `arith`, `int`, `fp16`, `fp32`, `fp64`, `sfu`) and
neither write a register the load reads nor read or write a register it writes. A load of
read-only data (`ld.global.nc`: no store of the kernel may write what it reads) also passes
plain stores, with the register-only instructions its address comes from (which pass plain
loads and stores they have no register in common with), as ptxas issues the
`LDG.E.CONSTANT`s of an unrolled grid-stride loop ahead of its stores (the SASS of
`scale_shift_grid_stride` and of `rmsnorm_bf16`'s second pass, nvcc 13, sm_90a). Other loads
never pass a store; no load passes another load, an atomic, a barrier, a fence, an
asynchronous copy, a tensor-core op, a branch or a call, so memory order and synchronisation
are as written and the loads keep their order among themselves. Each thread computes exactly
what the PTX says; only the order in which the timing model sees the instructions changes
(and with it the register estimate of `models.cta_dispatch`, whose live ranges now span the
loads in flight, as ptxas's do).

Left out: ptxas's register-pressure limit on hoisting, shared and local loads, scheduling
across blocks (software pipelining of loops). Units: pcs.
"""

from __future__ import annotations

from dataclasses import replace

from isa.cfg import basic_blocks, block_spans
from isa.dataflow import defs_uses

REGISTER_ONLY_UNITS = frozenset({"arith", "int", "fp16", "fp32", "fp64", "sfu"})
ORDERED_FLAGS = frozenset({"volatile", "relaxed", "acquire", "sc", "mmio", "weak"})


def hoistable(ins) -> bool:
    """A plain global load."""
    return (ins.opname == "ld" and ins.space == "global" and not ins.control
            and not ins.flags & ORDERED_FLAGS)


def _passable(ins) -> bool:
    return ins.spec.unit in REGISTER_ONLY_UNITS and not ins.control


def _plain_memory(ins) -> bool:
    """A load or store that is neither ordered nor control (what `_feeding` ops and read-only
    loads may pass)."""
    return (ins.opname in ("ld", "st") and not ins.control
            and ins.space in ("global", "shared", "local") and not ins.flags & ORDERED_FLAGS)


def _read_only(ins) -> bool:
    """A hoistable load of read-only data (`ld.global.nc`): no store of the kernel writes what
    it reads, so it may pass stores as ptxas's `LDG.E.CONSTANT` does."""
    return hoistable(ins) and "nc" in ins.flags


def _feeding(block: list, info: list) -> set[int]:
    """Register-only instructions of `block` whose results a read-only load of the block uses,
    directly or through other such instructions (its address arithmetic)."""
    needed: set = set()
    feeding: set[int] = set()
    for k in range(len(block) - 1, -1, -1):
        defs, uses = info[k]
        if _read_only(block[k]):
            needed |= uses
        elif _passable(block[k]) and defs & needed:
            feeding.add(k)
            needed |= uses
    return feeding


def _block_order(block: list) -> list[int]:
    """New order (indices into `block`) with each hoistable load moved up (docstring)."""
    info = [defs_uses(ins) for ins in block]
    feeding = _feeding(block, info)
    order: list[int] = []
    for k, ins in enumerate(block):
        pos = len(order)
        if hoistable(ins) or k in feeding:
            defs, uses = info[k]
            may_pass_memory = k in feeding or _read_only(ins)
            while pos > 0:
                prev = order[pos - 1]
                p_defs, p_uses = info[prev]
                other = block[prev]
                if uses & p_defs or defs & (p_uses | p_defs):
                    break
                if _passable(other):
                    pos -= 1
                    continue
                if not may_pass_memory or not _plain_memory(other):
                    break
                if other.opname == "ld" and k not in feeding:
                    break       # loads keep their order among themselves
                pos -= 1
        order.insert(pos, k)
    return order


def hoist_loads(program):
    """`program` with its global loads hoisted inside their blocks (module docstring); the
    program itself when nothing moves."""
    instrs = program.instrs
    starts, _ = basic_blocks(program)
    out = list(instrs)
    moved = False
    for start, end in block_spans(starts, len(instrs)):
        block = instrs[start:end]
        order = _block_order(block)
        if order == list(range(len(block))):
            continue
        moved = True
        for j, k in enumerate(order):
            out[start + j] = block[k]
    if not moved:
        return program
    for pc, ins in enumerate(out):
        ins.pc = pc
    return replace(program, instrs=out)
