"""Time series of one kernel run: per-SM issue utilization and bytes per memory level over time.

What it models
--------------
`TimelineTracer` listens to the SMs' hooks and the cached memory's hook and sums, into time
buckets of equal width (SM cycles), what the stats table sums over the whole run:

* per SM: issue slots (sub-partitions x cycles while a CTA is resident, from
  `SM_CTA_LAUNCH`/`SM_CTA_DONE`), stalled slots (`SM_STALL`: the scheduler cycles without an
  issue fired at cycle `cycle` cover the cycles since the SM's previous firing, and are
  spread evenly over them) and resident CTA-cycles;
* per memory level: bytes of each request (`CACHED_MEMORY_ACCESS` counts, the same sums as
  `CachedMemoryTracer`: L1 = sectors requested, L2 = L1 misses, L3 = sectors looked up
  there, HBM = sectors read + written back), placed at the request's completion time.
  Completions are paced by the level that served them (an HBM read completes a fixed
  latency after its line crossed the channel's bus), but the bytes of requests that finish
  together (tile loads waiting on all their sectors, write-backs counted at the miss that
  evicted them) can land in one short bucket: qkv_proj 128x2304x768 fp16 on h800_sxm
  showed 19.9 TB/s of L2 in 35 ns buckets against a 13.0 TB/s peak, SwiGLU 4096x2048 3.9
  TB/s of HBM in 140 ns buckets against 3.35. Given the levels' peaks
  (`level_peaks_gbps`), `frame()` keeps each level within its peak: a bucket's bytes
  beyond peak x bucket duration moved before they completed, so they go to the buckets
  before (`simulator.framework.stats.within_peak`: the latest schedule the peak allows; totals
  unchanged). (Spreading each request's bytes over its issue-to-completion time instead
  reads 2x the HBM peak at the start of SwiGLU: requests queued behind each other all
  count from their common issue.)

Buckets start `INITIAL_BUCKET_CYCLES` wide; when the run outgrows `CAPACITY_BUCKETS` of them,
neighbours are summed pairwise and the width doubles (sums stay exact). `frame()` then sums
groups of buckets so that at most `max_buckets` remain and returns the long time-series
table `TIMELINE_COLUMNS` = (run_id, kernel, start_us, end_us, component, stat, value,
unit), one row per bucket (from `start_us` to `end_us`: points in time from the kernel's
start, as a workload's `start_us`/`end_us`; a duration is always a `time_us`) and series:

    component   stat            unit      value
    sm.<id>     utilization     fraction  issued slots / (sub-partitions x bucket cycles)
    sm.<id>     ctas            count     mean resident CTAs over the bucket
    sm          utilization     fraction  mean of the SMs' utilization (SMs of the kernel)
    memory.<l>  bytes           B         bytes moved at level l (l1, l2, l3, hbm)
    memory.<l>  bandwidth_gbps  GB/s      bytes / bucket duration

and one row per CTA (not a bucket: `start_us`/`end_us` are its launch and completion on
the SM), the first `MAX_CTA_ROWS` CTAs to complete (by completion cycle):

    sm.<id>     cta_span        index     the CTA's linear index in the grid

Issued slots per SM are resident slots minus stalled slots, clipped to [0, 1] of the
bucket; summed over SMs and buckets they equal the warp-instructions issued (each issue takes
one scheduler slot), up to the even spreading of stalls inside a firing interval.

Left out: the flat memory (its hook carries no time; no memory rows then), stall reasons
over time (the stats table has them per kernel), per-unit series. A sampled
run's timeline covers the simulated waves only. Units: SM cycles inside, microseconds,
fractions, bytes and GB/s in the table.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numba as nb
import numpy as np
import pandas as pd

from models import cached_memory_layout as ck
from models.cached_memory import CACHED_MEMORY_ACCESS, CACHED_MEMORY_BATCH
from models.sm import SM_CTA_DONE, SM_CTA_LAUNCH, SM_CTA_LOG, SM_STALL, cta_log_steps
from models.sm_state import T_DONE
from simulator.framework.stats import within_peak

TIMELINE_COLUMNS = ("run_id", "kernel", "start_us", "end_us", "component", "stat", "value",
                    "unit")
INITIAL_BUCKET_CYCLES = 64
CAPACITY_BUCKETS = 1024
DEFAULT_MAX_BUCKETS = 100
MAX_CTA_ROWS = 50_000
LEVELS = ("l1", "l2", "l3", "hbm")
_MEMORY_CHUNK = 4096
_LEVEL_COUNTS = ((ck.C_SECTORS,), (ck.C_L1_MISS,), (ck.C_L3_HIT, ck.C_L3_MISS),
                 (ck.C_HBM_READ, ck.C_HBM_WRITE))
_LEVEL_COLUMNS = np.array([list(c) + [-1] * (2 - len(c)) for c in _LEVEL_COUNTS], np.int64)


@nb.njit(cache=True)
def _widen(data, width, cycle, span_end):
    """`TimeBuckets.fit` on (data, width)."""
    rows, capacity = data.shape
    while cycle > capacity * width or (not span_end and cycle == capacity * width):
        merged = np.zeros_like(data)
        for r in range(rows):
            for b in range(capacity // 2):
                merged[r, b] = data[r, 2 * b] + data[r, 2 * b + 1]
        data = merged
        width *= 2
    return data, width


@nb.njit(cache=True)
def _add_span(data, width, row, start, end, amount):
    """`TimeBuckets.add_span` on (data, width), the same arithmetic in the same order."""
    if end <= start:
        data, width = _widen(data, width, start, False)
        data[row, int(start // width)] += amount
        return data, width
    data, width = _widen(data, width, end, True)
    first, last = int(start // width), int(math.ceil(end / width)) - 1
    if first == last:
        data[row, first] += amount
        return data, width
    rate = amount / (end - start)
    data[row, first] += rate * ((first + 1) * width - start)
    for b in range(first + 1, last):
        data[row, b] += rate * width
    data[row, last] += rate * (end - last * width)
    return data, width


@nb.njit(cache=True)
def _add_spans(data, width, row, starts, ends, amounts):
    """`TimeBuckets.add_span` over arrays, the same arithmetic in the same order."""
    for i in range(starts.size):
        data, width = _add_span(data, width, row, starts[i], ends[i], amounts[i])
    return data, width


@nb.njit(cache=True)
def _residency_spans(data, width, slots_row, ctas_row, since, cycle, slots, cta_cycles):
    """`TimelineTracer._residency`'s two `add_span` calls (issue slots, then CTA-cycles)."""
    data, width = _add_span(data, width, slots_row, since, cycle, slots)
    return _add_span(data, width, ctas_row, since, cycle, cta_cycles)


