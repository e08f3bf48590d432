"""`write_report(result, DIR)`: tables, plots, an HTML page and a Chrome trace in one folder.

`result` is a `KernelResult`/`WorkloadResult`-like object or a mapping; only these are read:
`stats` (long table), `kernels` (a workload's per-kernel table), `config` (resolved config
dict, or an object with `to_dict()`), `timeline` (a long time-series table, see
`reports.plot_timeline`), `cycles` and `time_us`; a workload result's `kernel_timelines`
(per-node launch series), when present, replace `timeline` by the layer-wide series of
`reports.workload_timeline` (per-SM utilization, bytes per level and link bytes on one time
axis). The folder gets:

    stats.csv, stats.parquet      the long stats table as given
    kernels.csv, kernels.parquet  the per-kernel table (`reports.kernel_table`)
    timeline.csv, timeline.parquet  the time series as given (when the result has one)
    config.json                   the resolved config
    roofline.png, stalls.png, utilization.png, and when their data exist
    sm_utilization.png, bandwidth.png, gantt.png
    report.html                   self-contained: tables + plots as data URIs (with a
                                  Numerics section when `numerics` is given)
    trace.json                    Chrome/Perfetto trace (`reports.chrome_trace`)

Everything, `extra_files` included, is staged and committed by `reports.output_dir`: a new
folder appears whole or not at all, an earlier ptxsim output is replaced only after the new
one is complete, and files ptxsim did not write are never removed or replaced (a folder
holding them is refused unless `force`). `.ptxsim-manifest.json` lists the files written.
`numerics` (a run's error beside its time, the `numerics` section of `ptxsim run`'s
run.json: `workloads.codesign.run_numerics`) adds a "Numerics" section to report.html: how
and on what the error was measured (reduction, seed, FP64 reference, stock precision) and
one row per error category (relative and max error, argmax change, against FP64 and the
stock precision), or why it was not computed; the per-kernel columns come in the kernels
table itself.
`report_digest(result, code=...)` is a SHA-256 of everything these files are made from
(the tables but their `cached` column, which says where an op's result was read from, the
config, the per-node launch series, title, precision, peaks, numerics, the code version
and what the caller adds); `write_report(..., content=digest)` records it, and
`reports.output_dir.output_unchanged(DIR, digest)` tells a re-run that the folder already
holds these files.
Left out: TOML for the config (JSON carries the same dict), plots of sweeps (see
`reports.sweep_plots`). Units: as in the tables (microseconds, B, GB/s, TFLOP/s, fractions).
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from models.roofline import chip_peaks
from reports.chrome_trace import chrome_trace
from reports.html_report import Section, render_html
from reports.kernel_table import column_units, kernel_table
from reports.output_dir import write_output_dir
from reports.plot_kernels import plot_roofline, plot_stall_stacks, plot_unit_utilization
from reports.plot_timeline import missing_reason, plot_bandwidth, plot_gantt, plot_sm_heatmap
from reports.workload_timeline import workload_timeline
from simulator.framework.config import strict_json

SUMMARY_COLUMNS = ("kernel", "cycles", "kernel_time_us", "time_us", "achieved_tflops",
                   "hbm_gbps", "bound", "roofline_us", "roofline_gap", "achieved_occupancy",
                   "precision", "macs", "macs_skipped", "rel_error")


def _read(result: Any, name: str) -> Any:
    if isinstance(result, Mapping):
        return result.get(name)
    return getattr(result, name, None)


def _config_dict(result: Any) -> dict:
    """The result's resolved config as a dict (an object with `to_dict()` or a mapping)."""
    config = _read(result, "config")
    if config is not None and not isinstance(config, Mapping) and hasattr(config, "to_dict"):
        config = config.to_dict()
    return dict(config or {})


def result_tables(result: Any) -> dict[str, Any]:
    """The tables and scalars the report reads, from a result object or a mapping."""
    stats = _read(result, "stats")
    kernels = _read(result, "kernels")
    timeline = _read(result, "timeline")
    if _read(result, "kernel_timelines") and isinstance(kernels, pd.DataFrame):
        timeline = workload_timeline(result)
    return {"stats": stats if isinstance(stats, pd.DataFrame) else None,
            "kernels": kernels if isinstance(kernels, pd.DataFrame) else None,
            "timeline": timeline if isinstance(timeline, pd.DataFrame) else None,
            "config": _config_dict(result),
            "cycles": _read(result, "cycles"), "time_us": _read(result, "time_us"),
            "fidelity": _read(result, "fidelity"),
            "extrapolated_fraction": _read(result, "extrapolated_fraction")}


def _storable(frame: pd.DataFrame) -> pd.DataFrame:
    """Object columns holding dicts/lists become JSON text (Parquet needs one type)."""
    out = frame.copy()
    for col in out.columns:
        if out[col].dtype == object:
            out[col] = [json.dumps(v, default=str, sort_keys=True)
                        if isinstance(v, (dict, list, tuple)) else v for v in out[col]]
            if out[col].map(type).nunique() > 1:
                out[col] = out[col].map(lambda v: None if pd.isna(v) else str(v))
    return out


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    return buffer.getvalue()


