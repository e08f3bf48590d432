"""Simulated vs measured: per-kernel errors, MAPE, Pearson r, per-category sums, a scatter plot.

Reads the table of `workloads.traces.reference_ops.simulate_reference` (one row per
reference kernel: `name`, `category`, `op`, `kind`, `sizes`, `dur_us` measured,
`simulated_us`, `status`, `reason`, and `stream`/`start_us` when the trace has them) and
builds:

* `kernel_errors(df)`: per kernel `measured_us`, `simulated_us` and
  `error_pct` = 100 (simulated - measured) / measured (NaN where not simulated);
* `error_summary(df)`: kernels, simulated kernels, `coverage` (share of the measured time
  in simulated kernels), `mape_pct` (mean |error_pct| over simulated kernels), `pearson_r`
  of measured vs simulated (NaN with fewer than two kernels or a constant column), the
  measured and simulated sums over simulated kernels and their `total_error_pct`;
* `category_summary(df)`: the same sums and MAPE per category (`unmatched` for kernels
  no rule matched);
* `unsimulated(df)`: the kernels not simulated, grouped by name and reason, longest first;
* `stream_summary(df)`: the measured busy time per stream, their union, overlap and span
  (`workloads.traces.overlap`; how much communication hid behind compute in the trace);
* `plot_scatter(df)`: log-log simulated vs measured, coloured by category, with y = x and
  a +-25 % band; `write_compare(df, DIR)` writes all of them (CSV, summary.json,
  scatter.png, compare.html) through `reports.output_dir` (staged, committed whole,
  never touching files ptxsim did not write).

Left out: weighting the MAPE by time (the per-category sums show time-weighted error),
confidence intervals. Units: microseconds, percent, fractions.
"""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
import pandas as pd

from reports.html_report import Section, render_html
from reports.output_dir import write_output_dir
from reports.plot_kernels import new_figure
from simulator.config import strict_json

KERNEL_ERROR_COLUMNS = ("name", "category", "op", "kind", "sizes", "stream", "start_us",
                        "measured_us", "simulated_us", "error_pct", "status", "reason")
UNITS = {"measured_us": "us", "simulated_us": "us", "error_pct": "%", "start_us": "us",
         "mape_pct": "%", "total_error_pct": "%", "coverage": "fraction",
         "measured_sum_us": "us", "simulated_sum_us": "us", "dur_us": "us"}
BAND = 0.25


def kernel_errors(df: pd.DataFrame) -> pd.DataFrame:
    """One row per reference kernel with measured, simulated and error % (module doc)."""
    out = pd.DataFrame({c: df[c] if c in df.columns else None
                        for c in KERNEL_ERROR_COLUMNS if c not in ("measured_us", "error_pct")})
    out["category"] = out["category"].where(out["category"].notna(), "unmatched")
    out["measured_us"] = df["dur_us"].astype(float)
    out["simulated_us"] = pd.to_numeric(df["simulated_us"], errors="coerce").astype(float)
    out["error_pct"] = 100.0 * (out["simulated_us"] - out["measured_us"]) / out["measured_us"]
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
    """Per category: kernels, simulated kernels, measured time, and the error figures of its
    simulated kernels."""
    table = kernel_errors(df)
    rows = []
    for category, group in table.groupby("category", sort=False):
        done = group[group["status"] == "simulated"]
        rows.append({"category": category, "kernels": len(group), "simulated": len(done),
                     "dur_us": float(group["measured_us"].sum()), **_figures(done)})
    out = pd.DataFrame(rows, columns=["category", "kernels", "simulated", "dur_us",
                                      "measured_sum_us", "simulated_sum_us",
                                      "total_error_pct", "mape_pct"])
    return out.sort_values("dur_us", ascending=False, kind="stable").reset_index(drop=True)


def unsimulated(df: pd.DataFrame) -> pd.DataFrame:
    """Kernels not simulated: `name`, `status`, `reason`, `count`, `dur_us` (total)."""
    table = kernel_errors(df)
    rest = table[table["status"] != "simulated"]
    out = rest.groupby(["name", "status", "reason"], as_index=False, dropna=False).agg(
        count=("measured_us", "size"), dur_us=("measured_us", "sum"))
    return out.sort_values("dur_us", ascending=False, kind="stable").reset_index(drop=True)


def stream_summary(df: pd.DataFrame) -> pd.DataFrame:
    """Measured busy time per stream, union, overlap and span: columns `what`, `us`."""
    from workloads.traces.overlap import stream_overlap

    if not {"stream", "start_us", "dur_us"} <= set(df.columns) or df.empty:
        return pd.DataFrame(columns=["what", "us"])
    return stream_overlap(df).table()


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


def write_compare(df: pd.DataFrame, out_dir: str | Path, *, title: str = "ptxsim compare",
                  about: dict | None = None, force: bool = False, flag: str = "--out") -> Path:
    """Write kernels.csv, categories.csv, unsimulated.csv, streams.csv, summary.json,
    scatter.png (when something was simulated) and compare.html into `out_dir` through
    `reports.output_dir.write_output_dir` (files ptxsim did not write are never touched);
    returns its path."""
    about = dict(about or {})
    table, summary = kernel_errors(df), error_summary(df)
    categories, missing, streams = category_summary(df), unsimulated(df), stream_summary(df)

    def write(folder: Path) -> None:
        table.to_csv(folder / "kernels.csv", index=False)
        categories.to_csv(folder / "categories.csv", index=False)
        missing.to_csv(folder / "unsimulated.csv", index=False)
        streams.to_csv(folder / "streams.csv", index=False)
        (folder / "summary.json").write_text(strict_json({**about, **summary}, indent=1))
        fig = plot_scatter(df, title)
        figures = {}
        if fig is not None:
            figures["Simulated vs measured"] = _png(fig)
            (folder / "scatter.png").write_bytes(figures["Simulated vs measured"])
        sections = [Section("Summary", _summary_notes(summary, about)),
                    Section("Per category", (), {"categories": categories}, units=UNITS),
                    Section("Scatter", (), figures=figures),
                    Section("Not simulated", (), {"unsimulated": missing}, units=UNITS),
                    Section("Streams (measured)", (), {"streams": streams},
                            units={"us": "us"}),
                    Section("Per kernel", (), {"kernels": table}, units=UNITS)]
        (folder / "compare.html").write_text(render_html(title, sections), encoding="utf-8")
    return write_output_dir(out_dir, write, force=force, flag=flag)
