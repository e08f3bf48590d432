"""`simulate_kernel`: run a PTX kernel functionally, then time its warp traces on the chip model.

What it models
--------------
Functional first: `isa.run_kernel` computes the results (the caller's arrays are updated
exactly as `isa.run_kernel` would) while `simulator.runner.trace.TraceRecorder` records every warp's
instruction stream. The timing model then replays the traces: CTAs are dispatched to the
compute SMs under the occupancy limits (`models.cta_dispatch`), each SM issues through its
warp schedulers to units and the LSU (`models.sm`), memory answers through the system built by
`simulator.build_system`. Timing never changes a result.

`KernelResult.stats` is the project's long table (`run_id, kernel, component, stat, value,
unit`): kernel totals (cycles, time, warp-instructions, occupancy), per-unit issued
instructions and busy cycles, scheduler stall cycles by reason, requests and bytes per memory
level, and whatever a memory with `attach_tracers(sheet)` adds (per-link bytes for
`models.link_memory`). Same inputs give the same stats, bit for bit.
`KernelResult.timeline` holds the run's time series (per-SM utilization, bytes and bandwidth
per memory level; the table of `models.timeline_tracer`).

Fidelity: `fidelity="full"` times every CTA; `"sampled"` takes the shortcut the launch's
fidelity plan names (`simulator.runner.fidelity.plan`: a chip or row slice, synthesized CTAs, wave
extrapolation, ...), carried out by `simulator.runner.sampling`. `KernelResult.plan` is the plan
carried out (method, parameters, the share of CTAs simulated, the share of time
extrapolated); `fidelity` ("full" or "sampled"), `waves_simulated` and
`extrapolated_fraction` summarize it. Timing mode: `timing_only=True` skips the data of
tensor-core instructions and leaves the caller's arrays untouched (`isa.run_kernel`);
pointer arguments may then be `isa.ShapeOnly`. A sampled run also leaves them untouched.

SMs: `sms="compute"` (the default) runs the CTAs on the `sm.count - sm.comm_count` compute
SMs, `sms="comm"` on the `sm.comm_count` SMs reserved for communication kernels.

Launch costs: `KernelResult.kernel_time_us` = the SMs' span (`cycles` at the SM clock) +
`launch.kernel_front_end_us` (a fixed part of every launch's duration on the GPU that the
SMs do not see: what ncu measures beyond it); `KernelResult.time_us` = `kernel_time_us` +
`launch_overhead_us` (the config's `launch.kernel_overhead_us`, a fixed cost per launch
outside the kernel). 0 leaves either out. Cycles and goldens are the span's; the stats'
`time_us` row is `kernel_time_us`, with `front_end_us` and `launch_overhead_us` beside it.

Programs the configured chip's ISA target (`chip.isa_target`) lacks are refused before
anything runs (`check_isa_target`, an `isa.PtxError` at the line as ptxas would refuse them).
Launches the configured part could not run are refused before anything runs
(`check_launch_fits`, an `isa.LaunchError` naming the kernel and the config key): a CTA of
more threads than `sm.max_threads_per_cta`, more shared memory than
`sm.max_shared_memory_per_cta_bytes` (`models.cta_dispatch.occupancy`), a tensor instruction
of a precision whose rate is 0, a wgmma on a part whose `wgmma_latency_cycles` is 0.

Left out: concurrent kernels. Units: SM cycles, microseconds, counts, bytes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

import isa
import models
from isa.cluster import cluster_shape
from isa.launch import dim3
from isa.targets import verify_target
from models.cached_memory import CachedMemoryTracer
from models.cta_dispatch import CtaDispatcher, estimate_registers, occupancy
from models.kernel_image import KernelImage
from models.sm import DEFAULT_QUANTUM_CYCLES, StreamingMultiprocessor
from models.sm_state import PhaseTable
from models.sm_tracer import MemoryTracer, SmTracer
from models.timeline_tracer import TimelineTracer
from models.units import (
    _TENSOR_PRECISION,
    DATA_TIMED,
    event_timings,
    fusable_run_ends,
    instruction_timings,
)
from simulator.framework.stats import Stat, StatSheet
from simulator.runner.fidelity import FIDELITIES, FidelityPlan, LaunchShape, plan
from simulator.runner.l2_start import L2WarmStart, start_warm, warm_start
from simulator.runner.launch_time import front_end_us, kernel_us, launch_overhead_us
from simulator.runner.replay_session import CtaDoneLog, ReplaySession
from simulator.runner.sampling import simulate_sampled
from simulator.runner.system import SM_ROLES, build_system
from simulator.runner.trace import TraceRecorder

KERNEL_STATS = (
    Stat("cycles", "cycles", "kernel duration in SM cycles"),
    Stat("time_us", "us", "kernel duration (cycles at the SM clock + front_end_us, launch "
         "overhead excluded)"),
    Stat("front_end_us", "us", "fixed part of the kernel duration beyond the SMs' span"),
    Stat("launch_overhead_us", "us", "fixed launch cost added to KernelResult.time_us"),
    Stat("warp_instructions", "count", "warp-instructions executed"),
    Stat("thread_instructions", "count", "thread-instructions executed"),
    Stat("ctas_per_sm", "count", "CTAs resident per SM (occupancy limit)"),
    Stat("theoretical_occupancy", "fraction", "resident warps / max warps per SM"),
    Stat("achieved_occupancy", "fraction", "average resident warps / max warps over used SMs"),
    Stat("sms_used", "count", "SMs that ran at least one CTA"),
)


@dataclass
class KernelResult:
    """Timing of one kernel launch (the functional outputs are in the caller's arrays).

    `kernel_time_us` = the SMs' span + `launch.kernel_front_end_us`; `time_us` =
    `kernel_time_us` + `launch_overhead_us` (taken from `config` when not given)."""

    cycles: int
    kernel_time_us: float
    instructions: int
    stats: pd.DataFrame = field(repr=False)
    config: dict[str, Any] = field(repr=False)
    occupancy_limiter: str = ""
    fidelity: str = "full"
    waves_simulated: float = 0.0
    extrapolated_fraction: float = 0.0
    timeline: pd.DataFrame | None = field(default=None, repr=False)
    launch_overhead_us: float | None = None
    plan: FidelityPlan | None = None
    """The fidelity plan carried out (`simulator.runner.fidelity`); None: every CTA timed in full
    (a `full` plan is set), or, for a sampled result built without one, wave
    extrapolation from `waves_simulated`."""

    def __post_init__(self) -> None:
        if self.launch_overhead_us is None:
            self.launch_overhead_us = launch_overhead_us(self.config)
        if self.plan is None:
            self.plan = (FidelityPlan("full") if self.fidelity == "full" else
                         FidelityPlan("wave_extrapolation",
                                      {"waves_simulated": self.waves_simulated},
                                      float("nan"), self.extrapolated_fraction))

    @property
    def time_us(self) -> float:
        """Kernel duration plus the fixed launch overhead, microseconds."""
        return self.kernel_time_us + self.launch_overhead_us


def resolve_config(config):
    """`config`, or the h100_sxm preset when None."""
    if config is None:
        return models.load_preset("h100_sxm")
    return config


def simulate_kernel(ptx, entry: str, grid, block, args: list, config=None, shared_bytes: int = 0,
                    *, policy: str | None = None, regs_per_thread: int | None = None,
                    memory=None, run_id: str = "run",
                    quantum_cycles: int = DEFAULT_QUANTUM_CYCLES, fidelity: str = "full",
                    timing_only: bool = False, sms: str = "compute",
                    cta_work=None, cta_wrap_x: int = 0) -> KernelResult:
    """Run `entry` functionally (arrays updated in place) and time it on `config`.

    `config` defaults to the `h100_sxm` preset; `policy` overrides `sm.scheduler_policy`;
    `regs_per_thread` overrides the estimated register count for occupancy; `memory` picks
    the memory model by name (`"cached"`, the default, or `"flat"`; see
    `simulator.runner.system.MEMORY_MODELS`) or is any `MemoryInterface` object. The cached
    memory's L1 gets what the kernel's shared-memory carve-out leaves. `fidelity` is
    `"full"` or `"sampled"` (see the module docstring); `timing_only` as `isa.run_kernel`;
    `sms` is "compute" or "comm" (the SMs the CTAs run on); `cta_work` (a
    `simulator.runner.work_synthesis.CtaWork` of the grid's CTAs) lets sampled fidelity trace a
    few CTAs of a persistent kernel and synthesize the others; `cta_wrap_x` (Q > 0) declares
    that some operand's addresses start over every Q CTAs along grid x (a table indexed by
    x mod Q: RoPE's cos/sin rows), which trace synthesis checks and uses
    (`simulator.runner.trace_synthesis`).
    """
    if fidelity not in FIDELITIES:
        raise ValueError(f"fidelity={fidelity!r}; accepted: {', '.join(FIDELITIES)}")
    config = resolve_config(config)
    if sms not in SM_ROLES:
        raise ValueError(f"sms={sms!r}; accepted: {', '.join(SM_ROLES)}")
    if sms == "comm" and config.sm.comm_count < 1:
        raise ValueError("sms='comm' needs sm.comm_count >= 1 (SMs reserved for communication)")
    program = ptx if isinstance(ptx, isa.launch.Program) else isa.compile_kernel(ptx, entry)
    check_isa_target(program, config)
    if cta_work is not None and cta_work.k_loop is not None:   # on this launch's own text
        cta_work = dataclasses.replace(cta_work, k_loop=cta_work.k_loop.bound(ptx))
    launch = KernelLaunch(program, entry, dim3(grid, "grid"), dim3(block, "block"), list(args),
                          shared_bytes, timing_only, cta_work,
                          int(config.limits.host_memory_bytes), int(cta_wrap_x))
    if cta_work is not None and cta_work.classes.size != launch.n_ctas:
        raise ValueError(f"cta_work describes {cta_work.classes.size} CTAs; accepted one "
                         f"row per CTA of the grid ({launch.n_ctas})")
    check_launch_fits(program, launch.block, config)
    threads = launch.block_threads
    try:
        occ = occupancy(config, threads, regs_per_thread or estimate_registers(program),
                        program.shared_bytes + shared_bytes)
    except isa.LaunchError as exc:
        raise isa.LaunchError(f"kernel '{entry}': {exc}") from None
    replay = Replay(config, memory, policy, quantum_cycles, occ, run_id, entry, sms,
                    warm_start(program, launch.args, config))
    wave = replay.ctas_per_wave(replay.n_sms)
    check_cluster_launch(program, launch.grid, launch.n_ctas, wave)
    planned = plan(LaunchShape(launch.grid, wave, cta_work is not None, timing_only), config,
                   fidelity)
    if fidelity == "sampled":
        return simulate_sampled(launch, replay, planned)
    recorder = replay.recorder(launch)
    functional = launch.run(recorder)
    return replay.result(replay.run(launch, recorder, functional.warp_instructions,
                                    functional.thread_instructions), plan=planned)


def launch_shape(ptx, entry: str, grid, block, config, shared_bytes: int = 0, *,
                 regs_per_thread: int | None = None, timing_only: bool = False,
                 sms: str = "compute", cta_work=None) -> LaunchShape:
    """The `simulator.runner.fidelity.LaunchShape` of a launch as `simulate_kernel` would run it
    (its CTAs per wave from the occupancy on `config`), without running it: what
    `simulator.runner.fidelity.plan` decides from."""
    program = ptx if isinstance(ptx, isa.launch.Program) else isa.compile_kernel(ptx, entry)
    block = dim3(block, "block")
    occ = occupancy(config, block[0] * block[1] * block[2],
                    regs_per_thread or estimate_registers(program),
                    program.shared_bytes + shared_bytes)
    n_sms = config.sm.comm_count if sms == "comm" else config.sm.compute_count
    return LaunchShape(dim3(grid, "grid"), occ.ctas_per_sm * n_sms, cta_work is not None,
                       timing_only)


def check_isa_target(program, config) -> None:
    """Refuse (`isa.PtxError` at the line, naming the feature and the target) a program the
    configured chip's ISA target `chip.isa_target` lacks, or an extension opcode of a co-design
    unit it does not enable (`isa.targets.verify_target`), before anything runs."""
    verify_target(program, config.chip.isa_target, config.units.isa_extensions())


def check_launch_fits(program, block: tuple[int, int, int], config) -> None:
    """Refuse (`isa.LaunchError` naming the kernel, the figure and the config key) a launch
    the configured part cannot run: a CTA above `sm.max_threads_per_cta`, a tensor
    instruction of a precision whose `units.tensor.<p>_fma_per_clk_per_sm` is 0, a wgmma
    where `units.tensor.wgmma_latency_cycles` is 0 (the timing would invent a rate)."""
    entry, sm, tensor = program.entry, config.sm, config.units.tensor
    threads = block[0] * block[1] * block[2]
    if threads > sm.max_threads_per_cta:
        raise isa.LaunchError(
            f"block {block[0]}x{block[1]}x{block[2]} of kernel '{entry}' has {threads} "
            f"threads, more than sm.max_threads_per_cta = {sm.max_threads_per_cta}; "
            f"accepted: at most {sm.max_threads_per_cta} threads per CTA")
    for ins in program.instrs:
        if ins.unit != "tensor" or ins.opname in DATA_TIMED or (
                ins.opname.startswith("wgmma.") and ins.opname != "wgmma.mma_async"):
            continue
        if ins.opname == "wgmma.mma_async" and tensor.wgmma_latency_cycles == 0:
            raise isa.LaunchError(
                f"kernel '{entry}': {ins.text.strip()!r} is a wgmma, and "
                "units.tensor.wgmma_latency_cycles = 0 says this part has none; accepted: "
                "a part with wgmma (a wgmma_latency_cycles > 0)")
        names = [t.name for t in ins.types]
        precision = next((_TENSOR_PRECISION[n] for n in names[1:] + names
                          if n in _TENSOR_PRECISION), "fp16")
        if tensor.fma_per_clk_per_sm(precision) == 0:
            key = f"units.tensor.{precision}_fma_per_clk_per_sm"
            raise isa.LaunchError(
                f"kernel '{entry}': {ins.text.strip()!r} runs on {precision} tensor cores, "
                f"and {key} = 0 says this part has none; accepted: a rate > 0 "
                f"(--set {key}=N) or a kernel without {precision} tensor instructions")


def check_cluster_launch(program, grid, n_ctas: int, wave: int) -> None:
    """Clusters of several CTAs are timed when all their CTAs are resident at once (a grid
    of one wave: the SMs take them round-robin at the start; a later wave would need the
    dispatcher to place whole clusters); an SM's warps waiting for a phase another SM
    completes are woken by it (`models.sm_driver`, `StreamingMultiprocessor.wake_phase`)."""
    shape, _ = cluster_shape(program, grid)
    if shape != (1, 1, 1) and n_ctas > wave:
        raise isa.LaunchError(
            f"kernel '{program.entry}' runs {n_ctas} CTAs in clusters of {shape}, more than "
            f"the {wave} resident at once: clusters are timed for grids of one wave so far "
            "(persistent kernels)")


@dataclass
class KernelLaunch:
    """One kernel launch to trace: program, shapes, arguments, timing mode."""

    program: Any
    entry: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: list
    shared_bytes: int
    timing_only: bool
    work: Any = None          # a `simulator.runner.work_synthesis.CtaWork`, or None
    memory_budget_bytes: int = isa.launch.DEFAULT_MEMORY_BUDGET_BYTES  # limits.host_memory_bytes
    wrap_x: int = 0           # CTAs in x after which an operand's addresses start over (0: none)

    @property
    def block_threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    @property
    def n_ctas(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    def recorder(self, fuse_end: np.ndarray | None = None) -> TraceRecorder:
        return TraceRecorder(self.grid, self.block_threads, self.program.local_bytes, fuse_end)

    def run(self, recorder: TraceRecorder, cta_range: tuple[int, int] | None = None,
            ctas=None):
        """Functional run of all CTAs, or of `cta_range`, or of the CTAs `ctas` (ascending
        linear indices), traced into `recorder`."""
        return isa.run_kernel(self.program, self.entry, self.grid, self.block, self.args,
                              self.shared_bytes, observer=recorder, cta_range=cta_range,
                              timing_only=self.timing_only, ctas=ctas,
                              memory_budget_bytes=self.memory_budget_bytes)


def level_peaks_gbps(config) -> dict[str, float]:
    """The HBM and L2 peaks (GB/s) a launch's bandwidth over time stays within."""
    return {"hbm": config.hbm_peak_tbps * 1e3, "l2": config.l2_peak_tbps * 1e3}


@dataclass
class ReplayRun:
    """Outcome of one replay: cycles, time and the filled stat sheet."""

    cycles: int
    time_us: float
    sheet: StatSheet
    warp_instructions: int
    ctas: int
    cta_done_cycles: list[int] = field(default_factory=list)
    timeline: pd.DataFrame | None = None


@dataclass
class Replay:
    """Times traced CTAs on a freshly built system (one `run` = one kernel launch, from a
    cold L2 unless `l2_warm` says what it starts with)."""

    config: Any
    memory: Any
    policy: str | None
    quantum_cycles: int
    occ: Any
    run_id: str
    entry: str
    sms: str = "compute"
    l2_warm: L2WarmStart | None = None   # `fidelity.l2_start` warm-inputs: what starts in the L2
    _timings: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def n_sms(self) -> int:
        """SMs the kernel runs on (compute or reserved communication SMs)."""
        sm = self.config.sm
        return sm.comm_count if self.sms == "comm" else sm.compute_count

    def recorder(self, launch: KernelLaunch) -> TraceRecorder:
        """A trace recorder for `launch` that records runs of plain one-cycle unit ops as one
        event each (`models.units.fusable_run_ends`) when the scheduler is greedy-then-oldest,
        which issues such runs back to back as the fused event is timed."""
        if (self.policy or self.config.sm.scheduler_policy) != "gto":
            return launch.recorder()
        timings, _ = self.timings(launch.program)
        return launch.recorder(fusable_run_ends(launch.program, timings))

    def timings(self, program) -> tuple[list, int]:
        """`instruction_timings(program, self.config)`, kept per program for this replay's
        config (a sampled launch asks for them at every recorder and image); a copy of the
        list each time."""
        key = id(program)
        hit = self._timings.get(key)
        if hit is None or hit[0] is not program:
            hit = self._timings[key] = (program, *instruction_timings(program, self.config))
        return list(hit[1]), hit[2]

    def ctas_per_wave(self, n_sms: int) -> int:
        return self.occ.ctas_per_sm * n_sms

    def run(self, launch: KernelLaunch, recorder: TraceRecorder, warp_instructions: int,
            thread_instructions: int, stop: int | None = None) -> ReplayRun:
        """Replay CTAs [0, stop) (all when None) of the trace in `recorder`."""
        session = self.session(self.image(launch, recorder), stop)
        session.step_to_end()
        return self.finish(session, warp_instructions, thread_instructions)

    def image(self, launch: KernelLaunch, recorder: TraceRecorder) -> KernelImage:
        """The `KernelImage` of the trace recorded so far."""
        config = self.config
        timings, n_regs = self.timings(launch.program)
        trace, timings = event_timings(recorder.finish(), timings, launch.program, config)
        return KernelImage(trace, timings, n_regs)

    def session(self, kernel: KernelImage, stop: int | None = None) -> ReplaySession:
        """A system with CTAs [0, stop) of `kernel` dispatched to its SMs, started: cold, or
        with the launch's inputs in the L2 (`fidelity.l2_start`, `start_warm`)."""
        config, occ = self.config, self.occ
        system = build_system(config, self.memory, occ.shared_carveout_bytes)
        sheet = StatSheet()
        dispatcher = CtaDispatcher(kernel.trace.n_ctas if stop is None else stop)
        phases = PhaseTable(kernel.slot_events.size)
        sms = [StreamingMultiprocessor(k, system.env, config, kernel, system.memory, dispatcher,
                                       self.policy, self.quantum_cycles, phases)
               for k in system.sm_ids(self.sms)]
        timeline = TimelineTracer([sm.sm_id for sm in sms], config.sm.subpartitions,
                                  config.chip.clock_ghz,
                                  level_peaks_gbps=level_peaks_gbps(config))
        session = ReplaySession(system.env, system.memory, sms, dispatcher, sheet,
                                SmTracer(sheet), MemoryTracer(sheet), CachedMemoryTracer(sheet),
                                timeline, CtaDoneLog())
        session.wire()
        self.start_warm(session, kernel)
        dispatcher.initial_fill(sms, occ.ctas_per_sm)
        session.start()
        return session

    def start_warm(self, session: ReplaySession, kernel: KernelImage) -> None:
        """Put the launch's inputs that `kernel`'s loads read in the session's L2 under
        `fidelity.l2_start` (`simulator.runner.l2_start`); nothing for a cold start."""
        start_warm(self.l2_warm, session.memory, kernel.trace, session.sheet)

    def finish(self, session: ReplaySession, warp_instructions: int,
               thread_instructions: int) -> ReplayRun:
        """The figures of a session stepped to its end."""
        config, sms = self.config, session.sms
        cycles = max(sm.finish_cycle for sm in sms)
        time_us = kernel_us(config, cycles)
        session.sm_tracer.flush()
        session.cache_tracer.flush()
        used = sum(1 for sm in sms if sm.finish_cycle > 0)
        _kernel_stats(session.sheet, config, self.occ, warp_instructions, thread_instructions,
                      cycles, time_us, used, session.sm_tracer.warp_cycles)
        return ReplayRun(cycles, time_us, session.sheet, warp_instructions,
                         session.dispatcher.n_ctas, sorted(session.done_log.cycles),
                         session.timeline.frame(self.run_id, self.entry, cycles))

    def result(self, run: ReplayRun, **sampling) -> KernelResult:
        return KernelResult(run.cycles, run.time_us, run.warp_instructions,
                            run.sheet.to_frame(self.run_id, self.entry), self.config.to_dict(),
                            self.occ.limiter, timeline=run.timeline, **sampling)


def _kernel_stats(sheet, config, occ, warp_instructions, thread_instructions, cycles, time_us,
                  used, warp_cycles) -> None:
    for stat in KERNEL_STATS:
        sheet.declare(stat)
    max_warps = config.sm.max_warps_per_sm
    values = {
        "cycles": cycles, "time_us": time_us, "front_end_us": front_end_us(config),
        "launch_overhead_us": launch_overhead_us(config),
        "warp_instructions": warp_instructions,
        "thread_instructions": thread_instructions,
        "ctas_per_sm": occ.ctas_per_sm,
        "theoretical_occupancy": occ.ctas_per_sm * occ.warps_per_cta / max_warps,
        "achieved_occupancy": warp_cycles / max(cycles * max(used, 1) * max_warps, 1),
        "sms_used": used,
    }
    for name, value in values.items():
        sheet.set("kernel", name, value)
