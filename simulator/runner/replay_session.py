"""One replay of traced CTAs as an object that can be stepped, copied and resumed.

What it models
--------------
`ReplaySession` holds everything a replay changes: the SimPy environment, the memory, the
SMs, the CTA dispatcher and the tracers with their stat sheet. `Replay.run`
(`simulator.runner.simulate`) builds one, steps it to the end and reads its figures.

Snapshots serve the sampled fidelity's growth from k to k_max waves
(`simulator.runner.sampling`): a replay of the first k waves and one of the first k_max waves
are the same simulation until the dispatcher of the shorter one first has no CTA to give.
`step_to_end(snapshot_from=c)` copies the session at the first event boundary where the
dispatcher has handed out at least `c` CTAs but still holds some (so the two replays are
still one), and `snapshot.resume(kernel, n_ctas)` continues that copy with `n_ctas` CTAs
to dispatch and the image of the longer trace (its first CTAs' events are the same
events at the same positions; `tests/test_speed_snapshot.py` compares with replays from
a cold start). The copy is exact: the pending events at a boundary are the SMs' wake-ups
in the session's own queue, re-queued in their order (time, then scheduling order), and
an SM resumed at its wake-up time runs as the suspended one would, whose only state across
a yield is on the SM. Hooks are not copied but wired anew to the copied tracers in the
order `wire` attaches them.

Left out: memories other than `models.cached_memory` (a session with another memory runs
its SMs as SimPy processes and is never copied). Units: ps (SimPy time), CTAs.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from simpy.core import NORMAL, URGENT

from models.cached_memory import CachedMemory, CachedMemoryTracer
from models.sm import SM_CTA_DONE, SM_CTA_LOG
from models.sm_driver import Q_ORDER, SmDriver, SmQueue
from models.sm_state import T_CYCLE, T_DONE, T_KIND
from models.sm_tracer import MemoryTracer, SmTracer
from models.timeline_tracer import TimelineTracer
from simulator.framework.engine import SimEnvironment
from simulator.framework.hooks import Hooks
from simulator.framework.stats import StatSheet


class CtaDoneLog:
    """Listener keeping the cycle at which each CTA finished."""

    def __init__(self) -> None:
        self.cycles: list[int] = []

    def on_event(self, owner: str, position: str, data) -> None:
        if position == SM_CTA_LOG:
            log = data["log"]
            self.cycles.extend(log[log[:, T_KIND] == T_DONE, T_CYCLE].tolist())
        else:
            self.cycles.append(data["cycle"])


@dataclass
class ReplaySession:
    """The mutable state of one replay (see the module docstring)."""

    env: Any
    memory: Any
    sms: list
    dispatcher: Any
    sheet: StatSheet
    sm_tracer: SmTracer
    mem_tracer: MemoryTracer
    cache_tracer: CachedMemoryTracer
    timeline: TimelineTracer
    done_log: CtaDoneLog
    processes: dict = field(default_factory=dict)   # SimPy process -> SM
    pending: list = field(default_factory=list)     # a copy's (wake-up ps, SM) to resume
    queue: SmQueue | None = None                    # the event queue without SimPy (`start`)

    def wire(self) -> None:
        """Attach the tracers to the memory's and the SMs' hooks."""
        memory = self.memory
        self.mem_tracer.attach(memory.hooks)
        self.cache_tracer.attach(memory.hooks)
        getattr(memory, "attach_tracers", lambda sheet: [])(self.sheet)
        self.timeline.attach_memory(memory.hooks)
        for sm in self.sms:
            self.sm_tracer.attach(sm.hooks)
            self.timeline.attach_sm(sm.hooks, sm.sm_id)
            sm.hooks.attach(self.done_log.on_event, (SM_CTA_DONE, SM_CTA_LOG))

    def start(self) -> None:
        """Start the process of every SM holding a CTA: SimPy processes, or, when only the
        SMs schedule events (`copyable`), entries of the session's own queue
        (`models.sm_driver.SmQueue`), whose SMs `step_to_end` runs in one compiled call
        (`SmDriver`) in exactly SimPy's order (time, then start-ups before wake-ups, then
        scheduling order) without SimPy's per-event objects."""
        if copyable(self):
            self.queue = SmQueue(len(self.sms))
            for sm in self.sms:
                if sm.resident:
                    self._schedule(self.env.now, URGENT, sm)
            return
        for sm in self.sms:
            if sm.resident:
                self.processes[self.env.process(sm.process())] = sm

    def _schedule(self, at_ps: int, priority: int, sm) -> None:
        self.queue.push(at_ps, priority, self.sms.index(sm))

    def step_to_end(self, snapshot_from: int | None = None):
        """Run the replay to its end; with `snapshot_from`, the session copied at the first
        event boundary where at least that many CTAs are dispatched and some are left
        (None if there was none)."""
        env, dispatcher = self.env, self.dispatcher
        snapshot = None
        if self.queue is not None:
            driver = SmDriver(self.sms, self.queue)
            if snapshot_from is not None:
                def stop() -> bool:
                    return snapshot_from <= dispatcher.next_cta < dispatcher.n_ctas

                dispatcher.stop_from(snapshot_from)      # for CTAs launched in `drive`
                stopped = len(self.queue) and (stop() or driver.run(env, stop))
                dispatcher.stop_from(None)
                if stopped:
                    snapshot = self.copy()
            driver.run(env)
            return snapshot
        env.run()
        for sm in self.sms:
            sm.check_not_parked()
        return snapshot

    def copy(self) -> ReplaySession:
        """A deep copy of a session on its own queue (`start`): new environment and queue
        with the pending SM wake-ups, hooks wired anew."""
        env, queue = self.env, self.queue
        wakes = [(entry[0], self.sms[entry[3]]) for entry in queue.entries()]
        fresh = SimEnvironment()
        fresh._now = env.now
        memo: dict[int, Any] = {id(env): fresh, id(self.processes): {},
                                id(queue): SmQueue(len(self.sms), int(queue.ctl[Q_ORDER]))}
        for sm in self.sms:
            memo[id(sm.kernel)] = sm.kernel
            memo[id(sm.hooks)] = Hooks(sm.hooks.owner)
        memo[id(self.memory.hooks)] = Hooks(self.memory.hooks.owner)
        clone = copy.deepcopy(self, memo)
        clone.wire()
        clone.pending = [(at_ps, memo[id(sm)]) for at_ps, sm in wakes]
        return clone

    def resume(self, kernel, n_ctas: int) -> None:
        """Continue a copy with `kernel` (the longer trace's image) and `n_ctas` CTAs."""
        self.dispatcher.n_ctas = n_ctas
        for sm in self.sms:
            sm.set_kernel(kernel)
        for at_ps, sm in self.pending:
            self._schedule(at_ps, NORMAL, sm)
        self.pending = []


def copyable(session: ReplaySession) -> bool:
    """Whether `copy` reproduces the session (the cached memory holds no SimPy state)."""
    return type(session.memory) is CachedMemory

