"""Op registry: an op kind ("gemm", "softmax", ...) -> a builder of its kernel launch(es),
FLOPs and bytes, and `simulate_op`, which times the launches on a hardware config.

A builder takes the op's sizes as keyword arguments plus the config (tile choices may
depend on the SM count) and returns an `OpPlan`: the `Launch`es to run in order, the
op's useful FLOPs (2·M·N·K for a GEMM), the bytes it must move at least once (inputs
read once, outputs written once: the `bytes` of `gbps` and of the roofline), and the
precision whose peak bounds it (`tensor_<precision>` or `vector_fp32`).

Contract of a builder: it validates its sizes and raises `InputError` naming the flag
(`--m`, `--rows`, ...) of a bad one; it builds nothing it does not launch; its launches
are ISA programs with their arguments ready for `simulator.simulate_kernel` (numpy
arrays for small shapes, `isa.ShapeOnly` tensors in timing mode for large ones).

`simulate_op(plan, config, fidelity)` runs each launch through `simulate_kernel`
(passing `fidelity=` and `timing_only=` where this simulator build accepts them), sums
time, cycles and simulated HBM bytes, and puts the roofline beside them. TFLOP/s and the
roofline count the work issued (`issued_work`): a GEMM the co-design units run sparse (ZCE
zeros, 2:4) counts the products done, not its dense 2·M·N·K (`flops`, kept as the op's
useful work), so no op passes the peak, and its roofline bytes count the operands as stored
(`roofline_bytes`; `bytes` and `gbps` stay the dense inputs and outputs). With
`fidelity="sampled"` and a plan that carries `samples` (reduced launches with weights,
and `sample_byte_weights` where HBM bytes extrapolate otherwise than time), those are
simulated instead and the figures are their weighted sums (op-level sampling
for persistent kernels, whose single wave the simulator's wave sampling cannot shorten)
(`models.roofline.roofline_time_us`, peaks from `models.roofline.chip_peaks` of the
resolved config).

Sustained clock: each launch is simulated at the preset clock, then re-timed at the clock
its tensor load sustains under the power limit (`models.sustained_clock`, from the
launch's tensor busy fraction and the op's precision; `chip.power_cap_clock_ghz = 0`
turns it off and leaves every figure as simulated). The kernel's cycles stay, its time
grows by preset / sustained clock, the launch overhead stays; `sm_clock_ghz` (op and
kernel) is the clock it ran at. The cap binds only above a tensor busy fraction of 0.61
(bf16) / 0.50 (fp8) at the h100_sxm fit, i.e. on compute-bound launches, where this agrees
with a re-simulation at that clock within 1 % (`tests/test_clock_model.py`: 0.2-0.3 % on
512x512x4096 on 16 SMs); an HBM-bound launch would be overstated (16x4096x4096 bf16 with
the cap forced to bind, 1.83 -> 1.64 GHz: +5.5 %), which is why the kernel-level
`simulate_kernel` and the golden suite stay at the preset clock.

Size guards: an op is refused before it allocates what the host cannot hold. A builder
calls `check_op_size` with its estimate before its large allocations (GEMM tile tables,
attention CTA lists, compressed all-reduce arrays), and `build_op` and `simulate_op` check
every plan (`check_plan`: its numpy tensors and their copy in the simulated memory, the
simulator's per-CTA state at `HOST_BYTES_PER_CTA`): an `InputError` names the op, its sizes,
the estimate by part and the budget `limits.host_memory_bytes`. Tensors larger than the
device memory (`hbm.capacity_bytes`) are refused the same way. `isa.ShapeOnly` tensors are
counted by their shape, never materialized.

ISA target: `build_op` and `simulate_op` refuse a plan with a launch whose program the chip's
ISA target (`chip.isa_target`) lacks, before anything runs (`check_plan_target`: an
`InputError` naming the op, the kernel and the line, as `isa.targets.verify_target` finds it).
Builders of generated kernels pick their template by the target
(`workloads.kernels.templates.targets.pick_template`); each `kernel` entry names what ran:
`template` (a generated template's name, a catalog kernel's entry) and `ptx_target` (the
`.target` of its PTX).

Fidelity plan (`simulator.runner.fidelity`): each `kernel` entry and the op itself say how they
were timed: `fidelity_method` (full, full+synthesized_ctas, chip_slice, row_slice,
wave_extrapolation, op_model, mixed), `fidelity_params` (a dict), `simulated_cta_share`
and `extrapolated_time_share`. A launch timed by `simulate_kernel` carries the plan it
carried out (`KernelResult.plan`) and its summary (`fidelity` "full" or "sampled",
`waves_simulated`, `extrapolated_fraction`); the op's plan is the launches' (`mixed` where
they differ; the CTA share weighted by CTAs, the time share by time). An op timed from its
reduced launches has the `op_model` plan: its parameters name the launches, weights and
the builder's note, `simulated_cta_share` is the share of the op's CTA work (tile k-steps,
KV blocks) the reduced launches ran (`OpPlan.sample_work_shares`) and
`extrapolated_time_share` = 1 - (the longest reduced launch's cycles / the op's cycles);
its launches carry `sampled_from`. `plan_op` and `explain_op` give the plan before
anything runs (`ptxsim op --explain`).
A figure that cannot be computed (TFLOP/s of a zero time) is NaN with its reason under
`null_reasons`; `simulator.framework.config.strict_json` writes the dict as standard
JSON (NaN as null).
Units: microseconds, cycles, bytes, TFLOP/s, GB/s, GHz.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from isa.errors import InputError, PtxError
from isa.launch import ShapeOnly, compile_kernel
from isa.targets import program_target
from models.gpu_spec import HOST_MEMORY_BYTES
from models.roofline import chip_peaks, roofline_bound, roofline_time_us
from models.sustained_clock import sustained_clock_ghz, tensor_busy_fraction
from simulator.framework.config import NULL_REASONS_KEY
from simulator.runner.fidelity import FidelityPlan, aggregate
from simulator.runner.fidelity import plan as fidelity_plan
from simulator.runner.simulate import check_isa_target, launch_shape, simulate_kernel
from workloads.codesign.codesign_ops import op_counts

FIDELITIES = ("sampled", "full")


@dataclass(frozen=True)
class Launch:
    """One kernel launch of an op, ready for `simulator.simulate_kernel`."""
    name: str
    ptx: str
    entry: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: list = field(repr=False)
    shared_bytes: int = 0
    timing_only: bool = False        # arguments are ShapeOnly / tensor-core data skipped
    detail: dict = field(default_factory=dict)   # e.g. the tile choice, for the report
    regs_per_thread: int | None = None   # launch register count (None: estimated)
    overrides: dict = field(default_factory=dict)  # preset overrides it runs with (sm.comm_count)
    options: dict = field(default_factory=dict)    # more simulate_kernel keywords (sms, memory)

    def describe(self) -> dict:
        return {"name": self.entry, "grid": list(self.grid), "block": list(self.block),
                "shared_bytes": self.shared_bytes,
                "mode": "timing" if self.timing_only else "functional",
                **{k: v for k, v in self.detail.items() if not k.startswith("uses_")}}


@dataclass(frozen=True)
class OpPlan:
    """What an op launches and what it must do at least (FLOPs, bytes)."""
    kind: str
    sizes: dict
    launches: tuple[Launch, ...]
    flops: float
    bytes: float                      # inputs once + outputs once
    peak: str                         # key of reports.chip_peaks: "tensor_fp8_tflops", ...
    samples: tuple[tuple[float, Launch], ...] = ()
    """Op-level sampling for `fidelity="sampled"`: reduced launches (fewer tile rounds,
    fewer k-steps, fewer heads, ...) and weights such that the op's time and cycles are
    the weighted sums of theirs (a linear extrapolation the builder derives and
    documents). Empty: the `launches` themselves are simulated (with the simulator's own
    wave sampling)."""
    sample_note: str = ""             # how `samples` extrapolate, shown in the result
    sample_byte_weights: tuple[float, ...] = ()
    """The weights of the samples' simulated HBM bytes, one per sample, where bytes
    extrapolate otherwise than time (L2 reuse across tile rounds); empty: `samples`'
    weights."""
    sample_work_shares: tuple[float, ...] = ()
    """Each sample's CTA work (tile k-steps, KV blocks) as a share of the op's, one per
    sample (NaN for a launch run as it is, a combine kernel): the `op_model` plan's
    `simulated_cta_share` is their sum. Empty: not known (NaN)."""


@dataclass(frozen=True)
class Flag:
    """One command-line flag of an op (`ptxsim op KIND --flag`), passed to the builder as
    keyword `dest` (the flag without dashes, `-` -> `_`). `kind`: "int", "str", "float"
    or "switch" (a boolean that is present or not)."""
    name: str
    help: str
    kind: str = "int"
    required: bool = False
    default: Any = None
    choices: tuple | None = None

    @property
    def dest(self) -> str:
        return self.name.lstrip("-").replace("-", "_")


Builder = Callable[..., OpPlan]
OPS: dict[str, Builder] = {}
OP_FLAGS: dict[str, tuple[Flag, ...]] = {}
OP_HELP: dict[str, str] = {}


def register(kind: str, flags: tuple[Flag, ...] = (), help: str = "") \
        -> Callable[[Builder], Builder]:
    """Decorator: register `builder(config, **sizes) -> OpPlan` under `kind`, with the
    flags `ptxsim op KIND` offers for it (their `dest` names are the builder's keywords)."""
    def wrap(builder: Builder) -> Builder:
        OPS[kind] = builder
        OP_FLAGS[kind] = tuple(flags)
        OP_HELP[kind] = help or (builder.__doc__ or kind).strip().splitlines()[0]
        return builder
    return wrap


def build_op(kind: str, config, /, **sizes) -> OpPlan:
    """The plan of op `kind` at `sizes` on `config` (an `InputError` for an unknown kind or
    for a plan beyond the host's or the device's memory, `check_plan`)."""
    if kind not in OPS:
        raise InputError(f"op {kind!r} is not known; accepted: {', '.join(sorted(OPS))}")
    plan = OPS[kind](config, **sizes)
    check_plan(plan, config)
    check_plan_target(plan, config)
    return plan


def check_plan_target(plan: OpPlan, config) -> None:
    """Refuse, before anything runs, a plan with a launch (or reduced launch) whose program
    the chip's ISA target `chip.isa_target` lacks (`isa.targets.verify_target`): an
    `InputError` naming the op, its sizes, the kernel and the refusal (file:line:col)."""
    for launch in (*plan.launches, *(lau for _, lau in plan.samples)):
        try:
            check_isa_target(compile_kernel(launch.ptx, launch.entry), config)
        except PtxError as exc:
            shape = ", ".join(f"{k}={v}" for k, v in plan.sizes.items())
            raise InputError(f"op {plan.kind} ({shape}): kernel {launch.entry} cannot run on "
                             f"this chip: {exc}") from None


def ptx_target(launch: Launch) -> str:
    """The `.target` of a launch's program (`sm_90a`, ...; "" without one)."""
    return program_target(compile_kernel(launch.ptx, launch.entry)) or ""


HOST_BYTES_PER_CTA = 512
"""Host bytes kept per CTA of a launch while it is built and simulated (the builders' per-CTA
work lists, the simulator's dispatch and sampling tables): about 330 measured (tracemalloc
peak of a sampled softmax of 4M CTAs, less its tensors), rounded up."""


def _size(nbytes: float) -> str:
    """Bytes in the largest binary unit that keeps the figure >= 1 ("16 GiB")."""
    for unit, shift in (("PiB", 50), ("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift:
            return f"{nbytes / (1 << shift):.3g} {unit}"
    return f"{nbytes:.0f} B"


def tensor_bytes(arg) -> int:
    """Bytes of a pointer argument (a numpy array or an `isa.ShapeOnly`, counted from its
    shape in Python integers, never materialized); 0 for anything else."""
    if isinstance(arg, ShapeOnly):
        return math.prod(int(d) for d in arg.shape) * np.dtype(arg.dtype).itemsize
    if isinstance(arg, np.ndarray):
        return int(arg.nbytes)
    return 0


def check_op_size(config, kind: str, sizes: Mapping[str, Any], host: Mapping[str, float],
                  device_bytes: float = 0.0) -> None:
    """Refuse op `kind` at `sizes` (an `InputError` naming both, the estimate and the
    budget) when the host bytes it needs (the sum of the named parts of `host`) exceed
    `limits.host_memory_bytes`, or its tensors (`device_bytes`) exceed the device memory
    `hbm.capacity_bytes`."""
    shape = ", ".join(f"{k}={v}" for k, v in sizes.items())
    total = float(sum(host.values()))
    budget = getattr(getattr(config, "limits", None), "host_memory_bytes", HOST_MEMORY_BYTES)
    if total > budget:
        parts = ", ".join(f"{name} {_size(b)}" for name, b in host.items() if b)
        raise InputError(
            f"op {kind} ({shape}): needs about {_size(total)} of host memory ({parts}), more "
            f"than limits.host_memory_bytes = {budget} ({_size(budget)}); accepted: smaller "
            "sizes, or a larger budget (--set limits.host_memory_bytes=N)")
    capacity = getattr(getattr(config, "hbm", None), "capacity_bytes", math.inf)
    if device_bytes > capacity:
        raise InputError(
            f"op {kind} ({shape}): its tensors take {_size(device_bytes)}, more than the "
            f"device memory hbm.capacity_bytes = {capacity} ({_size(capacity)}); accepted: "
            "sizes whose tensors fit the device")


def plan_footprint(plan: OpPlan) -> tuple[dict[str, float], float]:
    """(host bytes by part, device bytes) of `plan`: its numpy tensors (each once), the
    largest launch's copy of them in the simulated memory, the largest launch's per-CTA
    state; on the device, the largest launch's tensors (arrays and ShapeOnly)."""
    arrays: dict[int, int] = {}
    copy = ctas = device = 0
    for launch in (*plan.launches, *(lau for _, lau in plan.samples)):
        own = [a for a in launch.args if isinstance(a, np.ndarray)]
        arrays.update((id(a), int(a.nbytes)) for a in own)
        copy = max(copy, sum(int(a.nbytes) for a in own))
        ctas = max(ctas, math.prod(launch.grid))
        device = max(device, sum(tensor_bytes(a) for a in launch.args))
    host = {"numpy tensors": float(sum(arrays.values())),
            "their copy in the simulated memory": float(copy),
            "per-CTA state": float(ctas * HOST_BYTES_PER_CTA)}
    return host, float(device)


def check_plan(plan: OpPlan, config) -> None:
    """`check_op_size` of a built plan (`plan_footprint`)."""
    host, device = plan_footprint(plan)
    check_op_size(config, plan.kind, plan.sizes, host, device)


def positive(flag: str, value) -> int:
    """`value` as a positive int, else an InputError naming `flag`."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"{flag} {value!r}: accepted a positive integer")
    return value


def _supported() -> set[str]:
    return set(inspect.signature(simulate_kernel).parameters)


def available_fidelities() -> tuple[str, ...]:
    """Fidelities this simulator build can run ("full" always; "sampled" once it exists)."""
    return FIDELITIES if "fidelity" in _supported() else ("full",)


def _simulate_launch(launch: Launch, config, fidelity: str, params: set[str]):

    extra: dict[str, Any] = {}
    if "fidelity" in params:
        extra["fidelity"] = fidelity
    if launch.timing_only and "timing_only" in params:
        extra["timing_only"] = True
    if launch.regs_per_thread:
        extra["regs_per_thread"] = launch.regs_per_thread
    extra.update(launch.options)
    if launch.overrides:
        config = config.with_overrides(launch.overrides)
    try:
        return simulate_kernel(launch.ptx, launch.entry, launch.grid, launch.block,
                                         list(launch.args), config=config,
                                         shared_bytes=launch.shared_bytes, **extra)
    except AttributeError as exc:
        if launch.detail.get("uses_wgmma"):
            raise InputError(f"{launch.entry}: wgmma timing not available in this "
                             f"simulator build (TMA/mbarrier/wgmma trace: {exc})") from None
        raise


class ClockParts(NamedTuple):
    """What re-timing a launch simulated at the preset clock needs (cycles summed over SMs
    and sub-partitions); `overhead_us`: the launch's fixed parts (`launch.kernel_front_end_us`
    and `launch.kernel_overhead_us`), which the SM clock does not scale."""
    overhead_us: float
    kernel_us: float
    busy_cycles: float
    slot_cycles: float
    time_us: float


def _clock_parts(res, launch: Launch, config) -> ClockParts:
    """The `ClockParts` of one simulated launch."""

    if launch.overrides:
        config = config.with_overrides(launch.overrides)
    frame = res.stats
    overhead = frame[(frame.component == "kernel")
                     & frame.stat.isin(("launch_overhead_us", "front_end_us"))]
    overhead_us = float(overhead.value.sum())
    slots = float(res.cycles) * config.sm.count * config.sm.subpartitions
    busy = tensor_busy_fraction(frame, config.sm.count, config.sm.subpartitions) * slots
    return ClockParts(overhead_us, float(res.time_us) - overhead_us, busy, slots,
                      float(res.time_us))


def _sustained_clock(parts: list, config, peak: str) -> float:
    """The clock a group of weighted launch parts sustains: one launch, or an op's samples
    together (their busy fraction is the extrapolated launch's, not each reduced one's)."""

    busy = sum(w * p.busy_cycles for w, p in parts)
    slots = sum(w * p.slot_cycles for w, p in parts)
    precision = peak.removeprefix("tensor_").removesuffix("_tflops")
    return sustained_clock_ghz(config.chip, busy / slots if slots > 0 else 0.0, precision)


def _retimed_us(parts: list, clock_ghz: float, preset_ghz: float) -> tuple[float, float]:
    """(time_us, kernel_us) of weighted launch parts at `clock_ghz`: cycles kept, kernel
    time x preset / sustained clock, the launch overhead kept; as simulated if not lower."""
    kernel = sum(w * p.kernel_us for w, p in parts)
    if clock_ghz >= preset_ghz:
        return sum(w * p.time_us for w, p in parts), kernel
    kernel *= preset_ghz / clock_ghz
    return sum(w * p.overhead_us for w, p in parts) + kernel, kernel


def simulate_op(plan: OpPlan, config, fidelity: str | None = None,
                stats: list | None = None, timelines: list | None = None) -> dict:
    """Time every launch of `plan` on `config`; a dict with the op's figures (see module).
    A `stats` list receives (weight, launch, stats DataFrame) per simulated launch, a
    `timelines` list (weight, launch, `KernelResult.timeline`)."""
    check_plan(plan, config)
    check_plan_target(plan, config)
    params = _supported()
    have = available_fidelities()
    fidelity = fidelity or have[0]
    if fidelity not in have:
        raise InputError(f"--fidelity {fidelity}: not available in this simulator build; "
                         f"accepted: {', '.join(have)}")
    time_us = cycles = hbm_bytes = 0.0
    kernels = []
    use_samples = fidelity == "sampled" and bool(plan.samples)
    runs = plan.samples if use_samples else tuple((1.0, launch) for launch in plan.launches)
    byte_weights = (plan.sample_byte_weights if use_samples and plan.sample_byte_weights
                    else tuple(weight for weight, _ in runs))
    if len(byte_weights) != len(runs):
        raise ValueError(f"{plan.kind}: {len(plan.sample_byte_weights)} sample byte weights "
                         f"for {len(runs)} samples; accepted: one per sample")
    parts, plans, run_cycles = [], [], []
    for (weight, launch), byte_weight in zip(runs, byte_weights, strict=True):
        res = _simulate_launch(launch, config, fidelity, params)
        plans.append(res.plan)
        run_cycles.append(float(res.cycles))
        if stats is not None:
            stats.append((weight, launch, res.stats))
        if timelines is not None:
            timelines.append((weight, launch, res.timeline))
        frame = res.stats
        hbm = frame[frame.component.str.startswith("memory.hbm") & (frame.stat == "bytes")]
        parts.append((weight, _clock_parts(res, launch, config)))
        cycles += weight * float(res.cycles)
        hbm_bytes += byte_weight * float(hbm.value.sum())
        if not use_samples:
            kernels.append({**launch.describe(), **_template_fields(launch),
                            "cycles": int(res.cycles),
                            "fidelity": res.fidelity,
                            "waves_simulated": float(res.waves_simulated),
                            "extrapolated_fraction": float(res.extrapolated_fraction),
                            **res.plan.fields()})
    preset_ghz = config.chip.clock_ghz
    groups = [parts] if use_samples else [[part] for part in parts]
    kernel_us = kernel_us_at_preset = 0.0
    for k, group in enumerate(groups):
        clock_ghz = _sustained_clock(group, config, plan.peak)
        group_us, group_kernel_us = _retimed_us(group, clock_ghz, preset_ghz)
        time_us += group_us
        kernel_us += group_kernel_us
        kernel_us_at_preset += sum(w * p.kernel_us for w, p in group)
        if not use_samples:
            kernels[k].update(time_us=group_us, sm_clock_ghz=clock_ghz)
    if use_samples:
        op_plan = _op_model_plan(plan, plans, run_cycles, cycles)
        kernels = [{**launch.describe(), **_template_fields(launch),
                    "sampled_from": len(plan.samples),
                    "sample_note": plan.sample_note, **op_plan.fields()}
                   for launch in plan.launches]
    else:
        op_plan = aggregate(plans, [math.prod(launch.grid) for _, launch in runs],
                            [k["time_us"] for k in kernels])
    peaks = chip_peaks(config.to_dict())
    peak_tflops = peaks[plan.peak]
    hbm_gbps = peaks["hbm_gbps"]
    issued, roof_bytes = issued_work(plan)
    roof = float(roofline_time_us(issued, roof_bytes, peak_tflops, hbm_gbps))
    result = {
        "op": plan.kind, **plan.sizes, "fidelity": fidelity,
        "time_us": time_us, "cycles": int(cycles),
        "sm_clock_ghz": (preset_ghz * kernel_us_at_preset / kernel_us
                         if kernel_us > kernel_us_at_preset else preset_ghz),
        "tflops": issued / (time_us * 1e6) if time_us else float("nan"),
        "gbps": plan.bytes / (time_us * 1e3) if time_us else float("nan"),
        "flops": plan.flops, "issued_flops": issued, "bytes": plan.bytes,
        "roofline_bytes": roof_bytes, "hbm_bytes": hbm_bytes,
        "roofline_us": roof,
        "bound": str(roofline_bound(issued, roof_bytes, peak_tflops, hbm_gbps)),
        "gap": time_us / roof if roof else float("nan"),
        "peak_tflops": peak_tflops, "hbm_peak_gbps": hbm_gbps, "peak": plan.peak,
        **op_plan.fields(),
        "kernel": kernels[0] if len(kernels) == 1 else kernels,
    }
    reasons = {"tflops": "time_us is 0", "gbps": "time_us is 0", "gap": "roofline_us is 0"}
    missing = {key: why for key, why in reasons.items() if math.isnan(result[key])}
    if missing:    # what `simulator.framework.config.strict_json` writes beside the nulls
        result[NULL_REASONS_KEY] = missing
    return result


SKIPS_INSIDE_FLOPS = ("gemm", "grouped_gemm")
"""Op kinds whose flops count the products the co-design units skip (a GEMM's dense
2·M·N·K); causal attention's flops count the visible products only, so the zeros the ZCE
skips there are not in them (`codesign_ops.op_counts`)."""


def issued_work(plan: OpPlan) -> tuple[float, float]:
    """(FLOPs the tensor cores issue, the roofline's bytes) of `plan`: flops - 2 x the MACs
    the co-design units skip (ZCE zeros, 2:4's half) for `SKIPS_INSIDE_FLOPS`, else flops;
    the op's bytes with its GEMM operands as stored (ZCE-compressed, 2:4 weights halved plus
    metadata) instead of dense. A stock plan: (flops, bytes) unchanged."""
    counts = op_counts(plan)
    skipped = counts["macs_skipped"] if plan.kind in SKIPS_INSIDE_FLOPS else 0.0
    saved = counts["operand_bytes"] - counts["operand_bytes_stored"]
    return plan.flops - 2 * skipped, plan.bytes - saved


def _template_fields(launch: Launch) -> dict:
    """What ran: the template (`detail["template"]` of a generated kernel, else the entry of
    a catalog kernel) and the `.target` of its PTX."""
    return {"template": launch.detail.get("template") or launch.entry,
            "ptx_target": ptx_target(launch)}


def _work_share(plan: OpPlan) -> float:
    """The share of the op's CTA work its reduced launches run (NaN when not known)."""
    shares = [w for w in plan.sample_work_shares if math.isfinite(w)]
    return float(sum(shares)) if shares else float("nan")


def _op_model_plan(plan: OpPlan, sample_plans: list, sample_cycles: list[float],
                   cycles: float) -> FidelityPlan:
    """The `op_model` plan carried out: the reduced launches, their weights and methods;
    the CTA work they ran; the share of the op's cycles beyond the longest of them. Samples
    that are the op's own launches, each of weight 1, are no model: their plans."""
    own = {id(launch) for launch in plan.launches}
    if all(w == 1.0 and id(launch) in own for w, launch in plan.samples):
        return aggregate(sample_plans, [math.prod(launch.grid) for _, launch in plan.samples],
                         sample_cycles)
    extrapolated = (min(1.0, max(0.0, 1.0 - max(sample_cycles) / cycles)) if cycles > 0
                    else 0.0)
    params = {"reduced_launches": len(plan.samples),
              "weights": [round(w, 6) for w, _ in plan.samples],
              "note": plan.sample_note,
              "reduced_launch_methods": [p.method for p in sample_plans],
              "simulated_work_share": _work_share(plan),
              "extrapolated_time_share": extrapolated}
    return FidelityPlan("op_model", params, _work_share(plan), extrapolated)


def _launch_plan(launch: Launch, config, fidelity: str) -> FidelityPlan:
    """The plan `simulate_kernel` will decide for `launch` (`simulator.runner.fidelity.plan` of
    its shape), before it runs."""

    if launch.overrides:
        config = config.with_overrides(launch.overrides)
    shape = launch_shape(launch.ptx, launch.entry, launch.grid, launch.block, config,
                         launch.shared_bytes, regs_per_thread=launch.regs_per_thread,
                         timing_only=launch.timing_only,
                         sms=launch.options.get("sms", "compute"),
                         cta_work=launch.options.get("cta_work"))
    return fidelity_plan(shape, config, fidelity)


def plan_op(plan: OpPlan, config, fidelity: str | None = None) -> FidelityPlan:
    """The op's fidelity plan before anything runs: `op_model` at sampled fidelity when
    the builder gave reduced launches (its time share known only once they ran: NaN),
    else its launches' plans (`simulator.runner.fidelity.aggregate`, time-weighted by CTAs)."""
    fidelity = fidelity or available_fidelities()[0]
    if fidelity == "sampled" and plan.samples:
        share = _work_share(plan)
        return FidelityPlan("op_model", {
            "reduced_launches": len(plan.samples),
            "weights": [round(w, 6) for w, _ in plan.samples], "note": plan.sample_note,
            "simulated_work_share": share, "extrapolated_time_share": float("nan")},
            share, float("nan"))
    plans = [_launch_plan(launch, config, fidelity) for launch in plan.launches]
    ctas = [math.prod(launch.grid) for launch in plan.launches]
    return aggregate(plans, ctas, [float(c) for c in ctas])


def explain_op(plan: OpPlan, config, fidelity: str | None = None) -> str:
    """How `simulate_op` will time `plan` at `fidelity`, in words, before it runs: the op's
    method, and per launch (or reduced launch) its planned method, the run-time checks it
    depends on and what follows when they fail."""
    fidelity = fidelity or available_fidelities()[0]
    op = plan_op(plan, config, fidelity)
    lines = [f"fidelity plan of {plan.kind} at {fidelity} fidelity: {op.method}"]
    if op.method == "op_model":
        lines += op.explain("  ")
        shown = [(f"reduced launch {k + 1}, weight {w:.4g}", launch)
                 for k, (w, launch) in enumerate(plan.samples)]
    else:
        shown = [(f"launch {k + 1}", launch) for k, launch in enumerate(plan.launches)]
    for label, launch in shown:
        grid = "x".join(map(str, launch.grid))
        lines.append(f"  {label} {launch.entry} (grid {grid}):")
        lines += _launch_plan(launch, config, fidelity).explain("    ")
    return "\n".join(lines)
