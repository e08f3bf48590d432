"""A streaming multiprocessor replaying warp traces: schedulers, scoreboard, units, barriers.

What it models
--------------
`StreamingMultiprocessor` runs the CTAs the dispatcher gives it. Each CTA's warps are spread
round-robin over the `sm.subpartitions` warp schedulers (`models.warp_scheduler`). A warp's
next instruction comes from its recorded trace (`isa.trace_format`); it may issue when

* the scoreboard allows: every register it reads or writes has been produced (producers'
  results are ready `latency` cycles after issue, memory results when the LSU says),
* its unit on that sub-partition is free (initiation interval, `models.units`),
* the warp is not waiting at a barrier; one instruction per warp per cycle.

Each scheduler issues at most one instruction per cycle, the first warp in its policy's
order that can. `bar.sync` holds a warp until every unfinished warp of its CTA has arrived.

Hopper tile ops (actions of `models.units`):

* TMA / bulk copies go to the SM's `models.tma.TmaEngine`, which returns their completion
  cycle at issue. A load's `complete_tx` is a contribution to its mbarrier phase at that
  cycle; `mbarrier.arrive*`/`expect_tx`/`complete_tx` contribute when their shared-memory
  access is done (LSU). A phase (trace slot, `simulator.runner.trace_tiles`) completes at the
  latest of its contributions once all of them (`slot_events`) have been issued.
* `mbarrier.try_wait`/`test_wait`: the warp's next instruction waits for the phase's
  completion cycle; a warp whose phase still lacks contributions is parked (like a barrier)
  and released when the last one is issued.
* Thread-block clusters: a multicast box is one TMA message of the issuing SM (read from
  the L2 once) contributing to the phase of every destination CTA; a remote
  `mbarrier.arrive` contributes to the owning CTA's phase; `barrier.cluster.arrive` is an
  mbarrier-like arrival (one shared-memory access) on every CTA's cluster-barrier phase and
  `barrier.cluster.wait` a phase wait. A phase completed on one SM releases waiters on
  another through `models.sm_driver`. Left out there: the destination SMs' ingress of a
  multicast box, distributed-shared-memory latency (`ld.shared::cluster` of another CTA
  costs a local shared access) and the cluster barrier's round trip beyond one
  shared-memory access.
* `wgmma.mma_async`: takes one issue cycle; its share of the MMA queues on the
  sub-partition's tensor pipe (busy `interval` cycles per op, FIFO) and its accumulators
  are ready `latency` cycles after the pipe starts it. `commit_group` closes the warp's
  open group (its completion = latest op in it); `wait_group N` holds the warp's next
  instruction until all but the N newest groups have completed.

A CTA is done when its last warp has issued its last instruction; the SM then takes the
next CTA from the dispatcher. The SM finishes when its last result (including stores) has
completed.

How it runs
-----------
The issue loop is compiled (`models.sm_core.run`, numba) over a struct of arrays
(`models.sm_state.SmState`); this class holds the parts that need Python and answers the
loop's requests: global memory accesses through the `models.sm_memory.LoadStoreUnit`, TMA
messages through the `TmaEngine`, finished CTAs (hooks, the dispatcher, the next launch),
and SimPy. In front of the cached memory (`CachedMemory.inline_state`) the loop serves
global accesses and TMA messages itself (`models.sm_memory`, same timing, same order) and
logs what the memory's per-request hook carried; the SM fires the log as one
`CACHED_MEMORY_BATCH` when it is full and at the end of its process.
Time advances only to cycles where something can happen (the earliest ready
warp or free unit); a scheduler is asked for a warp only from its `wake` cycle on (or when
a launch, barrier release or finished warp changed its warps). The SimPy process yields
only when the next such cycle lies more than `quantum_cycles` ahead of the simulation
clock, so SMs run ahead of each other by at most that window (memory requests are
time-stamped exactly; shared pipes see them in nearly time order). Within a cycle the
schedulers are visited in index order; an issue that needs the memory system suspends the
loop there and resumes it with the answer, so the order of memory requests is that of the
issues. In a replay whose only processes are SMs, `models.sm_driver` runs every SM's loop
from one compiled call in the same order and with the same answers (`answer`, `end`,
`yielding`, which `steps` uses too).

Hooks (fired on `self.hooks`, owner `sm<id>`): `SM_ISSUE` (issued, busy_cycles: per-unit
arrays) once per finished CTA, from counts precomputed over its trace (every event of a CTA
issues exactly once); `SM_STALL` (reasons: the names of
`models.warp_scheduler.STALL_REASONS`; cycles: int64 array; stalls: 2-D int64, a row per
entry of cycles, a column per reason): row i holds the scheduler cycles without an issue
since the previous row up to `cycles[i]`, by the reason of the first warp in policy order,
followed per scheduler as stretches over which the reason stays the same. The loop logs a
row at each yield (none when all are zero) and the SM fires the rows logged so far before
its other hooks, when the log is full and at the end, so listeners see them in order;
`SM_CTA_LAUNCH` / `SM_CTA_DONE` (cta, warps, cycle). The totals equal those of one event
per issue and per idle scheduler-cycle. CTAs finished and launched inside the compiled
driver are reported as one `SM_CTA_LOG` batch per return to Python (`Hooks.fire_batch`: the
built-in tracers sum it; other listeners get the same per-CTA events in order).

The SM's files, one part of the model each: this module (the SM as SimPy sees it, its
hooks, and the answers to its loop), `models.sm_core` (the compiled issue core: warp
scheduling, scoreboard, barriers, mbarrier phases, wgmma and cp.async groups),
`models.sm_state` (the struct-of-arrays state and the codes every compiled part shares),
`models.sm_memory` (the memory pipeline: shared banks, L1 data path, global and TMA
requests), `models.sm_driver` (every SM of a replay stepped from one compiled call),
`models.kernel_image` (a traced kernel laid out for the loop) and `models.sm_tracer`
(stats from the hooks); policies in `models.warp_scheduler`, unit timings in
`models.units`, the TMA engine in `models.tma`.

Left out: instruction fetch and caches, operand collectors, warp-level divergence costs
beyond the traced active masks, CTA launch latency. Units: SM cycles, ps for the SimPy clock.
"""

