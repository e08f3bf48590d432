"""HBM latency split: the part of the cited HBM latency that belongs to the channel itself.

What it models
--------------
`hbm.latency_cycles` is a pointer-chase figure over a footprint spread across both L2
partitions with random rows: it contains the L2 path and a row miss. The channel's own fixed
part (`hbm_fixed_latency_ps`) is that figure minus the average L2 hit path (near and far) minus
tRP + tRCD, so that `models.cached_memory`, which adds the L2 path and the row state of each
access, reproduces the cited figure for a row-missing read averaged over near and far SMs.
The channel's timing rules (banks, refresh, data bus, write-back buffer) are in
`models.hbm_kernel`.

Left out: everything but the split. Units: ps, SM cycles, ns for DRAM timings.
"""

from __future__ import annotations

from models.gpu_spec import GpuConfig
from simulator.framework.engine import Clock


def hbm_fixed_latency_ps(config: GpuConfig, clock: Clock) -> int:
    """The channel's own fixed latency (see the module docstring for the split)."""
    l2_average = (config.l2.near_hit_latency_cycles + config.l2.far_hit_latency_cycles) // 2
    row_miss_ps = round((config.hbm.row_activate_ns + config.hbm.row_precharge_ns) * 1000)
    fixed = clock.cycles_to_ps(config.hbm.latency_cycles - l2_average) - row_miss_ps
    if fixed < 0:
        raise ValueError("hbm.latency_cycles leaves no time for the channel after the L2 path")
    return fixed


__all__ = ["hbm_fixed_latency_ps"]
