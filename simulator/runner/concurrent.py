"""`simulate_concurrent`: several kernel launches running at the same time on one chip.

What it models
--------------
A compute kernel on the compute SMs (ids `0 .. sm.count - sm.comm_count - 1`) and a
communication kernel on the reserved SMs (the ids above) start together on ONE system: one
SimPy environment and one memory hierarchy, so they share the L2 (tags, LRU, slice pipes),
the crossbar and the HBM channels. A comm kernel's chunks land in rank 0's receive buffers
(`models.link_memory`), take L2 lines and evict the compute kernel's; both kernels' misses
queue on the same HBM channels. Each launch is traced functionally as in
`simulator.simulate_kernel` and replayed by its own SMs, with its own CTA dispatcher.

Launches are `workloads.ops.Launch`-like objects (ptx, entry, grid, block, args,
shared_bytes, timing_only, regs_per_thread, options, overrides, name). `options["sms"]`
("compute", the default, or "comm") picks the SMs; at most one launch per role. A launch
whose `options["memory"]` carries link windows (`models.link_memory.LinkMemory.factory`)
has them routed to the links; the shared memory is then one `LinkMemory` around the inner
hierarchy (`memory=`, "cached" by default); the SMs of a launch that touches no window
send their requests to the inner memory (`_memory_of`, no window lookups); in front of the
cached one every launch's SMs serve their requests inside their compiled loop, a
collective's link windows included (`models.link_memory_kernel`; same figures). `overrides` (e.g.
`sm.comm_count`) apply to the shared config and must agree between launches.

Separate address spaces: every launch is traced with the same allocator, so the launch at
position i has its sectors (and link windows) moved up by `i * ADDRESS_SPACING_BYTES`; no
two kernels share a line, as two processes' buffers would not.

Stats: `ConcurrentResult.kernels[name]` is a `KernelResult` per launch: its cycles are
when its last SM finished (all start at cycle 0), its stats table (kernel = the entry, as
`simulate_kernel` names it) holds its SMs' counters and the memory requests its SMs issued
(split by `sm_id`), plus the link counters for the launch that owns link windows.
A single launch gives exactly `simulate_kernel`'s figures (tested). The SMs of a launch that
serve their requests inside their loop and run no clusters are stepped by a compiled driver
of their own (`models.sm_driver.SmDriver.share`) in SimPy's order of events, alone or beside
the other launch's driver, to the end or to a stop: the same figures and progress as their
SimPy processes (tested).

Ending early: `stop_at="first"` ends the run when the first launch ends, `until_us` at a
time; `ConcurrentResult.progress` gives each launch's share of its trace's warp
instructions issued by then (CTAs not handed out and the resident warps' remaining events
are outstanding; the SMs run ahead of the stop by at most their quantum). A launch traced
once (`prepare_launch`) replays in any number of runs under the same resolved config.

Left out: launch skew (all kernels start at cycle 0), wave sampling (every CTA is timed:
pass reduced launches, e.g. an op's `samples`), two kernels on the same SMs, and the L1
carve-out per kernel (the memory is built with the carve-out of the first compute launch;
comm kernels use no shared memory). Units: SM cycles, microseconds, bytes.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from itertools import count
from typing import Any

import numpy as np
from simpy.core import URGENT

import isa
from isa.cluster import cluster_shape
from isa.launch import dim3
from models.cached_memory import CachedMemoryTracer
from models.cta_dispatch import CtaDispatcher, estimate_registers, occupancy
from models.kernel_image import KernelImage
from models.link_memory import LinkMemory
from models.sm import DEFAULT_QUANTUM_CYCLES, StreamingMultiprocessor
from models.sm_driver import Q_ORDER, SmDriver, SmQueue, next_order
from models.sm_state import W_END, W_POS, W_USED, PhaseTable
from models.sm_tracer import MemoryTracer, SmTracer
from models.timeline_tracer import TimelineTracer
from models.units import event_timings, fused_count
from simulator.framework.hooks import Hooks
from simulator.framework.stats import StatSheet
from simulator.runner.sampling import SampledRun
from simulator.runner.simulate import (
    KernelLaunch,
    KernelResult,
    Replay,
    _kernel_stats,
    check_cluster_launch,
    check_isa_target,
    kernel_us,
    level_peaks_gbps,
    resolve_config,
)
from simulator.runner.system import DEFAULT_MEMORY, MEMORY_MODELS, SM_ROLES, build_system
from simulator.runner.trace import SECTOR_SHIFT

ADDRESS_SPACING_BYTES = 1 << 48
"""Distance between the address spaces of concurrent launches (below the traced local
window at 2**56, far above any global allocation)."""


@dataclass
class ConcurrentResult:
    """Per-launch results of one concurrent run and the time the last one ended."""

    kernels: dict[str, KernelResult]
    cycles: int
    time_us: float          # when the last kernel ended, or the run stopped (no launch overhead)
    config: dict[str, Any] = field(repr=False)
    progress: dict[str, float] = field(default_factory=dict)
    """Per launch, the share of its trace's warp instructions issued when the run ended
    (1.0: it finished; below 1 only in a run stopped early, `stop_at` / `until_us`)."""
    issued: dict[str, int] = field(default_factory=dict)
    """Per launch, the warp instructions it issued by the run's end (of its traced CTAs)."""
    ran_out: tuple[str, ...] = ()
    """The launches prepared with part of their grid (`prepare_launch(share=...)`) whose
    dispatcher handed out every traced CTA: their figures need more of the grid traced
    (`grow`); those of the other launches are the whole grid's."""


