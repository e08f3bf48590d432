"""Config blocks of the memory system: L1, shared memory, L2, NoC, HBM, optional L3.

What it models
--------------
Geometry (sizes, line and sector bytes, associativity, slices, channels), latencies and
bandwidths of each level. Latencies are load-to-use figures as pointer-chase benchmarks
measure them from an SM, in SM cycles: `l2.near_hit_latency_cycles` already includes the L1
miss and the crossbar (`noc.latency_cycles` each way), `hbm.latency_cycles` includes the whole
path through L2. The memory blocks derive each level's own share from these totals, so the
unloaded latency of each level reproduces the cited measurement.

The L1 size is not a field: L1 and shared memory split one array per SM
(`sm.unified_l1_shared_bytes`) and the L1 gets what the shared-memory carve-out leaves.
Cache sizes that do not split into whole sets (a 64 MiB L2 over 80 slices of 20 ways) are
rounded down to whole sets per slice by the tag arrays; `modelled_size_bytes` says how much.

Left out: TLBs, write policies (write-back, write-allocate assumed by the blocks), ECC,
refresh, HBM bank groups and most DRAM timings (only activate and precharge are kept).
Units: bytes, cycles (SM clock), ns for DRAM timings, GB/s (1e9 B/s).
"""

from __future__ import annotations

from dataclasses import dataclass

from simulator.framework.config import Problem, SpecMixin, spec_field


def _line_problems(line_bytes: int, sector_bytes: int) -> tuple[Problem, ...]:
    if sector_bytes > line_bytes:
        return (("sector_bytes", sector_bytes, f"<= line_bytes ({line_bytes})",
                 "sector larger than the line"),)
    return ()


@dataclass(frozen=True, slots=True, kw_only=True)
class L1Spec(SpecMixin):
    """Per-SM L1 data cache (sectored, set-associative); its size comes from the carve-out."""

    line_bytes: int = spec_field("Cache line (tag granule).", power_of_two=True)
    sector_bytes: int = spec_field("Fill granule within a line.", power_of_two=True)
    associativity: int = spec_field(
        "Ways per set (sets = L1 bytes left by the carve-out / (line_bytes * ways), "
        "rounded down).", power_of_two=True)
    hit_latency_cycles: int = spec_field("Load-to-use latency of an L1 hit.", above=0)
    bandwidth_bytes_per_clk: int = spec_field("L1 bytes delivered per clock per SM.", above=0)

    def problems(self) -> tuple[Problem, ...]:
        """Sector must fit the line."""
        return _line_problems(self.line_bytes, self.sector_bytes)


