"""Tracers that turn SM and memory hooks into stats (issued instructions, stalls, bytes, occupancy).

What it models
--------------
`SmTracer` listens to every SM's hooks: per unit the issued warp-instructions and busy cycles
(sum of initiation intervals; over all SMs and sub-partitions), per stall reason the
scheduler cycles without an issue, and the resident-warp integral over time from CTA launch
and completion (for achieved occupancy). `MemoryTracer` listens to the memory's
`MEMORY_ACCESS` hook: requests and bytes at the L2 and at HBM, per access kind.

Left out: per-SM breakdowns (all SMs are summed) and time series (`models.timeline_tracer`
has both). Units: count, cycles, B, warp-cycles.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from models.flat_memory import MEMORY_ACCESS
from models.sm import SM_CTA_DONE, SM_CTA_LAUNCH, SM_CTA_LOG, SM_ISSUE, SM_STALL
from models.sm_state import T_CTA, T_CYCLE, T_DONE, T_KIND
from models.units import UNIT_NAMES
from simulator.framework.stats import Stat, Tracer


class SmTracer(Tracer):
    """Issue, stall and residency stats of all SMs."""

    STATS = (
        Stat("issued", "count", "warp-instructions issued to the unit"),
        Stat("busy_cycles", "cycles", "sub-partition cycles the unit could not accept work"),
        Stat("stall_cycles", "cycles", "scheduler cycles without an issue, by reason"),
        Stat("resident_warp_cycles", "warp-cycles", "integral of resident warps over time"),
        Stat("ctas", "count", "CTAs run"),
    )
    POSITIONS = (SM_ISSUE, SM_STALL, SM_CTA_LAUNCH, SM_CTA_DONE, SM_CTA_LOG)

    def __init__(self, sheet) -> None:
        super().__init__(sheet)
        self.issued = np.zeros(len(UNIT_NAMES), dtype=np.int64)
        self.busy = np.zeros(len(UNIT_NAMES), dtype=np.int64)
        self.stalls: dict[str, int] = {}
        self.warp_cycles = 0
        self.ctas = 0

    def on_event(self, owner: str, position: str, data: Mapping[str, Any]) -> None:
        """Accumulate one hook event (flushed to the sheet by `flush`)."""
        if position == SM_ISSUE:
            self.issued += data["issued"]
            self.busy += data["busy_cycles"]
        elif position == SM_STALL:
            self._stalls(data["reasons"], data["stalls"])
        elif position == SM_CTA_LOG:
            self._cta_log(data)
        elif position == SM_CTA_LAUNCH:
            self.warp_cycles -= data["warps"] * data["cycle"]
            self.ctas += 1
        else:
            self.warp_cycles += data["warps"] * data["cycle"]

    def _stalls(self, reasons, stalls: np.ndarray) -> None:
        for reason, n in zip(reasons, stalls.sum(axis=0).tolist(), strict=True):
            if n:
                self.stalls[reason] = self.stalls.get(reason, 0) + n

    def _cta_log(self, data: Mapping[str, Any]) -> None:
        """An `SM_CTA_LOG` batch: the sums of its events."""
        log = data["log"]
        done = log[:, T_KIND] == T_DONE
        ctas = log[done, T_CTA]
        if ctas.size:
            self.issued += data["issued"][ctas].sum(axis=0)
            self.busy += data["busy_cycles"][ctas].sum(axis=0)
        if data["stalls"].size:
            self._stalls(data["reasons"], data["stalls"])
        launched = ~done
        self.warp_cycles += (data["warps_done"] * int(log[done, T_CYCLE].sum())
                             - data["warps_launch"] * int(log[launched, T_CYCLE].sum()))
        self.ctas += int(np.count_nonzero(launched))

    def flush(self) -> None:
        """Write the accumulated values to the sheet."""
        for k, name in enumerate(UNIT_NAMES):
            if self.issued[k]:
                self.sheet.set(f"sm.units.{name}", "issued", int(self.issued[k]))
                self.sheet.set(f"sm.units.{name}", "busy_cycles", int(self.busy[k]))
        for reason in sorted(self.stalls):
            self.sheet.set(f"sm.scheduler.{reason}", "stall_cycles", self.stalls[reason])
        self.sheet.set("sm", "resident_warp_cycles", self.warp_cycles)
        self.sheet.set("sm", "ctas", self.ctas)


class MemoryTracer(Tracer):
    """Requests and bytes at each memory level."""

    STATS = (
        Stat("requests", "count", "warp-level memory requests"),
        Stat("sectors", "count", "32-byte sectors requested"),
        Stat("bytes", "B", "bytes moved at this level"),
    )
    POSITIONS = (MEMORY_ACCESS,)

    def on_event(self, owner: str, position: str, data: Mapping[str, Any]) -> None:
        """One warp's access: count it at the L2 and, for first touches, at HBM."""
        kind = data["kind"]
        self.sheet.add(f"memory.l2.{kind}", "requests")
        self.sheet.add(f"memory.l2.{kind}", "sectors", data["sectors"])
        self.sheet.add(f"memory.l2.{kind}", "bytes", data["l2_bytes"])
        if data["hbm_bytes"]:
            self.sheet.add(f"memory.hbm.{kind}", "bytes", data["hbm_bytes"])
