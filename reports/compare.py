"""Simulated vs measured: per-kernel errors, MAPE, Pearson r, per-category sums, a scatter plot
and a side-by-side timeline.

Reads the table of `workloads.traces.reference_ops.simulate_reference` (one row per
reference kernel: `name`, `category`, `op`, `kind`, `sizes`, `dur_us` measured,
`simulated_us`, `status`, `reason`, `mapped_by`, and `stream`/`start_us` when the trace has
them) and builds:

* `kernel_errors(df)`: per kernel `measured_us`, `simulated_us` and
  `error_pct` = 100 (simulated - measured) / measured (NaN where not simulated, and for a
  zero-length activity, which has no relative error: the MAPE leaves it out);
* `error_summary(df)`: kernels, simulated kernels, `coverage` (share of the measured time
  in simulated kernels), `mape_pct` (mean |error_pct| over simulated kernels), `pearson_r`
  of measured vs simulated (NaN with fewer than two kernels or a constant column), the
  measured and simulated sums over simulated kernels and their `total_error_pct`;
* `category_summary(df)`: per category (`unmatched` for kernels nothing mapped) its kernels,
  its `share` of the measured time, its `coverage` (the share of its own measured time
  simulated), the sums and the MAPE of its simulated kernels;
* `unsimulated(df)`: the kernels not simulated, grouped by name, status and reason (why
  the operators and the kernel-name rules gave no op, or what the builder refused),
  longest first;
* `baseline_summary(df, costs)`: the figures a regression baseline stores (the above,
  overall and per category, and each distinct op's simulated time and CPU cost), and
  `regression_failures(now, stored, points)`: where coverage dropped or MAPE rose by more
  than `points`;
* `stream_summary(df)`: the measured busy time per stream, their union, overlap and span
  (`workloads.traces.overlap`; how much communication hid behind compute in the trace);
* `timeline_lanes(df)`: per stream a measured lane (each kernel at its measured start) and
  a simulated lane (the same kernels in the same order, each at its simulated duration,
  the measured idle gaps between consecutive kernels of the stream kept; a kernel not
  simulated keeps its measured duration and is marked so);
* `plot_scatter(df)`: log-log simulated vs measured, coloured by category, with y = x and
  a +-25 % band; `plot_timeline(df)`: the two lanes of each stream one above the other;
  `write_compare(df, DIR)` writes all of them (CSV, summary.json, scatter.png,
  timeline.png, compare.html) through `reports.output_dir` (staged, committed whole,
  never touching files ptxsim did not write).

Left out: weighting the MAPE by time (the per-category sums show time-weighted error),
confidence intervals, contention between streams in the simulated lane (each kernel is
timed alone). Units: microseconds, percent, fractions.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.patches import Patch

from reports.html_report import Section, render_html
from reports.output_dir import write_output_dir
from reports.plot_kernels import new_figure
from simulator.framework.config import strict_json
from workloads.traces.overlap import stream_overlap

KERNEL_ERROR_COLUMNS = ("name", "category", "op", "kind", "sizes", "stream", "start_us",
                        "measured_us", "simulated_us", "error_pct", "status", "mapped_by",
                        "reason")
CATEGORY_COLUMNS = ("category", "kernels", "simulated", "dur_us", "share", "coverage",
                    "measured_sum_us", "simulated_sum_us", "total_error_pct", "mape_pct")
LANE_COLUMNS = ("stream", "lane", "index", "name", "category", "status", "start_us", "end_us")
UNITS = {"measured_us": "us", "simulated_us": "us", "error_pct": "%", "start_us": "us",
         "mape_pct": "%", "total_error_pct": "%", "coverage": "fraction",
         "measured_sum_us": "us", "simulated_sum_us": "us", "dur_us": "us",
         "share": "fraction", "end_us": "us"}
BAND = 0.25


def kernel_errors(df: pd.DataFrame) -> pd.DataFrame:
    """One row per reference kernel with measured, simulated and error % (module doc)."""
    out = pd.DataFrame({c: df[c] if c in df.columns else None
                        for c in KERNEL_ERROR_COLUMNS if c not in ("measured_us", "error_pct")})
    out["category"] = out["category"].where(out["category"].notna(), "unmatched")
    out["measured_us"] = df["dur_us"].astype(float)
    out["simulated_us"] = pd.to_numeric(df["simulated_us"], errors="coerce").astype(float)
    error = 100.0 * (out["simulated_us"] - out["measured_us"]) / out["measured_us"]
    out["error_pct"] = error.where(out["measured_us"] > 0)   # none for a zero-length activity
    return out[list(KERNEL_ERROR_COLUMNS)].reset_index(drop=True)


def _figures(rows: pd.DataFrame) -> dict:
    measured, simulated = rows["measured_us"], rows["simulated_us"]
    m_sum, s_sum = float(measured.sum()), float(simulated.sum())
    return {"measured_sum_us": m_sum, "simulated_sum_us": s_sum,
            "total_error_pct": 100.0 * (s_sum - m_sum) / m_sum if m_sum else math.nan,
            "mape_pct": float(rows["error_pct"].abs().mean()) if len(rows) else math.nan}


def pearson_r(x, y) -> float:
    """Pearson correlation of two equal-length samples (NaN when undefined)."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    if x.size < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    return float(np.corrcoef(x, y)[0, 1])