@dataclass
class _Prepared:
    """One launch traced and ready to replay on its SMs."""

    name: str
    entry: str
    role: str
    image: KernelImage
    occ: Any
    warp_instructions: int
    thread_instructions: int
    windows: tuple
    overrides: dict = field(default_factory=dict)
    config_key: str = ""      # the resolved config it was traced and timed under
    policy: str | None = None  # the scheduler policy its trace was recorded for (None: config's)
    fused_events: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    fused_extra: np.ndarray = field(default_factory=lambda: np.zeros(1, np.int64))
    """The trace's events that stand for a run of several instructions (`Replay.recorder`),
    ascending, and the instructions they add beyond one each, summed (0 first): what
    `instructions_before` counts."""
    clustered: bool = False   # its CTAs run in clusters of several (phases across SMs)
    ctas: int = 0             # the CTAs traced, and handed out: the first of the grid
    grid_ctas: int = 0        # the launch's grid
    source: Any = field(default=None, repr=False, compare=False)
    """What traced it (`_Source`), kept so `grow` can trace more of the grid."""

    @property
    def partial(self) -> bool:
        """Whether only the first CTAs of its grid are traced (`prepare_launch(share=...)`)."""
        return self.ctas < self.grid_ctas

    def issued_total(self) -> int:
        """Warp instructions of its traced CTAs."""
        return int(self.instructions_before(self.image.offsets[-1]))

    def instructions_before(self, events):
        """Warp instructions of the trace's events before event index (or indices)
        `events`: the events, a fused run counted as the instructions it stands for."""
        events = np.asarray(events, np.int64)
        return events + self.fused_extra[np.searchsorted(self.fused_events, events)]


def _role(launch) -> str:
    role = getattr(launch, "options", {}).get("sms", "compute")
    if role not in SM_ROLES:
        raise ValueError(f"launch {launch.name!r}: sms={role!r}; accepted: "
                         f"{', '.join(SM_ROLES)}")
    return role


def shared_config(launches, config):
    """`config` with the launches' overrides (they must agree)."""
    merged: dict[str, Any] = {}
    for launch in launches:
        for key, value in getattr(launch, "overrides", {}).items():
            if key in merged and merged[key] != value:
                raise ValueError(f"launch {launch.name!r}: override {key}={value!r} disagrees "
                                 f"with another launch's {merged[key]!r}; concurrent launches "
                                 "share one config")
            merged[key] = value
    return config.with_overrides(merged) if merged else config


