"""The functional SIMT execution loop (min-PC scheduling, batched across warps).

Each step picks the lowest pc among runnable threads of the batch and executes
that instruction once, with numpy, for every thread at that pc. Lanes of one warp
that reach the pc together form its active mask; a warp whose lanes diverged runs
its lowest-pc group first, so lanes reconverge where the immediate post-dominator
lies for nvcc's block layout (reconvergence points follow their divergent regions).
Exited threads leave the runnable set; threads blocked at `bar.sync` wait until the
barrier completes. An `observer` (if given) sees every step: the timing model and
instruction counters hang off it; with no observer the loop pays one `is None` test.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from isa.errors import PtxError, StepLimitError
from isa.machine import BLOCKED, EXITED, Machine


class StepCounts:
    """Executed warp-instructions and thread-instructions per static instruction."""

    def __init__(self, n_instrs: int):
        self.warp = np.zeros(n_instrs, dtype=np.int64)
        self.thread = np.zeros(n_instrs, dtype=np.int64)


def _lanes_of(idx: np.ndarray):
    """A slice when the indices form one contiguous run, else the index array."""
    lo, hi = int(idx[0]), int(idx[-1])
    if hi - lo + 1 == idx.size:
        return slice(lo, hi + 1)
    return idx


@nb.njit(cache=True)
def _lowest(pc: np.ndarray) -> tuple[int, np.ndarray]:
    """(lowest pc, the sorted thread slots at it)."""
    low = pc[0]
    for i in range(1, pc.size):
        if pc[i] < low:
            low = pc[i]
    idx = np.empty(pc.size, np.int64)
    n = 0
    for i in range(pc.size):
        if pc[i] == low:
            idx[n] = i
            n += 1
    return low, idx[:n]


@nb.njit(cache=True)
def _next_above(pc: np.ndarray, low: int) -> int:
    """The lowest pc above `low` (a value past every pc when there is none)."""
    nxt = np.iinfo(np.int64).max
    for i in range(pc.size):
        v = pc[i]
        if low < v < nxt:
            nxt = v
    return nxt


def _run_ends(instrs, skip: list[bool]) -> list[int]:
    """For each pc, where the run of skipped, unguarded instructions from it ends (the pc
    itself when it starts none)."""
    ends = [0] * (len(instrs) + 1)
    ends[-1] = len(instrs)
    for pc in range(len(instrs) - 1, -1, -1):
        plain = skip[pc] and instrs[pc].guard is None
        ends[pc] = ends[pc + 1] if plain else pc
    return ends


@nb.njit(cache=True)
def _n_warps(idx: np.ndarray) -> int:
    """Warps among the sorted thread slots `idx`."""
    n, prev = 0, -1
    for i in range(idx.size):
        w = idx[i] >> 5
        if w != prev:
            n += 1
            prev = w
    return n


def run_machine(m: Machine, counts: StepCounts, observer=None, max_steps: int = 0,
                skip_units: frozenset | None = None, skip_pcs: np.ndarray | None = None) -> None:
    """Run the batch to completion; raises `PtxError` on faults and deadlocks, and
    `StepLimitError` when the batch takes more than `max_steps` steps (0: no limit).

    Instructions of a unit in `skip_units` and those where `skip_pcs` is True (timing
    mode, `isa.dataflow`) advance the pc without their semantics, unless they are control
    instructions. A run of such unguarded instructions that no other thread's pc lies in
    is stepped at once: its threads are those at its first pc in each of its steps (min-PC
    order), so each instruction is counted and observed with them, as step by step (an
    observer with a `record_run(m, first, stop, lanes, n_warps)` method is given the run in
    one call instead). An observer whose `record_silent` is set is given, per guarded step,
    the thread slots of one lane of each warp counted there none of whose lanes executed.
    """
    instrs = m.program.instrs
    skip = None
    if skip_units is not None or skip_pcs is not None:
        skip = [not ins.control and (ins.unit in (skip_units or ()) or (
            skip_pcs is not None and bool(skip_pcs[pc]))) for pc, ins in enumerate(instrs)]
    ends = _run_ends(instrs, skip) if skip is not None else None
    pc = m.pc
    limit = max_steps or (1 << 62)
    silent = getattr(observer, "record_silent", None)
    with np.errstate(all="ignore"):
        while True:
            target, idx = _lowest(pc)
            if target >= BLOCKED:
                if target == BLOCKED:
                    _deadlock(m)
                return
            lanes = _lanes_of(idx)
            ins = instrs[target]
            nw = _n_warps(idx)
            if ends is not None and ends[target] > target + 1:
                last = min(ends[target], _next_above(pc, target))
                if last > target + 1:
                    _plain_run(m, counts, observer, lanes, nw, target, last, limit)
                    continue
            counts.warp[target] += nw
            m.steps += 1
            if m.steps > limit:
                raise _step_limit(m, ins, limit)
            exec_lanes = lanes
            if ins.guard is not None:
                g = ins.guard.read_raw(m, lanes)
                if ins.guard_neg:
                    g = ~g
                if not g.all():
                    pc[lanes] = target + 1
                    if silent is not None:
                        _silent_warps(silent, m, idx, g)
                    if not g.any():
                        continue
                    exec_lanes = _lanes_of(idx[g])
            counts.thread[target] += m.nlanes(exec_lanes)
            if not ins.control:
                pc[lanes] = target + 1
            else:
                pc[exec_lanes] = target + 1
            if skip is None or not skip[target]:
                ins.sem(m, ins, exec_lanes)
            if observer is not None:
                observer(m, ins, exec_lanes, nw)


def _silent_warps(silent, m: Machine, slots: np.ndarray, g) -> None:
    """Tell `silent` the warps of thread `slots` none of whose lanes `g` lets execute."""
    firsts = _silent_firsts(slots, np.asarray(g, np.bool_).reshape(-1))
    if firsts.size:
        silent(m, firsts)


@nb.njit(cache=True)
def _silent_firsts(slots: np.ndarray, g: np.ndarray) -> np.ndarray:
    """The first thread slot (warp * 32) of each warp among the sorted `slots` none of
    whose lanes `g` (one flag per slot) lets execute, ascending."""
    out = np.empty(slots.size, np.int64)
    n, i = 0, 0
    while i < slots.size:
        w = slots[i] >> 5
        runs = False
        while i < slots.size and slots[i] >> 5 == w:
            runs = runs or g[i]
            i += 1
        if not runs:
            out[n] = w << 5
            n += 1
    return out[:n]


def _plain_run(m: Machine, counts: StepCounts, observer, lanes, nw: int, first: int,
               last: int, limit: int) -> None:
    """Steps `first` .. `last` - 1 of `run_machine` for threads `lanes` (skipped, unguarded
    instructions; no other thread at those pcs)."""
    n_lanes = m.nlanes(lanes)
    instrs = m.program.instrs
    record_run = getattr(observer, "record_run", None)
    for target in range(first, last):
        counts.warp[target] += nw
        m.steps += 1
        if m.steps > limit:
            m.pc[lanes] = target
            raise _step_limit(m, instrs[target], limit)
        counts.thread[target] += n_lanes
        if observer is not None and record_run is None:
            observer(m, instrs[target], lanes, nw)
    if record_run is not None:
        record_run(m, first, last, lanes, nw)
    m.pc[lanes] = last


def _step_limit(m: Machine, ins, limit: int) -> StepLimitError:
    """The error of a batch that ran `limit` steps without finishing, at `ins`."""
    return m.fault(ins, f"kernel '{m.program.entry}': step limit of {limit} reached "
                   "(infinite loop?)", error=StepLimitError,
                   expected=f"a kernel that finishes within max_steps={limit} steps per batch "
                   "of CTAs (run_kernel(max_steps=...) raises it; None lifts it)")


def _deadlock(m: Machine) -> None:
    """Raise a PtxError describing, for the first stuck CTA, where its threads wait."""
    blocked = np.flatnonzero(m.pc == BLOCKED)
    c = int(m.cta_of[int(blocked[0])])
    seg = slice(c * m.tpc, (c + 1) * m.tpc)
    live = int(np.count_nonzero(m.pc[seg] != EXITED))
    waits = m.resume[seg][m.pc[seg] == BLOCKED] - 1
    pcs, counts = np.unique(waits, return_counts=True)
    parts = []
    for pc, n in zip(pcs.tolist(), counts.tolist(), strict=True):
        w = m.program.instrs[pc]
        parts.append(f"{n} at '{w.loc.text.strip().rstrip(';')}' (line {w.loc.line})")
    first = m.program.instrs[int(pcs[0])]
    cta = tuple(int(x) for x in m.cta_ids[c])
    raise PtxError(f"barrier deadlock in CTA {cta}: of {live} live threads, "
                   + ", ".join(parts) + "; no barrier can complete",
                   file=first.loc.file, line=first.loc.line, col=first.loc.col,
                   text=first.loc.text,
                   expected="every live thread of the CTA to reach the same barrier")