def error_summary(df: pd.DataFrame) -> dict:
    """Kernel counts, coverage, MAPE, Pearson r and summed error (module docstring)."""
    table = kernel_errors(df)
    done = table[table["status"] == "simulated"]
    total = float(table["measured_us"].sum())
    return {"kernels": len(table), "simulated": len(done),
            "not_simulated": len(table) - len(done),
            "coverage": float(done["measured_us"].sum()) / total if total else math.nan,
            **_figures(done),
            "pearson_r": pearson_r(done["measured_us"], done["simulated_us"]),
            "status_counts": {k: int(v) for k, v in table["status"].value_counts().items()}}


def category_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Per category: kernels, simulated kernels, measured time, its share of the total, the
    share of it simulated (`coverage`), and the error figures of its simulated kernels."""
    table = kernel_errors(df)
    total = float(table["measured_us"].sum())
    rows = []
    for category, group in table.groupby("category", sort=False):
        done = group[group["status"] == "simulated"]
        dur = float(group["measured_us"].sum())
        rows.append({"category": category, "kernels": len(group), "simulated": len(done),
                     "dur_us": dur, "share": dur / total if total else math.nan,
                     "coverage": float(done["measured_us"].sum()) / dur if dur else math.nan,
                     **_figures(done)})
    out = pd.DataFrame(rows, columns=list(CATEGORY_COLUMNS))
    return out.sort_values("dur_us", ascending=False, kind="stable").reset_index(drop=True)


def unsimulated(df: pd.DataFrame) -> pd.DataFrame:
    """Kernels not simulated: `name`, `status`, `reason`, `count`, `dur_us` (total)."""
    table = kernel_errors(df)
    rest = table[table["status"] != "simulated"]
    out = rest.groupby(["name", "status", "reason"], as_index=False, dropna=False).agg(
        count=("measured_us", "size"), dur_us=("measured_us", "sum"))
    return out.sort_values("dur_us", ascending=False, kind="stable").reset_index(drop=True)


def _finite(value) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def baseline_summary(df: pd.DataFrame, costs: dict | None = None) -> dict:
    """What a regression baseline stores of a compared trace: kernels, coverage, MAPE,
    Pearson r and summed error, the same per category, and each distinct simulated op with
    its simulated time, kernel count and CPU seconds (`costs`, keyed (kind, sizes))."""
    overall = error_summary(df)
    done = df[df["status"] == "simulated"]
    ops = [{"kind": kind, "sizes": json.loads(sizes), "kernels": len(group),
            "simulated_us": float(group["simulated_us"].iloc[0]),
            "cpu_s": round((costs or {}).get((kind, sizes), math.nan), 2)}
           for (kind, sizes), group in done.groupby(["kind", "sizes"], sort=True)]
    return {
        **{k: _finite(overall[k]) for k in ("coverage", "mape_pct", "pearson_r",
                                            "total_error_pct", "measured_sum_us",
                                            "simulated_sum_us")},
        "kernels": int(overall["kernels"]), "simulated": int(overall["simulated"]),
        "categories": {r.category: {"kernels": int(r.kernels), "share": _finite(r.share),
                                    "coverage": _finite(r.coverage),
                                    "mape_pct": _finite(r.mape_pct),
                                    "total_error_pct": _finite(r.total_error_pct)}
                       for r in category_summary(df).itertuples()},
        "ops": ops,
    }


def regression_failures(now: dict, stored: dict, tolerance_points: float) -> list[str]:
    """Where a `baseline_summary` falls behind the stored one: coverage lower or MAPE
    higher by more than `tolerance_points` (percent points), overall or in a category."""
    failures = []
    scopes = [("all kernels", now, stored)]
    scopes += [(f"category {c}", now["categories"].get(c, {}), figures)
               for c, figures in stored["categories"].items()]
    for scope, mine, theirs in scopes:
        coverage = 100 * (mine.get("coverage") or 0.0)
        if coverage < 100 * theirs["coverage"] - tolerance_points:
            failures.append(f"{scope}: coverage {coverage:.1f} % < "
                            f"{100 * theirs['coverage']:.1f} % - {tolerance_points}")
        mape, limit = mine.get("mape_pct"), theirs["mape_pct"]
        if limit is not None and (mape is None or mape > limit + tolerance_points):
            failures.append(f"{scope}: MAPE {mape if mape is None else round(mape, 1)} % > "
                            f"{limit:.1f} % + {tolerance_points}")
    return failures


def stream_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Measured busy time per stream, union, overlap and span: columns `what`, `us`."""

    if not {"stream", "start_us", "dur_us"} <= set(df.columns) or df.empty:
        return pd.DataFrame(columns=["what", "us"])
    return stream_overlap(df).table()