def prepare_launch(launch, index: int, config, policy: str | None = None,
                   share: float | None = None, waves: int = 0) -> _Prepared:
    """Trace, timings, occupancy; sectors and windows moved to the launch's own address
    space (that of position `index`). Reusable: `simulate_concurrent` takes it in place of
    the launch and does not change it, under the same resolved config and `policy`.

    The trace is the one `simulate_kernel` replays at full fidelity, built as its sampled
    fidelity builds it: runs of plain unit ops as one event under greedy-then-oldest
    (`Replay.recorder`, the same stats bit for bit), and, with `fidelity.trace_synthesis`,
    the CTAs after the first `fidelity.trace_synthesis_first_ctas` synthesized from their
    template where its checks pass (`SampledRun.trace_to`; the same trace as tracing them,
    `tests/test_comm_concurrent.py`), else traced.

    `share` (None: the whole grid) traces that share of the grid's CTAs and `waves` waves
    (CTAs resident at once on the launch's SMs) more, for a run stopped before the launch
    ends: the dispatcher hands out those, and a run in which it never ran out of them
    (`ConcurrentResult.ran_out`) is the same simulation as with the whole grid traced, up to
    the run's end; `grow` traces more. A launch in clusters is traced whole."""
    program = (launch.ptx if isinstance(launch.ptx, isa.launch.Program)
               else isa.compile_kernel(launch.ptx, launch.entry))
    check_isa_target(program, config)
    grid, block = dim3(launch.grid, "grid"), dim3(launch.block, "block")
    threads = block[0] * block[1] * block[2]
    regs = getattr(launch, "regs_per_thread", None) or estimate_registers(program)
    occ = occupancy(config, threads, regs, program.shared_bytes + launch.shared_bytes)
    role = _role(launch)
    sms = config.sm.comm_count if role == "comm" else config.sm.compute_count
    check_cluster_launch(program, grid, grid[0] * grid[1] * grid[2], occ.ctas_per_sm * sms)
    traced = KernelLaunch(program, launch.entry, grid, block, list(launch.args),
                          launch.shared_bytes, bool(getattr(launch, "timing_only", False)),
                          memory_budget_bytes=int(config.limits.host_memory_bytes),
                          wrap_x=int(getattr(launch, "options", {}).get("cta_wrap_x", 0)))
    replay = Replay(config, None, policy, DEFAULT_QUANTUM_CYCLES, occ, "run", launch.entry,
                    role)
    clustered = cluster_shape(program, grid)[0] != (1, 1, 1)
    source = _Source(launch, index, config, policy, program, occ, role, replay,
                     SampledRun(traced, replay, None), clustered)
    whole = traced.n_ctas
    ctas = whole if share is None or clustered else min(
        whole, math.ceil(whole * share) + waves * occ.ctas_per_sm * sms)
    return source.prepared(max(1, ctas))


@dataclass
class _Source:
    """How a launch was traced (`prepare_launch`): its recorder goes on to later CTAs."""

    launch: Any
    index: int
    config: Any
    policy: str | None
    program: Any
    occ: Any
    role: str
    replay: Any
    run: SampledRun
    clustered: bool

    def prepared(self, ctas: int) -> _Prepared:
        """The first `ctas` CTAs traced (those before traced already) and imaged."""
        launch, run, config = self.launch, self.run, self.config
        if ctas > run.traced:
            run.trace_to(ctas)
        timings, n_regs = self.replay.timings(self.program)
        trace, timings = event_timings(run.recorder.finish(), timings, self.program, config)
        offset = self.index * ADDRESS_SPACING_BYTES
        if offset:
            trace = replace(trace, sectors=trace.sectors + (offset >> SECTOR_SHIFT))
        memory = getattr(launch, "options", {}).get("memory")
        windows = tuple(_moved(w, offset) for w in getattr(memory, "windows", ()))
        image = KernelImage(trace, timings, n_regs)
        counts = np.array([fused_count(t) for t in timings] or [1], np.int64)[image.ev_pc]
        fused = np.flatnonzero(counts > 1)
        return _Prepared(launch.name, launch.entry, self.role, image, self.occ,
                         run.warp_instr, run.thread_instr, windows,
                         dict(getattr(launch, "overrides", {})), config_key(config),
                         self.policy, fused,
                         np.concatenate([[0], np.cumsum(counts[fused] - 1)]).astype(np.int64),
                         self.clustered, run.traced, run.n_ctas, self)