def _figures(table: pd.DataFrame, timeline, peaks: Mapping[str, float]):
    """(file stem, caption, figure or None, note when None) for every plot."""
    return [
        ("roofline", "Roofline", plot_roofline(table, peaks),
         "Roofline: not drawn (no kernel has both FLOP and HBM bytes)."),
        ("stalls", "Stall breakdown", plot_stall_stacks(table),
         "Stall breakdown: not drawn (the stats have no scheduler stall cycles)."),
        ("utilization", "Unit utilization", plot_unit_utilization(table),
         "Unit utilization: not drawn (the stats have no unit busy cycles)."),
        ("sm_utilization", "Per-SM utilization over time", plot_sm_heatmap(timeline),
         missing_reason("Per-SM utilization over time")),
        ("bandwidth", "Bandwidth per level over time", plot_bandwidth(timeline, peaks),
         missing_reason("Bandwidth per level over time")),
        ("gantt", "Kernels by stream", plot_gantt(table),
         "Gantt by stream: not drawn (no kernel start/end times; a single kernel run)."),
    ]


def _summary_notes(tables: dict, table: pd.DataFrame) -> list[str]:
    notes = []
    if tables["cycles"] is not None or tables["time_us"] is not None:
        kernel_us = (table["kernel_time_us"].iloc[0] if len(table) == 1
                     and "kernel_time_us" in table else None)
        profiler = (f", kernel_time_us {kernel_us:.4g} us (the profiler's duration: span plus "
                    "front end)" if kernel_us is not None and pd.notna(kernel_us) else "")
        notes.append(f"Simulated: cycles {tables['cycles']} (SM span){profiler}, time_us "
                     f"{tables['time_us']:.4g} us (with the host's launch overhead).")
    if tables["fidelity"] == "sampled" and tables["extrapolated_fraction"]:
        notes.append(f"Sampled fidelity: {tables['extrapolated_fraction']:.0%} of the time is "
                     "extrapolated; the time plots and the trace's CTAs and counters cover the "
                     "simulated waves only.")
    chip = tables["config"].get("chip", {})
    if chip:
        notes.append(f"Chip: {chip.get('name', '?')} at {chip.get('clock_ghz', '?')} GHz.")
    macs = pd.to_numeric(table.get("macs", pd.Series(dtype=float))).sum()
    if macs > 0:
        skipped = pd.to_numeric(table["macs_skipped"]).sum()
        dense = pd.to_numeric(table["operand_bytes"]).sum()
        stored = pd.to_numeric(table["operand_bytes_stored"]).sum()
        notes.append(f"Tensor-core MACs: {macs:.4g}, skipped by the co-design units "
                     f"{skipped:.4g} ({skipped / macs:.1%}); GEMM operands {dense:.4g} B "
                     f"dense, {stored:.4g} B as stored.")
    sources = sorted(set(table["flops_source"].dropna().astype(str)) - {""})
    if sources:
        notes.append("FLOP source: " + "; ".join(sources) + ".")
    return notes


NUMERICS_COLUMNS = ("category", "shortcuts", "rel_error", "max_abs_error", "argmax_change",
                    "rel_error_vs_stock", "max_abs_error_vs_stock", "argmax_change_vs_stock")
NUMERICS_UNITS = {"rel_error": "fraction", "argmax_change": "fraction",
                  "rel_error_vs_stock": "fraction", "argmax_change_vs_stock": "fraction"}


def numerics_section(numerics: Mapping[str, Any]) -> Section:
    """report.html's Numerics section from a run.json `numerics` dict (module docstring)."""
    if not numerics.get("computed"):
        return Section("Numerics (error beside time)",
                       (f"Not computed: {numerics.get('reason', '')}.",))
    layer = next(c for c in numerics["categories"] if c["category"] == "layer")
    notes = (f"Measured on the {numerics['reduction']}, seed {numerics['seed']}; data: "
             f"{numerics['data']}.",
             f"Reference: {numerics['reference_text']}; stock precision: "
             f"{numerics['stock']} (the *_vs_stock columns: the extra error of the "
             "co-design units).",
             "A category's error is the layer output's with only its ops' shortcuts on "
             f"(the rest in FP64); why computed: {numerics['reason']}.",
             f"Layer: GEMM precision {layer['precision']}, softmax error of the exp "
             f"{layer['softmax_rel_error']:.3g}, GEMM activations zero "
             f"{layer['activation_zeros']:.1%}, MACs skipped on the data "
             f"{layer['macs_skipped_share']:.1%} (ZCE threshold {layer['zce_threshold']:g}; "
             f"the time ran at activation sparsity {layer['activation_sparsity']:g}, "
             f"{layer.get('activation_sparsity_source', 'config')}: "
             "units.zce.activation_sparsity_source).",
             f"Left out: {numerics['left_out']}.")
    frame = pd.DataFrame([{c: row.get(c) for c in NUMERICS_COLUMNS}
                          for row in numerics["categories"]])
    return Section("Numerics (error beside time)", notes, {"numerics": frame},
                   units=NUMERICS_UNITS)


