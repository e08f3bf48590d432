"""Time plots: per-SM utilization heatmap, bandwidth per level over time, workload Gantt.

The time-resolved plots read a long `timeline` DataFrame with columns `end_us`,
`component`, `stat`, `value` (`KernelResult.timeline`, written by `models.timeline_tracer`,
has these and more): each row is a sample over the interval ending at the point in time
`end_us` (from `start_us`, or the previous sample's end, or 0). They use
rows with component `sm.<index>` and stat `utilization` (busy fraction) for the heatmap,
and rows with component `memory.<level>` and stat `bandwidth_gbps` (or `bytes` moved in the
interval ending at `end_us`) for the bandwidth plot, which draws each level's peak from
`peaks` (`models.roofline.chip_peaks`: `hbm_gbps`, `l2_gbps`) as a dashed line when given.
When such rows are absent the functions return None and `missing_reason` says why;
nothing is made up.
The Gantt reads the kernel table (`kernel`, `stream`, `start_us`, `end_us`).
Left out: interactive zoom, CTA-level timelines (see the Chrome trace).
Units: microseconds, fractions, GB/s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from reports.plot_kernels import new_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

TIMELINE_COLUMNS = ("end_us", "component", "stat", "value")


def _has_timeline(timeline) -> bool:
    return isinstance(timeline, pd.DataFrame) and set(TIMELINE_COLUMNS) <= set(timeline.columns)


def sm_utilization_series(timeline) -> pd.DataFrame:
    """SM index x sample end -> busy fraction (empty when the timeline has none)."""
    if not _has_timeline(timeline):
        return pd.DataFrame()
    rows = timeline[timeline["component"].astype(str).str.fullmatch(r"sm\.\d+")
                    & (timeline["stat"] == "utilization")]
    if rows.empty:
        return pd.DataFrame()
    sm = rows["component"].str.removeprefix("sm.").astype(int)
    return rows.assign(sm=sm).pivot_table(index="sm", columns="end_us", values="value",
                                          aggfunc="mean").sort_index()


def bandwidth_series(timeline) -> pd.DataFrame:
    """Sample end x memory level -> GB/s (empty when the timeline has none)."""
    if not _has_timeline(timeline):
        return pd.DataFrame()
    rows = timeline[timeline["component"].astype(str).str.fullmatch(r"memory\.\w+")]
    direct = rows[rows["stat"] == "bandwidth_gbps"]
    if not direct.empty:
        return direct.assign(level=direct["component"].str.removeprefix("memory.")).pivot_table(
            index="end_us", columns="level", values="value", aggfunc="sum").sort_index()
    moved = rows[rows["stat"] == "bytes"]
    if moved.empty:
        return pd.DataFrame()
    per_level = moved.assign(level=moved["component"].str.removeprefix("memory.")).pivot_table(
        index="end_us", columns="level", values="value", aggfunc="sum").sort_index()
    times = per_level.index.to_numpy(float)
    width_us = np.diff(np.concatenate([[0.0], times]))
    return per_level.div(np.where(width_us > 0, width_us, np.nan) * 1e3, axis=0)


def missing_reason(what: str) -> str:
    """The note a report shows in place of a time plot that has no data."""
    return (f"{what}: not drawn. The result carries no time series for it (the stats "
            "table sums counters over the whole run and no `timeline` table with per-SM or "
            "per-level samples was given), so there is nothing to plot over time.")


def plot_sm_heatmap(timeline) -> Figure | None:
    """Heatmap of busy fraction per SM (rows) over time (columns)."""
    grid = sm_utilization_series(timeline)
    if grid.empty:
        return None
    fig = new_figure((7.0, 4.0))
    ax = fig.subplots()
    times = grid.columns.to_numpy(float)
    image = ax.imshow(grid.to_numpy(float), aspect="auto", origin="lower", vmin=0, vmax=1,
                      extent=(0.0, float(times.max()), -0.5, len(grid) - 0.5),
                      interpolation="nearest")
    fig.colorbar(image, ax=ax, label="busy fraction")
    ax.set_xlabel("time (us)")
    ax.set_ylabel("SM")
    ax.set_title("Per-SM utilization over time")
    return fig


def plot_bandwidth(timeline, peaks: Mapping[str, float] | None = None) -> Figure | None:
    """Bandwidth per memory level over time, with each level's peak from `peaks`
    (`chip_peaks`: `<level>_gbps`) as a dashed line where given."""
    series = bandwidth_series(timeline)
    if series.empty:
        return None
    fig = new_figure((7.0, 3.6))
    ax = fig.subplots()
    edges = np.concatenate([[0.0], series.index.to_numpy(float)])
    for k, level in enumerate(series.columns):
        name = str(level).upper()
        ax.stairs(series[level].to_numpy(float), edges, label=name, color=f"C{k % 10}")
        peak = float((peaks or {}).get(f"{level}_gbps", np.nan))
        if np.isfinite(peak):
            ax.axhline(peak, color=f"C{k % 10}", linestyle="--", linewidth=0.8,
                       label=f"{name} peak")
    ax.set_xlabel("time (us)")
    ax.set_ylabel("GB/s")
    ax.set_title("Bandwidth per level over time")
    ax.legend(fontsize="small")
    return fig


def kernel_lane(row) -> str:
    """The lane a kernel row is drawn on: its stream, and its micro-batch where the table
    has one (`compute mb0` beside `comm mb0`), so each micro-batch's communication shows
    beside its computation."""
    stream = str(row["stream"]) if pd.notna(row.get("stream")) else "default"
    batch = row.get("micro_batch")
    return f"{stream} {batch}" if isinstance(batch, str) and batch else stream


def plot_gantt(table: pd.DataFrame) -> Figure | None:
    """Kernels as bars on one row per lane (stream, and micro-batch where given), from start
    to end."""
    needed = {"kernel", "stream", "start_us", "end_us"}
    if not needed <= set(table.columns):
        return None
    rows = table.dropna(subset=["start_us", "end_us"])
    if rows.empty:
        return None
    lanes = [kernel_lane(row) for _, row in rows.iterrows()]
    order = list(dict.fromkeys(lanes))     # first appearance, grouped by micro-batch
    streams = sorted(order, key=lambda lane: (lane.partition(" ")[2], order.index(lane)))
    fig = new_figure((8.0, 1.2 + 0.6 * len(streams)))
    ax = fig.subplots()
    colours = [f"C{k % 10}" for k in range(len(rows))]
    for k, (_, row) in enumerate(rows.iterrows()):
        lane = streams.index(lanes[k])
        start, end = float(row["start_us"]), float(row["end_us"])
        ax.barh(lane, end - start, left=start, height=0.6, color=colours[k], edgecolor="k",
                linewidth=0.3)
        if end > start:
            ax.text(start + (end - start) / 2, lane, str(row["kernel"]), ha="center",
                    va="center", fontsize="xx-small", clip_on=True)
    ax.set_yticks(range(len(streams)), streams)
    ax.set_xlabel("time (us)")
    ax.set_title("Kernels by stream" + (" and micro-batch" if len(streams) > len(
        set(rows["stream"].fillna("default").astype(str))) else ""))
    ax.invert_yaxis()
    return fig