def grow(prepared: _Prepared, ctas: int | None = None) -> _Prepared:
    """`prepared` with its first `ctas` CTAs traced (None: the whole grid; never fewer
    than it has), the CTAs it had kept as they were traced."""
    whole = prepared.grid_ctas
    ctas = whole if ctas is None else max(prepared.ctas, min(int(ctas), whole))
    return prepared if ctas == prepared.ctas else prepared.source.prepared(ctas)


def config_key(config) -> str:
    """The resolved config as a key (sorted JSON)."""
    return json.dumps(config.to_dict(), sort_keys=True, default=str)


def _moved(window, offset: int):
    mirror = None if window.mirror_start is None else window.mirror_start + offset
    return replace(window, start=window.start + offset, end=window.end + offset,
                   mirror_start=mirror)


def _memory_factory(memory, windows: tuple):
    """A `build_system` memory: the named (or given) model, inside a `LinkMemory` when some
    launch has link windows."""
    name = DEFAULT_MEMORY if memory is None else memory
    if isinstance(name, str) and name not in MEMORY_MODELS:
        raise ValueError(f"memory={name!r} is not a memory model; known: "
                         f"{sorted(MEMORY_MODELS)}")
    if not windows:
        return name
    if not isinstance(name, str):
        raise ValueError("link windows need a memory model by name (the LinkMemory wraps it)")
    return LinkMemory.factory(windows, inner=name)


def _split_hooks(hooks: Hooks, owner_of: dict[int, str], roles) -> dict[str, Hooks]:
    """Per-role hooks fed with the events of `hooks` whose `sm_id` belongs to that role."""
    split = {role: Hooks(hooks.owner) for role in roles}

    def forward(owner: str, position: str, data) -> None:
        target = split[owner_of[data["sm_id"]]]
        if target.listening:
            target.fire(position, **data)

    hooks.attach(forward)
    return split


def simulate_concurrent(launches, config=None, *, memory=None, policy: str | None = None,
                        quantum_cycles: int = DEFAULT_QUANTUM_CYCLES,
                        run_id: str = "run", stop_at: str = "last",
                        until_us: float | None = None) -> ConcurrentResult:
    """Run `launches` (or their `prepare_launch` images, traced under the same resolved
    config) together on one system of `config` (default `h100_sxm`); see the module
    docstring. The run ends when the last launch ends (`stop_at="last"`) or the first
    (`"first"`), or at `until_us` if that comes sooner; `ConcurrentResult.progress` says how
    far each launch got, and a launch stopped early has its SMs' counters up to then."""
    launches = list(launches)
    if not launches:
        raise ValueError("simulate_concurrent: no launches given")
    if stop_at not in STOP_AT:
        raise ValueError(f"stop_at={stop_at!r}; accepted: one of {', '.join(STOP_AT)}")
    if until_us is not None and not until_us > 0:
        raise ValueError(f"until_us={until_us!r}; accepted: a positive number of "
                         "microseconds, or None (no limit)")
    config = shared_config(launches, resolve_config(config))
    key = config_key(config)
    prepared = []
    for i, launch in enumerate(launches):
        if isinstance(launch, _Prepared):
            if launch.config_key != key or launch.policy != policy:
                raise ValueError(f"launch {launch.name!r} was prepared under another config "
                                 "or scheduler policy than this run's; prepare it with the "
                                 "run's resolved config and policy")
            prepared.append(launch)
        else:
            prepared.append(prepare_launch(launch, i, config, policy))
    _check_roles(prepared, config)
    carveout = next((p.occ.shared_carveout_bytes for p in prepared if p.role == "compute"),
                    prepared[0].occ.shared_carveout_bytes)
    windows = tuple(w for p in prepared for w in p.windows)
    system = build_system(config, _memory_factory(memory, windows), carveout)
    owner_of = {sm_id: p.role for p in prepared for sm_id in system.sm_ids(p.role)}
    memory_hooks = _split_hooks(system.memory.hooks, owner_of, [p.role for p in prepared])
    runs = [_Run(p, system, _memory_of(p, system.memory), config, policy, quantum_cycles,
                 memory_hooks[p.role])
            for p in prepared]
    for run in runs:
        if run.prepared.windows:
            system.memory.attach_tracers(run.sheet)
    for run in runs:
        run.start(_compiled(run))
    _run_until(system, runs, stop_at, until_us)
    stop_cycle = system.clock.ps_to_cycles(system.env.now)
    issued = {run.prepared.name: run.issued() for run in runs}
    progress = {run.prepared.name: _share(issued[run.prepared.name],
                                          run.prepared.issued_total()) for run in runs}
    ran_out = tuple(run.prepared.name for run in runs
                    if run.prepared.partial and run.dispatcher.next_cta >= run.prepared.ctas)
    for run in runs:
        if progress[run.prepared.name] >= 1.0:
            for sm in run.sms:
                sm.check_not_parked()
    results = {run.prepared.name: run.result(system, config, run_id,
                                             None if progress[run.prepared.name] >= 1.0
                                             else stop_cycle)
               for run in runs}
    cycles = max(r.cycles for r in results.values())
    return ConcurrentResult(results, cycles, system.clock.cycles_to_ps(cycles) / 1e6,
                            config.to_dict(), progress, issued, ran_out)


