"""The L2: slices in two partitions, each a sectored write-back cache behind the crossbar.

What it models
--------------
`L2Cache` holds `l2.slices` `SectoredCache` slices (see `models.cache` for the protocol),
`l2.size_bytes / slices` each, write-back with write-allocate at sector granularity. Which
slice holds an address is the `AddressMap` hash; slices are numbered partition by partition.
A slice's own latency is the near-hit figure less what the L1 and the two crossbar hops
contribute (`l2_slice_latency_cycles`); the far-partition penalty is added by the crossbar.
Each slice returns `l2.slice_bandwidth_bytes_per_clk`.

Left out: the persisting-access carve-out, L2 compression, atomics/ROP units, the request
coalescer. Units: bytes, cycles of the SM clock.
"""

from __future__ import annotations

from models.cache import Fanout, SectoredCache
from models.gpu_spec import GpuConfig
from models.tag_array import TagArray
from simulator.engine import Clock, SimEnvironment


def l2_slice_latency_cycles(config: GpuConfig) -> int:
    """A slice's own share of the near-hit latency."""
    return (config.l2.near_hit_latency_cycles - config.l1.hit_latency_cycles
            - 2 * config.noc.latency_cycles)


class L2Cache:
    """All L2 slices of the chip."""

    def __init__(self, env: SimEnvironment, config: GpuConfig, clock: Clock,
                 name: str = "l2") -> None:
        l2 = config.l2
        latency = l2_slice_latency_cycles(config)
        self.slices = tuple(
            SectoredCache(env, f"{name}.slice{s}", clock=clock,
                          tags=TagArray(l2.size_bytes // l2.slices, l2.line_bytes,
                                        l2.sector_bytes, l2.associativity),
                          sector_bytes=l2.sector_bytes, latency_cycles=latency,
                          bandwidth_bytes_per_clk=l2.slice_bandwidth_bytes_per_clk,
                          write_back=True)
            for s in range(l2.slices))

    @property
    def core_sides(self) -> tuple:
        """The slices' request inboxes, by slice index."""
        return tuple(s.core_side for s in self.slices)

    def connect_downstream(self, fanout: Fanout) -> None:
        """Every slice sends misses and write-backs through `fanout`."""
        for cache_slice in self.slices:
            cache_slice.connect_downstream(fanout)