def timeline_lanes(df: pd.DataFrame) -> pd.DataFrame:
    """Per stream, a `measured` and a `simulated` lane of its kernels (module docstring):
    `LANE_COLUMNS`, times from the first kernel's measured start."""
    table = kernel_errors(df)
    if table.empty or table["start_us"].isna().all():
        return pd.DataFrame(columns=list(LANE_COLUMNS))
    origin = float(table["start_us"].min())
    rows = []
    for stream, group in table.sort_values("start_us", kind="stable").groupby("stream"):
        sim_end = measured_end = None
        for index, k in enumerate(group.itertuples()):
            start = float(k.start_us) - origin
            done = k.status == "simulated" and math.isfinite(k.simulated_us)
            length = float(k.simulated_us) if done else float(k.measured_us)
            gap = 0.0 if measured_end is None else max(start - measured_end, 0.0)
            sim_start = start if sim_end is None else sim_end + gap
            rows.append((stream, "measured", index, k.name, k.category, k.status, start,
                         start + float(k.measured_us)))
            rows.append((stream, "simulated", index, k.name, k.category, k.status, sim_start,
                         sim_start + length))
            measured_end = max(measured_end or 0.0, start + float(k.measured_us))
            sim_end = sim_start + length
    return pd.DataFrame(rows, columns=list(LANE_COLUMNS))