def _share(issued: int, total: int) -> float:
    """A launch's progress: the share of its traced warp instructions issued (1.0 for none)."""
    return 1.0 if total == 0 else issued / total


def _memory_of(prepared: _Prepared, memory):
    """The memory `prepared`'s SMs send their requests to: the inner memory of a
    `LinkMemory` when the launch touches none of its windows (its SMs then serve their
    requests inside the compiled loop in front of the cached memory, with the same timing:
    `LinkMemory.access` hands such requests to the inner memory unchanged), else `memory`."""
    if (not isinstance(memory, LinkMemory) or prepared.windows
            or memory.touches(prepared.image.trace.sectors)):
        return memory
    return memory.inner


def _compiled(run: _Run) -> bool:
    """Whether `run`'s SMs step in a compiled driver of their own (`_Run.start`): its SMs
    serve their requests inside their loop (the cached memory, or link windows around it: a
    collective) and its CTAs run in no clusters. Each launch's driver stands in SimPy's
    queue with its first entry and steps its SMs up to SimPy's next event, which may be the
    other launch's driver (`models.sm_driver.SmDriver.share`), so two launches together step
    in event order as their SimPy processes would: the same figures, bit for bit."""
    return run.sms[0].inline is not None and not run.prepared.clustered


STOP_AT = ("last", "first")
"""When a concurrent run ends: once every launch has ended, or once the first has."""


def _run_until(system, runs: list[_Run], stop_at: str, until_us: float | None) -> None:
    """Advance the shared environment until the run's end (`simulate_concurrent`)."""
    env = system.env
    if stop_at == "last" and until_us is None:
        env.run()
        return
    ends = [env.all_of(run.procs) for run in runs]
    stops = [env.any_of(ends) if stop_at == "first" else env.all_of(ends)]
    if until_us is not None:
        stops.append(env.timeout(round(until_us * 1e6)))
    stop = env.any_of(stops)
    try:
        env.run(until=stop)
    except RuntimeError:
        if stop.triggered:
            raise
        # no event left: every process ended or is parked; check_not_parked tells which


def _check_roles(prepared: list[_Prepared], config) -> None:
    seen: dict[str, str] = {}
    for p in prepared:
        if p.role in seen:
            raise ValueError(f"launches {seen[p.role]!r} and {p.name!r} both ask for the "
                             f"{p.role} SMs; accepted: at most one launch per role "
                             f"({', '.join(SM_ROLES)})")
        seen[p.role] = p.name
        if p.role == "comm" and config.sm.comm_count < 1:
            raise ValueError(f"launch {p.name!r}: sms='comm' needs sm.comm_count >= 1")
    if len(seen) != len(set(p.name for p in prepared)):
        raise ValueError("concurrent launches need distinct names")