from __future__ import annotations

import simpy

from isa.trace_format import KIND_ATOMIC, KIND_BULK_STORE
from models import jit_cache, sm_memory
from models import sm_core as core
from models import sm_state as st
from models.cached_memory import NO_INLINE_MEMORY
from models.kernel_image import KernelImage
from models.sm_core import launch as launch_cta
from models.sm_core import waits_on_phase, wake_remote
from models.sm_memory import LoadStoreUnit
from models.tma import TmaEngine
from models.units import UNIT_NAMES
from models.warp_scheduler import STALL_REASONS, policy_code
from simulator.framework.engine import Clock
from simulator.framework.hooks import Hooks

SM_ISSUE = "SM_ISSUE"
SM_STALL = "SM_STALL"
SM_CTA_LAUNCH = "SM_CTA_LAUNCH"
SM_CTA_DONE = "SM_CTA_DONE"
SM_CTA_LOG = "SM_CTA_LOG"
"""The CTA log of the compiled driver as one batch (`Hooks.fire_batch`; listeners not attached
here get its `SM_STALL`, `SM_ISSUE`, `SM_CTA_DONE` and `SM_CTA_LAUNCH` events one by one).
data: log (int64 rows of `sm_state.T_*` columns: kind `T_DONE` / `T_LAUNCH`, cta, cycle,
the stall rows logged before it), reasons, cycles and stalls (the stall rows the log
fires, as `SM_STALL` has them), issued and busy_cycles (per-CTA tables [CTAs, units], row c
what `SM_ISSUE` gives for CTA c), warps_done and warps_launch (the warps of a finished and of
a launched CTA)."""
DEFAULT_QUANTUM_CYCLES = 64


def cta_log_steps(data: dict):
    """The rows of an `SM_CTA_LOG` batch in order: (kind `T_DONE` / `T_LAUNCH`, cta, cycle,
    stall rows `[first, end)` of `data["stalls"]` fired just before it, empty when none)."""
    fired = 0
    for kind, cta, cycle, upto in data["log"].tolist():
        yield kind, cta, cycle, fired, max(upto, fired)
        fired = max(upto, fired)


