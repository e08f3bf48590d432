"""The fidelity plan of a kernel launch: which shortcut times it, with which parameters, and
how much of it was simulated.

What it models
--------------
A launch at `--fidelity full` traces and times every CTA. At `sampled` one of a fixed set of
methods (`METHODS`) times it:

    full                    every CTA traced for real and timed on the whole chip
    full+synthesized_ctas   every CTA timed; CTAs that repeat traced ones built, not run
                            (`simulator.runner.trace_synthesis`, `simulator.runner.work_synthesis`)
    chip_slice              the first ceil(n/f) CTAs timed on 1/f of the chip
                            (`simulator.runner.chip_slice`); counts scaled to the grid
    row_slice               the first ceil(gx/f) CTAs of every row on 1/f of the chip
    wave_extrapolation      the first k waves replayed, the other n - k extrapolated at the
                            mean of the last two wave marginals (`simulator.runner.sampling`)
    op_model                an op timed from reduced launches and weights
                            (`workloads.ops.gemm_sampling`, `workloads.ops.attention_sampling`)
    mixed                   an op whose launches were timed by different methods
    link_model              a node timed by link bandwidth alone (no kernel simulated)

A `FidelityPlan` names the method, its parameters (JSON-ready), the share of the grid's CTAs
whose timing was simulated (`simulated_cta_share`; for `op_model` the share of the op's CTA
work, tile k-steps or KV blocks, its reduced launches ran) and the share of the reported
time that was extrapolated rather than simulated (`extrapolated_time_share`).

`plan(shape, config, fidelity)` is the decision, a pure function of the launch's shape
(grid, CTAs per wave, whether its builder gave a `CtaWork`) and the config's `[fidelity]`
keys (`simulator.framework.policy_spec.FidelitySpec`): the method to attempt and, where a check on
the traces decides at run time, that check (`condition`) and the plan taken when it fails
(`fallback`). `simulator.runner.sampling.SampledRun` carries the plan out and records on the
`KernelResult` the plan it did carry out (`KernelResult.plan`, with measured shares). Only
the checks that need the traces stay with the executor: whether the CTAs form a template
and a slice's footprint is 1/f of the grid's (chip and row slices), whether the last row
of CTAs differs (then timed in full), whether synthesis reproduces the traced CTAs, whether
the first replay's marginals are steady (then k_max waves), whether the grid outgrows the
L2 (the steady-L2 start). Whether an op has reduced launches at all is its builder's choice
(`OpPlan.samples`); `workloads.ops.registry.simulate_op` uses them at `sampled` and
records an `op_model` plan.

Left out: how the functional run itself is shortened (timing mode, `isa.ShapeOnly`
tensors, dataflow pruning) is recorded as a parameter (`timing_only`), not a method.
Units: shares in [0, 1], waves, CTAs.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from simulator.runner import chip_slice

METHODS = ("full", "full+synthesized_ctas", "chip_slice", "row_slice", "wave_extrapolation",
           "op_model", "mixed", "link_model")
"""The fixed vocabulary of fidelity methods (module docstring)."""
FIDELITIES = ("full", "sampled")


@dataclass(frozen=True, slots=True)
class FidelityPlan:
    """How a launch (or an op) is timed: `method` (one of `METHODS`), its `params`, the
    share of CTAs simulated and the share of time extrapolated. A plan decided before the
    run may carry the run-time check it depends on (`condition`) and the plan taken when
    that check fails (`fallback`); a plan carried out has neither."""

    method: str
    params: dict = field(default_factory=dict)
    simulated_cta_share: float = 1.0
    extrapolated_time_share: float = 0.0
    condition: str = ""
    fallback: FidelityPlan | None = None

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"fidelity method {self.method!r}; accepted: {', '.join(METHODS)}")

    def params_json(self) -> str:
        """`params` as JSON text (keys sorted, NaN as null): the kernels table's column."""
        return json.dumps(_plain(self.params), sort_keys=True)

    def to_dict(self) -> dict[str, Any]:
        """method, params, simulated_cta_share, extrapolated_time_share (and the condition and
        fallback of a plan decided before the run)."""
        out = {"method": self.method, "params": _plain(self.params),
               "simulated_cta_share": self.simulated_cta_share,
               "extrapolated_time_share": self.extrapolated_time_share}
        if self.condition:
            out["condition"] = self.condition
        if self.fallback is not None:
            out["fallback"] = self.fallback.to_dict()
        return out

    def fields(self) -> dict[str, Any]:
        """The four result fields (`fidelity_method`, `fidelity_params`,
        `simulated_cta_share`, `extrapolated_time_share`), params as a dict."""
        return {"fidelity_method": self.method, "fidelity_params": _plain(self.params),
                "simulated_cta_share": self.simulated_cta_share,
                "extrapolated_time_share": self.extrapolated_time_share}

    def describe(self) -> str:
        """The plan in words, one sentence (its condition and fallback included)."""
        return " ".join(line.strip() for line in self.explain())

    def explain(self, indent: str = "") -> list[str]:
        """The plan in words as lines: the method and what it does, the shares; the
        run-time check it depends on and, indented, the plan that follows when it fails."""
        text = f"{indent}{self.method}: {_WORDS[self.method](self.params)}"
        if self.method not in ("op_model", "mixed", "link_model"):
            text += (f"; {_share(self.simulated_cta_share)} of the CTAs simulated, "
                     f"{_share(self.extrapolated_time_share)} of the time extrapolated")
        lines = [text]
        if self.condition:
            lines.append(f"{indent}  if {self.condition};")
        if self.fallback is not None:
            lines.append(f"{indent}  otherwise")
            lines += self.fallback.explain(indent + "    ")
        return lines


