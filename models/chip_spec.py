"""Config blocks for the chip, its SMs and their execution units (frozen, unit-suffixed).

What it models
--------------
`ChipSpec` (name, the run's one clock, ISA target), `SmSpec` (SM count and the per-SM limits that
decide occupancy), `UnitsSpec` (latency and throughput of each execution unit, tensor rates per
precision), and the co-design units, each off unless a preset enables it: `VpcuSpec`
(variable-precision tensor unit: FLOP/clk/SM and operand bytes per precision, switch cost),
`LutExpSpec` (lookup-table ex2 latency, throughput and table), `ZceSpec` (zero-skipping MMA
granularity, zero threshold, compression throughput). Values come from a preset
(`models/presets/*.toml`) where each carries its source. `LaunchSpec` holds the fixed cost of
one kernel launch, added to a kernel's simulated duration
(`simulator.runner.simulate.KernelResult.time_us`).

Throughputs are given as the CUDA Programming Guide gives them: results per clock per SM.
The issue interval of one warp instruction on one sub-partition follows from it
(`VectorUnitSpec.initiation_interval_cycles`), so the two can never disagree.

Left out: clock domains other than the SM clock, register-file banks, the dual-issue rules
of older generations. Units: cycles of the SM clock, GHz, bytes, counts as named.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from isa.targets import TARGETS
from simulator.framework.config import Problem, SpecMixin, spec_field

TENSOR_PRECISIONS = ("fp64", "tf32", "fp16", "bf16", "fp8", "int8")


@dataclass(frozen=True, slots=True, kw_only=True)
class ChipSpec(SpecMixin):
    """The chip as a whole."""

    name: str = spec_field("Marketing name of the modelled part.")
    clock_ghz: float = spec_field(
        "SM clock used for the whole run, in GHz. Presets use the clock the tensor-core peak "
        "is specified at (sustained under load), not the maximum boost clock.", above=0)
    clock_basis: str = spec_field("Why this clock was chosen (free text).", default="")
    power_cap_clock_ghz: float = spec_field(
        "Sustained SM clock under power limit at full bf16 tensor-pipe utilization, in GHz: "
        "an op-level launch whose tensor pipes are busy a fraction u of its cycles runs at "
        "min(clock_ghz, power_cap_clock_ghz / (u * ratio) ** (1/3)) "
        "(`models.sustained_clock`); 0 turns the model off (every launch at clock_ghz).",
        default=0.0, minimum=0)
    fp8_tensor_power_ratio: float = spec_field(
        "Power of an fp8 tensor-busy cycle relative to a bf16 one (the ratio above for fp8 "
        "launches; 1 for the other precisions).", default=1.0, above=0, maximum=100)
    isa_target: Literal[TARGETS] = spec_field(
        "PTX target the chip runs (`isa.targets.TARGETS`, oldest first): a program whose "
        "`.target`, instructions, qualifiers or special registers need a newer one is refused "
        "before it runs, as `ptxas -arch=<target>` refuses it (`isa.targets.verify_target`), "
        "and ops pick their kernel templates by it.")


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchSpec(SpecMixin):
    """The fixed costs of one kernel launch the SMs' simulated span leaves out: inside the
    kernel's duration as a profiler measures it (`kernel_front_end_us`, added to
    `KernelResult.kernel_time_us`) and outside it, what CUDA events around one operator see
    beyond its kernel (`kernel_overhead_us`, added to `KernelResult.time_us`). Neither is
    in the kernel's cycles; 0 (the default) leaves each out."""

    kernel_overhead_us: float = spec_field(
        "Microseconds added to every simulated kernel launch (0: the kernel alone).",
        default=0.0, minimum=0)
    kernel_front_end_us: float = spec_field(
        "Microseconds of every launch inside the kernel's duration on the GPU beyond the "
        "SMs' simulated span (grid launch and CTA rasterization, end-of-kernel drain): "
        "added to `KernelResult.kernel_time_us`, not to its cycles (0: the span alone).",
        default=0.0, minimum=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class SmSpec(SpecMixin):
    """Streaming multiprocessors: count and per-SM resource limits."""

    count: int = spec_field("Number of SMs on the chip.", above=0)
    comm_count: int = spec_field(
        "SMs reserved for communication kernels; compute kernels get count - comm_count.",
        default=0, minimum=0)
    subpartitions: int = spec_field(
        "Sub-partitions (SMSPs) per SM, each with one warp scheduler.", default=4, above=0)
    warp_size_threads: int = spec_field("Threads per warp.", default=32, power_of_two=True)
    max_warps_per_sm: int = spec_field("Resident warps per SM.", above=0)
    max_threads_per_sm: int = spec_field("Resident threads per SM.", above=0)
    max_ctas_per_sm: int = spec_field("Resident thread blocks (CTAs) per SM.", above=0)
    max_threads_per_cta: int = spec_field("Threads per thread block.", above=0)
    registers_per_sm: int = spec_field("32-bit registers per SM.", above=0)
    max_registers_per_thread: int = spec_field("32-bit registers per thread.", above=0)
    unified_l1_shared_bytes: int = spec_field(
        "Bytes of the per-SM array shared by L1 data cache and shared memory.", above=0)
    max_shared_memory_bytes: int = spec_field(
        "Largest shared-memory carve-out per SM; the L1 gets the rest of the array.", minimum=0)
    max_shared_memory_per_cta_bytes: int = spec_field(
        "Largest dynamic shared memory one CTA may request.", minimum=0)
    shared_carveout_options_bytes: tuple[int, ...] = spec_field(
        "Carve-outs the driver may choose, ascending; it picks the smallest that fits.",
        minimum=0)
    scheduler_policy: Literal["gto", "lrr"] = spec_field(
        "Warp scheduler policy: 'gto' greedy-then-oldest or 'lrr' loose round robin.",
        default="gto")
    cluster_release_cycles: int = spec_field(
        "SM cycles a cluster-scope release (`mbarrier.arrive.release.cluster`, to the "
        "CTA's own barrier or a cluster partner's) adds before the arrival counts toward "
        "its phase (0: none, as at CTA scope).", default=0, minimum=0)
    gpu_fence_cycles: int = spec_field(
        "SM cycles a fence at GPU or system scope (`membar.gl`, `fence.sc.gpu`, "
        "`fence.acq_rel.gpu`, ...) holds its warp after the warp's operations in flight "
        "completed (0: only that wait; `models.units`).", default=0, minimum=0)
    param_read_cycles: int = spec_field(
        "SM cycles from a parameter-space access (`ld.param`, `st.param`) to its value being "
        "usable: ptxas makes a kernel parameter a constant-bank-0 operand or a uniform "
        "register load (ULDC), a call-sequence parameter a register, never an L1 access; "
        "it takes an issue slot and no LSU slot (`models.units`).", default=1, above=0)
    param_read_model: Literal["uniform", "ptxas_like"] = spec_field(
        "Which kernel-parameter reads are per-thread LDCs: 'uniform' times every one at "
        "`param_read_cycles`; 'ptxas_like' times the reads ptxas makes LDCs (a pointer fused "
        "into a wide multiply-add, a read in an if-converted block, an indexed read: "
        "`models.param_reads`) at "
        "`const_cache_hit_cycles`, the rest at `param_read_cycles`.", default="uniform")
    cvt_model: Literal["conversion_unit", "ptxas_like"] = spec_field(
        "Which unit a `cvt` with a float side issues to: 'ptxas_like' times the exact "
        "widenings ptxas does not emit as conversions as the instruction it emits (sm_80 "
        "and sm_90a: bf16 -> f32 is a 16-bit left shift, SHF.L.U32 or IMAD.U32, on the "
        "int32 unit; f16 -> f32 is HADD2.F32, on the fp16 unit) and every other one on the "
        "conversion unit; 'conversion_unit' times every one there.", default="ptxas_like")
    int_pipe_model: Literal["int32_unit", "alu_fma"] = spec_field(
        "Which unit an integer op issues to: 'int32_unit' times every one on the int32 "
        "unit; 'alu_fma' as ptxas places them on sm_80 and sm_90a: multiplies (IMAD, "
        "IMUL) on the FMA pipe (the fp32 unit, at the int32 rate), adds, subtracts and "
        "moves on whichever pipe their basic block has loaded less, predicate logic folded "
        "into its compare or branch (one issue slot), the rest on the int32 unit (the ALU) "
        "(`models.units`).", default="alu_fma")
    const_cache_hit_cycles: int = spec_field(
        "SM cycles of a `.const` load (LDC) that hits the SM's constant cache.",
        default=1, above=0)

    @property
    def compute_count(self) -> int:
        """SMs left for compute kernels."""
        return self.count - self.comm_count

    def l1_bytes(self, shared_carveout_bytes: int) -> int:
        """L1 data-cache bytes left when `shared_carveout_bytes` go to shared memory."""
        return self.unified_l1_shared_bytes - shared_carveout_bytes

    def problems(self) -> tuple[Problem, ...]:
        """Cross-field conflicts of the SM limits."""
        found: list[Problem] = []
        if self.comm_count >= self.count:
            found.append(("comm_count", self.comm_count, f"0 .. {self.count - 1} (< sm.count)",
                          "no SM left for compute"))
        if self.max_shared_memory_bytes > self.unified_l1_shared_bytes:
            found.append(("max_shared_memory_bytes", self.max_shared_memory_bytes,
                          f"<= unified_l1_shared_bytes ({self.unified_l1_shared_bytes})",
                          "carve-out larger than the unified L1/shared array"))
        if self.max_shared_memory_per_cta_bytes > self.max_shared_memory_bytes:
            found.append(("max_shared_memory_per_cta_bytes", self.max_shared_memory_per_cta_bytes,
                          f"<= max_shared_memory_bytes ({self.max_shared_memory_bytes})",
                          "a CTA cannot use more than the SM has"))
        options = self.shared_carveout_options_bytes
        if list(options) != sorted(set(options)) or not options:
            found.append(("shared_carveout_options_bytes", options, "a non-empty ascending list",
                          "not ascending"))
        elif options[-1] > self.max_shared_memory_bytes:
            found.append(("shared_carveout_options_bytes", options,
                          f"values <= max_shared_memory_bytes ({self.max_shared_memory_bytes})",
                          "carve-out larger than the maximum"))
        if self.max_threads_per_sm > self.max_warps_per_sm * self.warp_size_threads:
            found.append(("max_threads_per_sm", self.max_threads_per_sm,
                          f"<= max_warps_per_sm * warp_size_threads "
                          f"({self.max_warps_per_sm * self.warp_size_threads})",
                          "more threads than warp slots"))
        return tuple(found)


@dataclass(frozen=True, slots=True, kw_only=True)
class VectorUnitSpec(SpecMixin):
    """One kind of per-lane execution unit (FP32, INT32, SFU, ...)."""

    latency_cycles: int = spec_field("Issue-to-result latency of a dependent instruction.",
                                     above=0)
    results_per_clk_per_sm: float = spec_field(
        "Lane results per clock per SM (the CUDA Programming Guide throughput table).",
        above=0)

    def initiation_interval_cycles(self, subpartitions: int, warp_size_threads: int) -> float:
        """Cycles between two warp instructions of this kind on one sub-partition."""
        return warp_size_threads * subpartitions / self.results_per_clk_per_sm


@dataclass(frozen=True, slots=True, kw_only=True)
class TensorUnitSpec(SpecMixin):
    """The tensor cores of one SM: dense rates per input precision and latencies. A rate of
    0 says the part lacks that precision, a `wgmma_latency_cycles` of 0 that it lacks wgmma:
    a launch that needs either is refused (`simulator.runner.simulate.check_launch_fits`)."""

    mma_latency_cycles: int = spec_field("Latency of one warp-level mma.sync.", above=0)
    wgmma_latency_cycles: int = spec_field(
        "Issue-to-completion latency of one warpgroup wgmma (m64n128k16); 0 where the part "
        "has no wgmma.", minimum=0)
    fp64_fma_per_clk_per_sm: int = spec_field("Dense FP64 FMAs per clock per SM.", minimum=0)
    tf32_fma_per_clk_per_sm: int = spec_field("Dense TF32 FMAs per clock per SM.", minimum=0)
    fp16_fma_per_clk_per_sm: int = spec_field("Dense FP16 FMAs per clock per SM.", minimum=0)
    bf16_fma_per_clk_per_sm: int = spec_field("Dense BF16 FMAs per clock per SM.", minimum=0)
    fp8_fma_per_clk_per_sm: int = spec_field(
        "Dense FP8 (e4m3/e5m2) FMAs per clock per SM; 0 where the part has no FP8.", minimum=0)
    int8_fma_per_clk_per_sm: int = spec_field("Dense INT8 MACs per clock per SM.", minimum=0)
    sparse_rate_multiplier: float = spec_field(
        "Math-rate multiplier of 2:4 structured sparsity over dense.", minimum=1, maximum=64)
    sparse_2_4: bool = spec_field(
        "GEMM weights pruned 2:4 and run on the sparse tensor path (mma.sp / sparse wgmma: "
        "sparse_rate_multiplier x the dense rate, half the weights plus metadata moved); "
        "a workload choice, off by default.", default=False)

    def fma_per_clk_per_sm(self, precision: str) -> int:
        """Dense FMAs per clock per SM for `precision` (one of TENSOR_PRECISIONS)."""
        if precision not in TENSOR_PRECISIONS:
            raise KeyError(f"unknown tensor precision {precision!r}; known: {TENSOR_PRECISIONS}")
        return getattr(self, f"{precision}_fma_per_clk_per_sm")


VPCU_PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "e4m3", "e5m2")


