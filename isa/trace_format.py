"""The trace format: what a traced warp-instruction tells the timing model, and `WarpTrace`.

What it models
--------------
A run of a kernel under a trace recorder (`simulator.trace.TraceRecorder`, an observer of
`isa.run_kernel`) yields one event per warp-instruction: its pc, active lanes, a kind
(`KIND_*`) and a detail whose meaning depends on the kind:

* `SECTOR_KINDS` (global loads, stores, atomics, loads that skip the L1, bulk/TMA copies):
  the number of distinct 32-byte sectors it touches (sector index = byte address >>
  `SECTOR_SHIFT`), the sectors themselves listed in `WarpTrace.sectors`;
* `KIND_SHARED`: the bank-conflict degree;
* `KIND_CONST` (param/const loads): 0; `KIND_NONE` (no memory access): 0, or an extension
  op's data-dependent detail (`isa.event_detail`);
* `KIND_MBARRIER` / `KIND_MBARRIER_WAIT`: 0; the event's barrier phase slot is in
  `WarpTrace.phase_slot`.

Traced local addresses live from `LOCAL_TRACE_BASE` on, above every buffer and window.
`WarpTrace` holds the events of every warp of a launch grouped by warp; `models` times it,
`simulator` records, samples and synthesizes it. This module holds only the format, so
that both may import it.

Left out: how the events are recorded (`simulator.trace`). Units: byte addresses, 32-byte
sectors, lanes, counts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SECTOR_SHIFT = 5
LOCAL_TRACE_BASE = 1 << 56
"""Where traced local addresses live: far above global buffers, apart from every window."""

(KIND_NONE, KIND_LOAD, KIND_STORE, KIND_ATOMIC, KIND_SHARED, KIND_CONST, KIND_BULK_LOAD,
 KIND_BULK_STORE, KIND_MBARRIER, KIND_MBARRIER_WAIT, KIND_LOAD_CG) = range(11)
KIND_NAMES = ("none", "load", "store", "atomic", "shared", "const", "bulk_load", "bulk_store",
              "mbarrier", "mbarrier_wait", "load_cg")
SECTOR_KINDS = frozenset({KIND_LOAD, KIND_STORE, KIND_ATOMIC, KIND_BULK_LOAD, KIND_BULK_STORE,
                          KIND_LOAD_CG})
_SECTOR_KIND_CODES = np.array(sorted(SECTOR_KINDS), np.int8)


def sector_events(kind: np.ndarray, detail: np.ndarray) -> np.ndarray:
    """Which events carry sectors in `WarpTrace.sectors`: global accesses and TMA/bulk
    copies (`SECTOR_KINDS`) whose `detail` (their sector count) is positive."""
    return np.isin(kind, _SECTOR_KIND_CODES) & (detail > 0)


@dataclass(frozen=True)
class WarpTrace:
    """Dynamic instruction streams of every warp of a launch, grouped by warp.

    Events of warp `w` are `warp_offsets[w]:warp_offsets[w + 1]`; for event `e`, `pc[e]`,
    `active[e]` (lanes), `kind[e]` (a `KIND_*`), `detail[e]` (sector count for
    `SECTOR_KINDS`, bank-conflict degree for shared, else 0), for sector kinds
    `sectors[sector_start[e]:sector_start[e] + detail[e]]`, and `phase_slot[e]` (mbarrier
    phase slot of tile-op events, with `slot_events[slot]` contributions per slot; for a
    global atomic the most of its lanes that update one address
    (`simulator.trace_lanes.lane_depth`), which the L2 serializes; else -1).
    """

    warps_per_cta: int
    n_ctas: int
    warp_offsets: np.ndarray
    pc: np.ndarray
    active: np.ndarray
    kind: np.ndarray
    detail: np.ndarray
    sector_start: np.ndarray
    sectors: np.ndarray
    phase_slot: np.ndarray | None = None
    slot_events: np.ndarray | None = None
    fused_runs: tuple[tuple[int, int], ...] = ()

    @property
    def n_warps(self) -> int:
        """Warps of the launch (including warps that executed nothing)."""
        return self.warps_per_cta * self.n_ctas

    @property
    def n_events(self) -> int:
        """Recorded events (warp-instructions, a fused run counting once)."""
        return int(self.pc.size)

    def events_of(self, warp: int) -> slice:
        """The event range of global warp `warp`."""
        return slice(int(self.warp_offsets[warp]), int(self.warp_offsets[warp + 1]))
