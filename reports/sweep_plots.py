"""Sweep plots from a `load_sweep` table: metric lines over one axis, heatmaps over two,
per-category time bars per point.

`plot_sweep_lines(df, x, y)` draws `y` against `x`, one line per value of the other swept
axes (or of `hue` when given); `plot_sweep_heatmap(df, x, y, value)` draws `value` over the
grid of `x` and `y` values; `plot_sweep_categories(df)` stacks each point's kernel time by
category (`gemm_time_us`, `attention_time_us`, ... of an op, layer or step sweep), one bar
per point labelled by its axis values. Only points with `status == "ok"` are drawn; points
that share a line and an x (or a cell) are averaged (`aggfunc`). All return a
`matplotlib.figure.Figure` drawn on an Agg canvas: no pyplot state, no window, nothing
shown; save with `fig.savefig(path)`.
Left out: error bars across seeds, interactive plots, log colour scales.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure


def _figure(figsize: tuple[float, float]) -> Figure:
    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _ok_rows(df: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"no column {missing[0]!r} in the sweep table; columns are: "
                         + ", ".join(map(str, df.columns)))
    rows = df[df["status"] == "ok"] if "status" in df.columns else df
    if rows.empty:
        raise ValueError("the sweep table has no finished (status ok) points to plot")
    return rows


def _hue_columns(df: pd.DataFrame, x: str, hue: str | Sequence[str] | None) -> list[str]:
    if hue is not None:
        return [hue] if isinstance(hue, str) else list(hue)
    axes = df.attrs.get("axes", [])
    return [a for a in axes if a != x and a in df.columns and df[a].nunique(dropna=False) > 1]


def _spans_decades(values: pd.Series) -> bool:
    v = pd.to_numeric(values, errors="coerce").dropna()
    return bool(len(v) and (v > 0).all() and v.max() / v.min() >= 100)


def plot_sweep_lines(df: pd.DataFrame, x: str, y: str, *,
                     hue: str | Sequence[str] | None = None, aggfunc: str = "mean",
                     logx: bool | None = None, title: str | None = None) -> Figure:
    """`y` over `x`, a line per combination of the other swept axes (or of `hue`)."""
    hues = _hue_columns(df, x, hue)
    rows = _ok_rows(df, [x, y, *hues])
    fig = _figure((6.4, 4.2))
    ax = fig.subplots()
    groups = rows.groupby(hues, sort=True, dropna=False) if hues else [((), rows)]
    for key, group in groups:
        line = group.groupby(x, sort=True)[y].agg(aggfunc)
        keys = key if isinstance(key, tuple) else (key,)
        label = ", ".join(f"{h}={v}" for h, v in zip(hues, keys, strict=True)) or y
        ax.plot(line.index, line.to_numpy(dtype=float, na_value=np.nan), marker="o",
                label=label)
    if logx if logx is not None else _spans_decades(rows[x]):
        ax.set_xscale("log")
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(title or f"{df.attrs.get('sweep', 'sweep')}: {y} vs {x}")
    ax.grid(True, alpha=0.3)
    if hues:
        ax.legend(fontsize="small")
    return fig


def plot_sweep_heatmap(df: pd.DataFrame, x: str, y: str, value: str, *, aggfunc: str = "mean",
                       annotate: bool | None = None, title: str | None = None) -> Figure:
    """`value` over the (`x`, `y`) grid; cells with several points show their `aggfunc`."""
    rows = _ok_rows(df, [x, y, value])
    table = rows.pivot_table(index=y, columns=x, values=value, aggfunc=aggfunc).sort_index()
    table = table.sort_index(axis=1)
    grid = table.to_numpy(dtype=float, na_value=np.nan)
    fig = _figure((1.0 + 0.9 * max(len(table.columns), 4), 1.0 + 0.6 * max(len(table), 4)))
    ax = fig.subplots()
    image = ax.imshow(np.ma.masked_invalid(grid), origin="lower", aspect="auto",
                      cmap="viridis")
    ax.set_xticks(range(len(table.columns)), [str(c) for c in table.columns],
                  rotation=45 if len(table.columns) > 6 else 0)
    ax.set_yticks(range(len(table.index)), [str(i) for i in table.index])
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_title(title or f"{df.attrs.get('sweep', 'sweep')}: {value}")
    fig.colorbar(image, ax=ax, label=value)
    if annotate if annotate is not None else grid.size <= 100:
        middle = np.nanmean(grid) if np.isfinite(grid).any() else 0.0
        for (i, j), v in np.ndenumerate(grid):
            if np.isfinite(v):
                ax.text(j, i, f"{v:.4g}", ha="center", va="center", fontsize="small",
                        color="black" if v > middle else "white")
    return fig


CATEGORY_COLUMNS = ("gemm_time_us", "attention_time_us", "comm_time_us", "norm_time_us",
                    "elementwise_time_us", "other_time_us")
"""The per-category kernel times of an op, layer or step point (`simulator.app.points`)."""


def _point_label(row: pd.Series, axes: Sequence[str]) -> str:
    return ", ".join(f"{a}={row[a]}" for a in axes) or str(row.get("index", ""))


def plot_sweep_categories(df: pd.DataFrame, *, title: str | None = None) -> Figure:
    """Each point's kernel time stacked by category, one bar per point (sweep order)."""
    rows = _ok_rows(df, list(CATEGORY_COLUMNS))
    axes = [a for a in df.attrs.get("axes", []) if a in rows.columns]
    fig = _figure((1.6 + 0.7 * max(len(rows), 4), 4.6))
    ax = fig.subplots()
    bottom = np.zeros(len(rows))
    for column in CATEGORY_COLUMNS:
        values = rows[column].to_numpy(dtype=float, na_value=np.nan)
        ax.bar(range(len(rows)), values, bottom=bottom,
               label=column.removesuffix("_time_us"))
        bottom += np.nan_to_num(values)
    labels = [_point_label(row, axes) for _, row in rows.iterrows()]
    ax.set_xticks(range(len(rows)), labels, rotation=30 if len(rows) > 3 else 0, ha="right"
                  if len(rows) > 3 else "center", fontsize="small")
    ax.set_ylabel("kernel time (us)")
    ax.set_title(title or f"{df.attrs.get('sweep', 'sweep')}: kernel time by category")
    ax.legend(fontsize="small")
    ax.grid(True, axis="y", alpha=0.3)
    return fig
