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
unfinished warp of its CTA has arrived. A CTA is done when its last warp has issued its last
instruction; the SM then takes the next CTA from the dispatcher. The SM finishes when its last
result (including stores) has completed.

Time advances only to cycles where something can happen (the earliest ready warp or free
unit), not cycle by cycle; the SimPy process yields only when the next such cycle lies more
than `quantum_cycles` ahead of the simulation clock, so SMs run ahead of each other by at
most that window (memory requests are time-stamped exactly; shared pipes see them in nearly
time order).

Hooks (fired on `self.hooks`, owner `sm<id>`): `SM_ISSUE` (unit index, interval_cycles),
`SM_STALL` (reason, cycles) per scheduler and idle stretch, `SM_CTA_LAUNCH` / `SM_CTA_DONE`
(cta, warps, cycle). Left out: instruction fetch and caches, operand collectors, warp-level
divergence costs beyond the traced active masks, CTA launch latency. Units: SM cycles, ps
for the SimPy clock.
"""

from __future__ import annotations

from dataclasses import dataclass

from models.lsu import LoadStoreUnit
from models.units import ACTION_BARRIER, ACTION_MEMORY, UNIT_NAMES, InstrTiming
from models.warp_scheduler import NEVER, WarpScheduler, make_policy
from simulator.engine import Clock
from simulator.hooks import Hooks
from simulator.trace import KIND_ATOMIC, KIND_LOAD, KIND_STORE, WarpTrace

SM_ISSUE = "SM_ISSUE"
SM_STALL = "SM_STALL"
SM_CTA_LAUNCH = "SM_CTA_LAUNCH"
SM_CTA_DONE = "SM_CTA_DONE"
DEFAULT_QUANTUM_CYCLES = 64
_SECTOR_KINDS = (KIND_LOAD, KIND_STORE, KIND_ATOMIC)


@dataclass(frozen=True)
class KernelImage:
    """A traced kernel ready to time: per-event lists and per-pc timings."""

    trace: WarpTrace
    timings: list[InstrTiming]
    n_registers: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "pcs", self.trace.pc.tolist())
        object.__setattr__(self, "kinds", self.trace.kind.tolist())
        object.__setattr__(self, "details", self.trace.detail.tolist())
        object.__setattr__(self, "sector_starts", self.trace.sector_start.tolist())
        object.__setattr__(self, "offsets", self.trace.warp_offsets.tolist())


class Warp:
    """One resident warp: where it is in its trace and its scoreboard."""

    __slots__ = ("gid", "cta", "scheduler", "pos", "end", "ready", "from_memory",
                 "ready_cycle", "next_unit", "waits_on_memory", "finished", "done_cycle")

    def __init__(self, gid: int, cta, scheduler, start: int, end: int, n_regs: int,
                 cycle: int) -> None:
        self.gid, self.cta, self.scheduler = gid, cta, scheduler
        self.pos, self.end = start, end
        self.ready = [0] * n_regs
        self.from_memory = [False] * n_regs
        self.ready_cycle, self.next_unit, self.waits_on_memory = cycle, 0, False
        self.finished = False
        self.done_cycle = cycle


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
        self.clock = Clock(config.chip.clock_ghz)
        self.hooks = Hooks(f"sm{sm_id}")
        self.lsu = LoadStoreUnit(sm_id, config, memory, self.clock)
        name = policy or config.sm.scheduler_policy
        self.schedulers = [WarpScheduler(k, make_policy(name), len(UNIT_NAMES))
                           for k in range(config.sm.subpartitions)]
        self.quantum_ps = self.clock.cycles_to_ps(quantum_cycles)
        self.resident = 0
        self.next_scheduler = 0
        self.cycle = 0
        self.wake_cycle = NEVER
        self.finish_cycle = 0

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
            sched.warps.append(warp)
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
            self.hooks.fire(SM_CTA_DONE, cta=state.index,
                            warps=self.kernel.trace.warps_per_cta, cycle=cycle)
        cta = self.dispatcher.take()
        if cta is not None:
            self.launch(cta)

    # -- warps ----------------------------------------------------------------------
    def _prepare(self, warp: Warp, cycle: int) -> None:
        """Scoreboard check of the warp's next instruction, after an issue at `cycle`."""
        t = self.kernel.timings[self.kernel.pcs[warp.pos]]
        ready_cycle, memory = cycle + 1, False
        ready, from_memory = warp.ready, warp.from_memory
        for r in t.sources + t.destinations:
            if ready[r] > ready_cycle:
                ready_cycle, memory = ready[r], from_memory[r]
        warp.ready_cycle, warp.next_unit, warp.waits_on_memory = ready_cycle, t.unit, memory

    def _finish_warp(self, warp: Warp, cycle: int) -> None:
        warp.finished = True
        warp.scheduler.warps.remove(warp)
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
        self.wake_cycle = min(self.wake_cycle, cycle + 1)

    def _issue(self, warp: Warp, sched: WarpScheduler, cycle: int) -> None:
        kernel = self.kernel
        e = warp.pos
        t = kernel.timings[kernel.pcs[e]]
        sched.unit_free[t.unit] = cycle + t.interval_cycles
        sched.last = warp
        memory = t.action == ACTION_MEMORY
        if memory:
            kind, detail = kernel.kinds[e], kernel.details[e]
            sectors = None
            if kind in _SECTOR_KINDS:
                s = kernel.sector_starts[e]
                sectors = kernel.trace.sectors[s:s + detail]
            done = self.lsu.issue(cycle, kind, detail, sectors)
        else:
            done = cycle + t.latency_cycles
        ready, from_memory = warp.ready, warp.from_memory
        for d in t.destinations:
            ready[d] = done
            from_memory[d] = memory
        if done > warp.done_cycle:
            warp.done_cycle = done
        if self.hooks.listening:
            self.hooks.fire(SM_ISSUE, unit=t.unit, interval_cycles=t.interval_cycles)
        warp.pos = e + 1
        if t.action == ACTION_BARRIER:
            warp.ready_cycle = NEVER
            state = warp.cta
            state.arrived.append(warp)
            if len(state.arrived) == state.live:
                self._release(state, cycle)
        elif warp.pos == warp.end:
            self._finish_warp(warp, cycle)
        else:
            self._prepare(warp, cycle)

    # -- the process ----------------------------------------------------------------
    def process(self):
        """SimPy process: issue until no CTA is resident and the dispatcher is empty."""
        env, clock, hooks = self.env, self.clock, self.hooks
        scheds = self.schedulers
        while self.resident:
            cycle = self.cycle
            self.wake_cycle = NEVER
            next_cycle = NEVER
            idle = []
            for sched in scheds:
                warp, earliest = sched.pick(cycle)
                if warp is not None:
                    self._issue(warp, sched, cycle)
                elif hooks.listening:
                    idle.append(sched)
                if earliest < next_cycle:
                    next_cycle = earliest
            next_cycle = min(next_cycle, max(self.wake_cycle, cycle + 1))
            if next_cycle >= NEVER:
                if self.resident:
                    raise RuntimeError(f"sm{self.sm_id}: no warp can ever issue at cycle {cycle}")
                break
            for sched in idle:
                hooks.fire(SM_STALL, reason=sched.stall_reason(cycle), cycles=next_cycle - cycle)
            self.cycle = next_cycle
            target_ps = clock.edge_ps(next_cycle)
            if target_ps > env.now + self.quantum_ps:
                yield env.timeout(target_ps - env.now)
        self.finish_cycle = max(self.finish_cycle, self.cycle)
