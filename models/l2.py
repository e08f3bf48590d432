"""L2 latency split: the part of the cited near-hit latency that belongs to an L2 slice.

What it models
--------------
`l2.near_hit_latency_cycles` is a load-to-use figure measured from an SM: it contains the L1
lookup and the crossbar both ways. A slice's own share (`l2_slice_latency_cycles`) is that
figure less `l1.hit_latency_cycles` and two `noc.latency_cycles` hops, so that
`models.cached_memory`, which charges the L1, the crossbar and the slice separately,
reproduces the cited figure for an unloaded near hit. The far-partition penalty
(`far - near`) is charged apart. The slice's tag, copy and bandwidth rules are in
`models.cached_memory` and `models.cached_memory_kernel`.

Left out: everything but the split. Units: SM cycles.
"""

from __future__ import annotations

from models.gpu_spec import GpuConfig


def l2_slice_latency_cycles(config: GpuConfig) -> int:
    """A slice's own share of the near-hit latency."""
    return (config.l2.near_hit_latency_cycles - config.l1.hit_latency_cycles
            - 2 * config.noc.latency_cycles)


__all__ = ["l2_slice_latency_cycles"]