@dataclass(frozen=True, slots=True, kw_only=True)
class VpcuSpec(SpecMixin):
    """Variable-precision tensor unit (`vmma`, `vpcu.setprec`); a co-design what-if, off by
    default. Rates are per SM (one FMA = 2 FLOP) and replace the tensor unit's for `vmma`."""

    enabled: bool = spec_field("Whether the chip has the VPCU (vmma needs it).", default=False)
    fp32_flop_per_clk_per_sm: float = spec_field("Dense FP32 FLOP per clock per SM.",
                                                 default=0.0, minimum=0)
    tf32_flop_per_clk_per_sm: float = spec_field("Dense TF32 FLOP per clock per SM.",
                                                 default=0.0, minimum=0)
    fp16_flop_per_clk_per_sm: float = spec_field("Dense FP16 FLOP per clock per SM.",
                                                 default=0.0, minimum=0)
    bf16_flop_per_clk_per_sm: float = spec_field("Dense BF16 FLOP per clock per SM.",
                                                 default=0.0, minimum=0)
    e4m3_flop_per_clk_per_sm: float = spec_field("Dense FP8 e4m3 FLOP per clock per SM.",
                                                 default=0.0, minimum=0)
    e5m2_flop_per_clk_per_sm: float = spec_field("Dense FP8 e5m2 FLOP per clock per SM.",
                                                 default=0.0, minimum=0)
    fp32_operand_bytes: int = spec_field("Bytes per FP32 operand element.", default=4, above=0)
    tf32_operand_bytes: int = spec_field("Bytes per TF32 operand element.", default=4, above=0)
    fp16_operand_bytes: int = spec_field("Bytes per FP16 operand element.", default=2, above=0)
    bf16_operand_bytes: int = spec_field("Bytes per BF16 operand element.", default=2, above=0)
    e4m3_operand_bytes: int = spec_field("Bytes per e4m3 operand element.", default=1, above=0)
    e5m2_operand_bytes: int = spec_field("Bytes per e5m2 operand element.", default=1, above=0)
    switch_cycles: int = spec_field(
        "Cycles the sub-partition's tensor pipe is held by one precision switch (an executed "
        "vpcu.setprec), and its latency to the next vmma.", default=0, minimum=0)
    policy: Literal["dtype", "static", "per_kernel", "gradient_norm"] = spec_field(
        "Precision policy of the GEMM/attention ops (workloads.codesign.precision): 'dtype' "
        "keeps each kernel's own dtype.", default="dtype")
    static_precision: str = spec_field("Precision of every GEMM under policy 'static'.",
                                       default="bf16")
    grad_norm: float = spec_field(
        "The layer's gradient L2 norm under policy 'gradient_norm' (a train driver sets it "
        "per layer).", default=1e-2, minimum=0, maximum=1e30)

    def flop_per_clk_per_sm(self, precision: str) -> float:
        """Dense FLOP per clock per SM of `precision` (one of VPCU_PRECISIONS)."""
        if precision not in VPCU_PRECISIONS:
            raise KeyError(f"unknown VPCU precision {precision!r}; known: {VPCU_PRECISIONS}")
        return getattr(self, f"{precision}_flop_per_clk_per_sm")

    def operand_bytes(self, precision: str) -> int:
        """Bytes per operand element of `precision`."""
        if precision not in VPCU_PRECISIONS:
            raise KeyError(f"unknown VPCU precision {precision!r}; known: {VPCU_PRECISIONS}")
        return getattr(self, f"{precision}_operand_bytes")

    def problems(self) -> tuple[Problem, ...]:
        """An enabled VPCU needs a rate for every precision."""
        bad = () if self.static_precision in VPCU_PRECISIONS else (
            ("static_precision", self.static_precision, ", ".join(VPCU_PRECISIONS),
             "not a VPCU precision"),)
        if not self.enabled:
            return bad
        return bad + tuple((f"{p}_flop_per_clk_per_sm", 0.0, "> 0 when enabled",
                            "an enabled VPCU needs a rate for every precision")
                           for p in VPCU_PRECISIONS if self.flop_per_clk_per_sm(p) <= 0)