def _write_files(folder: Path, tables: dict, table: pd.DataFrame, title: str,
                 peaks: Mapping[str, float], numerics: Mapping[str, Any] | None) -> None:
    stats = tables["stats"] if tables["stats"] is not None else pd.DataFrame(
        columns=["run_id", "kernel", "component", "stat", "value", "unit"])
    stats.to_csv(folder / "stats.csv", index=False)
    _storable(stats).to_parquet(folder / "stats.parquet", index=False)
    table.to_csv(folder / "kernels.csv", index=False)
    _storable(table).to_parquet(folder / "kernels.parquet", index=False)
    if tables["timeline"] is not None:
        tables["timeline"].to_csv(folder / "timeline.csv", index=False)
        _storable(tables["timeline"]).to_parquet(folder / "timeline.parquet", index=False)
    (folder / "config.json").write_text(strict_json(tables["config"], indent=1))
    pngs, notes = {}, []
    for stem, caption, fig, note in _figures(table, tables["timeline"], peaks):
        if fig is None:
            notes.append(note)
            continue
        pngs[caption] = _png(fig)
        (folder / f"{stem}.png").write_bytes(pngs[caption])
    units = column_units()
    summary = table[[c for c in SUMMARY_COLUMNS if c in table.columns]]
    sections = [
        Section("Summary", tuple(_summary_notes(tables, table)), {"summary": summary},
                units=units),
        *([numerics_section(numerics)] if numerics is not None else []),
        Section("Per-kernel table", (), {"kernels": table}, units=units, transpose=True),
        Section("Plots", (), figures=pngs),
        Section("Not drawn", tuple(notes)),
    ]
    (folder / "report.html").write_text(render_html(title, sections), encoding="utf-8")
    trace = chrome_trace(table, tables["timeline"], title=title)
    (folder / "trace.json").write_text(json.dumps(trace, allow_nan=False))


PROVENANCE_COLUMNS = ("cached",)
"""Kernel-table columns saying where a result was read from, not what it is."""


def _frame_digest(frame: pd.DataFrame | None) -> str:
    if frame is None:
        return "none"
    frame = _storable(frame.drop(columns=[c for c in PROVENANCE_COLUMNS
                                          if c in frame.columns]))
    digest = hashlib.sha256(json.dumps([list(map(str, frame.columns)),
                                        list(map(str, frame.dtypes))]).encode())
    digest.update(pd.util.hash_pandas_object(frame, index=True).to_numpy().tobytes())
    return digest.hexdigest()


def report_digest(result: Any, *, code: str, title: str | None = None,
                  precision: str = "bf16", peaks: Mapping[str, float] | None = None,
                  numerics: Mapping[str, Any] | None = None, extra: Any = None) -> str:
    """A SHA-256 of what `write_report` makes its files from (module docstring); `code`
    is the code version, `extra` anything JSON-able the caller's extra files hold."""
    frames = {name: _frame_digest(_read(result, name))
              for name in ("stats", "kernels", "timeline")}
    launches = {str(k): _frame_digest(v) for k, v in
                sorted((_read(result, "kernel_timelines") or {}).items(), key=lambda kv:
                       str(kv[0]))}
    doc = {"code": code, "config": _config_dict(result), "frames": frames,
           "kernel_timelines": launches, "title": title, "precision": precision,
           "peaks": dict(peaks or {}), "numerics": numerics, "extra": extra,
           "scalars": {k: _read(result, k) for k in ("cycles", "time_us", "fidelity",
                                                     "extrapolated_fraction")}}
    return hashlib.sha256(strict_json(doc).encode()).hexdigest()


def write_report(result: Any, out_dir: str | Path, *, title: str | None = None,
                 precision: str = "bf16", peaks: Mapping[str, float] | None = None,
                 extra_files: Mapping[str, str] | None = None, force: bool = False,
                 flag: str = "--out", numerics: Mapping[str, Any] | None = None,
                 content: str | None = None) -> Path:
    """Write the report folder (see the module docstring) through
    `reports.output_dir.write_output_dir`; `extra_files` (file name -> text) are written
    with it, before the folder is committed; `numerics` adds report.html's Numerics
    section; `content` (`report_digest`) is recorded in the manifest. Returns its path."""
    tables = result_tables(result)
    table = kernel_table(tables["stats"], tables["config"], tables["kernels"],
                         precision=precision, peaks=peaks)
    chip = {**chip_peaks(tables["config"]), **(peaks or {})}
    title = title or "ptxsim report: " + ", ".join(map(str, table["kernel"].head(3)))

    def write(folder: Path) -> None:
        _write_files(folder, tables, table, title, chip, numerics)
        for name, text in (extra_files or {}).items():
            (folder / name).write_text(text, encoding="utf-8")
    return write_output_dir(out_dir, write, force=force, flag=flag, content=content)
