"""Which instructions only compute data: what timing mode may leave unexecuted.

What it models
--------------
In timing mode (`isa.run_kernel(timing_only=True)`) a kernel's results are not kept, only
its control flow, active masks and addresses matter. `data_only_pcs(program)` marks the
instructions whose results can reach none of those:

* candidates are the register-only instructions (spec units `arith`, `int`, `fp32`,
  `sfu`: they write their destination registers and touch nothing else);
* a register is *needed* when an instruction that is not a candidate reads it (addresses,
  loaded or stored shared/local/param values, atomics, barriers, branches, calls,
  tensor-core descriptors), when it guards any instruction, or when a candidate writing a
  needed register reads it (closure over the whole program, flow-insensitive, so a
  register name reused for an address anywhere keeps all its writers);
* exempt from being needed: the data stored by `st.global` (the kernel's outputs) and the
  register vectors of `wgmma.mma_async` (accumulators and A fragments, whose arithmetic
  timing mode already skips);
* a candidate none of whose destinations is needed is data-only.

Skipping them changes no trace event, mask or count: `run_machine` still records them. Left
out: values that travel through global memory and come back within the kernel (a kernel
that stores a computed value with `st.global` and loads it again as an address would read
a stale one). Units: pcs.
"""

from __future__ import annotations

import numpy as np

from isa.operands import DAddr, DVec, registers_of

CANDIDATE_UNITS = frozenset({"arith", "int", "fp32", "sfu"})
NO_DESTINATION = frozenset({"st", "red", "stmatrix", "wmma.store", "prefetch", "prefetchu",
                            "cp.async", "bar"})
"""Opcodes whose first operand is not a destination."""
_CACHE_ATTR = "_data_only_pcs"


def _key(reg) -> tuple[int, int]:
    return reg.fid, reg.index


def defs_uses(ins) -> tuple[frozenset, frozenset]:
    """(registers `ins` writes, registers it reads) as (file, index) keys. A guarded write
    may leave the old value, so it reads its destinations too, and `wgmma.mma_async`
    reads its accumulators."""
    ops = list(ins.ops)
    writes = bool(ops) and ins.opname not in NO_DESTINATION and not isinstance(ops[0], DAddr)
    defs = frozenset(_key(r) for r in registers_of(ops[0])) if writes else frozenset()
    uses = {_key(r) for op in (ops[1:] if writes else ops) for r in registers_of(op)}
    if ins.guard is not None:
        uses.update(_key(r) for r in registers_of(ins.guard))
        uses |= defs
    if ins.opname == "wgmma.mma_async":
        uses |= defs
    return defs, frozenset(uses)


def _needed_by(ins) -> list:
    """Registers a non-candidate instruction needs."""
    ops = list(ins.ops)
    if ins.opname == "wgmma.mma_async":
        ops = [op for op in ops if not isinstance(op, DVec)]
    elif ins.opname == "st" and ins.space == "global":
        ops = ops[:1]
    return [r for op in ops for r in registers_of(op)]


def data_only_pcs(program) -> np.ndarray:
    """A bool per pc: True where the instruction only computes data (module docstring)."""
    cached = getattr(program, _CACHE_ATTR, None)
    if cached is not None:
        return cached
    instrs = program.instrs
    needed: set[tuple[int, int]] = set()
    candidates = []
    for pc, ins in enumerate(instrs):
        if ins.guard is not None:
            needed.update(_key(r) for r in registers_of(ins.guard))
        if ins.spec.unit in CANDIDATE_UNITS and not ins.control and ins.ops:
            ops = list(ins.ops)
            candidates.append((pc, {_key(r) for r in registers_of(ops[0])},
                               {_key(r) for op in ops[1:] for r in registers_of(op)}))
        else:
            needed.update(_key(r) for r in _needed_by(ins))
    changed = True
    while changed:
        changed = False
        for _pc, dests, sources in candidates:
            if not dests.isdisjoint(needed) and not sources <= needed:
                needed |= sources
                changed = True
    skip = np.zeros(len(instrs), dtype=bool)
    for pc, dests, _sources in candidates:
        skip[pc] = bool(dests) and dests.isdisjoint(needed)
    setattr(program, _CACHE_ATTR, skip)
    return skip