def cta_log_events(data: dict):
    """The events of an `SM_CTA_LOG` batch one by one, as `SM_STALL` / `SM_ISSUE` /
    `SM_CTA_DONE` / `SM_CTA_LAUNCH` would have been fired: (position, data) pairs."""
    cycles, stalls = data["cycles"], data["stalls"]
    for kind, cta, cycle, first, end in cta_log_steps(data):
        if end > first:
            yield SM_STALL, {"reasons": data["reasons"], "cycles": cycles[first:end],
                             "stalls": stalls[first:end]}
        if kind == st.T_DONE:
            yield SM_ISSUE, {"issued": data["issued"][cta],
                             "busy_cycles": data["busy_cycles"][cta]}
            yield SM_CTA_DONE, {"cta": cta, "warps": data["warps_done"], "cycle": cycle}
        else:
            yield SM_CTA_LAUNCH, {"cta": cta, "warps": data["warps_launch"], "cycle": cycle}


class StreamingMultiprocessor:
    """One SM (see the module docstring); `launch(cta)` then run `process()` under SimPy.

    `phases` is the launch's `models.sm_state.PhaseTable`, shared by its SMs (one of its
    own when None)."""

    def __init__(self, sm_id: int, env, config, kernel: KernelImage, memory, dispatcher,
                 policy: str | None = None, quantum_cycles: int = DEFAULT_QUANTUM_CYCLES,
                 phases: st.PhaseTable | None = None):
        jit_cache.ensure_fresh()          # before the compiled loop first loads
        self.sm_id, self.env, self.kernel, self.dispatcher = sm_id, env, kernel, dispatcher
        self.clock = Clock(config.chip.clock_ghz)
        self.hooks = Hooks(f"sm{sm_id}")
        self.lsu = LoadStoreUnit(sm_id, config, memory, self.clock)
        self.tma = TmaEngine(sm_id, memory, self.clock)
        self.phases = phases if phases is not None else st.PhaseTable()
        self.phases.ensure(kernel.slot_events.size)
        self.state = st.SmState(config.sm.subpartitions, len(UNIT_NAMES), kernel.n_registers,
                                  kernel.trace.warps_per_cta,
                                  policy_code(policy or config.sm.scheduler_policy),
                                  config.shared_memory.latency_cycles,
                                  config.sm.const_cache_hit_cycles)
        self.quantum_ps = self.clock.cycles_to_ps(quantum_cycles)
        self.memory = memory
        self.inline = getattr(memory, "inline_state", None)
        self.log = sm_memory.new_log()
        lp = self.state.lp
        lp[st.L_INLINE] = self.inline is not None
        lp[st.L_SM_ID] = sm_id
        lp[st.L_INDEX] = len(self.phases.members)     # what phase slots name it by (H_SM)
        self.phases.members.append(self)
        self._wake = None           # the SimPy event a parked SM waits for
        self._proc = None           # its SimPy process (to wake it early)
        self._resume_ps = 0         # when a woken SM goes on
        lp[st.L_FREQ_KHZ] = self.clock.freq_khz
        lp[st.L_L1_SECTORS] = self.lsu.sectors_per_cycle
        lp[st.L_TMA_BYTES] = self.tma.bytes_per_clk

    @property
    def resident(self) -> int:
        """CTAs resident now."""
        return int(self.state.lp[st.L_RESIDENT])

    @property
    def cycle(self) -> int:
        """The SM's current cycle."""
        return int(self.state.lp[st.L_CYCLE])

    @property
    def finish_cycle(self) -> int:
        """The cycle its last result completed (0 before it ran anything)."""
        return int(self.state.lp[st.L_FINISH])

    def set_kernel(self, kernel: KernelImage) -> None:
        """Go on with `kernel`, whose first CTAs' events are this one's (snapshot resume)."""
        self.kernel = kernel
        self.phases.ensure(kernel.slot_events.size)

    def _memory_state(self) -> tuple:
        """The memory arrays the loop serves requests on (`CachedMemory.inline_state`, room
        for this kernel's largest request), or stand-ins of the same types."""
        if self.inline is None:
            return NO_INLINE_MEMORY
        return self.inline(self.kernel.max_sectors)

    # -- CTAs -----------------------------------------------------------------------
    def launch(self, cta: int) -> None:
        """Make CTA `cta` resident from the current cycle on."""
        kernel, s = self.kernel, self.state
        s.make_room()
        cycle = self.cycle
        done = launch_cta(cta, cycle, kernel.offsets, kernel.ev_pc, kernel.pcs, kernel.regs,
                           s.wi, s.wr, s.wm, s.si, s.sw, s.ci, s.ca, s.lp)
        if self.hooks.listening:
            self._drain_stalls()
            self.hooks.fire(SM_CTA_LAUNCH, cta=cta, warps=s.wpc, cycle=cycle)
        if done:
            self._cta_done()

    def _cta_done(self) -> None:
        """The CTA in `L_CTA_DONE` finished: its hooks, then the dispatcher's next CTA."""
        lp = self.state.lp
        cta = int(lp[st.L_CTA_DONE])
        lp[st.L_CTA_DONE] = -1
        if self.hooks.listening:
            kernel = self.kernel
            self._drain_stalls()
            self.hooks.fire(SM_ISSUE, issued=kernel.cta_issued[cta],
                            busy_cycles=kernel.cta_busy_cycles[cta])
            self.hooks.fire(SM_CTA_DONE, cta=cta, warps=kernel.trace.warps_per_cta,
                            cycle=self.cycle)
        nxt = self.dispatcher.take()
        if nxt is not None:
            self.launch(nxt)

    # -- requests of the loop -------------------------------------------------------
    def _memory(self, tma: bool) -> int:
        """Completion cycle of the pending event (global access or TMA message)."""
        kernel, lp = self.kernel, self.state.lp
        e, cycle = int(lp[st.L_PEND_E]), int(lp[st.L_CYCLE])
        trace = kernel.trace
        s, n = int(trace.sector_start[e]), int(kernel.ev_detail[e])
        kind = int(kernel.ev_kind[e])
        ops = 1             # an atomic's lane operations on one address (`sm_core.lane_ops`)
        if kind == KIND_ATOMIC and not tma and kernel.ev_slot.size:
            ops = max(int(kernel.ev_slot[e]), 1)
        policy = kernel.pcs[int(kernel.ev_pc[e]), st.P_POLICY:st.P_FIELDS]
        if lp[st.L_INLINE]:                 # the request log was full
            self.drain_log()
            return sm_memory.serve_event(kind, tma, cycle, kernel.ev_sectors[s:s + n],
                                         self.inline(max(n, kernel.max_sectors)), lp, self.log,
                                         ops, policy)
        if tma:
            done = self.tma.issue(cycle, kind == KIND_BULK_STORE, trace.sectors[s:s + n],
                                  policy)
            lp[st.L_TMA_FREE] = self.tma.free_cycle    # a store's source read (`sm_core.post`)
            return done
        return self.lsu.issue(cycle, kind, trace.sectors[s:s + n], ops, policy)

    def drain_log(self) -> None:
        """Hand the logged requests to the memory's listeners (`models.sm_memory`); a run
        stopped before the SM ended calls it for the requests served so far."""
        lp = self.state.lp
        n = int(lp[st.L_LOG_N])
        if n:
            self.memory.fire_batch(self.sm_id, self.log[:n])
            lp[st.L_LOG_N] = 0

    def _drain_stalls(self) -> None:
        """Fire the stall log's rows as one `SM_STALL` and drop them (the loop logs a row at
        each yield while hooks listen, `models.sm_core.log_stalls`)."""
        s = self.state
        n = int(s.lp[st.L_STALL_N])
        if n:
            rows = s.stall_log[:n]
            self.hooks.fire(SM_STALL, reasons=STALL_REASONS, cycles=rows[:, 0],
                            stalls=rows[:, 1:])
            s.lp[st.L_STALL_N] = 0

    def replay_cta_log(self) -> None:
        """Fire the hooks of the CTAs finished and launched inside the compiled driver
        (`models.sm_driver.drive`) as one `SM_CTA_LOG` batch: in order, each after the stall
        rows logged before it, as `_cta_done` and `launch` would have; empties the log and
        drops the stall rows it fired."""
        log = self.state.cta_log
        n = int(log[0, 0])
        if not n:
            return
        rows = log[1:n + 1, :st.T_FIELDS].copy()
        log[0, 0] = 0
        stall_log = self.state.stall_log
        fired = int(rows[:, st.T_STALLS].max())
        kernel = self.kernel
        data = {"log": rows, "reasons": STALL_REASONS, "cycles": stall_log[:fired, 0],
                "stalls": stall_log[:fired, 1:], "issued": kernel.cta_issued,
                "busy_cycles": kernel.cta_busy_cycles,
                "warps_done": kernel.trace.warps_per_cta, "warps_launch": self.state.wpc}
        self.hooks.fire_batch(SM_CTA_LOG, data, lambda: cta_log_events(data))
        self._drop_stalls(fired)

    def _drop_stalls(self, cut: int) -> None:
        """Drop the first `cut` rows of the stall log (fired already)."""
        s = self.state
        n = int(s.lp[st.L_STALL_N])
        if cut:
            s.stall_log[:n - cut] = s.stall_log[cut:n].copy()
            s.lp[st.L_STALL_N] = n - cut

    def _fire_stalls(self, cycle: int) -> None:
        """Fire the stall cycles summed so far, open stretches counted up to `cycle`."""
        s = self.state
        if s.lp[st.L_STALL_N] == st.STALL_ROWS:
            self._drain_stalls()
        core.log_stalls(cycle, s.si, s.stall, s.lp, s.stall_log)
        self._drain_stalls()

    # -- the process ----------------------------------------------------------------
    def _loop_args(self) -> tuple:
        """The arguments of `models.sm_core.run` as they stand (a launch, wider wgmma
        groups, a new kernel or larger scratch arrays replace some)."""
        kernel, s = self.kernel, self.state
        return (kernel.ev_pc, kernel.ev_kind, kernel.ev_detail, kernel.ev_slot, kernel.pcs,
                kernel.regs, kernel.slot_events, s.wi, s.wr, s.wm, s.wg, s.si, s.uf, s.sw,
                s.ci, s.ca, self.phases.table, s.lp, s.stall, s.stall_log, kernel.ev_sstart,
                kernel.ev_sectors, self._memory_state(), self.log)

    def process(self):
        """SimPy process of `steps`; a parked SM (None) waits until another SM completes a
        phase its warps wait for (`wake_phase`), which also cuts a sleep short."""
        env = self.env
        self._proc = env.active_process
        for at_ps in self.steps():
            if at_ps is None:
                self._wake = env.event()
                yield self._wake
                self._wake = None
            else:
                try:
                    yield env.timeout(at_ps - env.now)
                    continue
                except simpy.Interrupt:
                    pass
            if self._resume_ps > env.now:      # woken: go on at the wake-up's cycle edge
                yield env.timeout(self._resume_ps - env.now)

    def steps(self):
        """Run the compiled loop until no CTA is resident and the dispatcher is empty,
        answering its requests (`models.sm_state` RC_*); yields the time (ps) to continue
        at whenever the loop reaches past its window, and goes on once the caller has
        advanced `env.now` to it (`process` under SimPy, `simulator.runner.replay_session`)."""
        env, clock, lp = self.env, self.clock, self.state.lp
        lp[st.L_WINDOW] = clock.ps_to_cycles(env.now + self.quantum_ps)
        run = core.run
        args = self._loop_args()
        while True:
            self.listen()
            rc = run(*args) if run.overloads else jit_cache.reserved_call(run, *args)
            if lp[st.L_REMOTE_N] or lp[st.L_REMOTE_LOST]:
                self._wake_remote()
            if rc == st.RC_YIELD:
                cycle = int(lp[st.L_CYCLE])
                self.yielding()
                yield clock.edge_ps(cycle)
                lp[st.L_WINDOW] = clock.ps_to_cycles(env.now + self.quantum_ps)
            elif rc == st.RC_END:
                break
            elif rc == st.RC_STUCK and waits_on_phase(self.state.wi):
                lp[st.L_PARKED] = 1
                yield None
                lp[st.L_WINDOW] = clock.ps_to_cycles(env.now + self.quantum_ps)
            else:
                self.answer(rc)
                args = self._loop_args()
        self.end()

    def check_not_parked(self) -> None:
        """After the run: a parked SM waited for a phase no SM completed (a deadlock)."""
        if self.state.lp[st.L_PARKED]:
            raise RuntimeError(f"sm{self.sm_id}: its warps wait for mbarrier phases no SM "
                               f"completes (stuck at cycle {self.cycle})")

    def _wake_remote(self) -> None:
        """Phases this SM completed whose waiters are on other SMs wake them (the SimPy
        path of `models.sm_driver._remote_wakes`)."""
        lp, ph = self.state.lp, self.phases.table
        slots = [int(lp[st.L_REMOTE + i]) for i in range(int(lp[st.L_REMOTE_N]))]
        lp[st.L_REMOTE_N] = 0
        if lp[st.L_REMOTE_LOST]:
            lp[st.L_REMOTE_LOST] = 0
            for sm in self.phases.members:
                wi = sm.state.wi
                for slot in wi[(wi[:, st.W_USED] != 0) & (wi[:, st.W_WAIT_SLOT] >= 0),
                               st.W_WAIT_SLOT].tolist():
                    if ph[slot, st.H_DONE] >= 0:
                        sm.wake_phase(slot)
        for slot in slots:
            self.phases.members[int(ph[slot, st.H_SM])].wake_phase(slot)

    def wake_phase(self, slot: int) -> None:
        """Phase `slot`, completed on another SM, wakes this SM's warps waiting for it
        (`models.sm_core.wake_remote`); a parked or sleeping process goes on at the cycle
        that gives (`process`)."""
        lp, s, kernel = self.state.lp, self.state, self.kernel
        parked = bool(lp[st.L_PARKED])
        at = wake_remote(slot, self.clock.ps_to_cycles(self.env.now), self.phases.table,
                         kernel.ev_pc, kernel.pcs, kernel.regs, s.wi, s.wr, s.wm, s.si, lp)
        if at < 0:
            return
        self._resume_ps = self.clock.edge_ps(at)
        if parked:
            if self._wake is not None and not self._wake.triggered:
                self._wake.succeed()
        elif self._proc is not None and self._proc.is_alive and \
                self._proc is not self.env.active_process:
            self._proc.interrupt()

    def listen(self) -> None:
        """Tell the loop whether hooks listen (the SM's, the memory's)."""
        lp = self.state.lp
        lp[st.L_LISTEN] = self.hooks.listening
        lp[st.L_MEM_LISTEN] = getattr(self.memory, "listening", self.memory.hooks.listening)

    def yielding(self) -> None:
        """The loop stopped past its window: drain a full stall log before waiting."""
        if self.state.lp[st.L_STALL_N] == st.STALL_ROWS:
            self._drain_stalls()

    def answer(self, rc: int) -> None:
        """Serve the loop's request `rc` (`RC_MEMORY`, `RC_TMA`, `RC_CTA_DONE`, `RC_GROW`;
        `RC_STUCK` raises) so that it can go on; the state's arrays may be replaced."""
        if rc == st.RC_MEMORY or rc == st.RC_TMA:
            self.state.lp[st.L_DONE] = self._memory(rc == st.RC_TMA)
        elif rc == st.RC_CTA_DONE:
            self._cta_done()
        elif rc == st.RC_GROW:
            self.state.widen_groups()
        else:
            raise RuntimeError(f"sm{self.sm_id}: no warp can ever issue at cycle {self.cycle}")

    def end(self) -> None:
        """The loop ended (nothing resident, nothing to dispatch): the logs' rest."""
        self.drain_log()
        if self.hooks.listening:
            self._fire_stalls(self.cycle)
        lp = self.state.lp
        lp[st.L_FINISH] = max(self.finish_cycle, self.cycle)
