"""Per-kernel plots from the kernel table: roofline, stall stacks, unit utilization bars.

Each function takes the table of `reports.kernel_table.kernel_table` (and, for the roofline,
the peaks of `reports.roofline.chip_peaks`) and returns a `matplotlib.figure.Figure` on an
Agg canvas (no pyplot state, nothing shown), or None when the table holds nothing to draw.
Left out: interactive plots, per-SM breakdowns (the stats sum over SMs).
Units: FLOP/B, TFLOP/s, fractions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from reports.kernel_table import STALL_COLUMNS, UNITS
from reports.roofline import ridge_point_flops_per_byte

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def new_figure(figsize: tuple[float, float]) -> Figure:
    """A figure with an Agg canvas and constrained layout."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # at first use: ~0.6 s
    from matplotlib.figure import Figure
    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _labels(table: pd.DataFrame) -> list[str]:
    return [str(k) for k in table["kernel"]]


def plot_roofline(table: pd.DataFrame, peaks: Mapping[str, float]) -> Figure | None:
    """Log-log roofline: compute roofs per peak used, HBM and L2 memory roofs, every kernel
    at (FLOP per HBM byte, achieved TFLOP/s)."""
    rows = table[(table["flops"] > 0) & (table["hbm_bytes"] > 0) & (table["time_us"] > 0)]
    hbm = peaks.get("hbm_gbps", np.nan)
    if rows.empty or not np.isfinite(hbm):
        return None
    fig = new_figure((6.8, 4.6))
    ax = fig.subplots()
    x = rows["intensity_flops_per_byte"].to_numpy(float)
    roofs = sorted({(name, float(peak)) for name, peak
                    in zip(rows["compute_peak"], rows["peak_tflops"], strict=True)
                    if np.isfinite(peak)}, key=lambda r: r[1])
    top = max((p for _, p in roofs), default=1.0)
    lo = min(x.min() / 4, ridge_point_flops_per_byte(roofs[0][1], hbm) / 8 if roofs else 0.1)
    hi = max(x.max() * 4, ridge_point_flops_per_byte(top, hbm) * 8)
    grid = np.geomspace(max(lo, 1e-3), hi, 200)
    for bw, name, style in ((hbm, "HBM", "-"), (peaks.get("l2_gbps", np.nan), "L2", ":")):
        if np.isfinite(bw):
            ax.plot(grid, np.minimum(grid * bw / 1e3, top), style, color="k",
                    label=f"{name} {bw / 1e3:.2f} TB/s")
    for name, peak in roofs:
        ax.axhline(peak, linestyle="--", linewidth=1, label=f"{name} {peak:.1f} TFLOP/s")
    for label, xi, yi, bound in zip(_labels(rows), x, rows["achieved_tflops"], rows["bound"],
                                    strict=True):
        ax.plot(xi, yi, "o", color="tab:red" if bound == "memory" else "tab:blue")
        ax.annotate(label, (xi, yi), textcoords="offset points", xytext=(4, 4),
                    fontsize="x-small")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / HBM byte)")
    ax.set_ylabel("achieved TFLOP/s")
    ax.set_title("Roofline (red: memory-bound, blue: compute-bound)")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize="x-small", loc="lower right")
    return fig


def plot_stall_stacks(table: pd.DataFrame) -> Figure | None:
    """Stacked bars: share of scheduler stall cycles by reason, one bar per kernel."""
    cols = [f"stall_{s}_frac" for s in STALL_COLUMNS]
    rows = table[table[cols].notna().any(axis=1)]
    if rows.empty:
        return None
    fig = new_figure((max(4.0, 1.0 + 0.6 * len(rows)), 4.0))
    ax = fig.subplots()
    bottom = np.zeros(len(rows))
    pos = np.arange(len(rows))
    for reason, col in zip(STALL_COLUMNS, cols, strict=True):
        share = rows[col].fillna(0.0).to_numpy(float)
        ax.bar(pos, share, bottom=bottom, label=reason)
        bottom += share
    ax.set_xticks(pos, _labels(rows), rotation=30, ha="right", fontsize="small")
    ax.set_ylabel("share of stall cycles")
    ax.set_ylim(0, 1)
    ax.set_title("Stall breakdown")
    ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def plot_unit_utilization(table: pd.DataFrame) -> Figure | None:
    """Grouped bars: busy fraction of each unit that did any work, per kernel."""
    cols = [f"util_{u}" for u in UNITS if table[f"util_{u}"].fillna(0).gt(0).any()]
    if not cols:
        return None
    fig = new_figure((max(5.0, 1.5 + 0.5 * len(cols) * len(table)), 4.0))
    ax = fig.subplots()
    width = 0.8 / len(table)
    pos = np.arange(len(cols))
    for k, (label, (_, row)) in enumerate(zip(_labels(table), table.iterrows(), strict=True)):
        ax.bar(pos + k * width, row[cols].fillna(0.0).to_numpy(float), width, label=label)
    ax.set_xticks(pos + width * (len(table) - 1) / 2, [c.removeprefix("util_") for c in cols])
    ax.set_ylabel("busy cycles / (cycles x SMs x sub-partitions)")
    ax.set_title("Unit utilization")
    if len(table) <= 12:
        ax.legend(fontsize="x-small")
    return fig