@dataclass(frozen=True, slots=True, kw_only=True)
class LutExpSpec(SpecMixin):
    """A lookup-table exp in the SFU (a co-design what-if, off by default): when enabled,
    `ex2` uses this latency and throughput instead of the SFU's."""

    enabled: bool = spec_field("Whether ex2 runs on the lookup-table path.", default=False)
    latency_cycles: int = spec_field("Issue-to-result latency of a LUT ex2.", default=1,
                                     above=0)
    results_per_clk_per_sm: float = spec_field("LUT ex2 lane results per clock per SM.",
                                               default=16.0, above=0)
    entries: int = spec_field(
        "Segments of the table of 2^f over f in [0, 1) (2^x = 2^i * 2^f); the table holds "
        "entries + 1 values (workloads.codesign.numerics.lut_exp2 gives its error).",
        default=64, power_of_two=True)
    interpolation: Literal["linear", "nearest"] = spec_field(
        "How ex2 reads the table: 'linear' between the two entries around f, 'nearest' the "
        "closest entry.", default="linear")

    def initiation_interval_cycles(self, subpartitions: int, warp_size_threads: int) -> float:
        """Cycles between two LUT ex2 warp instructions on one sub-partition."""
        return warp_size_threads * subpartitions / self.results_per_clk_per_sm


