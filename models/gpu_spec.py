"""The whole hardware config: every block's spec, cross-block checks and peak figures.

What it models
--------------
`GpuConfig` groups the blocks (`chip`, `sm`, `units`, `l1`, `shared_memory`, `l2`, `noc`,
`hbm`, `l3`, `links`, `launch`), checks what spans blocks (the latency order of the levels) and
computes closed-form peaks (tensor and vector FLOP/s, HBM bandwidth) that reports put
beside simulated numbers.

`links` (`models.link_spec.LinksSpec`): per-GPU NVLink / InfiniBand / PCIe figures and the
node topology, used by the communication model (`models.link_memory`).

`limits` (`LimitsSpec`) is not hardware: what the simulating host may spend on one op before
it is refused (`workloads.ops.registry.check_op_size`); no figure depends on it.
`fidelity` and `kernels` (`simulator.framework.policy_spec`) are not hardware either: the shortcuts
sampled fidelity may take and the op builders' kernel choices, config so that they are
overridable, sweepable and saved with every result.

Left out: power. Units: TFLOP/s (1e12 FLOP/s, one FMA = 2 FLOP), TB/s (1e12 B/s),
as named elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass

from isa.launch import DEFAULT_MEMORY_BUDGET_BYTES
from models.chip_spec import ChipSpec, LaunchSpec, SmSpec, UnitsSpec
from models.link_spec import LinksSpec
from models.memory_spec import HbmSpec, L1Spec, L2Spec, L3Spec, NocSpec, SharedMemorySpec
from simulator.framework.config import Problem, SpecMixin, spec_field
from simulator.framework.policy_spec import FidelitySpec, KernelsSpec

FLOP_PER_FMA = 2
HOST_MEMORY_BYTES = DEFAULT_MEMORY_BUDGET_BYTES   # one default for ops and launches


@dataclass(frozen=True, slots=True, kw_only=True)
class LimitsSpec(SpecMixin):
    """Budgets of the simulating host, checked before an op is built or simulated."""

    host_memory_bytes: int = spec_field(
        "Host memory one op may need (its numpy tensors, per-tile and per-CTA tables, the "
        "simulator's per-CTA state, by `workloads.ops.registry` estimates) before it is "
        "refused with the estimate; the default leaves room on a 24 GB machine.",
        default=HOST_MEMORY_BYTES, above=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class GpuConfig(SpecMixin):
    """A complete, validated hardware description (what `models.load_preset` returns)."""

    chip: ChipSpec = spec_field("The chip and its clock.")
    sm: SmSpec = spec_field("SM count and per-SM limits.")
    units: UnitsSpec = spec_field("Execution units per SM.")
    l1: L1Spec = spec_field("Per-SM L1 data cache.")
    shared_memory: SharedMemorySpec = spec_field("Per-SM shared memory.")
    l2: L2Spec = spec_field("L2 cache.")
    noc: NocSpec = spec_field("SM <-> L2 crossbar.")
    hbm: HbmSpec = spec_field("Device memory.")
    l3: L3Spec = spec_field("Optional memory-side cache (disabled by default).",
                            default_factory=L3Spec)
    links: LinksSpec = spec_field("Off-chip links.")
    launch: LaunchSpec = spec_field("Fixed cost per kernel launch (0 when absent).",
                                    default_factory=LaunchSpec)
    limits: LimitsSpec = spec_field("Budgets of the simulating host (not hardware).",
                                    default_factory=LimitsSpec)
    fidelity: FidelitySpec = spec_field("Shortcuts of sampled fidelity (not hardware).",
                                        default_factory=FidelitySpec)
    kernels: KernelsSpec = spec_field("Kernel choices of the op builders (not hardware).",
                                      default_factory=KernelsSpec)

    def problems(self) -> tuple[Problem, ...]:
        """Checks that span blocks, with full dotted keys."""
        found: list[Problem] = []
        l1_and_noc = self.l1.hit_latency_cycles + 2 * self.noc.latency_cycles
        if self.l2.near_hit_latency_cycles <= l1_and_noc:
            found.append(("l2.near_hit_latency_cycles", self.l2.near_hit_latency_cycles,
                          f"> l1.hit_latency_cycles + 2 * noc.latency_cycles ({l1_and_noc})",
                          "L2 hit faster than the path to it"))
        slowest_cache = self.l2.far_hit_latency_cycles
        if self.l3.enabled:
            if not self.l2.far_hit_latency_cycles < self.l3.hit_latency_cycles:
                found.append(("l3.hit_latency_cycles", self.l3.hit_latency_cycles,
                              f"> l2.far_hit_latency_cycles ({self.l2.far_hit_latency_cycles})",
                              "L3 hit faster than an L2 hit"))
            slowest_cache = max(slowest_cache, self.l3.hit_latency_cycles)
        if self.hbm.latency_cycles <= slowest_cache:
            found.append(("hbm.latency_cycles", self.hbm.latency_cycles,
                          f"> the slowest cache hit ({slowest_cache})",
                          "HBM faster than a cache hit"))
        return tuple(found)

    def peak_tensor_tflops(self, precision: str = "bf16", sparse: bool = False) -> float:
        """Dense (or 2:4 sparse) tensor-core peak of all SMs at `chip.clock_ghz`."""
        fma = self.units.tensor.fma_per_clk_per_sm(precision)
        rate = self.units.tensor.sparse_rate_multiplier if sparse else 1.0
        return fma * FLOP_PER_FMA * rate * self.sm.count * self.chip.clock_ghz / 1e3

    def peak_vector_tflops(self, unit: str = "fp32") -> float:
        """Peak of a per-lane unit (FMA counted as 2 FLOP) of all SMs at `chip.clock_ghz`."""
        results = getattr(self.units, unit).results_per_clk_per_sm
        return results * FLOP_PER_FMA * self.sm.count * self.chip.clock_ghz / 1e3

    @property
    def hbm_peak_tbps(self) -> float:
        """Peak HBM bandwidth in TB/s."""
        return self.hbm.peak_bandwidth_gbps / 1e3

    @property
    def l2_peak_tbps(self) -> float:
        """Peak L2 bandwidth (all slices) in TB/s at the SM clock."""
        return self.l2.bandwidth_bytes_per_clk * self.chip.clock_ghz / 1e3
