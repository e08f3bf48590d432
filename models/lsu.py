"""The load/store unit of one SM: shared-memory banks, the L1 data path, the memory interface.

What it models
--------------
One `LoadStoreUnit` per SM times each traced memory warp-instruction:

* shared memory: the banked array serves one conflict-free wavefront per cycle; a warp
  instruction with bank-conflict degree `d` holds it `d` cycles and its data is usable
  `shared_memory.latency_cycles + d - 1` cycles after it started;
* param/const loads: served by the constant cache at the L1 hit latency, no traffic;
* global/local loads, stores and atomics: the L1 data path moves
  `l1.bandwidth_bytes_per_clk / 32` sectors per cycle (a warp instruction of `s` sectors holds
  it `ceil(s / that)` cycles), then the sectors go to the memory system through the
  `MemoryInterface` contract (`models.flat_memory`), which returns the completion time.

Address generation issue rate is the LSU unit's initiation interval (`models.units`); this
block only adds what follows it. Left out: L1 hits (the flat memory keeps no L1 data),
MSHR limits, write coalescing buffers (bulk and tensor copies go to `models.tma`, not here).
Units: SM cycles, ps at the memory interface.
"""

from __future__ import annotations

import numpy as np

from simulator.engine import Clock
from simulator.trace import KIND_ATOMIC, KIND_CONST, KIND_LOAD, KIND_SHARED, KIND_STORE

SECTOR_BYTES = 32
_KIND_NAMES = {KIND_LOAD: "load", KIND_STORE: "store", KIND_ATOMIC: "atomic"}


class LoadStoreUnit:
    """Times memory warp-instructions of SM `sm_id` (see the module docstring)."""

    __slots__ = ("sm_id", "memory", "clock", "shared_latency", "const_latency",
                 "sectors_per_cycle", "shared_free", "l1_free")

    def __init__(self, sm_id: int, config, memory, clock: Clock) -> None:
        self.sm_id = sm_id
        self.memory = memory
        self.clock = clock
        self.shared_latency = config.shared_memory.latency_cycles
        self.const_latency = config.l1.hit_latency_cycles
        self.sectors_per_cycle = max(config.l1.bandwidth_bytes_per_clk // SECTOR_BYTES, 1)
        self.shared_free = 0
        self.l1_free = 0

    def issue(self, cycle: int, kind: int, detail: int, sectors: np.ndarray | None) -> int:
        """Cycle at which the access completes (data usable / store performed)."""
        if kind == KIND_SHARED:
            start = max(cycle, self.shared_free)
            degree = max(int(detail), 1)
            self.shared_free = start + degree
            return start + self.shared_latency + degree - 1
        if kind == KIND_CONST or sectors is None or not sectors.size:
            return cycle + self.const_latency
        start = max(cycle, self.l1_free)
        self.l1_free = start + -(-int(sectors.size) // self.sectors_per_cycle)
        clock = self.clock
        done_ps = self.memory.access(self.sm_id, _KIND_NAMES[kind], sectors,
                                     clock.edge_ps(start))
        return clock.ps_to_cycles(done_ps - 1) + 1
