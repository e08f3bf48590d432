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
neither write a register the load reads nor read or write a register it writes. A load
never passes another load, a store, an atomic, a barrier, a fence, an asynchronous copy, a
tensor-core op, a branch or a call, so memory order and synchronisation are as written and
the loads keep their order among themselves. Each thread computes exactly what the PTX
says; only the order in which the timing model sees the instructions changes (and with it
the register estimate of `models.cta_dispatch`, whose live ranges now span the loads in
flight, as ptxas's do).

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


def _block_order(block: list) -> list[int]:
    """New order (indices into `block`) with each hoistable load moved up (docstring)."""
    info = [defs_uses(ins) for ins in block]
    order: list[int] = []
    for k, ins in enumerate(block):
        pos = len(order)
        if hoistable(ins):
            defs, uses = info[k]
            while pos > 0:
                prev = order[pos - 1]
                p_defs, p_uses = info[prev]
                if not _passable(block[prev]) or uses & p_defs or defs & (p_uses | p_defs):
                    break
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
