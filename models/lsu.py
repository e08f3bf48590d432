"""The load/store unit of one SM: shared-memory banks, the L1 data path, the memory interface.

What it models
--------------
How each traced memory warp-instruction of an SM is timed:

* shared memory: the banked array serves one conflict-free wavefront per cycle; a warp
  instruction with bank-conflict degree `d` holds it `d` cycles and its data is usable
  `shared_memory.latency_cycles + d - 1` cycles after it started;
* param/const loads: served by the constant cache at the L1 hit latency, no traffic;
* global/local loads, stores and atomics: the L1 data path moves
  `l1.bandwidth_bytes_per_clk / 32` sectors per cycle (a warp instruction of `s` sectors holds
  it `ceil(s / that)` cycles), then the sectors go to the memory system through the
  `MemoryInterface` contract (`models.flat_memory`), which returns the completion time.

Shared and constant accesses are timed inside the compiled issue loop (`models.sm_core`):
`shared_access` for the banks, the L1 hit latency for constants, and the same for global
kinds that touch no sector. One `LoadStoreUnit` per SM times the global accesses, which
need the memory system. Address generation issue rate is the LSU unit's initiation
interval (`models.units`); this block only adds what follows it.

Left out: L1 hits (the flat memory keeps no L1 data), MSHR limits, write coalescing
buffers (bulk and tensor copies go to `models.tma`, not here). Units: SM cycles, ps at the
memory interface.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from models.sm_memory import lsu_window
from simulator.engine import Clock
from simulator.trace import KIND_ATOMIC, KIND_LOAD, KIND_LOAD_CG, KIND_STORE

SECTOR_BYTES = 32
_KIND_NAMES = {KIND_LOAD: "load", KIND_STORE: "store", KIND_ATOMIC: "atomic",
               KIND_LOAD_CG: "load_cg"}


@nb.njit(cache=True)
def shared_access(cycle, free, degree, latency):
    """(cycle its data is usable, cycle the banks are free again) of a shared-memory access
    issued at `cycle` with bank-conflict degree `degree` (at least 1), the banks free from
    `free` on."""
    start = max(cycle, free)
    degree = max(degree, 1)
    return start + latency + degree - 1, start + degree


class LoadStoreUnit:
    """Times the global accesses of SM `sm_id` (see the module docstring)."""

    __slots__ = ("sm_id", "memory", "clock", "sectors_per_cycle", "l1_free")

    def __init__(self, sm_id: int, config, memory, clock: Clock) -> None:
        self.sm_id = sm_id
        self.memory = memory
        self.clock = clock
        self.sectors_per_cycle = max(config.l1.bandwidth_bytes_per_clk // SECTOR_BYTES, 1)
        self.l1_free = 0

    def issue(self, cycle: int, kind: int, sectors: np.ndarray, ops: int = 1) -> int:
        """Cycle at which a load, store or atomic of `sectors` (at least one) issued at
        `cycle` completes (data usable / store performed); `ops`: an atomic's lane
        operations on one address."""
        start, self.l1_free = lsu_window(cycle, self.l1_free, int(sectors.size),
                                         self.sectors_per_cycle)
        clock = self.clock
        done_ps = self.memory.access(self.sm_id, _KIND_NAMES[kind], sectors,
                                     clock.edge_ps(start), ops)
        return clock.ps_to_cycles(done_ps - 1) + 1
