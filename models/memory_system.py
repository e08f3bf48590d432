"""Memory-side assembly: HBM -> (L3) -> L2 slices -> crossbar -> per-SM L1s.

What it models
--------------
`build_memory_system(env, config, sm_count=..., shared_carveout_bytes=...)` wires the memory
blocks of one chip bottom-up, in this order (processes start in it, which fixes the order of
simultaneous events): HBM channels and their input links; the optional L3 slices; the L2
slices; the crossbar; one L1 per SM. An SM talks to `system.l1s[i].core_side` with requests
whose `source` is `system.sm_source(i)`, after `system.connect_sm(i, inbox)` says where its
responses go. `simulator.build_system` calls this for the memory side of a whole chip.

The optional L3 is a memory-side cache: one slice group per HBM channel group (an address's
L3 slice follows its HBM channel), write-back, with its own latency being
`l3.hit_latency_cycles` less the average L2 hit path.

Left out: the SM side (load/store units, TMA), host memory. Units: as in the blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models.address_map import AddressMap
from models.cache import MappedTargets, SectoredCache
from models.gpu_spec import GpuConfig
from models.hbm import Hbm
from models.l1 import build_l1
from models.l2 import L2Cache
from models.noc import Crossbar
from models.tag_array import TagArray
from simulator.engine import Clock, SimEnvironment
from simulator.hooks import Hooks
from simulator.ports import Inbox, Link


@dataclass(frozen=True, slots=True)
class MemorySystem:
    """The wired memory blocks of one chip."""

    config: GpuConfig
    clock: Clock
    address_map: AddressMap
    hbm: Hbm
    l3_slices: tuple[SectoredCache, ...]
    l2: L2Cache
    crossbar: Crossbar
    l1s: tuple[SectoredCache, ...]

    @staticmethod
    def sm_source(sm_index: int) -> str:
        """The `source` an SM puts on its requests."""
        return f"sm{sm_index}"

    def connect_sm(self, sm_index: int, inbox: Inbox) -> None:
        """Responses to SM `sm_index`'s requests go into `inbox`."""
        self.l1s[sm_index].connect_upstream(self.sm_source(sm_index), inbox)

    def hooks(self) -> tuple[Hooks, ...]:
        """Hooks of every memory block, for tracers."""
        blocks = (*self.hbm.channels, *self.l3_slices, *self.l2.slices, *self.l1s)
        return tuple(block.hooks for block in blocks)


def build_address_map(config: GpuConfig) -> AddressMap:
    """The address hashes of `config`."""
    return AddressMap(line_bytes=config.l2.line_bytes, l2_slices=config.l2.slices,
                      l2_partitions=config.l2.partitions, hbm_channels=config.hbm.channels,
                      hbm_banks=config.hbm.banks_per_channel,
                      hbm_row_bytes=config.hbm.row_bytes,
                      hbm_row_channels=config.hbm.row_channels)


def _build_l3(env: SimEnvironment, config: GpuConfig, clock: Clock, address_map: AddressMap,
              hbm: Hbm) -> tuple[tuple[SectoredCache, ...], MappedTargets]:
    l3 = config.l3
    l2_average = (config.l2.near_hit_latency_cycles + config.l2.far_hit_latency_cycles) // 2
    slices = tuple(
        SectoredCache(env, f"l3.slice{s}", clock=clock,
                      tags=TagArray(l3.size_bytes // l3.slices, l3.line_bytes,
                                    config.l2.sector_bytes, l3.associativity),
                      sector_bytes=config.l2.sector_bytes,
                      latency_cycles=max(l3.hit_latency_cycles - l2_average, 1),
                      bandwidth_bytes_per_clk=l3.slice_bandwidth_bytes_per_clk, write_back=True)
        for s in range(l3.slices))
    for cache_slice in slices:
        cache_slice.connect_downstream(hbm.fanout)
        hbm.connect_upstream(cache_slice.name, cache_slice.mem_side)
    bandwidth_gbps = l3.slice_bandwidth_bytes_per_clk * clock.clock_ghz
    inputs = tuple(Link(env, f"{s.name}.in", s.core_side, 0, bandwidth_gbps) for s in slices)

    def slice_of(lines: np.ndarray) -> np.ndarray:
        return address_map.hbm_channel(lines) * l3.slices // config.hbm.channels

    return slices, MappedTargets(inputs, slice_of)


def build_memory_system(env: SimEnvironment, config: GpuConfig, *, sm_count: int | None = None,
                        shared_carveout_bytes: int | None = None) -> MemorySystem:
    """Wire the memory blocks for `sm_count` SMs (default: all) with the given carve-out
    (default: the smallest option, i.e. the largest L1)."""
    clock = Clock(config.chip.clock_ghz)
    address_map = build_address_map(config)
    sm_count = config.sm.count if sm_count is None else sm_count
    carveout = (config.sm.shared_carveout_options_bytes[0] if shared_carveout_bytes is None
                else shared_carveout_bytes)
    hbm = Hbm(env, config, clock, address_map)
    l3_slices, below_l2 = (), hbm.fanout
    if config.l3.enabled:
        l3_slices, below_l2 = _build_l3(env, config, clock, address_map, hbm)
    l2 = L2Cache(env, config, clock)
    l2.connect_downstream(below_l2)
    for cache_slice in l2.slices:
        if l3_slices:
            for l3_slice in l3_slices:
                l3_slice.connect_upstream(cache_slice.name, cache_slice.mem_side)
        else:
            hbm.connect_upstream(cache_slice.name, cache_slice.mem_side)
    crossbar = Crossbar(env, config, clock, address_map, l2.core_sides, sm_count)
    l1s = tuple(build_l1(env, f"sm{i}.l1", config, clock, carveout) for i in range(sm_count))
    for i, l1 in enumerate(l1s):
        l1.connect_downstream(MappedTargets((crossbar.uplinks[i],), address_map.l2_slice))
        crossbar.connect_sm(i, l1.name, l1.mem_side)
        for s, cache_slice in enumerate(l2.slices):
            cache_slice.connect_upstream(l1.name, crossbar.inbox_from_slice(s, l1.name))
    return MemorySystem(config, clock, address_map, hbm, l3_slices, l2, crossbar, l1s)


__all__ = ["MemorySystem", "build_address_map", "build_memory_system"]