def _plain(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if hasattr(value, "item"):           # numpy scalars
        return _plain(value.item())
    return value


def _share(value: float) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "an unknown share"
    return f"{100 * value:.3g} %"


def _waves(p: dict) -> str:
    return f"{p['waves']:.2f} whole-chip waves" if "waves" in p else "its waves"


def _synthesis(p: dict) -> str:
    kind = p.get("synthesis")
    if kind == "work":
        return " (a few CTAs per work class traced, the others synthesized)"
    if p.get("synthesized_ctas"):
        return f" ({p['synthesized_ctas']} CTAs synthesized from the traced ones)"
    if kind == "trace":
        return " (CTAs that repeat the first ones synthesized where the checks pass)"
    return ""


_WORDS = {
    "full": lambda p: (f"every CTA traced and timed on the whole chip ({_waves(p)}"
                       + (f"; {p['reason']}" if p.get("reason") else "") + ")" + _synthesis(p)),
    "full+synthesized_ctas": lambda p: (
        f"every CTA timed on the whole chip ({_waves(p)}"
        + (f"; {p['reason']}" if p.get("reason") else "") + ")" + _synthesis(p)),
    "chip_slice": lambda p: (
        f"the first {p.get('ctas_timed', '1/f')} of {p.get('ctas', 'the')} CTAs timed on a "
        f"slice of 1/{p['factor']} of the chip ({p.get('slice_sms', '?')} SMs, L2 slices, HBM "
        f"channels), counts scaled to the grid" + _synthesis(p)),
    "row_slice": lambda p: (
        f"the first 1/{p['factor']} of every row of CTAs ({p.get('ctas_timed', '?')} of "
        f"{p.get('ctas', '?')}) timed on a slice of 1/{p['factor']} of the chip, counts "
        f"scaled to the grid" + _synthesis(p)),
    "wave_extrapolation": lambda p: (
        f"the first {p.get('waves_simulated', p.get('start_waves'))} waves replayed"
        + ("" if "waves_simulated" in p else
           f" ({p['max_waves']} when their last two marginals differ by "
           f"{100 * p['steady_tolerance_fraction']:.3g} % or more)")
        + f", the rest of {p['waves_total']:.2f} waves extrapolated at the mean of the last "
          "two wave marginals" + _synthesis(p)),
    "op_model": lambda p: (
        f"the op timed from {p['reduced_launches']} reduced launches, weighted: "
        f"{p.get('note', '')}; {_share(p.get('simulated_work_share'))} of its CTA work "
        f"simulated, {_share(p.get('extrapolated_time_share'))} of its time extrapolated"),
    "mixed": lambda p: "launches timed by different methods: " + "; ".join(
        f"{k['method']}" for k in p.get("launches", ())),
    "link_model": lambda p: "no kernel simulated: link bytes over the link bandwidth",
}


@dataclass(frozen=True, slots=True)
class LaunchShape:
    """What the plan of a launch depends on: its grid, the CTAs resident at once on the SMs
    it runs on (`ctas_per_wave`), whether its builder described its CTAs' work
    (`has_work`, a `simulator.runner.work_synthesis.CtaWork`: persistent GEMMs) and whether it
    runs in timing mode."""

    grid: tuple[int, int, int]
    ctas_per_wave: int
    has_work: bool = False
    timing_only: bool = False

    @property
    def n_ctas(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    @property
    def n_waves(self) -> float:
        return self.n_ctas / max(self.ctas_per_wave, 1)


def plan(shape: LaunchShape, config, fidelity: str = "sampled") -> FidelityPlan:
    """The plan of a launch of `shape` on `config` at `fidelity` (module docstring): full at
    "full"; at "sampled", by the config's `[fidelity]` keys, a chip or row slice (alike
    CTAs, `chip_slice_min_waves` to f x `chip_slice_max_slice_waves` waves, or a 2-D grid
    whose last row differs), work synthesis (a `CtaWork` launch under
    `wave_sampling_min_waves`), the whole grid timed (fewer waves), or wave extrapolation."""
    if fidelity not in FIDELITIES:
        raise ValueError(f"fidelity={fidelity!r}; accepted: {', '.join(FIDELITIES)}")
    policy, n_waves = config.fidelity, shape.n_waves
    base = {"waves": round(n_waves, 4), "ctas": shape.n_ctas, "timing_only": shape.timing_only}
    if fidelity == "full":
        return FidelityPlan("full", {**base, "reason": "fidelity full"})
    if shape.has_work:
        if n_waves >= policy.wave_sampling_min_waves:
            return _waves_plan(shape, policy, base)
        full = FidelityPlan("full", {**base, "reason": _few(policy)})
        if not policy.work_synthesis:
            return full
        return FidelityPlan("full+synthesized_ctas", {**base, "reason": _few(policy),
                                                      "synthesis": "work"},
                            condition="every work class's traced CTAs reproduce their "
                                      "synthesis (simulator.runner.work_synthesis)",
                            fallback=full)
    whole = _uniform_whole_or_waves(shape, policy, base)
    f = chip_slice.slice_factor(config)
    if (f == 1 or not policy.trace_synthesis or n_waves < policy.chip_slice_min_waves):
        return whole
    few = n_waves <= f * policy.chip_slice_max_slice_waves
    if not few and shape.grid[1] < 2:
        return whole
    timed = chip_slice.sliced_ctas(shape.n_ctas, f)
    sliced = {**base, "factor": f, "ctas_timed": timed,
              "slice_sms": config.sm.compute_count // f, "synthesis": "trace"}
    if few:
        return FidelityPlan(
            "chip_slice", sliced, timed / shape.n_ctas,
            condition=f"the CTAs form a template (the grid's last and middle CTAs match "
                      f"it) and the first {timed} CTAs touch 1/{f} of the grid's sectors, "
                      f"else the first 1/{f} of every row does (a row slice)",
            fallback=whole)
    rows = shape.grid[1] * math.ceil(shape.grid[0] / f)
    return FidelityPlan(
        "row_slice", {**sliced, "ctas_timed": rows}, rows / shape.n_ctas,
        condition=f"the grid's last row of CTAs runs other events (a template tail) and "
                  f"the first 1/{f} of every row touches 1/{f} of the grid's sectors",
        fallback=whole)


def _few(policy) -> str:
    return f"fewer than wave_sampling_min_waves = {policy.wave_sampling_min_waves:g} waves"


def _uniform_whole_or_waves(shape: LaunchShape, policy, base: dict) -> FidelityPlan:
    """A launch without a `CtaWork` that no slice takes: timed in full under
    `wave_sampling_min_waves`, else wave-extrapolated (timed in full when its last row of
    CTAs differs); CTAs synthesized where trace synthesis is on and the checks pass."""
    synthesis = {"synthesis": "trace"} if policy.trace_synthesis else {}
    if shape.n_waves < policy.wave_sampling_min_waves:
        return FidelityPlan("full", {**base, "reason": _few(policy), **synthesis})
    waves = _waves_plan(shape, policy, {**base, **synthesis})
    if not policy.trace_synthesis or shape.grid[1] < 2:
        return waves
    full = FidelityPlan("full", {**base, "reason": "the last row of CTAs differs from the "
                                                   "first rows", **synthesis})
    return FidelityPlan(waves.method, waves.params, waves.simulated_cta_share,
                        waves.extrapolated_time_share,
                        condition="the grid's last row of CTAs runs the events of the others",
                        fallback=full)


def _waves_plan(shape: LaunchShape, policy, base: dict) -> FidelityPlan:
    """Wave extrapolation: k = `wave_sampling_start_waves` waves, k_max when not steady
    (at most `wave_sampling_max_waves`, a wave left to extrapolate), the second replay
    grown from a snapshot `snapshot_lead_waves` before the first's end."""
    n_waves = shape.n_waves
    k = policy.wave_sampling_start_waves
    k_max = max(k, min(policy.wave_sampling_max_waves, math.floor(n_waves - 1)))
    snapshot = policy.snapshot_growth and k_max > k
    params = {**base, "waves_total": round(n_waves, 4), "start_waves": k, "max_waves": k_max,
              "steady_tolerance_fraction": policy.wave_sampling_steady_tolerance_fraction,
              "snapshot_growth": snapshot,
              "snapshot_lead_waves": policy.snapshot_lead_waves if snapshot else None,
              "steady_l2_preconditioning": policy.steady_l2_preconditioning}
    simulated = min(k * shape.ctas_per_wave, shape.n_ctas) / shape.n_ctas
    return FidelityPlan("wave_extrapolation", params, simulated,
                        max(0.0, (n_waves - k) / n_waves))


def aggregate(plans: list[FidelityPlan], ctas: list[int],
              times_us: list[float]) -> FidelityPlan:
    """One plan for an op's launches: theirs when they share a method (params of a single
    launch, else per launch), else `mixed`; the CTA share weighted by CTAs, the
    extrapolated share by time."""
    if len(plans) == 1:
        return plans[0]
    total_ctas, total_us = sum(ctas), sum(times_us)
    simulated = (sum(p.simulated_cta_share * c for p, c in zip(plans, ctas, strict=True))
                 / total_ctas if total_ctas else 1.0)
    extrapolated = (sum(p.extrapolated_time_share * t
                        for p, t in zip(plans, times_us, strict=True)) / total_us
                    if total_us else 0.0)
    methods = {p.method for p in plans}
    method = methods.pop() if len(methods) == 1 else "mixed"
    params = {"launches": [{"method": p.method, **p.params} for p in plans]}
    return FidelityPlan(method, params, simulated, extrapolated)