@dataclass(frozen=True, slots=True, kw_only=True)
class ZceSpec(SpecMixin):
    """Zero-compression engine (a co-design what-if, off by default): MMA that skips zero
    operands at a granularity, and (de)compression of the bitmap format."""

    enabled: bool = spec_field("Whether the chip has the ZCE (zmma needs it).", default=False)
    granularity: Literal["element", "group", "kblock"] = spec_field(
        "What the engine skips: single zero products ('element'), 2:4 groups of K with no "
        "non-zero product ('group', 4 K-elements), or whole k-blocks ('kblock').",
        default="element")
    kblock_elements: int = spec_field("K-elements per skippable block at 'kblock'.",
                                      default=16, power_of_two=True)
    min_issue_fraction: float = spec_field(
        "Smallest fraction of the dense issue cost a zmma takes (0 = fully skippable).",
        default=0.0, minimum=0, maximum=1)
    compress_bytes_per_clk_per_sm: float = spec_field(
        "Dense bytes per clock per SM the compressor consumes.", default=64.0, above=0)
    decompress_bytes_per_clk_per_sm: float = spec_field(
        "Dense bytes per clock per SM the decompressor produces.", default=64.0, above=0)
    activation_sparsity: float = spec_field(
        "Zero fraction of GEMM activations (ReLU-like, seeded) in workload simulations; "
        "`ptxsim run` replaces it by the measured share when activation_sparsity_source is "
        "'measured'.", default=0.0, minimum=0, maximum=1)
    activation_sparsity_source: Literal["measured", "config"] = spec_field(
        "Where `ptxsim run` takes the activation sparsity it times the ZCE at: 'measured' "
        "(the MAC-weighted zero share of the GEMM activations of the model's reduced layer "
        "on seeded data at `threshold`, workloads.codesign.run_numerics.zce_sparsity, ~1 s "
        "of CPU; the run's config.json carries it as activation_sparsity) or 'config' "
        "(activation_sparsity as typed, a what-if). Other entry points (ptxsim op, sweeps) "
        "time activation_sparsity as typed.", default="measured",
        source="what-if: the share a run finds on the layer's own activations, not a dial")
    weight_sparsity: float = spec_field(
        "Zero fraction of GEMM weights (magnitude-pruned, seeded) in workload simulations.",
        default=0.0, minimum=0, maximum=1)
    seed: int = spec_field("Seed of the sampled sparse operand tiles.", default=0, minimum=0,
                           maximum=2 ** 63 - 1)
    threshold: float = spec_field(
        "Operand magnitude below which the engine treats an activation as zero, in the "
        "tensor's own value units (0 = exact zeros only, bit-exact). workloads.codesign."
        "numerics measures the error and the zeros it makes; the what-ifs "
        "(workloads.codesign.whatif) and `ptxsim run` (activation_sparsity_source "
        "'measured') time the GEMMs at that measured share.", default=0.0, minimum=0,
        maximum=1e30)


