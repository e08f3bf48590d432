"""Scoreboard slots: registers whose pending values never overlap share one scoreboard entry.

What it models
--------------
Nothing new: it only renumbers. The SM's scoreboard keeps a ready cycle and a from-memory
flag per warp and register (`SmState.wr`, `wm`), indexed by the dense numbers of
`models.units.instruction_timings`. nvcc's PTX names a fresh virtual register for almost
every value (RMSNorm 4096x7168: 597 of them), so with 63 resident warps an SM's rows take
300 KB and the 132 SMs' rows 40 MB, which the host's caches cannot hold: the issue loop
then waits on a cache miss at nearly every scoreboard check. `scoreboard_slots` maps the
registers onto fewer slots such that every check reads the value it read before, or a
value at or below the checking cycle in both numberings (a check only takes values above
it into account), so the timing is the same, cycle for cycle:

* a register's *extent* is the pc range from its first to its last occurrence;
* a register is *clean* when every write to it is followed, on every path through the
  control-flow graph, by an unguarded instruction whose scoreboard check reads it (as a
  source or as a destination's write-after-write check) before the path leaves its extent
  or ends the thread (a guarded instruction may issue no event at all; a thread that exits
  may leave other lanes of its warp running). Paths that loop inside the extent forever
  count as reading (they never reach another register's pcs);
* why that suffices: a warp runs its lanes in min-PC order (`isa.interpreter`), so after
  a write by the lanes at pc d every other live lane sits above d, and the warp issues a
  pc outside the extent only once the writing lanes left it, having read the register:
  the warp waited for the pending value, which is then at or below every later cycle. So
  at a check of register r in a slot shared with clean registers of disjoint extents, the
  slot holds r's own last value, or another register's at or below the checking cycle
  while r's own (r clean: read since) is too; a check only takes values above its cycle
  into account, so it decides as before. A loop is no exception: a value carried to the
  next iteration is read inside the extent (the loop's pcs between its write and its read
  lie in it), and values local to one iteration share slots;
* slots are given out in order of extent start; a slot passes to a later register only
  after a clean owner's extent ended (the lowest free slot first). Pseudo registers (the
  asynchronous-copy groups, whose ring `models.sm_warps.copy_groups` walks by position) and
  registers that are not clean keep their slot to themselves.

A program with `call` keeps one slot per register (its control flow is not followed here).
`tests/test_scoreboard_slots.py` checks the renumbering on small programs and compares
whole simulations with and without it (`COMPACT`). Units: pcs, slots.
"""

from __future__ import annotations

import dataclasses
import heapq

import numba
import numpy as np

from models.units import scoreboard_board

COMPACT = True
"""Renumber registers onto shared slots (False: one slot per register, as numbered)."""
_ENDS_THREAD = frozenset({"exit", "ret", "trap"})
_CACHE_ATTR = "_scoreboard_slots"
"""The program's (register -> slot, slot count): registers and control flow do not depend
on the config, so every `instruction_timings` of one program renumbers the same way."""


def _successors(instrs) -> list[tuple[int, ...]]:
    """The pcs each instruction may continue at (empty: the thread ends). Control ops other
    than branches and exits may hold the thread at their own pc (waits), so they list it."""
    n, out = len(instrs), []
    for pc, ins in enumerate(instrs):
        name, nxt = ins.spec.name, (pc + 1,) if pc + 1 < n else ()
        if name == "bra":
            out.append((ins.target, *nxt) if ins.guard is not None else (ins.target,))
        elif name in _ENDS_THREAD:
            out.append(nxt if ins.guard is not None else ())
        elif ins.spec.control:
            out.append((pc, *nxt))
        else:
            out.append(nxt)
    return out