class _Run:
    """One launch's SMs, dispatcher and tracers on the shared system."""

    def __init__(self, prepared: _Prepared, system, memory, config, policy, quantum_cycles,
                 memory_hooks: Hooks) -> None:
        self.prepared = prepared
        self.sheet = StatSheet()
        self.sm_tracer, self.cache_tracer = SmTracer(self.sheet), CachedMemoryTracer(self.sheet)
        MemoryTracer(self.sheet).attach(memory_hooks)
        self.cache_tracer.attach(memory_hooks)
        self.dispatcher = CtaDispatcher(prepared.ctas)
        phases = PhaseTable(prepared.image.slot_events.size)
        self.sms = [StreamingMultiprocessor(k, system.env, config, prepared.image,
                                            memory, self.dispatcher, policy,
                                            quantum_cycles, phases)
                    for k in system.sm_ids(prepared.role)]
        self.timeline = TimelineTracer([sm.sm_id for sm in self.sms], config.sm.subpartitions,
                                       config.chip.clock_ghz,
                                       level_peaks_gbps=level_peaks_gbps(config))
        self.timeline.attach_memory(memory_hooks)
        for sm in self.sms:
            self.sm_tracer.attach(sm.hooks)
            self.timeline.attach_sm(sm.hooks, sm.sm_id)
        self.system = system
        self.procs: list = []

    def start(self, compiled: bool = False) -> None:
        """Hand out the first CTAs and start the SMs holding one: as SimPy processes, or,
        `compiled` (`_compiled`), as entries of a compiled driver's queue among the
        environment's events (`models.sm_driver.SmDriver.share`: the same order of events,
        so the same figures); `procs` are the processes or the events that stand for their
        ends."""
        self.dispatcher.initial_fill(self.sms, self.prepared.occ.ctas_per_sm)
        env = self.system.env
        if not compiled:
            self.procs = [env.process(sm.process()) for sm in self.sms if sm.resident]
            return
        queue = SmQueue(len(self.sms), next_order(env))
        ends = [None] * len(self.sms)
        for i, sm in enumerate(self.sms):
            if sm.resident:
                queue.push(env.now, URGENT, i)      # SimPy's start-up of its process
                ends[i] = env.event()
        env._eid = count(int(queue.ctl[Q_ORDER]))
        self.procs = [end for end in ends if end is not None]
        SmDriver(self.sms, queue).share(env, ends)

    def issued(self) -> int:
        """Warp instructions issued: those of the traced CTAs less those of CTAs not yet
        handed out and those left to the resident warps."""
        prepared = self.prepared
        offsets = prepared.image.offsets
        count = prepared.instructions_before
        total = prepared.issued_total()
        undispatched = self.dispatcher.next_cta * prepared.image.trace.warps_per_cta
        left = total - int(count(offsets[min(undispatched, offsets.size - 1)]))
        for sm in self.sms:
            wi = sm.state.wi
            used = wi[:, W_USED] != 0
            left += int((count(wi[used, W_END]) - count(wi[used, W_POS])).sum())
        return total - left

    def result(self, system, config, run_id: str, stop_cycle: int | None = None) \
            -> KernelResult:
        """The launch's result; `stop_cycle` for a launch the run stopped before it ended
        (its cycles are then the stop's, its counters those up to it)."""
        p = self.prepared
        cycles = (max(sm.finish_cycle for sm in self.sms) if stop_cycle is None
                  else stop_cycle)
        time_us = kernel_us(config, cycles)
        for sm in self.sms:               # a stopped SM's requests served in its loop
            sm.drain_log()
        self.sm_tracer.flush()
        self.cache_tracer.flush()
        used = sum(1 for sm in self.sms if sm.finish_cycle > 0)
        _kernel_stats(self.sheet, config, p.occ, p.warp_instructions, p.thread_instructions,
                      cycles, time_us, used, self.sm_tracer.warp_cycles)
        return KernelResult(cycles, time_us, p.warp_instructions,
                            self.sheet.to_frame(run_id, p.entry), config.to_dict(),
                            p.occ.limiter, timeline=self.timeline.frame(run_id, p.entry, cycles))