@dataclass(frozen=True, slots=True, kw_only=True)
class UnitsSpec(SpecMixin):
    """Execution units of one SM."""

    fp32: VectorUnitSpec = spec_field("FP32 add/mul/FMA.")
    fp16: VectorUnitSpec = spec_field("FP16 add/mul/FMA (a half2 op counts 2 results).")
    bf16: VectorUnitSpec = spec_field("BF16 add/mul/FMA outside the tensor cores.")
    fp64: VectorUnitSpec = spec_field("FP64 add/mul/FMA.")
    int32: VectorUnitSpec = spec_field("INT32 add/logic/shift/compare.")
    sfu: VectorUnitSpec = spec_field("Special functions: rcp, rsqrt, lg2, ex2, sin, cos.")
    conversion: VectorUnitSpec = spec_field("Type conversions other than 8/16->32-bit int.")
    shuffle: VectorUnitSpec = spec_field("Warp shuffles.")
    lsu: VectorUnitSpec = spec_field("Load/store address generation (per lane).")
    tensor: TensorUnitSpec = spec_field("Tensor cores.")
    vpcu: VpcuSpec = spec_field("Variable-precision tensor unit (what-if; off by default).",
                                default_factory=VpcuSpec)
    lut_exp: LutExpSpec = spec_field("Lookup-table exp in the SFU (what-if; off by default).",
                                     default_factory=LutExpSpec)
    zce: ZceSpec = spec_field("Zero-compression engine (what-if; off by default).",
                              default_factory=ZceSpec)

    def isa_extensions(self) -> frozenset[str]:
        """The co-design units whose opcodes the chip runs (`isa.targets.EXTENSION_UNITS`
        names them): those enabled."""
        return frozenset(name for name in ("vpcu", "zce") if getattr(self, name).enabled)