@numba.njit(cache=True)
def _must_read(lo: int, hi: int, succ_ptr, succ_pc, reads_here):
    """For pcs lo..hi: every path from the pc reads the register (`reads_here[p - lo]`: an
    unguarded check at p) before it leaves lo..hi or ends the thread (greatest fixpoint: a
    path that loops inside the extent forever never reaches another register's pcs)."""
    must = np.ones(hi - lo + 1, np.bool_)
    changed = True
    while changed:
        changed = False
        for p in range(hi, lo - 1, -1):
            if not must[p - lo] or reads_here[p - lo]:
                continue
            ok = succ_ptr[p + 1] > succ_ptr[p]
            for i in range(succ_ptr[p], succ_ptr[p + 1]):
                s = succ_pc[i]
                if s < lo or s > hi or not must[s - lo]:
                    ok = False
                    break
            if not ok:
                must[p - lo] = False
                changed = True
    return must


def _clean(r: int, lo: int, hi: int, writes_at: list[int], succ, reads, csr) -> bool:
    """Whether every write to `r` is followed by a read on every path (module doc)."""
    slow = []
    for d in writes_at:
        p = d + 1                                   # straight-line code first
        while p <= hi and succ[p - 1] == (p,) and r not in reads[p]:
            p += 1
        if p <= hi and succ[p - 1] == (p,) and r in reads[p]:
            continue
        slow.append(d)
    if not slow:
        return True
    here = np.fromiter((r in reads[p] for p in range(lo, hi + 1)), np.bool_, hi - lo + 1)
    must = _must_read(lo, hi, csr[0], csr[1], here)
    return all(succ[d] and all(lo <= s <= hi and must[s - lo] for s in succ[d])
               for d in slow)


def scoreboard_slots(program, timings: list, n_regs: int, exclusive: frozenset
                     ) -> tuple[list, int]:
    """(`timings` with registers renumbered onto slots, the slot count); `exclusive`: the
    register numbers that keep a slot of their own (the pseudo registers). The mapping
    is worked out once per program (kept on it)."""
    instrs = program.instrs
    if not COMPACT or len(timings) != len(instrs) or any(
            ins.spec.name == "call" for ins in instrs):
        return timings, n_regs
    cached = getattr(program, _CACHE_ATTR, None)
    if cached is None:
        cached = _slots(instrs, timings, exclusive)
        setattr(program, _CACHE_ATTR, cached)
    slot_of, n_slots = cached

    def remap(regs: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(slot_of[r] for r in regs)

    out = [dataclasses.replace(t, sources=remap(t.sources), destinations=remap(t.destinations),
                               unchecked=remap(t.unchecked)) for t in timings]
    return out, n_slots


def _slots(instrs, timings: list, exclusive: frozenset) -> tuple[dict[int, int], int]:
    """(register -> slot, slot count) of a program (module doc)."""
    succ = _successors(instrs)
    csr = (np.cumsum([0] + [len(nxt) for nxt in succ], dtype=np.int64),
           np.array([s for nxt in succ for s in nxt] or [0], np.int64))
    access: dict[int, list[int]] = {}
    writes: dict[int, list[int]] = {}
    reads: list[frozenset] = []
    for pc, t in enumerate(timings):
        reads.append(frozenset(scoreboard_board(t)) if instrs[pc].guard is None
                     else frozenset())
        for r in (*t.sources, *t.destinations, *t.unchecked):
            access.setdefault(r, []).append(pc)
        for r in dict.fromkeys((*t.destinations, *t.unchecked)):
            writes.setdefault(r, []).append(pc)
    extents = {r: (min(pcs), max(pcs)) for r, pcs in access.items()}
    slot_of: dict[int, int] = {}
    free: list[int] = []                 # slots a clean owner left, lowest first
    ending: list[tuple[int, int]] = []   # (extent end, slot) of clean owners
    n_slots = 0
    for r in sorted(extents, key=lambda reg: (extents[reg][0], reg)):
        lo, hi = extents[r]
        while ending and ending[0][0] < lo:
            heapq.heappush(free, heapq.heappop(ending)[1])
        if r in exclusive:
            slot, clean = n_slots, False
            n_slots += 1
        else:
            if free:
                slot = heapq.heappop(free)
            else:
                slot, n_slots = n_slots, n_slots + 1
            clean = _clean(r, lo, hi, writes.get(r, []), succ, reads, csr)
        slot_of[r] = slot
        if clean:
            heapq.heappush(ending, (hi, slot))
    return slot_of, max(n_slots, 1)
