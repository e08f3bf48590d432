"""Per-kernel plots from the kernel table: roofline, stall stacks, unit-utilization heatmap.

Each function takes the table of `reports.kernel_table.kernel_table` (and, for the roofline,
the peaks of `models.roofline.chip_peaks`) and returns a `matplotlib.figure.Figure` on an
Agg canvas (no pyplot state, nothing shown), or None when the table holds nothing to draw.
Legible at any kernel count: figures are capped at `MAX_FIGURE_INCHES`; the stall stacks and
the utilization heatmap keep the `MAX_KERNELS` longest kernels (`time_us`) and say so in
their title; the roofline names only the `LABELLED_POINTS` longest.
Left out: interactive plots, per-SM breakdowns (the stats sum over SMs).
Units: FLOP/B, TFLOP/s, fractions.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from models.roofline import ridge_point_flops_per_byte
from reports.kernel_table import STALL_COLUMNS, UNITS

if TYPE_CHECKING:
    from matplotlib.figure import Figure


MAX_KERNELS = 40          # rows of a per-kernel plot; the longest kernels are kept
MAX_FIGURE_INCHES = 12.0  # width and height cap of the per-kernel plots
LABELLED_POINTS = 12      # roofline points annotated with their name (the longest kernels)


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
    labelled = set(rows["time_us"].nlargest(LABELLED_POINTS).index)
    for index, label, xi, yi, bound in zip(rows.index, _labels(rows), x,
                                           rows["achieved_tflops"], rows["bound"], strict=True):
        ax.plot(xi, yi, "o", color="tab:red" if bound == "memory" else "tab:blue")
        if index in labelled:
            ax.annotate(_short(label, 24), (xi, yi), textcoords="offset points",
                        xytext=(4, 4), fontsize="x-small")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP / roofline byte)")
    ax.set_ylabel("achieved TFLOP/s")
    named = "" if len(rows) <= LABELLED_POINTS else f"; the {LABELLED_POINTS} longest named"
    ax.set_title(f"Roofline (red: memory-bound, blue: compute-bound{named})",
                 fontsize="medium")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize="x-small", loc="lower right")
    return fig


def plot_stall_stacks(table: pd.DataFrame) -> Figure | None:
    """Stacked bars: share of scheduler stall cycles by reason, one bar per kernel."""
    cols = [f"stall_{s}_frac" for s in STALL_COLUMNS]
    rows = table[table[cols].notna().any(axis=1)]
    if rows.empty:
        return None
    rows, left_out = top_kernels(rows)
    fig = new_figure((min(MAX_FIGURE_INCHES, max(4.0, 1.0 + 0.3 * len(rows))), 4.0))
    ax = fig.subplots()
    bottom = np.zeros(len(rows))
    pos = np.arange(len(rows))
    for reason, col in zip(STALL_COLUMNS, cols, strict=True):
        share = rows[col].fillna(0.0).to_numpy(float)
        ax.bar(pos, share, bottom=bottom, label=reason)
        bottom += share
    ax.set_xticks(pos, [_short(k) for k in _labels(rows)], rotation=60, ha="right",
                  fontsize="x-small" if len(rows) > 12 else "small")
    ax.set_ylabel("share of stall cycles")
    ax.set_ylim(0, 1)
    ax.set_title("Stall breakdown" + left_out, fontsize="medium")
    ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def top_kernels(table: pd.DataFrame, limit: int = MAX_KERNELS) -> tuple[pd.DataFrame, str]:
    """The `limit` rows of `table` with the longest `time_us` (in table order), and a title
    suffix saying what was left out ("" when nothing was)."""
    if len(table) <= limit:
        return table, ""
    time = table["time_us"] if "time_us" in table else pd.Series(0.0, index=table.index)
    keep = time.fillna(0.0).nlargest(limit).index
    return table.loc[table.index.isin(keep)], f" (longest {limit} of {len(table)} kernels)"


def plot_unit_utilization(table: pd.DataFrame) -> Figure | None:
    """Heatmap of kernels x units: busy fraction of each unit that did any work, one row
    per kernel (the `MAX_KERNELS` longest when there are more), a colorbar from 0 to the
    largest value and each cell's value as a percentage."""
    cols = [f"util_{u}" for u in UNITS if table[f"util_{u}"].fillna(0).gt(0).any()]
    if not cols:
        return None
    rows, left_out = top_kernels(table)
    values = rows[cols].fillna(0.0).to_numpy(float)
    top = max(float(values.max()), 1e-12)
    fig = new_figure((min(MAX_FIGURE_INCHES, 3.5 + 0.75 * len(cols)),
                      min(MAX_FIGURE_INCHES, max(3.6, 1.6 + 0.3 * len(rows)))))
    ax = fig.subplots()
    image = ax.imshow(values, aspect="auto", cmap="viridis", vmin=0.0, vmax=top,
                      interpolation="nearest")
    ax.set_xticks(np.arange(len(cols)), [c.removeprefix("util_") for c in cols],
                  rotation=30, ha="right", fontsize="small")
    ax.set_yticks(np.arange(len(rows)), [_short(k) for k in _labels(rows)], fontsize="x-small")
    for (r, c), value in np.ndenumerate(values):
        ax.text(c, r, _percent(value), ha="center", va="center", fontsize="xx-small",
                color="white" if value < top / 2 else "black")
    bar = fig.colorbar(image, ax=ax)
    bar.set_label("busy fraction: busy cycles /\n(cycles x SMs x sub-partitions)",
                  fontsize="small")
    ax.set_title("Unit utilization" + left_out, fontsize="medium")
    return fig


def _short(label: str, width: int = 36) -> str:
    return label if len(label) <= width else label[:width - 1] + "\u2026"


def _percent(fraction: float) -> str:
    """A busy fraction as a percentage with two significant figures ("" for zero)."""
    if fraction <= 0:
        return ""
    return f"{100 * fraction:.2g}%"