def plot_timeline(df: pd.DataFrame, title: str = "Measured and simulated timeline"):
    """Per stream a measured lane above a simulated lane, kernels coloured by category
    (hatched: not simulated, shown at the measured duration); None without start times."""
    lanes = timeline_lanes(df)
    if lanes.empty:
        return None
    streams = list(dict.fromkeys(lanes["stream"]))
    categories = sorted(set(lanes["category"]))
    colour = {c: f"C{k % 10}" for k, c in enumerate(categories)}
    fig = new_figure((11.0, 1.2 + 0.9 * len(streams)))
    ax = fig.subplots()
    labels = []
    for s, stream in enumerate(streams):
        for l, lane in enumerate(("measured", "simulated")):
            y = 2 * s + (1 - l)
            rows = lanes[(lanes["stream"] == stream) & (lanes["lane"] == lane)]
            for category, group in rows.groupby("category"):
                bars = list(zip(group["start_us"], group["end_us"] - group["start_us"],
                                strict=True))
                ax.broken_barh(bars, (y - 0.4, 0.8), facecolors=colour[category],
                               edgecolors=colour[category], linewidth=0.6)   # short: a line
            missing = rows[rows["status"] != "simulated"]
            if lane == "simulated" and not missing.empty:
                bars = list(zip(missing["start_us"], missing["end_us"] - missing["start_us"],
                                strict=True))
                ax.broken_barh(bars, (y - 0.4, 0.8), facecolors="none", hatch="///",
                               edgecolor="0.3")
            labels.append((y, f"stream {stream} {lane}"))
    ax.set_yticks([y for y, _ in labels], [t for _, t in labels])
    ax.set_xlabel("time from the first kernel (us)")
    ax.set_title(title)
    handles = [Patch(color=colour[c], label=c) for c in categories]
    handles.append(Patch(facecolor="none", hatch="///", edgecolor="0.3",
                         label="not simulated (measured duration)"))
    ax.legend(handles=handles, fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return fig


def plot_scatter(df: pd.DataFrame, title: str = "Simulated vs measured"):
    """Log-log scatter of the simulated kernels (None when there are none)."""
    table = kernel_errors(df)
    done = table[(table["status"] == "simulated") & (table["simulated_us"] > 0)]
    if done.empty:
        return None
    fig = new_figure((5.8, 5.0))
    ax = fig.subplots()
    for k, (category, group) in enumerate(done.groupby("category", sort=True)):
        ax.loglog(group["measured_us"], group["simulated_us"], "o", color=f"C{k % 10}",
                  label=f"{category} ({len(group)})", alpha=0.8)
    values = np.concatenate([done["measured_us"], done["simulated_us"]])
    lo, hi = values.min() / 1.5, values.max() * 1.5
    line = np.geomspace(lo, hi, 50)
    ax.plot(line, line, "k-", linewidth=1, label="simulated = measured")
    ax.fill_between(line, line * (1 - BAND), line * (1 + BAND), color="0.85",
                    label=f"+-{BAND:.0%}")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured (us)")
    ax.set_ylabel("simulated (us)")
    ax.set_title(title)
    ax.legend(fontsize="small")
    return fig


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    return buffer.getvalue()


def _summary_notes(summary: dict, about: dict) -> tuple[str, ...]:
    notes = [f"{k}: {v}" for k, v in about.items()]
    notes.append(f"{summary['simulated']} of {summary['kernels']} kernels simulated "
                 f"({summary['coverage']:.1%} of the measured time); MAPE "
                 f"{summary['mape_pct']:.1f} %, Pearson r {summary['pearson_r']:.3f}, summed "
                 f"error {summary['total_error_pct']:+.1f} %.")
    return tuple(notes)


LANE_NOTE = ("Each stream's measured lane places its kernels at their measured starts; the "
             "simulated lane runs the same kernels in the same order at their simulated "
             "durations, keeping the measured idle gaps between them (host launch gaps are "
             "not simulated); hatched kernels were not simulated and keep their measured "
             "duration.")


def write_compare(df: pd.DataFrame, out_dir: str | Path, *, title: str = "ptxsim compare",
                  about: dict | None = None, force: bool = False, flag: str = "--out") -> Path:
    """Write kernels.csv, categories.csv, unsimulated.csv, streams.csv, timeline.csv,
    summary.json, scatter.png (when something was simulated), timeline.png (when the trace
    has start times) and compare.html into `out_dir` through
    `reports.output_dir.write_output_dir` (files ptxsim did not write are never touched);
    returns its path."""
    about = dict(about or {})
    table, summary = kernel_errors(df), error_summary(df)
    categories, missing, streams = category_summary(df), unsimulated(df), stream_summary(df)
    lanes = timeline_lanes(df)

    def write(folder: Path) -> None:
        table.to_csv(folder / "kernels.csv", index=False)
        categories.to_csv(folder / "categories.csv", index=False)
        missing.to_csv(folder / "unsimulated.csv", index=False)
        streams.to_csv(folder / "streams.csv", index=False)
        lanes.to_csv(folder / "timeline.csv", index=False)
        (folder / "summary.json").write_text(strict_json({**about, **summary}, indent=1))
        figures, timeline = {}, {}
        fig = plot_scatter(df, title)
        if fig is not None:
            figures["Simulated vs measured"] = _png(fig)
            (folder / "scatter.png").write_bytes(figures["Simulated vs measured"])
        fig = plot_timeline(df, f"{title}: measured and simulated lanes")
        if fig is not None:
            timeline["Measured and simulated lanes"] = _png(fig)
            (folder / "timeline.png").write_bytes(timeline["Measured and simulated lanes"])
        sections = [Section("Summary", _summary_notes(summary, about)),
                    Section("Per category", (), {"categories": categories}, units=UNITS),
                    Section("Scatter", (), figures=figures),
                    Section("Timeline", (LANE_NOTE,) if timeline else (), figures=timeline),
                    Section("Not simulated", (), {"unsimulated": missing}, units=UNITS),
                    Section("Streams (measured)", (), {"streams": streams},
                            units={"us": "us"}),
                    Section("Per kernel", (), {"kernels": table}, units=UNITS)]
        (folder / "compare.html").write_text(render_html(title, sections), encoding="utf-8")
    return write_output_dir(out_dir, write, force=force, flag=flag)
