"""The per-SM TMA engine: bulk and tensor copies between global and shared memory.

What it models
--------------
One `TmaEngine` per SM serves `cp.async.bulk.tensor` / `cp.async.bulk` messages in issue
order. A message is the whole box (or byte range) of one warp instruction: its distinct
global sectors from the trace. The engine moves `TMA_BYTES_PER_CLK` bytes per SM cycle:
a message starts when the engine is free (and `TMA_ISSUE_CYCLES` after the warp issued it)
and holds the engine `ceil(bytes / TMA_BYTES_PER_CLK)` cycles. Its sectors go to the memory
system in chunks of at most `CHUNK_SECTORS` (one `access` call each), chunk k at the
engine's pace (start + k * chunk bytes / bandwidth), so the caches and HBM see the box as a
few requests spread over its transfer rather than one burst. The message completes when
the last chunk's data is back plus `TMA_EXTRA_LATENCY_CYCLES`; for a load the replay then
performs the `complete_tx` of its bytes on the mbarrier (`models.sm`). For a store the
engine's window is its read of the source out of shared memory at the same rate: the
source is free for reuse (`cp.async.bulk.wait_group.read`) at the window's end plus
`shared_memory.latency_cycles` (`models.sm_memory.source_read_cycle`), while its writes
are still on their way; plain `wait_group` waits for the completion.

Numbers: `TMA_BYTES_PER_CLK = 128` is an ESTIMATE (one 128-byte line per SM cycle, the
L1/shared fill width of `l1.bandwidth_bytes_per_clk` on h100_sxm; no per-SM TMA bandwidth
is published; the measured H800 PCIe plateau of 1.80-1.83 TB/s over 114 SMs is HBM-bound).
`TMA_EXTRA_LATENCY_CYCLES = 100`: a TMA load of an L2-resident line takes 365-369 cycles
against 264.5 for a plain `ld` on the H800 PCIe (HPMLL tma_lat_random log, see
notes/hopper-params.md section 7, "TMA extra over ld (L2 hit) ~100 cycles").

Loads go to the memory as "bulk_load" requests: they read through L2 and neither look up
nor fill the SM's L1 (bulk copies land in shared memory; CUDA C++ Programming Guide,
"Asynchronous Data Copies using the Tensor Memory Accelerator"). Stores are "store".

Left out: the shared-memory write of the box (swizzle and bank costs), multicast to a
cluster, descriptor fetch and prefetch. Shared to shared bulk copies (no global sectors) take
only the engine time. Units: SM cycles, bytes, 32-byte sectors, ps at the memory interface.
"""

from __future__ import annotations

import numpy as np

from models.sm_memory import (  # noqa: F401  (the engine's constants live with the loop)
    CHUNK_SECTORS,
    SECTOR_BYTES,
    TMA_EXTRA_LATENCY_CYCLES,
    TMA_ISSUE_CYCLES,
    tma_window,
)
from simulator.framework.engine import Clock

TMA_BYTES_PER_CLK = 128


class TmaEngine:
    """The TMA unit of SM `sm_id` (see the module docstring)."""

    __slots__ = ("sm_id", "memory", "clock", "bytes_per_clk", "free_cycle")

    def __init__(self, sm_id: int, memory, clock: Clock,
                 bytes_per_clk: int = TMA_BYTES_PER_CLK) -> None:
        self.sm_id = sm_id
        self.memory = memory
        self.clock = clock
        self.bytes_per_clk = bytes_per_clk
        self.free_cycle = 0

    def issue(self, cycle: int, store: bool, sectors: np.ndarray,
              policy: np.ndarray | None = None) -> int:
        """Cycle at which a message issued at `cycle` has completed (data in place);
        `policy`: its instruction's cache-policy row (`.L2::cache_hint`)."""
        n = int(sectors.size)
        per = self.bytes_per_clk
        start, self.free_cycle = tma_window(cycle, self.free_cycle, n, per)
        done = self.free_cycle
        clock, kind = self.clock, "store" if store else "bulk_load"
        for first in range(0, n, CHUNK_SECTORS):
            at = start + first * SECTOR_BYTES // per
            done_ps = self.memory.access(self.sm_id, kind, sectors[first:first + CHUNK_SECTORS],
                                         clock.edge_ps(at), 1, policy)
            done = max(done, clock.ps_to_cycles(done_ps - 1) + 1)
        return done + TMA_EXTRA_LATENCY_CYCLES
