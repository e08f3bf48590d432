"""The trace format: what a traced warp-instruction tells the timing model, and `WarpTrace`.

What it models
--------------
A run of a kernel under a trace recorder (`simulator.runner.trace.TraceRecorder`, an observer of
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

Cache policies (`isa.semantics.cache_policy`) are a property of the instruction: its
qualifiers (`.L1::no_allocate`, `.L1::evict_first`, `.L2::256B`, ...) and the value of its
`.L2::cache_hint` policy operand the first time it runs (first executing lane). So the trace
keeps one row per pc, `WarpTrace.pc_policy` (`POLICY_FIELDS` int64: a packed code and, for
a range policy, its bounds in sectors), not a field per event: events synthesized from
traced ones share their pcs and so their policies. A policy register is uniform in the
kernels we know (CUTLASS passes constants; DeepGEMM and DeepEP build it once from
immediates); a pc whose later executions carry another value keeps its first. The code
(`policy_row`, `policy_code`): bits 0-1 the primary L2 eviction class (`L2_*`), 2-3 the
secondary class, 4-8 the primary share in sixteenths of the lines (a fractional policy; a
line's class follows a hash of its number), 9-10 the L1 mode (`L1_*`), 11-12 a
maintenance op (`OP_*`), 13-15 the L2 fetch size (`FETCH_*`), bit 16 set for a range
policy: lines from sector `lo` to `mid` take the primary class, from `mid` to `hi` the
secondary, others `L2_UNCHANGED`. A pc without a row (code 0) has the caches' default:
allocate in L1 and L2, an L2 hit keeps the line's class.

Traced local addresses live from `LOCAL_TRACE_BASE` on, above every buffer and window.
`WarpTrace` holds the events of every warp of a launch grouped by warp; `models` times it,
`simulator` records, samples and synthesizes it. This module holds only the format, so
that both may import it.

Left out: how the events are recorded (`simulator.runner.trace`). Units: byte addresses, 32-byte
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


# -- cache policies (module docstring) ---------------------------------------------------
L2_UNCHANGED, L2_NORMAL, L2_FIRST, L2_LAST = range(4)
"""L2 eviction classes an access gives a line: keep its class (a new line: normal; also
the default of an access without a policy), normal, evict first, evict last."""
L1_ALLOCATE, L1_NO_ALLOCATE, L1_EVICT_FIRST = range(3)
"""L1 modes of a load: allocate (LRU), leave the L1 unchanged, allocate as the LRU victim."""
OP_ACCESS, OP_DISCARD, OP_APPLY_PRIORITY = range(3)
"""What the request does at the L2: an access, `discard.global.L2` (drop the line, no
write-back), `applypriority.global.L2::evict_normal` (give a held line the primary class)."""
FETCH_SECTOR, FETCH_64B, FETCH_128B, FETCH_256B = range(4)
"""L2 fetch size of a load's miss: its sectors, aligned 64 B, the line, the 256-byte pair."""
POLICY_CODE, POLICY_LO, POLICY_MID, POLICY_HI, POLICY_FIELDS = range(5)
SECONDARY_SHIFT, SHARE_SHIFT, L1_SHIFT, OP_SHIFT, FETCH_SHIFT, RANGE_SHIFT = 2, 4, 9, 11, 13, 16
SHARE_WHOLE = 16
_FETCH_CODES = {0: FETCH_SECTOR, 32: FETCH_SECTOR, 64: FETCH_64B, 128: FETCH_128B,
                256: FETCH_256B}


def policy_code(primary: int, secondary: int, sixteenths: int, l1: int, op: int,
                fetch_bytes: int, ranged: bool) -> int:
    """The packed code of a policy row (module docstring)."""
    return (primary | secondary << SECONDARY_SHIFT | sixteenths << SHARE_SHIFT
            | l1 << L1_SHIFT | op << OP_SHIFT | _FETCH_CODES[fetch_bytes] << FETCH_SHIFT
            | int(ranged) << RANGE_SHIFT)


def policy_row(primary: int, secondary: int, sixteenths: int, l1: int, op: int,
               fetch_bytes: int, lo: int = -1, mid: int = -1, hi: int = -1) -> np.ndarray:
    """A `pc_policy` row: the code, then the range bounds in sectors (-1: not a range)."""
    code = policy_code(primary, secondary, sixteenths, l1, op, fetch_bytes, lo >= 0)
    return np.array([code, lo, mid, hi], np.int64)


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
    (`simulator.runner.trace_lanes.lane_depth`), which the L2 serializes; else -1).
    `pc_policy[pc]` is the cache-policy row of a program pc (module docstring); None when
    no instruction applies one, and pcs past its rows apply none.
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
    pc_policy: np.ndarray | None = None

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
