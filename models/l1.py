"""The per-SM L1 data cache: sectored, set-associative, LRU, write-through without allocate.

What it models
--------------
One `SectoredCache` (see `models.cache` for the memory protocol) per SM. Its size is what the
shared-memory carve-out leaves of the unified L1/shared array (`sm.l1_bytes(carveout)`);
line, sector, associativity, hit latency and bandwidth come from `config.l1`. A hit answers
after `l1.hit_latency_cycles`, the cited load-to-use figure; a miss pays the same on its way
back up, so the levels below add their own share only. Writes update lines the L1 holds and
go through to L2 (the L1 answers when L2 acknowledges).

Left out: texture and constant caching, `ld.global.nc` paths, L1 bank conflicts, the
streaming (evict-first) hints. Units: bytes, cycles of the SM clock.
"""

from __future__ import annotations

from models.cache import SectoredCache
from models.gpu_spec import GpuConfig
from models.tag_array import TagArray
from simulator.engine import Clock, SimEnvironment


def build_l1(env: SimEnvironment, name: str, config: GpuConfig, clock: Clock,
             shared_carveout_bytes: int) -> SectoredCache:
    """The L1 of one SM, sized by the carve-out left to shared memory."""
    l1 = config.l1
    size_bytes = config.sm.l1_bytes(shared_carveout_bytes)
    if size_bytes < 0:
        raise ValueError(f"carve-out {shared_carveout_bytes} B exceeds the unified array "
                         f"({config.sm.unified_l1_shared_bytes} B)")
    tags = TagArray(size_bytes, l1.line_bytes, l1.sector_bytes, l1.associativity)
    return SectoredCache(env, name, clock=clock, tags=tags, sector_bytes=l1.sector_bytes,
                         latency_cycles=l1.hit_latency_cycles,
                         bandwidth_bytes_per_clk=l1.bandwidth_bytes_per_clk, write_back=False)
