"""Sampled fidelity: time the first waves of a kernel's CTAs and extrapolate the rest.

What it models
--------------
A wave is the CTAs resident at once on all compute SMs: `W = ctas_per_sm * compute SMs` (the
occupancy calculation of `models.cta_dispatch`); the grid has `n = n_ctas / W` waves
(fractional). `simulate_sampled` (a `SampledRun`, which holds the launch's state: its
recorder and counts, template, CTAs traced alone, chip slice) traces CTAs wave by wave
(`isa.run_kernel(cta_range=...)`, one recorder, so earlier waves are traced once) and
replays the first k waves from a cold system, giving t(k) cycles. Inside that replay, M_j is
the cycle at which j waves' worth of CTAs (j * W) have finished, and m_j = M_j - M_(j-1) the
marginal wave time (dispatch is dynamic, so these waves overlap as in the full run; the last
wave is left out because no later wave overlaps its tail). With m the mean of the last two
marginals,

    cycles = t(k) + (n - k) * m

(the final partial wave counts in proportion to its CTAs).

The thresholds are the config's `[fidelity]` keys (`simulator.framework.policy_spec.FidelitySpec`):
first k = `wave_sampling_start_waves` (4); if its last two marginals differ by
`wave_sampling_steady_tolerance_fraction` (1 %) or more, the first k_max waves are replayed
instead, k_max = `wave_sampling_max_waves` (7) or fewer so that at least one wave is left to
extrapolate (two replays at most; the k_max-wave replay continues a copy of the k-wave one
taken `snapshot_lead_waves` (half a wave) before its CTAs ran out, `snapshot_growth`, as
both are the same simulation up to there). A grid of fewer than `wave_sampling_min_waves`
(8) waves is timed in full (or on a chip slice, below), so every extrapolated grid has
k_max = 7. Below 8 waves the replays cost about as much as the full run, and extrapolating
from fewer waves was not accurate enough (mma_bf16 2048x1024x64, 6.2 waves of 1320 CTAs on
h100_sxm, k_max = 5: marginals 4127, 4290, 4082 cycles, but the full run's waves 5 and 6
took 3118 and 4117 and its 272-CTA partial wave ended 226 cycles after wave 6, so
extrapolating 1.2 waves at 4186 read 3.1 % long; RMSNorm 4096x7168 extrapolated at a 3 %
tolerance read +6.6 %).

A kernel whose grid moves more data than the L2 holds reaches a steady state the first
waves never see: once the L2 is full each new line evicts an older one and the dirty ones
go back to HBM. The first k waves alone may fit in the L2, so their replay would write
nothing back (saxpy over 16 M elements on h100_sxm from a cold L2: sampled 45.0 us against
full 63.3 us, -29 %). When the traced CTAs' distinct sectors, scaled to the grid, outgrow
the L2 (`steady_dirty_fraction`) and `steady_l2_preconditioning` is on, the k- and
k_max-wave replays start from an L2 full of lines of no kernel, the share of them dirty
that the grid's evictions have on average (`models.cached_memory.CachedMemory.
precondition_l2`): saxpy reads 64.4 us (+1.7 %), SwiGLU 32768x2048 on h800_sxm 141.8 us
against full 139.4, quantize 4096x7168 -4.8 %, residual add of 9 inputs 4096x7168 +0.2 %
(`tests/test_sampling_steady_l2.py`). A replay in full starts cold, as the real launch.

Only the first CTAs (a wave, at most `trace_synthesis_first_ctas` or one per SM) are run
functionally when the kernel's CTAs repeat each other's instructions with addresses affine
in the CTA coordinates and `trace_synthesis` is on: the later CTAs are made from them
(`simulator.runner.trace_synthesis`, checked against two CTAs traced for real each time), the
same traces the functional run gives, so the same result bit for bit (RMSNorm 4096x7168
on h800_sxm: 6.5 s CPU against 10.8 s tracing every CTA); a kernel that fails a check is
traced in full.
With `chip_slicing` on, a grid of `chip_slice_min_waves` (2) to f x
`chip_slice_max_slice_waves` (16) waves whose CTAs are alike (the synthesis template
holds, the grid's last and middle CTAs match it, and the CTAs share no data along a grid
dimension) is not wave-sampled: its first ceil(n / f) CTAs are all timed, from a cold
system, on a slice of the chip with 1/f of its SMs, L2 slices and HBM channels (f = 4 on
h800_sxm, `simulator.runner.chip_slice`), and its counts scaled to the grid: quantize 4096x7168
on h800_sxm -0.8 % against full (wave-sampled -4.9 %), 1.4 s CPU instead of 4.4; vLLM's
SwiGLU 4096x5504 on h100_sxm +2.4 % (wave-sampled +2.6 %).
A 2-D grid whose last row of CTAs runs other events than the rows before it (a template
`tail`, `simulator.runner.trace_synthesis`) is not wave-sampled: its first waves all lie in the
first rows, so they do not stand for the grid (quantizing 32768x1536 on h800_sxm, whose
second CTA per row quantizes 4 strips of 8, reads +18.1 % wave-sampled; the layer's RoPE
4096x8256, +8.9 %). It is row-sliced (`simulator.runner.chip_slice.row_slice`) from two waves
on, or else timed in full. A launch that declares a wrap in x (`KernelLaunch.wrap_x`: a table
read at x mod Q, RoPE's cos/sin rows) has it in its template when
`trace_synthesis_wrap` is on, and its row slice takes the first Q/f CTAs of every Q.
A persistent kernel launched with a `simulator.runner.work_synthesis.CtaWork` (the plain GEMMs:
one wave, timed in full) has a few CTAs per work class traced and the others synthesized
from them when `work_synthesis` is on (`simulator.runner.work_synthesis`), the same trace as
tracing all: q_a_proj 4096x1536x7168 FP8 on h800_sxm 12.0 s CPU against 14.1 s,
kv_a_proj 4096x576x7168 5.0 s against 6.9 s.
Which of these a launch takes is its fidelity plan (`simulator.runner.fidelity.plan`, from its
grid, CTAs per wave and the config's `[fidelity]` keys); `SampledRun` carries it out, makes
the checks that need the traces (template and footprint of a slice, a differing last row,
synthesis, steadiness, the L2 footprint) and records the plan it carried out as
`KernelResult.plan` (method, parameters, the share of CTAs simulated, the share of time
extrapolated), summarized by `KernelResult.fidelity` ("sampled" or "full"),
`waves_simulated` (k) and `extrapolated_fraction` ((n - k) * m / cycles).

Stats: the kernel's `cycles` and `time_us` are the extrapolated ones (the launch's fixed
`launch.kernel_front_end_us` added once, not extrapolated). Rows that count work
(units `count`, `B`, `cycles`: instructions, issues, busy and stall cycles, requests,
sectors, bytes) are scaled by n_ctas / simulated CTAs, except the kernel's `ctas_per_sm`
and `sms_used`; ratios (`fraction`, hit rates, occupancy) are those of the simulated
waves. `KernelResult.instructions` is scaled the same way.

Left out: the outputs of a sampled run (the caller's arrays are not written), tail effects
beyond the proportional partial wave, kernels whose waves differ by design (persistent
kernels with one wave are simply timed in full). Units: SM cycles, waves, CTAs.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from simulator.runner import chip_slice, trace_synthesis, work_synthesis
from simulator.runner import trace as trace_mod
from simulator.runner.fidelity import FidelityPlan
from simulator.runner.launch_time import front_end_us
from simulator.runner.trace_tiles import span_items

_UNKNOWN = object()
"""`SampledRun.dirty` before it is computed (None is a value: the grid fits in the L2)."""
_UNSCALED_KERNEL_STATS = frozenset({"cycles", "time_us", "ctas_per_sm", "sms_used"})
_SCALED_UNITS = frozenset({"count", "B", "cycles"})


def _scale_stats(frame, factor: float, cycles: int, time_us: float):
    """The stats table with count-like rows scaled by `factor`, kernel time replaced."""
    frame = frame.copy()
    kernel = frame["component"] == "kernel"
    scaled = frame["unit"].isin(_SCALED_UNITS) & ~(kernel & frame["stat"].isin(
        _UNSCALED_KERNEL_STATS))
    frame.loc[scaled, "value"] = frame.loc[scaled, "value"].astype(float) * factor
    frame.loc[kernel & (frame["stat"] == "cycles"), "value"] = cycles
    frame.loc[kernel & (frame["stat"] == "time_us"), "value"] = time_us
    return frame


def wave_marginals(done_cycles: list[int], wave: int, k: int) -> list[int]:
    """m_j = M_j - M_(j-1), j = 2 .. k-1, where M_j is the cycle the (j * wave)-th CTA
    finished (the last wave, whose tail nothing overlaps, is left out)."""
    milestones = [done_cycles[j * wave - 1] for j in range(1, k)]
    return [b - a for a, b in zip(milestones, milestones[1:], strict=False)]


_READ_KINDS = (trace_mod.KIND_LOAD, trace_mod.KIND_BULK_LOAD, trace_mod.KIND_LOAD_CG)
_WRITE_KINDS = (trace_mod.KIND_STORE, trace_mod.KIND_BULK_STORE, trace_mod.KIND_ATOMIC)


def steady_dirty_fraction(trace, traced_ctas: int, n_ctas: int, l2_bytes: int,
                          partitions: int = 1) -> float | None:
    """How much of the L2 to hold dirty before a sampled replay (`CachedMemory.
    precondition_l2`), or None when the grid's footprint fits in the L2.

    The traced CTAs' distinct global sectors, scaled to `n_ctas`, are the grid's footprint
    F; loaded lines also take a copy in the reader's partition for the (P - 1) / P of them
    homed in another (`models.cached_memory`), so the L2 allocates A = F + (P - 1) / P x
    loaded. Once A outgrows the L2 each allocation evicts an older line, dirty in the share
    w / A of them (w: the written sectors; copies are clean), and the evictions are the
    A - L2 allocations after the L2 filled. Spread over the whole grid (the sampled waves
    stand for all of it), the share of dirty victims is w / A x (1 - L2 / A)."""
    idx = np.flatnonzero(np.isin(trace.kind, _READ_KINDS + _WRITE_KINDS))
    counts = trace.detail[idx].astype(np.int64)
    total = int(counts.sum())
    if total == 0 or traced_ctas < 1:
        return None
    sectors = trace.sectors[span_items(trace.sector_start[idx], counts)]
    written = np.repeat(np.isin(trace.kind[idx], _WRITE_KINDS), counts)
    scale = (1 << trace_mod.SECTOR_SHIFT) * n_ctas / traced_ctas
    distinct, distinct_loaded, distinct_written = _distinct_sectors(sectors, written)
    footprint = distinct * scale
    loaded = distinct_loaded * scale
    allocated = footprint + (partitions - 1) / partitions * loaded
    if allocated <= l2_bytes:
        return None
    return distinct_written * scale / allocated * (1 - l2_bytes / allocated)


def _distinct_sectors(sectors: np.ndarray, written: np.ndarray) -> tuple[int, int, int]:
    """Distinct sectors of `sectors`, of those read, of those written: one sort of
    sector x 2 + written (np.unique hashes and was 6x slower: 7.2 of the 18.5 CPU seconds
    of a sampled 9-input residual add)."""
    if sectors.size == 0:
        return 0, 0, 0
    keys = np.sort(sectors.astype(np.int64) * 2 + written)
    first = np.empty(keys.size, np.bool_)
    first[0] = True
    np.not_equal(keys[1:], keys[:-1], out=first[1:])
    distinct_keys = keys[first]
    is_written = (distinct_keys & 1).astype(np.bool_)
    sector = distinct_keys >> 1
    new_sector = np.empty(sector.size, np.bool_)
    new_sector[0] = True
    np.not_equal(sector[1:], sector[:-1], out=new_sector[1:])
    n_written = int(is_written.sum())
    return int(new_sector.sum()), int(is_written.size - n_written), n_written


def simulate_sampled(launch, replay, planned: FidelityPlan):
    """A `KernelResult` of `launch` timed by `replay` at sampled fidelity by the plan
    `planned` (`simulator.runner.fidelity.plan`; module docstring), with the plan carried out."""
    return SampledRun(launch, replay, planned).result()


class SampledRun:
    """One launch timed at sampled fidelity by a plan (`simulator.runner.fidelity.plan`): the CTAs
    traced so far into one recorder (for real, or synthesized from a template), the chip
    slice taken, the replays of its waves. The plan decides the method; this run makes the
    checks that need the traces and records the plan it carried out.

    `whole` is the replay of the chip the result speaks for, `replay` the one that times
    (a slice of it when `factor` > 1, running the CTAs `order`, or the first `grid_ctas`
    when `order` is None)."""

    def __init__(self, launch, replay, planned: FidelityPlan) -> None:
        self.launch, self.whole, self.replay, self.planned = launch, replay, replay, planned
        self.n_ctas = launch.n_ctas
        self.wave = max(replay.ctas_per_wave(replay.n_sms), 1)
        self.n_waves = self.n_ctas / self.wave
        self.recorder = replay.recorder(launch)
        self.warp_instr = self.thread_instr = self.traced = self.synthesized = 0
        self.work_synthesized = False
        self.dirty = _UNKNOWN               # steady-L2 dirty fraction (None: fits), once known
        self.policy = replay.config.fidelity          # the config's [fidelity] thresholds
        self.synthesis_on = self.policy.trace_synthesis
        self.template = None
        self.alone: dict = {}               # CTA -> its trace alone (`real_cta`)
        self.order: np.ndarray | None = None
        self.factor = 1
        self.grid_ctas = self.n_ctas

    # -- tracing --------------------------------------------------------------------
    def run_to(self, stop: int) -> None:
        """CTAs up to `stop` traced for real."""
        functional = self.launch.run(self.recorder, (self.traced, stop))
        self.warp_instr += functional.warp_instructions
        self.thread_instr += functional.thread_instructions
        self.traced = stop

    def first_ctas(self) -> int:
        return min(self.wave, max(self.policy.trace_synthesis_first_ctas, self.replay.n_sms))

    def trace_evidence(self) -> None:
        """The first CTAs traced for real (those a template is built from)."""
        stop = min(self.first_ctas(), self.n_ctas)
        if self.traced < stop:
            self.run_to(stop)

    def build_template(self):
        if self.template is None:
            grouped, sectors = self.recorder.grouped()
            wrap_x = self.launch.wrap_x if self.policy.trace_synthesis_wrap else 0
            self.template = trace_synthesis.template(
                grouped, sectors, self.recorder.warps_per_cta, self.traced, self.warp_instr,
                self.thread_instr, self.launch.grid, self.real_cta, wrap_x)
        return self.template

    def trace_to(self, stop: int) -> None:
        """CTAs up to `stop` traced: the first `first` for real, the rest synthesized from
        them where `simulator.runner.trace_synthesis` allows, else for real. On a row slice of the
        chip the places from `first` on hold the slice's CTAs (`order`), synthesized."""
        first, order, recorder = self.first_ctas(), self.order, self.recorder
        if self.synthesis_on and self.traced == 0 and stop > first:
            self.run_to(first)
        if self.synthesis_on and self.traced >= first:
            tpl = self.build_template()
            ctas = (np.arange(self.traced, stop, dtype=np.int64) if order is None
                    else order[self.traced:stop])
            if tpl is not None and self.probes_match(tpl, *self.probe_ctas(ctas)):
                for part, piece in trace_synthesis.pieces(tpl, ctas):
                    grouped, sectors = trace_synthesis.synthesize(
                        part, self.traced, self.traced + piece.size,
                        self.n_ctas * recorder.warps_per_cta, recorder.sector_count,
                        None if order is None else piece)
                    recorder.append_grouped(grouped, sectors)
                    self.warp_instr += part.warp_instructions * piece.size
                    self.thread_instr += part.thread_instructions * piece.size
                    self.traced += piece.size
                    self.synthesized += piece.size
                return
            self.synthesis_on = False
        if order is not None:
            raise RuntimeError(f"{self.launch.entry}: the chip slice's CTAs {self.traced}.."
                               f"{stop - 1} could not be synthesized after their template "
                               "was checked")
        self.run_to(stop)

    def real_cta(self, cta: int):
        """`trace_synthesis.cta_events` of CTA `cta` traced alone, and its (warp, thread)
        instruction counts (each CTA traced once)."""
        if cta not in self.alone:
            launch = self.launch
            probe = self.replay.recorder(launch)
            functional = launch.run(probe, (cta, cta + 1))
            events, sectors = trace_synthesis.cta_events(
                probe.finish(), cta, len(launch.program.instrs), self.recorder.fused_runs)
            self.alone[cta] = events, sectors, (functional.warp_instructions,
                                                functional.thread_instructions)
        return self.alone[cta]

    @staticmethod
    def probe_ctas(ctas: np.ndarray) -> tuple[int, int]:
        """The CTAs whose real traces check a synthesis of `ctas`: the middle and the last."""
        return int(ctas[ctas.size // 2]), int(ctas[-1])

    def probes_match(self, tpl, *ctas: int) -> bool:
        """Whether CTAs `ctas`, traced alone, equal their synthesis from `tpl`."""
        return all(trace_synthesis.probe_matches(tpl, c, self.real_cta(c))
                   for c in sorted(set(ctas)))

    # -- what is timed --------------------------------------------------------------
    def slice_factor(self) -> tuple[int, np.ndarray | None]:
        """f of the chip slice that times this grid (`simulator.runner.chip_slice`), 1 for none,
        and the CTAs it times when they are a row slice (None: the first ceil(n / f)). The
        plan names the slice (`chip_slice`: a grid of few waves, whose first ceil(n / f)
        CTAs or rows may be sliced; `row_slice`: more waves, sliced only when its last row
        runs other events, a template `tail`); the traces decide whether it holds."""
        launch, n_ctas, planned, policy = self.launch, self.n_ctas, self.planned, self.policy
        if planned.method not in ("chip_slice", "row_slice"):
            return 1, None
        f, few = planned.params["factor"], planned.method == "chip_slice"
        self.trace_evidence()                         # the template decides (module docstring)
        tpl = self.build_template()
        if tpl is None or (not few and tpl.tail is None) or not self.probes_match(
                tpl, n_ctas // 2, n_ctas - 1):
            return 1, None
        tolerance = policy.chip_slice_footprint_tolerance_fraction
        if tpl.tail is None and chip_slice.proportional(tpl, n_ctas, f, tolerance=tolerance):
            return f, None
        rows = chip_slice.row_slice(launch.grid, f,
                                    tpl.wrap_x if tpl.wrapped is not None else 0)
        traced = self.traced
        if (rows is not None and rows.size > traced
                and (rows[:traced] == np.arange(traced)).all()
                and chip_slice.proportional(tpl, n_ctas, f, rows, tolerance=tolerance)
                and self.probes_match(tpl, *self.probe_ctas(rows[traced:]))):  # as `trace_to`
            return f, rows
        return 1, None

    def rows_differ(self) -> bool:
        """Whether the grid's last row runs other events than the rows before it (its
        template has a `tail`): then its first waves do not stand for the grid."""
        if (not self.synthesis_on or self.launch.grid[1] < 2
                or self.n_waves < self.policy.wave_sampling_min_waves):
            return False
        self.trace_evidence()
        tpl = self.build_template()
        return tpl is not None and tpl.tail is not None

    def time_waves(self, k: int, snapshot_from: int | None = None, resume=None,
                   steady_l2: bool = True):
        """The replay of the first k waves (of `grid_ctas`), from a cold system or resumed
        from `resume`; (its `ReplayRun`, a snapshot taken at `snapshot_from` or None)."""
        replay = self.replay
        stop = min(k * self.wave, self.grid_ctas)
        if stop > self.traced:
            self.trace_to(stop)
        kernel = replay.image(self.launch, self.recorder)
        if resume is None:
            session = replay.session(kernel, stop)
            if (steady_l2 and self.policy.steady_l2_preconditioning
                    and hasattr(session.memory, "precondition_l2")):
                if self.dirty is _UNKNOWN:
                    self.dirty = steady_dirty_fraction(
                        kernel.trace, stop, self.grid_ctas, replay.config.l2.size_bytes,
                        replay.config.l2.partitions)
                if self.dirty is not None:
                    session.memory.precondition_l2(self.dirty)
                    replay.start_warm(session, kernel)     # the inputs over the old lines
        else:
            session = resume
            session.resume(kernel, stop)
        snapshot = session.step_to_end(snapshot_from)
        return replay.finish(session, self.warp_instr, self.thread_instr), snapshot

    # -- the result -----------------------------------------------------------------
    def result(self):
        """The `KernelResult` (module docstring) by the plan: the grid timed in full (on the
        chip or a slice of it), or its first waves timed and the rest extrapolated; its
        `plan` is the one carried out."""
        launch, n_ctas, n_waves = self.launch, self.n_ctas, self.n_waves
        if launch.work is None:                                  # CtaWork: CTAs differ
            self.factor, self.order = self.slice_factor()
        factor, order = self.factor, self.order
        if factor > 1:
            self.replay = dataclasses.replace(
                self.replay, config=chip_slice.sliced_config(self.replay.config, factor))
            self.wave = max(self.replay.ctas_per_wave(self.replay.n_sms), 1)
        self.grid_ctas = (chip_slice.sliced_ctas(n_ctas, factor) if order is None
                          else order.size)                       # the CTAs timed as the grid
        wave, whole = self.wave, self.whole
        taken = self.planned if factor > 1 else _unsliced_plan(self.planned)
        if taken.method == "full+synthesized_ctas" and taken.params.get("synthesis") == "work":
            counts = work_synthesis.synthesize_trace(launch, self.recorder, self.policy)
            if counts is not None:
                self.warp_instr, self.thread_instr = counts
                self.traced, self.work_synthesized = n_ctas, True
            else:
                self.recorder = self.replay.recorder(launch)   # drop what the attempt traced
        rows_differ = (taken.method == "wave_extrapolation" and launch.work is None
                       and self.rows_differ())
        if taken.method != "wave_extrapolation" or rows_differ:
            full, _ = self.time_waves(math.ceil(self.grid_ctas / wave), steady_l2=False)
            if factor == 1:
                reason = ("the last row of CTAs differs from the first rows" if rows_differ
                          else taken.params.get("reason", ""))
                return whole.result(full, fidelity="full", waves_simulated=n_waves,
                                    plan=self.whole_grid_plan(reason))
            result = whole.result(full, fidelity="sampled", waves_simulated=n_waves,
                                  extrapolated_fraction=0.0, plan=self.slice_plan())
            return _unsliced(result, full, n_ctas, factor)
        params = taken.params
        k, k_max = params["start_waves"], params["max_waves"]
        snapshot_from = None
        if params["snapshot_growth"]:
            snapshot_from = k * wave - int(params["snapshot_lead_waves"] * wave)
        last, snapshot = self.time_waves(k, snapshot_from)
        marginals = wave_marginals(last.cta_done_cycles, wave, k)
        steady = _steady(marginals, params["steady_tolerance_fraction"])
        if not steady and k_max > k:
            k = k_max
            last, _ = self.time_waves(k, resume=snapshot)
            marginals = wave_marginals(last.cta_done_cycles, wave, k)
        marginal = max((marginals[-1] + marginals[-2]) / 2, 0)
        extra = (n_waves - k) * marginal
        cycles = int(round(last.cycles + extra))
        front = front_end_us(self.replay.config)
        time_us = (last.time_us - front) * cycles / max(last.cycles, 1) + front
        grown = k != params["start_waves"]
        done = FidelityPlan("wave_extrapolation", {
            **self.done_params(), "waves_total": round(n_waves, 4), "waves_simulated": k,
            "replays": 2 if grown else 1, "steady": steady,
            "snapshot_growth": grown and snapshot is not None,
            "steady_l2_dirty_fraction": None if self.dirty is _UNKNOWN else self.dirty,
            "marginal_cycles": marginal},
            min(k * wave, n_ctas) / n_ctas, extra / max(cycles, 1))
        result = whole.result(last, fidelity="sampled", waves_simulated=float(k),
                              extrapolated_fraction=extra / max(cycles, 1), plan=done)
        result.cycles, result.kernel_time_us = cycles, time_us
        return _unsliced(result, last, n_ctas, factor)

    # -- the plan carried out -------------------------------------------------------
    def done_params(self) -> dict:
        """Parameters every carried-out plan of this launch records: waves, CTAs, timing
        mode and the synthesis that built CTAs' traces."""
        params = {"waves": round(self.n_waves, 4), "ctas": self.n_ctas,
                  "timing_only": bool(self.launch.timing_only)}
        if self.work_synthesized:
            params["synthesis"] = "work"
        elif self.synthesized:
            params.update(synthesis="trace", synthesized_ctas=self.synthesized)
        return params

    def whole_grid_plan(self, reason: str) -> FidelityPlan:
        """Every CTA timed on the whole chip (some built by synthesis)."""
        built = self.work_synthesized or self.synthesized > 0
        return FidelityPlan("full+synthesized_ctas" if built else "full",
                            {**self.done_params(), "reason": reason})

    def slice_plan(self) -> FidelityPlan:
        """The grid's share timed on a slice of 1/f of the chip."""
        return FidelityPlan("row_slice" if self.order is not None else "chip_slice",
                            {**self.done_params(), "factor": self.factor,
                             "ctas_timed": self.grid_ctas, "slice_sms": self.replay.n_sms},
                            self.grid_ctas / self.n_ctas, 0.0)


def _unsliced_plan(planned: FidelityPlan) -> FidelityPlan:
    """The plan a launch follows when no slice is taken: a slice's fallback, else itself."""
    if planned.method in ("chip_slice", "row_slice") and planned.fallback is not None:
        return planned.fallback
    return planned


def _steady(marginals: list[int], tolerance: float) -> bool:
    """The last two wave marginals within the share `tolerance` of each other."""
    return abs(marginals[-1] - marginals[-2]) < tolerance * max(marginals[-2], 1)


def _unsliced(result, last, n_ctas: int, factor: int):
    """`result` (of the replay `last`, `result.cycles` and `kernel_time_us` set) with its
    counts scaled to the grid's `n_ctas` CTAs and, for a run on a slice of the chip
    (`factor` > 1, `simulator.runner.chip_slice`), the whole chip put back."""
    scale = n_ctas / last.ctas
    result.instructions = int(round(last.warp_instructions * scale))
    result.stats = _scale_stats(result.stats, scale, result.cycles, result.kernel_time_us)
    if factor > 1:
        result.stats, result.timeline = chip_slice.unslice(result.stats, result.timeline,
                                                           factor)
    return result