@dataclass(frozen=True, slots=True, kw_only=True)
class SharedMemorySpec(SpecMixin):
    """Per-SM shared memory (the banked part of the unified array)."""

    banks: int = spec_field("Banks; lanes hitting different words of one bank serialise.",
                            power_of_two=True)
    bank_width_bytes: int = spec_field("Bytes per bank per clock.", power_of_two=True)
    latency_cycles: int = spec_field("Load-to-use latency without bank conflicts.", above=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class L2Spec(SpecMixin):
    """The chip's L2: two partitions of slices; an SM reaches the far partition slower."""

    size_bytes: int = spec_field("Total L2 capacity.", above=0)
    partitions: int = spec_field("Partitions joined by the partitioned crossbar.", above=0)
    slices: int = spec_field("Slices on the chip (split evenly over partitions).", above=0)
    line_bytes: int = spec_field("Cache line (tag granule).", power_of_two=True)
    sector_bytes: int = spec_field("Fill granule within a line.", power_of_two=True)
    associativity: int = spec_field("Ways per set in one slice (any positive count).", above=0)
    near_hit_latency_cycles: int = spec_field(
        "Load-to-use latency of a hit in the SM's near partition, from the SM.", above=0)
    far_hit_latency_cycles: int = spec_field(
        "Load-to-use latency of a hit in the far partition, from the SM.", above=0)
    slice_bandwidth_bytes_per_clk: int = spec_field("Bytes one slice returns per clock.",
                                                    above=0)
    slice_requests_per_clk: float = spec_field(
        "Line requests one slice's tag stage takes per clock: a request holds the slice for "
        "its sectors' bytes at slice_bandwidth_bytes_per_clk, and at least 1 / this many "
        "clocks (0: no limit, the bytes alone; docs/accuracy.md has what 1 does).",
        default=0.0, minimum=0.0)
    same_address_atomic_ns: float = spec_field(
        "Time the home slice holds one address for one lane's atomic read-modify-write: "
        "lanes and warps updating the same address serialize at this rate (0: atomics are "
        "timed as plain accesses).", default=0.0, minimum=0.0)
    persisting_max_fraction: float = spec_field(
        "Share of each set's ways that evict-last (persisting) lines may hold: the L2 "
        "set-aside for persisting accesses (cudaLimitPersistingL2CacheSize / L2 size), taken "
        "per set (models.cached_memory). 0: evict_last acts as evict_normal.",
        default=0.75, minimum=0.0, maximum=1.0,
        source="csv H100_SXM \"Max persisting L2 (cudaLimitPersistingL2CacheSize)\" = "
               "39321600 of 52428800 B = 0.75 (LOW-CONFIDENCE device report); the CUDA C++ "
               "Programming Guide's L2 set-aside example sizes it "
               "min(l2CacheSize * 0.75, persistingL2CacheMaxSize)")

    @property
    def sets_per_slice(self) -> int:
        """Whole sets in one slice (a size that does not split evenly is rounded down)."""
        return self.size_bytes // (self.slices * self.line_bytes * self.associativity)

    @property
    def modelled_size_bytes(self) -> int:
        """Capacity the tag arrays hold: `size_bytes` rounded down to whole sets per slice."""
        return self.sets_per_slice * self.slices * self.line_bytes * self.associativity

    @property
    def bandwidth_bytes_per_clk(self) -> int:
        """All slices together."""
        return self.slices * self.slice_bandwidth_bytes_per_clk

    def problems(self) -> tuple[Problem, ...]:
        """Geometry must divide evenly; far must not be faster than near."""
        found = list(_line_problems(self.line_bytes, self.sector_bytes))
        if self.slices % self.partitions:
            found.append(("slices", self.slices, f"a multiple of partitions ({self.partitions})",
                          "slices do not split evenly"))
        set_bytes = self.slices * self.line_bytes * self.associativity
        if self.size_bytes < set_bytes:
            found.append(("size_bytes", self.size_bytes,
                          f">= slices * line_bytes * associativity ({set_bytes})",
                          "slices would not hold one set each"))
        if self.far_hit_latency_cycles < self.near_hit_latency_cycles:
            found.append(("far_hit_latency_cycles", self.far_hit_latency_cycles,
                          f">= near_hit_latency_cycles ({self.near_hit_latency_cycles})",
                          "far partition faster than near"))
        return tuple(found)


@dataclass(frozen=True, slots=True, kw_only=True)
class NocSpec(SpecMixin):
    """The crossbar between SMs and L2 slices."""

    latency_cycles: int = spec_field(
        "One-way traversal SM <-> L2 slice, part of the L2 hit latencies.", minimum=0)
    port_bandwidth_bytes_per_clk: int = spec_field("Bytes per clock through one SM's port.",
                                                   above=0)
    read_return_gbps: float = spec_field(
        "Read data (L2 -> SMs) the crossbar returns to all SMs together, bytes per second "
        "(it runs on its own clock, not the SM's); 0: no limit beyond the ports and slices.",
        default=0.0, minimum=0)


@dataclass(frozen=True, slots=True, kw_only=True)
class HbmSpec(SpecMixin):
    """HBM stacks, channels and a simple per-bank row buffer."""

    capacity_bytes: int = spec_field("Device memory capacity.", above=0)
    stacks: int = spec_field("HBM stacks.", above=0)
    channels_per_stack: int = spec_field("Independent channels per stack.", above=0)
    channel_bandwidth_gbps: float = spec_field("Peak data bandwidth of one channel.", above=0)
    latency_cycles: int = spec_field(
        "Load-to-use latency of an L2 miss served by HBM, unloaded, random addresses "
        "(row-buffer misses), from the SM.", above=0)
    banks_per_channel: int = spec_field("Banks per channel, one open row each.", above=0)
    row_bytes: int = spec_field("Bytes of one open row (page) per bank.", power_of_two=True)
    row_map_channels: int = spec_field(
        "Channels of the row map: a channel's lines with line number // row_map_channels "
        "in one row_bytes range share a row (0: the chip's channels). Not a part of the "
        "hardware: `simulator.runner.chip_slice` sets the whole chip's channel count on a slice of "
        "fewer channels, so that its rows span the chip's address ranges.",
        default=0, minimum=0)
    row_activate_ns: float = spec_field("Activate-to-read time (tRCD).", minimum=0)
    row_precharge_ns: float = spec_field("Precharge time (tRP).", minimum=0)
    refresh_interval_ns: float = spec_field(
        "All-bank refresh interval of a channel (tREFI); channels are staggered evenly.",
        above=0)
    refresh_ns: float = spec_field(
        "All-bank refresh time (tRFC): the channel moves no data, rows close.", minimum=0)
    write_to_read_gap_ns: float = spec_field(
        "Data-bus idle time when a channel turns from writing to reading.", minimum=0)
    read_to_write_gap_ns: float = spec_field(
        "Data-bus idle time when a channel turns from reading to writing.", minimum=0)
    writeback_buffer_lines_per_channel: int = spec_field(
        "Write-back buffer of one channel, in L2 lines (crosses the bus as one batch).",
        above=0)

    def problems(self) -> tuple[Problem, ...]:
        """Refresh must leave the channel some time to move data."""
        if self.refresh_ns >= self.refresh_interval_ns:
            return (("refresh_ns", self.refresh_ns,
                     f"< refresh_interval_ns ({self.refresh_interval_ns})",
                     "a channel refreshing all the time moves no data"),)
        return ()

    @property
    def channels(self) -> int:
        """All channels on the chip."""
        return self.stacks * self.channels_per_stack

    @property
    def row_channels(self) -> int:
        """The channel count the row map divides line numbers by (`row_map_channels`, or
        the chip's channels when it is 0)."""
        return self.row_map_channels or self.channels

    @property
    def peak_bandwidth_gbps(self) -> float:
        """Total peak bandwidth."""
        return self.channels * self.channel_bandwidth_gbps


@dataclass(frozen=True, slots=True, kw_only=True)
class L3Spec(SpecMixin):
    """An optional memory-side cache between L2 and HBM (a what-if; absent on real parts)."""

    enabled: bool = spec_field("Whether the L3 exists.", default=False)
    size_bytes: int = spec_field("Total L3 capacity.", default=0, minimum=0)
    slices: int = spec_field("Slices (one per HBM stack is natural).", default=1, above=0)
    line_bytes: int = spec_field("Cache line.", default=128, power_of_two=True)
    associativity: int = spec_field("Ways per set.", default=16, above=0)
    hit_latency_cycles: int = spec_field(
        "Load-to-use latency of an L3 hit from the SM (between L2 far hit and HBM).",
        default=0, minimum=0)
    slice_bandwidth_bytes_per_clk: int = spec_field("Bytes one slice returns per clock.",
                                                    default=64, above=0)

    def problems(self) -> tuple[Problem, ...]:
        """An enabled L3 needs a size and a latency."""
        if not self.enabled:
            return ()
        found: list[Problem] = []
        set_bytes = self.slices * self.line_bytes * self.associativity
        if self.size_bytes < set_bytes:
            found.append(("size_bytes", self.size_bytes,
                          f">= slices * line_bytes * associativity ({set_bytes}) when enabled",
                          "an enabled L3 needs room for one set per slice"))
        if self.hit_latency_cycles <= 0:
            found.append(("hit_latency_cycles", self.hit_latency_cycles, "> 0 when enabled",
                          "an enabled L3 needs a latency"))
        return tuple(found)
