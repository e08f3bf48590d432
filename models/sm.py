"""A streaming multiprocessor replaying warp traces: schedulers, scoreboard, units, barriers.

What it models
--------------
`StreamingMultiprocessor` runs the CTAs the dispatcher gives it. Each CTA's warps are spread
round-robin over the `sm.subpartitions` warp schedulers (`models.warp_scheduler`). A warp's
next instruction comes from its recorded trace (`simulator.trace`); it may issue when

* the scoreboard allows: every register it reads or writes has been produced (producers'
  results are ready `latency` cycles after issue, memory results when the LSU says),
* its unit on that sub-partition is free (initiation interval, `models.units`),
* the warp is not waiting at a barrier; one instruction per warp per cycle.

Each scheduler issues at most one instruction per cycle. `bar.sync` holds a warp until every
unfinished warp of its CTA has arrived.

Hopper tile ops (actions of `models.units`):

* TMA / bulk copies go to the SM's `models.tma.TmaEngine`, which returns their completion
  cycle at issue. A load's `complete_tx` is a contribution to its mbarrier phase at that
  cycle; `mbarrier.arrive*`/`expect_tx`/`complete_tx` contribute when their shared-memory
  access is done (LSU). A phase (trace slot, `simulator.trace_tiles`) completes at the
  latest of its contributions once all of them (`slot_events`) have been issued.
* `mbarrier.try_wait`/`test_wait`: the warp's next instruction waits for the phase's
  completion cycle; a warp whose phase still lacks contributions is parked (like a barrier)
  and released when the last one is issued.
* `wgmma.mma_async`: takes one issue cycle; its share of the MMA queues on the
  sub-partition's tensor pipe (`tensor_free`, busy `interval` cycles per op, FIFO) and its
  accumulators are ready `latency` cycles after the pipe starts it. `commit_group` closes
  the warp's open group (its completion = latest op in it); `wait_group N` holds the
  warp's next instruction until all but the N newest groups have completed.

A CTA is done when its last warp has issued its last instruction; the SM then takes the
next CTA from the dispatcher. The SM finishes when its last result (including stores) has
completed.

Time advances only to cycles where something can happen (the earliest ready warp or free
unit), not cycle by cycle; a scheduler is asked for a warp only from its `wake` cycle on (or
when a launch, barrier release or finished warp changed its warps), so idle schedulers cost
nothing. The SimPy process yields only when the next such cycle lies more than
`quantum_cycles` ahead of the simulation clock, so SMs run ahead of each other by at most that
window (memory requests are time-stamped exactly; shared pipes see them in nearly time order).
Per-pc timings are tuples (`_op`) looked up per trace event, built once in `KernelImage`.

Batched runs (`KernelImage(batch_runs=True)`; `simulator.simulate.Replay` turns it on
under the greedy `gto` policy): a run of consecutive events of one warp on consecutive pcs,
all plain unit instructions (`ACTION_UNIT`) of one unit with a 1-cycle initiation interval,
none reading or writing a register an earlier one of the run wrote, is replayed as one
event (`ACTION_RUN`) when its warp issues it: the part of the run whose instructions would
issue back to back (each register ready by the cycle its first user issues) takes the
scheduler's issue slot and the unit for that many consecutive cycles, each destination is
ready at its own instruction's issue cycle + latency, the warp's next instruction may issue
one cycle after the last one; the rest of a run cut short issues instruction by instruction.
This is what the instructions one by one do under `gto`: the greedy warp keeps the slot
while its next instruction is ready, which within such a run is every cycle, and nothing
else it does depends on those cycles. The SM also yields to SimPy at the cycle it would
have yielded at visiting the run's cycles one by one (`run_end`), so other SMs interleave
with it as before and memory sees the same order. Replays come out identical to the
unbatched ones (the tests compare cycles and stats). Runs with a 2-cycle interval (int32 on
H100/H800) are not batched: one by one they leave every other slot to other warps. The
long runs are the FP8 GEMM's FP32 promotion FMAs (independent, one per accumulator).

Hooks (fired on `self.hooks`, owner `sm<id>`): `SM_ISSUE` (issued, busy_cycles: per-unit
arrays) once per finished CTA, from counts precomputed over its trace (every event of a CTA
issues exactly once); `SM_STALL` (reason, cycles, cycle): scheduler cycles without an issue
since the previous firing up to `cycle`, by the
reason of the first warp in policy order (`WarpScheduler.stall_reason`), followed per
scheduler as stretches over which the reason stays the same, summed per reason and fired
once per reason at each yield and at the end; `SM_CTA_LAUNCH` / `SM_CTA_DONE` (cta, warps,
cycle). The totals equal those of one event per issue and per idle scheduler-cycle.

Left out: instruction fetch and caches, operand collectors, warp-level divergence costs
beyond the traced active masks, CTA launch latency. Units: SM cycles, ps for the SimPy clock.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models.lsu import LoadStoreUnit
from models.tma import TmaEngine
from models.units import (
    ACTION_BARRIER,
    ACTION_MBARRIER,
    ACTION_MBARRIER_WAIT,
    ACTION_MEMORY,
    ACTION_TMA,
    ACTION_UNIT,
    ACTION_WGMMA,
    ACTION_WGMMA_COMMIT,
    UNIT_NAMES,
    InstrTiming,
)
from models.warp_scheduler import (
    NEVER,
    STALL_REASONS,
    WarpScheduler,
    first_warp_reason,
    make_policy,
)
from simulator.engine import Clock
from simulator.hooks import Hooks
from simulator.trace import (
    KIND_ATOMIC,
    KIND_BULK_STORE,
    KIND_LOAD,
    KIND_SHARED,
    KIND_STORE,
    WarpTrace,
)

SM_ISSUE = "SM_ISSUE"
SM_STALL = "SM_STALL"
SM_CTA_LAUNCH = "SM_CTA_LAUNCH"
SM_CTA_DONE = "SM_CTA_DONE"
DEFAULT_QUANTUM_CYCLES = 64
_SECTOR_KINDS = (KIND_LOAD, KIND_STORE, KIND_ATOMIC)
ACTION_RUN = -1
"""Action of a batched run of plain unit instructions (see the module docstring)."""


def _op(t: InstrTiming) -> tuple:
    """(unit, interval, latency, action, scoreboard registers, destinations, count) of a pc."""
    registers = tuple(dict.fromkeys(t.sources + t.destinations))
    if t.action == ACTION_WGMMA:
        registers = t.sources
    return (t.unit, t.interval_cycles, t.latency_cycles, t.action, registers, t.destinations,
            t.count)


def _run_limits(timings: list[InstrTiming]) -> list[int]:
    """Per pc, how many instructions from it on (pc, pc+1, ...) may form one run."""
    limits = [1] * len(timings)
    for p, t in enumerate(timings):
        if t.action != ACTION_UNIT or t.interval_cycles != 1:
            continue
        written = set(t.destinations)
        q = p + 1
        while q < len(timings):
            u = timings[q]
            if u.action != ACTION_UNIT or u.unit != t.unit or u.interval_cycles != 1:
                break
            if not written.isdisjoint(u.sources + u.destinations):
                break
            written.update(u.destinations)
            q += 1
        limits[p] = q - p
    return limits


def _run_op(timings: list[InstrTiming], pc: int, n: int) -> tuple:
    """The `_op` tuple of the run of `n` instructions from `pc` (action `ACTION_RUN`).

    interval = the unit's busy cycles (n); latency = cycles from the run's issue to its last
    result; registers = those of the first instruction (the scoreboard check before issue);
    count = (n, cycles from the run's issue to the earliest next issue of the warp,
    per-destination ready offsets, every register the run reads or writes, the offset of
    the run's first instruction that uses it, pc)."""
    group = timings[pc:pc + n]
    first_use: dict[int, int] = {}
    ready: dict[int, int] = {}
    start = last_issue = 0
    for t in group:
        for r in t.sources + t.destinations:
            first_use.setdefault(r, start)
        for d in t.destinations:
            ready[d] = start + t.latency_cycles
        last_issue = start
        start += t.interval_cycles
    offsets = tuple(ready.values())
    return (group[0].unit, start, max(offsets, default=0), ACTION_RUN, _op(group[0])[4],
            tuple(ready), (n, last_issue + 1, offsets, tuple(first_use),
                           tuple(first_use.values()), pc))


def _batch_runs(ops: list, trace: WarpTrace, timings: list[InstrTiming],
                run_ops: dict[tuple[int, int], tuple]) -> int:
    """Replace the first event of each batchable run by its run op (in place, `run_ops`
    caches them per (pc, length)); the number of runs."""
    limits = _run_limits(timings)
    if max(limits, default=1) < 2:
        return 0
    pc = trace.pc
    ends = np.zeros(pc.size + 1, dtype=bool)
    offsets = trace.warp_offsets[1:]
    ends[offsets - 1] = True
    ends[np.maximum(offsets - 2, 0)] = True
    cont_a = (np.diff(pc) == 1) & ~ends[:pc.size - 1]
    limit_a = np.asarray(limits, dtype=np.int64)[pc[:-1]] if pc.size else np.zeros(0, np.int64)
    starts = np.flatnonzero(cont_a & (limit_a >= 2)).tolist()
    cont = cont_a.tolist() + [False]
    pcs = pc.tolist()
    runs, free = 0, 0
    for e in starts:
        if e < free:
            continue
        limit = limits[pcs[e]]
        n = 2
        while n < limit and cont[e + n - 1]:
            n += 1
        key = (pcs[e], n)
        op = run_ops.get(key)
        if op is None:
            op = run_ops[key] = _run_op(timings, pcs[e], n)
        ops[e] = op
        runs += 1
        free = e + n
    return runs


@dataclass(frozen=True)
class KernelImage:
    """A traced kernel ready to time: per-event lists, per-pc timings, per-CTA issue counts.

    `ops[e]` is the `_op` tuple of event `e`'s pc (with `batch_runs`, a run's first event
    holds the run's op; `runs` counts them); `cta_issued[c]` / `cta_busy_cycles[c]` are
    CTA `c`'s warp-instructions and initiation-interval cycles per unit.
    """

    trace: WarpTrace
    timings: list[InstrTiming]
    n_registers: int
    batch_runs: bool = False

    def __post_init__(self) -> None:
        trace, n_units = self.trace, len(UNIT_NAMES)
        by_pc = [_op(t) for t in self.timings]
        setattr_ = object.__setattr__
        ops = list(map(by_pc.__getitem__, trace.pc.tolist()))
        setattr_(self, "run_ops", {})
        setattr_(self, "runs", _batch_runs(ops, trace, self.timings, self.run_ops)
                 if self.batch_runs else 0)
        setattr_(self, "ops", ops)
        setattr_(self, "kinds", trace.kind.tolist())
        setattr_(self, "details", trace.detail.tolist())
        setattr_(self, "sector_starts", trace.sector_start.tolist())
        setattr_(self, "offsets", trace.warp_offsets.tolist())
        slots = trace.phase_slot
        setattr_(self, "slots", slots.tolist() if slots is not None else None)
        events = trace.slot_events
        setattr_(self, "slot_events", events.tolist() if events is not None else [])
        unit = np.array([t.unit for t in self.timings], dtype=np.int64)
        interval = np.array([t.interval_cycles for t in self.timings], dtype=np.int64)
        per_warp = np.diff(trace.warp_offsets)
        cta = np.repeat(np.arange(per_warp.size, dtype=np.int64), per_warp) // trace.warps_per_cta
        key = cta * n_units + unit[trace.pc]
        size = trace.n_ctas * n_units
        setattr_(self, "cta_issued", np.bincount(key, minlength=size).reshape(-1, n_units))
        busy = np.bincount(key, weights=interval[trace.pc], minlength=size)
        setattr_(self, "cta_busy_cycles", busy.astype(np.int64).reshape(-1, n_units))


    def run_op(self, pc: int, n: int) -> tuple:
        """The op of the run of `n` instructions from `pc` (cached)."""
        op = self.run_ops.get((pc, n))
        if op is None:
            op = self.run_ops[(pc, n)] = _run_op(self.timings, pc, n)
        return op


class Warp:
    """One resident warp: where it is in its trace and its scoreboard."""

    __slots__ = ("gid", "cta", "scheduler", "pos", "end", "ready", "from_memory",
                 "ready_cycle", "next_unit", "waits_on_memory", "finished", "done_cycle",
                 "wgmma_groups", "wgmma_open")

    def __init__(self, gid: int, cta, scheduler, start: int, end: int, n_regs: int,
                 cycle: int) -> None:
        self.gid, self.cta, self.scheduler = gid, cta, scheduler
        self.pos, self.end = start, end
        self.ready = [0] * n_regs
        self.from_memory = [False] * n_regs
        self.ready_cycle, self.next_unit, self.waits_on_memory = cycle, 0, False
        self.finished = False
        self.done_cycle = cycle
        self.wgmma_groups: list[int] = []
        self.wgmma_open = 0


class CtaState:
    """A resident CTA: its unfinished warps and those waiting at the barrier."""

    __slots__ = ("index", "live", "arrived")

    def __init__(self, index: int, live: int) -> None:
        self.index, self.live, self.arrived = index, live, []


class StreamingMultiprocessor:
    """One SM (see the module docstring); `launch(cta)` then run `process()` under SimPy."""

    def __init__(self, sm_id: int, env, config, kernel: KernelImage, memory, dispatcher,
                 policy: str | None = None, quantum_cycles: int = DEFAULT_QUANTUM_CYCLES):
        self.sm_id, self.env, self.kernel, self.dispatcher = sm_id, env, kernel, dispatcher
        self.ops = kernel.ops
        self.clock = Clock(config.chip.clock_ghz)
        self.hooks = Hooks(f"sm{sm_id}")
        self.lsu = LoadStoreUnit(sm_id, config, memory, self.clock)
        self.tma = TmaEngine(sm_id, memory, self.clock)
        self.tensor_free = [0] * config.sm.subpartitions
        self.phase_pending: dict[int, list[int]] = {}
        self.phase_done: dict[int, int] = {}
        self.phase_waiters: dict[int, list[Warp]] = {}
        name = policy or config.sm.scheduler_policy
        self.schedulers = [WarpScheduler(k, make_policy(name), len(UNIT_NAMES))
                           for k in range(config.sm.subpartitions)]
        self.quantum_ps = self.clock.cycles_to_ps(quantum_cycles)
        self.resident = 0
        self.next_scheduler = 0
        self.cycle = 0
        self.wake_cycle = NEVER
        self.finish_cycle = 0
        self.run_end = 0
        self.pending_stall_cycles = dict.fromkeys(STALL_REASONS, 0)

    # -- CTAs -----------------------------------------------------------------------
    def launch(self, cta: int) -> None:
        """Make CTA `cta` resident from the current cycle on."""
        kernel, wpc, cycle = self.kernel, self.kernel.trace.warps_per_cta, self.cycle
        state = CtaState(cta, wpc)
        self.resident += 1
        for k in range(wpc):
            gid = cta * wpc + k
            sched = self.schedulers[self.next_scheduler]
            self.next_scheduler = (self.next_scheduler + 1) % len(self.schedulers)
            start, end = kernel.offsets[gid], kernel.offsets[gid + 1]
            warp = Warp(gid, state, sched, start, end, kernel.n_registers, cycle)
            sched.add(warp, cycle)
            if start == end:
                self._finish_warp(warp, cycle)
            else:
                self._prepare(warp, cycle - 1)
        if self.hooks.listening:
            self.hooks.fire(SM_CTA_LAUNCH, cta=cta, warps=wpc, cycle=cycle)
        self.wake_cycle = min(self.wake_cycle, cycle)

    def _cta_done(self, state: CtaState, cycle: int) -> None:
        self.resident -= 1
        if self.hooks.listening:
            kernel = self.kernel
            self.hooks.fire(SM_ISSUE, issued=kernel.cta_issued[state.index],
                            busy_cycles=kernel.cta_busy_cycles[state.index])
            self.hooks.fire(SM_CTA_DONE, cta=state.index,
                            warps=kernel.trace.warps_per_cta, cycle=cycle)
        cta = self.dispatcher.take()
        if cta is not None:
            self.launch(cta)

    # -- warps ----------------------------------------------------------------------
    def _prepare(self, warp: Warp, cycle: int) -> None:
        """Scoreboard check of the warp's next instruction, after an issue at `cycle`."""
        unit, _, _, _, registers, _, _ = self.ops[warp.pos]
        ready_cycle, memory = cycle + 1, False
        ready = warp.ready
        for r in registers:
            if ready[r] > ready_cycle:
                ready_cycle, memory = ready[r], warp.from_memory[r]
        warp.ready_cycle, warp.next_unit, warp.waits_on_memory = ready_cycle, unit, memory

    def _finish_warp(self, warp: Warp, cycle: int) -> None:
        warp.finished = True
        warp.scheduler.remove(warp, cycle)
        self.finish_cycle = max(self.finish_cycle, warp.done_cycle)
        state = warp.cta
        state.live -= 1
        if state.live == 0:
            self._cta_done(state, cycle)
        elif len(state.arrived) == state.live:
            self._release(state, cycle)

    def _release(self, state: CtaState, cycle: int) -> None:
        arrived, state.arrived = state.arrived, []
        for warp in arrived:
            if warp.pos == warp.end:
                self._finish_warp(warp, cycle)
            else:
                self._prepare(warp, cycle)
                warp.scheduler.touch(cycle)
        self.wake_cycle = min(self.wake_cycle, cycle + 1)

    def _access(self, e: int, cycle: int) -> int:
        """Completion cycle of memory event `e` issued at `cycle` (through the LSU)."""
        kernel = self.kernel
        kind, detail = kernel.kinds[e], kernel.details[e]
        sectors = None
        if kind in _SECTOR_KINDS:
            s = kernel.sector_starts[e]
            sectors = kernel.trace.sectors[s:s + detail]
        return self.lsu.issue(cycle, kind, detail, sectors)

    def _issue(self, warp: Warp, sched: WarpScheduler, cycle: int) -> None:
        """Issue the warp's next instruction at `cycle`; then `_prepare` (inlined) the one after."""
        e = warp.pos
        ops = self.ops
        unit, interval, latency, action, _, destinations, count = ops[e]
        if action == ACTION_UNIT:             # the common case, without the tile/barrier tests
            sched.unit_free[unit] = cycle + interval
            done = cycle + latency
            ready, from_memory = warp.ready, warp.from_memory
            for d in destinations:
                ready[d] = done
                from_memory[d] = False
            if done > warp.done_cycle:
                warp.done_cycle = done
            e += 1
            warp.pos = e
            if e == warp.end:
                self._finish_warp(warp, cycle)
                return
            next_unit, _, _, _, registers, _, _ = ops[e]
            ready_cycle, memory = cycle + 1, False
            for r in registers:
                if ready[r] > ready_cycle:
                    ready_cycle, memory = ready[r], from_memory[r]
            warp.ready_cycle, warp.next_unit, warp.waits_on_memory = ready_cycle, next_unit, memory
            return
        if action < 0:
            self._issue_run(warp, sched, cycle, ops[e])
            return
        sched.unit_free[unit] = cycle + interval
        hold = 0
        if action == ACTION_MEMORY:
            done, memory = self._access(e, cycle), True
        elif action >= ACTION_TMA:
            done, memory, hold = self._tile(warp, sched, e, cycle, action, interval, latency,
                                            count)
        else:
            done, memory = cycle + latency, False
        ready, from_memory = warp.ready, warp.from_memory
        for d in destinations:
            ready[d] = done
            from_memory[d] = memory
        if done > warp.done_cycle:
            warp.done_cycle = done
        e += 1
        warp.pos = e
        if action == ACTION_BARRIER:
            warp.ready_cycle = NEVER
            state = warp.cta
            state.arrived.append(warp)
            if len(state.arrived) == state.live:
                self._release(state, cycle)
        elif e == warp.end:
            self._finish_warp(warp, cycle)
        else:
            next_unit, _, _, _, registers, _, _ = self.ops[e]
            ready_cycle, memory = cycle + 1, False
            for r in registers:
                if ready[r] > ready_cycle:
                    ready_cycle, memory = ready[r], from_memory[r]
            if hold > ready_cycle:
                ready_cycle, memory = hold, action == ACTION_MBARRIER_WAIT
            warp.ready_cycle, warp.next_unit, warp.waits_on_memory = ready_cycle, next_unit, memory

    def _issue_run(self, warp: Warp, sched: WarpScheduler, cycle: int, op: tuple) -> None:
        """Issue a batched run (`ACTION_RUN`) at `cycle`, or the part of it whose registers
        are ready in time (the rest then issues instruction by instruction)."""
        ready, from_memory = warp.ready, warp.from_memory
        n, _, _, registers, first_use, pc = op[6]
        k = n
        for r, offset in zip(registers, first_use, strict=True):
            if offset < k and ready[r] > cycle + offset:
                k = offset
        if k < n:
            op = self.kernel.run_op(pc, max(k, 1))
        unit, interval, latency, _, _, destinations, (n, step, offsets, _, _, _) = op
        sched.unit_free[unit] = cycle + interval
        sched.wake = sched.slot_free = cycle + n
        if cycle + n > self.run_end:
            self.run_end = cycle + n
        for d, offset in zip(destinations, offsets, strict=True):
            ready[d] = cycle + offset
            from_memory[d] = False
        done = cycle + latency
        if done > warp.done_cycle:
            warp.done_cycle = done
        e = warp.pos = warp.pos + n
        if e == warp.end:
            self._finish_warp(warp, cycle)
            return
        next_unit, _, _, _, registers, _, _ = self.ops[e]
        ready_cycle, memory = cycle + step, False
        for r in registers:
            if ready[r] > ready_cycle:
                ready_cycle, memory = ready[r], from_memory[r]
        warp.ready_cycle, warp.next_unit, warp.waits_on_memory = ready_cycle, next_unit, memory

    # -- tile ops -------------------------------------------------------------------
    def _tile(self, warp: Warp, sched: WarpScheduler, e: int, cycle: int, action: int,
              interval: int, latency: int, count: int) -> tuple[int, bool, int]:
        """(result cycle, from memory, hold-next-instruction-until cycle) of a tile op."""
        kernel = self.kernel
        if action == ACTION_WGMMA:
            sched.unit_free[kernel.ops[e][0]] = cycle + 1
            k = sched.index
            start = max(cycle, self.tensor_free[k])
            self.tensor_free[k] = start + interval
            done = start + latency
            if done > warp.wgmma_open:
                warp.wgmma_open = done
            return done, False, 0
        if action == ACTION_WGMMA_COMMIT:
            warp.wgmma_groups.append(warp.wgmma_open)
            warp.wgmma_open = 0
            return cycle + latency, False, 0
        if action == ACTION_TMA:
            s, n = kernel.sector_starts[e], kernel.details[e]
            store = kernel.kinds[e] == KIND_BULK_STORE
            done = self.tma.issue(cycle, store, kernel.trace.sectors[s:s + n])
            if not store:
                self._contribute(kernel.slots[e], done, cycle)
            return done, True, 0
        if action == ACTION_MBARRIER:
            done = self.lsu.issue(cycle, KIND_SHARED, 1, None)
            self._contribute(kernel.slots[e], done, cycle)
            return done, False, 0
        if action == ACTION_MBARRIER_WAIT:
            slot = kernel.slots[e]
            if slot < 0:
                return cycle + latency, False, 0
            at = self.phase_done.get(slot)
            if at is None:
                self.phase_waiters.setdefault(slot, []).append(warp)
                return cycle + latency, False, NEVER
            return max(at, cycle + latency), True, at
        groups = warp.wgmma_groups
        hold = 0
        if len(groups) > count:
            cut = len(groups) - count
            hold = max(groups[:cut])
            del groups[:cut]
        return cycle + latency, False, hold

    def _contribute(self, slot: int, at: int, cycle: int) -> None:
        """One contribution to mbarrier phase `slot` at cycle `at` (issued at `cycle`)."""
        pending = self.phase_pending.get(slot)
        if pending is None:
            pending = self.phase_pending[slot] = [0, 0]
        pending[0] += 1
        if at > pending[1]:
            pending[1] = at
        if pending[0] < self.kernel.slot_events[slot]:
            return
        del self.phase_pending[slot]
        done = self.phase_done[slot] = pending[1]
        for warp in self.phase_waiters.pop(slot, ()):
            if warp.pos == warp.end:
                continue
            self._prepare(warp, cycle)
            if done > warp.ready_cycle:
                warp.ready_cycle, warp.waits_on_memory = done, True
            warp.scheduler.touch(cycle)
            self.wake_cycle = min(self.wake_cycle, cycle + 1)

    # -- stall stretches ------------------------------------------------------------
    def _account_stalls(self, cycle: int) -> None:
        """After the issues of `cycle`: end or start each changed scheduler's stall stretch."""
        for sched in self.schedulers:
            if not sched.touched:
                continue
            sched.touched = False
            reason = None if cycle < sched.slot_free else sched.stall_reason(cycle)
            if reason != sched.stall_reason_open:
                self._stretch(sched, reason, cycle)

    def _stretch(self, sched: WarpScheduler, reason: str | None, cycle: int) -> None:
        """End the scheduler's open stall stretch at `cycle`, open one of `reason` there."""
        open_reason = sched.stall_reason_open
        if open_reason is not None:
            self.pending_stall_cycles[open_reason] += cycle - sched.stall_since
        sched.stall_reason_open, sched.stall_since = reason, cycle

    def _fire_stalls(self, cycle: int) -> None:
        """Fire the stall cycles summed so far, open stretches counted up to `cycle`."""
        pending = self.pending_stall_cycles
        for sched in self.schedulers:
            if sched.stall_reason_open is not None:
                pending[sched.stall_reason_open] += cycle - sched.stall_since
                sched.stall_since = cycle
        for reason, cycles in pending.items():
            if cycles:
                self.hooks.fire(SM_STALL, reason=reason, cycles=cycles, cycle=cycle)
                pending[reason] = 0

    # -- the process ----------------------------------------------------------------
    def process(self):
        """SimPy process: issue until no CTA is resident and the dispatcher is empty.

        The loop holds each scheduler's pick (the first warp in policy order whose operands
        are ready and whose unit is free; `models.warp_scheduler`) and, while hooks listen,
        the stall stretch of each scheduler it asks (`_stretch`, with the reason
        `WarpScheduler.stall_reason` gives from the order the pick walked): a scheduler
        changed afterwards in the same cycle from outside is `touch`ed and `_account_stalls`
        redoes it after the issues, which ends a stretch opened at that cycle after 0
        cycles, so the sums per reason are those of accounting every scheduler after the
        issues. These ran for every visited cycle of every scheduler: a quarter of an
        element-wise replay's time."""
        env, clock, hooks = self.env, self.clock, self.hooks
        scheds = self.schedulers
        issue, pending = self._issue, self.pending_stall_cycles
        last_cycle_in_window = clock.ps_to_cycles(env.now + self.quantum_ps)
        while self.resident:
            cycle = self.cycle
            self.wake_cycle = NEVER
            next_cycle = NEVER
            listening = hooks.listening
            for sched in scheds:
                wake = sched.wake
                if wake <= cycle:
                    reason = None
                    if cycle < sched.slot_free:
                        wake = sched.wake = sched.slot_free
                    else:
                        order = sched._order
                        if order is None:
                            order = sched._order = sched.policy.order(sched.warps, sched.last)
                        unit_free = sched.unit_free
                        earliest = NEVER
                        for warp in order:
                            ready = warp.ready_cycle
                            if ready > cycle:
                                if ready < earliest:
                                    earliest = ready
                                continue
                            free = unit_free[warp.next_unit]
                            if free > cycle:
                                if free < earliest:
                                    earliest = free
                                continue
                            sched.wake = sched.slot_free = cycle + 1
                            if warp is not sched.last:
                                sched.last = warp
                                sched._order = None
                            issue(warp, sched, cycle)
                            wake = sched.wake
                            break
                        else:
                            wake = sched.wake = earliest
                            if listening:
                                reason = first_warp_reason(order, cycle)
                    if listening:
                        sched.touched = False
                        open_reason = sched.stall_reason_open
                        if reason != open_reason:              # _stretch, inlined
                            if open_reason is not None:
                                pending[open_reason] += cycle - sched.stall_since
                            sched.stall_reason_open, sched.stall_since = reason, cycle
                    else:
                        sched.touched = True
                if wake < next_cycle:
                    next_cycle = wake
            if self.wake_cycle < next_cycle:
                next_cycle = self.wake_cycle
            if next_cycle <= cycle:
                next_cycle = cycle + 1
            if next_cycle >= NEVER:
                if self.resident:
                    raise RuntimeError(f"sm{self.sm_id}: no warp can ever issue at cycle {cycle}")
                break
            if listening:
                for sched in scheds:
                    if sched.touched:
                        self._account_stalls(cycle)
                        break
            if next_cycle > last_cycle_in_window + 1 and self.run_end > last_cycle_in_window + 1:
                next_cycle = last_cycle_in_window + 1  # a run issues there: yield as it would
            self.cycle = next_cycle
            if next_cycle > last_cycle_in_window:
                if hooks.listening:
                    self._fire_stalls(next_cycle)
                yield env.timeout(clock.edge_ps(next_cycle) - env.now)
                last_cycle_in_window = clock.ps_to_cycles(env.now + self.quantum_ps)
        if hooks.listening:
            self._fire_stalls(self.cycle)
        self.finish_cycle = max(self.finish_cycle, self.cycle)
