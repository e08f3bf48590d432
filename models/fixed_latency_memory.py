"""Ideal memory behind the SMs' synchronous memory contract: one fixed latency, no limits.

What it models
--------------
Every global access completes a fixed number of SM cycles after issue (default: the L1 hit
latency of the preset), with unlimited bandwidth and no capacity: the memory a kernel would
see if every access hit the L1. Running a kernel with `memory="ideal"` beside the default
`"cached"` hierarchy measures what the real memory blocks cost it. It implements the
`MemoryInterface` contract of `models.flat_memory` and fires that module's
`MEMORY_ACCESS` hook (with zero L2/HBM bytes), so the usual tracer counts its requests.

Left out: everything that makes memory slow (on purpose). Units: ps, SM cycles.
"""

from __future__ import annotations

import numpy as np

from models.flat_memory import MEMORY_ACCESS
from simulator.framework.engine import Clock
from simulator.framework.hooks import Hooks


class FixedLatencyMemory:
    """Each access completes `latency_cycles` after issue (see the module docstring)."""

    def __init__(self, config, latency_cycles: int | None = None) -> None:
        cycles = config.l1.hit_latency_cycles if latency_cycles is None else latency_cycles
        if cycles < 0:
            raise ValueError(f"latency_cycles must be >= 0, got {cycles}")
        self.latency_ps = Clock(config.chip.clock_ghz).cycles_to_ps(cycles)
        self.hooks = Hooks("memory")

    def access(self, sm_id: int, kind: str, sectors: np.ndarray, now_ps: int,
               ops: int = 1, policy: np.ndarray | None = None) -> int:
        done = now_ps + self.latency_ps
        if self.hooks.listening:
            self.hooks.fire(MEMORY_ACCESS, sm_id=sm_id, kind=kind, sectors=int(sectors.size),
                            l2_bytes=0, hbm_bytes=0, issue_ps=now_ps, done_ps=done)
        return done
