"""A traced kernel ready to time: per-event arrays in the SM loop's dtypes, the per-pc table
of its timings and per-CTA issue counts (`KernelImage`).

What it models
--------------
Nothing by itself: it lays an `isa.trace_format.WarpTrace` and its `models.units.InstrTiming`s
out as the arrays `models.sm_core` runs on (`models.sm_state` `P_*` columns for the pcs) and
counts, per CTA and unit, the warp-instructions and initiation-interval cycles its events
issue (every event of a CTA issues exactly once, so `models.sm` fires `SM_ISSUE` from these
when the CTA finishes). Units: warp-instructions, cycles, sectors.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np

from isa.trace_format import KIND_NAMES, SECTOR_KINDS, WarpTrace
from models import jit_cache
from models import sm_state as st
from models.units import UNIT_NAMES, InstrTiming, fused_count, scoreboard_board


def _pc_table(timings: list[InstrTiming], pc_policy: np.ndarray | None
              ) -> tuple[np.ndarray, np.ndarray]:
    """(per-pc `P_*` rows, flat register list) of the timings: the scoreboard registers
    (sources then destinations, once each, without those it does not wait for; a wgmma's
    sources only) and the destinations; a fused run's row (`models.units.fused_timing`)
    has none and points at its first pc (`P_FIRST`, -1 for the others); from `P_POLICY` on,
    the trace's cache-policy row of the pc (`WarpTrace.pc_policy`, zeros where none)."""
    table = np.zeros((max(len(timings), 1), st.P_FIELDS), np.int64)
    if pc_policy is not None:
        rows = min(len(pc_policy), len(table))
        table[:rows, st.P_POLICY:] = pc_policy[:rows]
    flat: list[int] = []
    for p, t in enumerate(timings):
        board = scoreboard_board(t)
        lo = len(flat)
        flat.extend(board)
        mid = len(flat)
        flat.extend(t.destinations)
        table[p, :st.P_POLICY] = (t.unit, t.interval_cycles, t.latency_cycles, t.action,
                                  t.count, lo, mid, mid, len(flat), t.first_pc)
    return table, np.array(flat or [0], np.int64)


@nb.njit(cache=True)
def _cta_counts(offsets, pc, kind, detail, unit, interval, weight, sized, warps_per_cta,
                n_ctas, n_units):
    """(warp-instructions and initiation-interval cycles per CTA and unit, the largest
    sector count of an event whose kind is `sized`) over a trace's events; an event of pc
    `p` stands for `weight[p]` warp-instructions (a fused run's length, else 1)."""
    issued = np.zeros((n_ctas, n_units), np.int64)
    busy = np.zeros((n_ctas, n_units), np.int64)
    largest = 0
    for w in range(offsets.size - 1):
        c = w // warps_per_cta
        for e in range(offsets[w], offsets[w + 1]):
            p = pc[e]
            issued[c, unit[p]] += weight[p]
            busy[c, unit[p]] += interval[p] * weight[p]
            if sized[kind[e]] and detail[e] > largest:
                largest = detail[e]
    return issued, busy, largest


@dataclass(frozen=True)
class KernelImage:
    """A traced kernel ready to time: per-event arrays, per-pc timings, per-CTA issue counts.

    `pcs` / `regs` are the per-pc table of `models.sm_state` (`P_*` columns); `ev_*` the
    trace's per-event pc, kind, detail and phase slot in the loop's dtypes;
    `cta_issued[c]` / `cta_busy_cycles[c]` are CTA `c`'s warp-instructions and
    initiation-interval cycles per unit.
    """

    trace: WarpTrace
    timings: list[InstrTiming]
    n_registers: int

    def __post_init__(self) -> None:
        jit_cache.ensure_fresh()          # the first compiled call of a timing run follows
        trace, n_units = self.trace, len(UNIT_NAMES)
        setattr_ = object.__setattr__
        pcs, regs = _pc_table(self.timings, trace.pc_policy)
        setattr_(self, "pcs", pcs)
        setattr_(self, "regs", regs)
        setattr_(self, "ev_pc", np.ascontiguousarray(trace.pc, np.int32))
        setattr_(self, "ev_kind", np.ascontiguousarray(trace.kind, np.int8))
        setattr_(self, "ev_detail", np.ascontiguousarray(trace.detail, np.int32))
        slots = trace.phase_slot
        setattr_(self, "ev_slot", np.ascontiguousarray(
            slots if slots is not None else np.zeros(0), np.int32))
        events = trace.slot_events
        setattr_(self, "slot_events", np.ascontiguousarray(
            events if events is not None else np.zeros(0), np.int64))
        setattr_(self, "offsets", np.ascontiguousarray(trace.warp_offsets, np.int64))
        setattr_(self, "ev_sstart", np.ascontiguousarray(trace.sector_start, np.int64))
        setattr_(self, "ev_sectors", np.ascontiguousarray(trace.sectors, np.int64))
        unit = np.array([t.unit for t in self.timings] or [0], dtype=np.int64)
        interval = np.array([t.interval_cycles for t in self.timings] or [0], dtype=np.int64)
        weight = np.array([fused_count(t) for t in self.timings] or [1], dtype=np.int64)
        sized = np.zeros(len(KIND_NAMES), np.bool_)
        sized[list(SECTOR_KINDS)] = True
        issued, busy, max_sectors = _cta_counts(
            self.offsets, self.ev_pc, self.ev_kind, self.ev_detail, unit, interval, weight,
            sized, trace.warps_per_cta, trace.n_ctas, n_units)
        setattr_(self, "cta_issued", issued)
        setattr_(self, "cta_busy_cycles", busy)
        setattr_(self, "max_sectors", int(max_sectors))