@nb.njit(cache=True)
def _stall_windows(data, width, row, at, stalls, start, end, pending):
    """`TimelineTracer._stalls` (`end` -1: no firing yet): the same windows, each closed one
    added by `add_span` in turn; returns (data, width, start, end, pending)."""
    for i in range(at.size):
        cycle = at[i]
        if cycle != end:
            closed = max(end, 0)
            if pending:
                data, width = _add_span(data, width, row, start, closed, pending)
                pending = 0
            start, end = closed, cycle
        for j in range(stalls.shape[1]):
            pending += stalls[i, j]
    return data, width, start, end, pending


@nb.njit(cache=True)
def _add_bytes(data, row0, index, counts, columns, sector_bytes):
    """`np.add.at` of each level's bytes (sectors in `counts[:, columns[k]]`, -1: none) into
    row `row0 + k`, request by request in order as `np.add.at` adds them."""
    for k in range(columns.shape[0]):
        row = row0 + k
        for i in range(index.size):
            sectors = 0
            for c in columns[k]:
                if c >= 0:
                    sectors += counts[i, c]
            data[row, index[i]] += np.float64(sectors) * sector_bytes


class TimeBuckets:
    """Rows of sums over equal time buckets that double in width when time runs past them."""

    def __init__(self, rows: int, width_cycles: int = INITIAL_BUCKET_CYCLES,
                 capacity: int = CAPACITY_BUCKETS) -> None:
        if capacity < 2 or capacity % 2:
            raise ValueError(f"capacity {capacity}: accepted an even number >= 2")
        self.width_cycles = width_cycles
        self.data = np.zeros((rows, capacity))

    def fit(self, cycle: float, *, span_end: bool = False) -> None:
        """Widen the buckets until `cycle` falls inside them (or, for the exclusive end of a
        span, until it is at most their end)."""
        data = self.data
        rows, capacity = data.shape
        while cycle > capacity * self.width_cycles or (
                not span_end and cycle == capacity * self.width_cycles):
            merged = data.reshape(rows, capacity // 2, 2).sum(axis=2)
            data = np.zeros_like(data)
            data[:, :capacity // 2] = merged
            self.width_cycles *= 2
        self.data = data

    def add_span(self, row: int, start: float, end: float, amount: float) -> None:
        """Spread `amount` evenly over cycles [start, end) (all at `start` when empty)."""
        if end <= start:
            self.fit(start)
            self.data[row, int(start // self.width_cycles)] += amount
            return
        self.fit(end, span_end=True)
        width = self.width_cycles
        first, last = int(start // width), int(math.ceil(end / width)) - 1
        if first == last:
            self.data[row, first] += amount
            return
        rate = amount / (end - start)
        line = self.data[row]
        line[first] += rate * ((first + 1) * width - start)
        line[first + 1:last] += rate * width
        line[last] += rate * (end - last * width)

    def add_spans(self, row: int, starts: np.ndarray, ends: np.ndarray,
                  amounts: np.ndarray) -> None:
        """`add_span` for each (start, end, amount) in turn (int64 arrays), compiled."""
        self.data, self.width_cycles = _add_spans(self.data, self.width_cycles, row, starts,
                                                  ends, amounts)

    def add_at(self, row: int, cycles: np.ndarray, amounts: np.ndarray) -> None:
        """Add `amounts[i]` at time `cycles[i]`, all into one row."""
        if cycles.size == 0:
            return
        self.fit(float(cycles.max()))
        index = (cycles // self.width_cycles).astype(np.int64)
        np.add.at(self.data[row], index, amounts)

    def summed(self, end_cycle: float, max_buckets: int) -> tuple[np.ndarray, float]:
        """(rows x buckets sums, bucket width in cycles) covering [0, end_cycle) and every
        bucket holding data, at most `max_buckets` buckets."""
        self.fit(end_cycle, span_end=True)
        used = np.flatnonzero(self.data.any(axis=0))
        n = max(int(math.ceil(end_cycle / self.width_cycles)), 1,
                int(used[-1]) + 1 if used.size else 0)
        group = max(int(math.ceil(n / max_buckets)), 1)
        n_out = int(math.ceil(n / group))
        padded = np.zeros((self.data.shape[0], n_out * group))
        padded[:, :n] = self.data[:, :n]
        return padded.reshape(-1, n_out, group).sum(axis=2), self.width_cycles * group


class TimelineTracer:
    """Per-SM and per-level time series of one run (see the module docstring).

    `level_peaks_gbps` (level -> GB/s, e.g. from `reports.chip_peaks`: hbm, l2) keeps each
    level's bytes per bucket within its peak; levels without one are left as completed.
    `sm_ids` are the SMs the kernel runs on; attach with `attach_sm(hooks, sm_id)` for each
    and `attach_memory(hooks)` for the memory; after the run `frame(run_id, kernel, cycles)`
    gives the table.
    """

    def __init__(self, sm_ids, subpartitions: int, clock_ghz: float,
                 max_buckets: int = DEFAULT_MAX_BUCKETS,
                 level_peaks_gbps: Mapping[str, float] | None = None) -> None:
        if max_buckets < 1:
            raise ValueError(f"max_buckets {max_buckets}: accepted an integer >= 1")
        self.sm_ids = [int(s) for s in sm_ids]
        self.row_of = {sm_id: row for row, sm_id in enumerate(self.sm_ids)}
        self.n_sms = n_sms = len(self.sm_ids)
        self.subpartitions = subpartitions
        self.cycles_per_ps = clock_ghz / 1000.0
        self.cycles_per_us = clock_ghz * 1000.0
        self.max_buckets = max_buckets
        self.level_peaks_gbps = dict(level_peaks_gbps or {})
        # rows: slots, stalled slots and CTA-cycles per SM, then bytes per level
        self.buckets = TimeBuckets(3 * n_sms + len(LEVELS))
        self.resident = [0] * n_sms
        self.changed_cycle = [0] * n_sms
        self.window_end: list[int | None] = [None] * n_sms
        self.window_start = [0] * n_sms
        self.pending_stall = [0] * n_sms
        self.mem_done_ps: list[int] = []
        self.cta_launch: dict[int, int] = {}
        self.cta_spans: list[tuple[int, int, int, int]] = []
        self.mem_counts: list[np.ndarray] = []

    # -- attaching ------------------------------------------------------------------
    def attach_sm(self, hooks, sm_id: int) -> None:
        """Observe SM `sm_id` (its CTA launches and completions, its stall firings)."""
        row = self.row_of[sm_id]

        def on_sm(owner: str, position: str, data: Mapping[str, Any]) -> None:
            if position == SM_STALL:
                self._stalls(row, data["cycles"], data["stalls"])
            elif position == SM_CTA_LAUNCH:
                self._launched(row, data["cta"], data["cycle"])
            elif position == SM_CTA_DONE:
                self._done(row, data["cta"], data["cycle"])
            elif position == SM_CTA_LOG:       # its events in order, without the hooks' calls
                self._cta_log(row, data)

        hooks.attach(on_sm, (SM_STALL, SM_CTA_LAUNCH, SM_CTA_DONE, SM_CTA_LOG))

    def attach_memory(self, hooks) -> None:
        """Observe the cached memory's requests (kept in chunks, summed per chunk)."""
        done, keep_done, keep_counts = self.mem_done_ps, self.mem_done_ps.append, \
            self.mem_counts.append

        def on_memory(owner: str, position: str, data: Mapping[str, Any]) -> None:
            if position == CACHED_MEMORY_BATCH:
                self._add_memory(data["done_ps"], data["counts"])
                return
            keep_done(data["done_ps"])
            keep_counts(data["counts"])
            if len(done) >= _MEMORY_CHUNK:
                self._drain_memory()

        hooks.attach(on_memory, (CACHED_MEMORY_ACCESS, CACHED_MEMORY_BATCH))

    # -- events ---------------------------------------------------------------------
    def _cta_log(self, s: int, data: Mapping[str, Any]) -> None:
        """An `SM_CTA_LOG` batch (`cta_log_steps`): the stall rows before each CTA that
        logged them, then the CTA's completion or launch."""
        cycles, stalls = data["cycles"], data["stalls"]
        for kind, cta, cycle, first, end in cta_log_steps(data):
            if end > first:
                self._stalls(s, cycles[first:end], stalls[first:end])
            if kind == T_DONE:
                self._done(s, cta, cycle)
            else:
                self._launched(s, cta, cycle)

    def _launched(self, s: int, cta: int, cycle: int) -> None:
        self.cta_launch[cta] = cycle
        self._residency(s, cycle, 1)

    def _done(self, s: int, cta: int, cycle: int) -> None:
        self.cta_spans.append((cycle, s, cta, self.cta_launch.pop(cta)))
        if len(self.cta_spans) >= 2 * MAX_CTA_ROWS:
            self._first_spans()
        self._residency(s, cycle, -1)

    def _residency(self, s: int, cycle: int, step: int) -> None:
        resident, since = self.resident[s], self.changed_cycle[s]
        if resident:
            span = cycle - since
            buckets = self.buckets
            buckets.data, buckets.width_cycles = _residency_spans(
                buckets.data, buckets.width_cycles, s, 2 * self.n_sms + s, since, cycle,
                self.subpartitions * span, resident * span)
        elif self.window_end[s] is None:
            self.window_end[s] = cycle
        self.resident[s], self.changed_cycle[s] = resident + step, cycle

    def _stalls(self, s: int, at: np.ndarray, stalls: np.ndarray) -> None:
        """Stall cycles `stalls[i].sum()` fired at cycle `at[i]`: each covers the cycles since
        the SM's previous firing (its window); the windows they close are added in one
        compiled call, the last stays open for firings at the same cycle."""
        end = self.window_end[s]
        buckets = self.buckets
        buckets.data, buckets.width_cycles, start, end, pending = _stall_windows(
            buckets.data, buckets.width_cycles, self.n_sms + s, at, stalls,
            self.window_start[s], -1 if end is None else end, self.pending_stall[s])
        self.window_start[s], self.pending_stall[s] = start, pending
        self.window_end[s] = None if end < 0 else end

    def _close_window(self, s: int) -> None:
        if self.pending_stall[s]:
            self.buckets.add_span(self.n_sms + s, self.window_start[s], self.window_end[s] or 0,
                                  self.pending_stall[s])
            self.pending_stall[s] = 0

    def _drain_memory(self) -> None:
        if not self.mem_done_ps:
            return
        self._add_memory(np.asarray(self.mem_done_ps), np.stack(self.mem_counts))
        self.mem_done_ps.clear()
        self.mem_counts.clear()

    def _add_memory(self, done_ps: np.ndarray, counts: np.ndarray) -> None:
        """Bytes per level of requests done at `done_ps` (counts: one row per request)."""
        if done_ps.size == 0:
            return
        cycles = done_ps.astype(np.float64) * self.cycles_per_ps
        buckets = self.buckets
        buckets.fit(float(cycles.max()))
        index = (cycles // buckets.width_cycles).astype(np.int64)
        _add_bytes(buckets.data, 3 * self.n_sms, index, counts, _LEVEL_COLUMNS,
                   ck.SECTOR_BYTES_ASSUMED)

    # -- the table ------------------------------------------------------------------
    def frame(self, run_id: str, kernel: str, cycles: int) -> pd.DataFrame:
        """The time-series table of the run up to `cycles` (see the module docstring)."""
        for s in range(self.n_sms):
            self._close_window(s)
            if self.resident[s]:
                self._residency(s, max(cycles, self.changed_cycle[s]), 0)
        self._drain_memory()
        sums, width = self.buckets.summed(max(cycles, 1), self.max_buckets)
        n = self.n_sms
        slots_per_bucket = self.subpartitions * width
        busy = np.clip((sums[:n] - sums[n:2 * n]) / slots_per_bucket, 0.0, 1.0)
        ctas = sums[2 * n:3 * n] / width
        edges_us = np.arange(sums.shape[1] + 1) * width / self.cycles_per_us
        duration_us = np.diff(edges_us)
        moved = np.array([within_peak(sums[3 * n + k],
                                      self.level_peaks_gbps.get(level, math.inf)
                                      * duration_us * 1e3)
                          for k, level in enumerate(LEVELS)])
        ids = self.sm_ids
        series = [(f"sm.{ids[r]}", "utilization", "fraction", busy[r]) for r in range(n)]
        series += [(f"sm.{ids[r]}", "ctas", "count", ctas[r]) for r in range(n)]
        series.append(("sm", "utilization", "fraction", busy.mean(axis=0)))
        if self.buckets.data[3 * n:].any():
            for k, level in enumerate(LEVELS):
                series.append((f"memory.{level}", "bytes", "B", moved[k]))
                series.append((f"memory.{level}", "bandwidth_gbps", "GB/s",
                               moved[k] / (duration_us * 1e3)))
        buckets = _long_table(run_id, kernel, edges_us, series)
        if not self.cta_spans:
            return buckets
        return pd.concat([buckets, self._cta_table(run_id, kernel)], ignore_index=True)

    def _first_spans(self) -> None:
        """Keep the spans of the `MAX_CTA_ROWS` CTAs that finished first (by completion
        cycle, then SM row and CTA: hooks of CTAs launched inside the compiled driver come
        in batches, not in completion order across SMs)."""
        self.cta_spans.sort()
        del self.cta_spans[MAX_CTA_ROWS:]

    def _cta_table(self, run_id: str, kernel: str) -> pd.DataFrame:
        self._first_spans()
        done = np.array(self.cta_spans, dtype=np.float64).reshape(-1, 4)
        spans = done[:, [1, 2, 3, 0]]
        ids = np.array(self.sm_ids, dtype=np.int64)[spans[:, 0].astype(np.int64)]
        return pd.DataFrame({
            "run_id": run_id, "kernel": kernel,
            "start_us": spans[:, 2] / self.cycles_per_us,
            "end_us": spans[:, 3] / self.cycles_per_us,
            "component": np.array([f"sm.{i}" for i in ids], dtype=object),
            "stat": "cta_span", "value": spans[:, 1], "unit": "index",
        }, columns=list(TIMELINE_COLUMNS))


def _long_table(run_id: str, kernel: str, edges_us: np.ndarray, series: list) -> pd.DataFrame:
    m = edges_us.size - 1
    components = np.repeat([c for c, _, _, _ in series], m)
    return pd.DataFrame({
        "run_id": run_id, "kernel": kernel,
        "start_us": np.tile(edges_us[:-1], len(series)),
        "end_us": np.tile(edges_us[1:], len(series)),
        "component": components.astype(object),
        "stat": np.repeat([s for _, s, _, _ in series], m).astype(object),
        "value": np.concatenate([np.asarray(v, dtype=np.float64) for _, _, _, v in series]),
        "unit": np.repeat([u for _, _, u, _ in series], m).astype(object),
    }, columns=list(TIMELINE_COLUMNS))


def empty_timeline() -> pd.DataFrame:
    """A time-series table with the standard columns and no rows."""
    return pd.DataFrame({c: pd.Series(dtype="float64" if c in ("start_us", "end_us", "value")
                                      else "object") for c in TIMELINE_COLUMNS})
