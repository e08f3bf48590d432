"""Chrome / Perfetto trace (Trace Event Format, JSON object form) from result tables.

`chrome_trace(table, timeline=None, title=...)` returns a dict `{"traceEvents": [...],
"displayTimeUnit": "ns", "otherData": {...}}` that chrome://tracing and ui.perfetto.dev
open. Kernels are "X" (complete) events with `ts`/`dur` in microseconds (`dur` = the
table's `time_us`: what the kernel costs its stream, launch overhead included, so a
workload's kernels tile their streams; `args` carry `kernel_time_us`, the profiler's
duration, and `cycles`), one thread per stream of one process (the GPU), named by "M"
metadata events (`process_name`, `thread_name`; a workload's micro-batches get a thread
per stream and micro-batch, `reports.plot_timeline.kernel_lane`). A kernel table without
`start_us` (one simulated kernel) places kernels back to back from 0 on a `default` stream. From a
`timeline` table (see `reports.plot_timeline`) come "C" counter events: bandwidth per
memory level (GB/s), the mean SM utilization (component `sm`), utilization and resident
CTAs per SM (components `sm.<id>`, stats `utilization`, `ctas`); without one there are no
counters. A counter holds its value until the next one, so each sample is placed at the
start of its interval (`start_us`, or the previous sample's `end_us`). Timeline rows with
stat `cta_span` (a CTA's launch `start_us` and completion `end_us` on SM `<id>`) become
"X" slices in a third process, on one thread per CTA slot of each SM (CTAs resident at
once get different slots, so the slices of a thread never overlap).
Left out: warp-level slices, flow events between dependent kernels.
Units: microseconds (the format's unit for `ts` and `dur`), GB/s, counts.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from reports.plot_timeline import TIMELINE_COLUMNS, bandwidth_series, kernel_lane

GPU_PID = 1
COUNTER_PID = 2
SM_PID = 3
SLOTS_PER_SM = 1000   # thread id of an SM's CTA slot: sm * SLOTS_PER_SM + slot
KERNEL_ARGS = ("op", "cycles", "kernel_time_us", "flops", "achieved_tflops", "hbm_bytes",
               "bound", "roofline_us", "roofline_gap", "achieved_occupancy")


def _scalar(value: Any) -> Any:
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _metadata(pid: int, tid: int, kind: str, name: str) -> dict:
    return {"ph": "M", "name": kind, "pid": pid, "tid": tid, "ts": 0, "args": {"name": name}}


def _kernel_events(table: pd.DataFrame) -> tuple[list[dict], list[str]]:
    streams: list[str] = []
    events: list[dict] = []
    clock = 0.0
    has_start = "start_us" in table.columns and table["start_us"].notna().any()
    for _, row in table.iterrows():
        stream = kernel_lane(row)
        if stream not in streams:
            streams.append(stream)
        dur = float(row["time_us"]) if pd.notna(row.get("time_us")) else 0.0
        start = float(row["start_us"]) if has_start and pd.notna(row["start_us"]) else clock
        clock = max(clock, start + dur)
        args = {k: _scalar(row[k]) for k in KERNEL_ARGS if k in row.index and pd.notna(row[k])}
        events.append({"ph": "X", "name": str(row["kernel"]), "cat": "kernel",
                       "pid": GPU_PID, "tid": streams.index(stream) + 1, "ts": start,
                       "dur": dur, "args": args})
    return events, streams


def _counter_events(timeline) -> list[dict]:
    if not (isinstance(timeline, pd.DataFrame) and set(TIMELINE_COLUMNS) <= set(timeline)):
        return []
    events = []
    bandwidth = bandwidth_series(timeline)
    starts = [0.0, *map(float, bandwidth.index[:-1])]
    for at_us, (_, row) in zip(starts, bandwidth.iterrows(), strict=True):
        events.append({"ph": "C", "name": "bandwidth GB/s", "pid": COUNTER_PID, "tid": 0,
                       "ts": at_us,
                       "args": {str(k): _scalar(v) or 0.0 for k, v in row.items()}})
    components = timeline["component"].astype(str)
    per_sm = components.str.fullmatch(r"sm\.\d+")
    utilization = timeline["stat"] == "utilization"
    series = [((components == "sm") & utilization, "SM utilization", "utilization"),
              (per_sm & utilization, "utilization {}", "utilization"),
              (per_sm & (timeline["stat"] == "ctas"), "CTAs {}", "ctas")]
    for mask, name, key in series:
        rows = timeline[mask]
        for comp, at_us, value in zip(rows["component"], _sample_starts(rows),
                                      rows["value"], strict=True):
            events.append({"ph": "C", "name": name.format(comp), "pid": COUNTER_PID, "tid": 0,
                           "ts": at_us, "args": {key: _scalar(value) or 0.0}})
    return events


def _sample_starts(rows: pd.DataFrame) -> list[float]:
    """When each sample's value starts to hold: `start_us`, else the previous sample's end."""
    if "start_us" in rows.columns and rows["start_us"].notna().all():
        return [float(t) for t in rows["start_us"]]
    previous = rows.groupby("component")["end_us"].shift(1).fillna(0.0)
    return [float(t) for t in previous]


def _cta_events(timeline) -> tuple[list[dict], list[dict]]:
    """(thread-name metadata, one X slice per CTA row of the timeline). CTAs resident at
    once on an SM go to separate slot threads (first free slot), so slices on one thread
    never overlap."""
    if not (isinstance(timeline, pd.DataFrame) and set(TIMELINE_COLUMNS) <= set(timeline)
            and "start_us" in timeline.columns):
        return [], []
    rows = timeline[(timeline["stat"] == "cta_span")
                    & timeline["component"].astype(str).str.fullmatch(r"sm\.\d+")]
    rows = rows.assign(sm=rows["component"].str.removeprefix("sm.").astype(int))
    names, slices = [], []
    for sm, group in rows.sort_values(["sm", "start_us", "value"], kind="stable").groupby("sm"):
        slot_free: list[float] = []
        for start, end, cta in zip(group["start_us"], group["end_us"], group["value"],
                                   strict=True):
            start, end = float(start), max(float(end), float(start))
            slot = next((k for k, free in enumerate(slot_free) if free <= start), None)
            if slot is None:
                slot = len(slot_free)
                slot_free.append(end)
                names.append(_metadata(SM_PID, sm * SLOTS_PER_SM + slot, "thread_name",
                                       f"SM {sm} slot {slot}"))
            slot_free[slot] = end
            slices.append({"ph": "X", "name": f"CTA {int(cta)}", "cat": "cta", "pid": SM_PID,
                           "tid": sm * SLOTS_PER_SM + slot, "ts": start, "dur": end - start,
                           "args": {"sm": sm, "slot": slot}})
    return names, slices


def chrome_trace(table: pd.DataFrame, timeline=None, *, title: str = "ptxsim") -> dict:
    """The trace as a JSON-ready dict (see the module docstring)."""
    kernels, streams = _kernel_events(table)
    events = [_metadata(GPU_PID, 0, "process_name", f"{title} GPU")]
    events += [_metadata(GPU_PID, k + 1, "thread_name", f"stream {s}")
               for k, s in enumerate(streams)]
    counters = _counter_events(timeline)
    if counters:
        events.append(_metadata(COUNTER_PID, 0, "process_name", f"{title} counters"))
    sm_names, ctas = _cta_events(timeline)
    if ctas:
        events.append(_metadata(SM_PID, 0, "process_name", f"{title} SMs (CTAs)"))
    events += sm_names + kernels + counters + ctas
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"producer": "ptxsim reports", "kernels": len(kernels),
                          "counters": len(counters), "ctas": len(ctas)}}
