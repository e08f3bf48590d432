"""write_report: every file exists and parses, the trace is valid Trace Event Format, the HTML
is self-contained, and a failed write leaves nothing behind."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pytest

import models
import reports
from isa.errors import InputError
from reports.kernel_table import KERNEL_COLUMNS
from simulator.app.cli import main

PHASES = {"B", "E", "X", "i", "I", "C", "M", "b", "e", "n", "s", "t", "f", "P", "O", "N", "D"}


def validate_trace_events(trace) -> list[str]:
    """Problems of a Trace Event Format document (JSON object form); empty when valid."""
    problems = []
    events = trace.get("traceEvents") if isinstance(trace, dict) else trace
    if not isinstance(events, list):
        return ["no traceEvents list"]
    for k, ev in enumerate(events):
        missing = [key for key in ("ph", "ts", "pid", "tid", "name") if key not in ev]
        if ev.get("ph") == "C":   # counters need no tid
            missing = [key for key in missing if key != "tid"]
        if missing:
            problems.append(f"event {k}: missing {missing}")
            continue
        if ev["ph"] not in PHASES:
            problems.append(f"event {k}: unknown phase {ev['ph']!r}")
        if not isinstance(ev["ts"], (int, float)) or ev["ts"] < 0:
            problems.append(f"event {k}: ts {ev['ts']!r} is not a non-negative number")
        if ev["ph"] == "X" and not (isinstance(ev.get("dur"), (int, float)) and ev["dur"] >= 0):
            problems.append(f"event {k}: X event without a non-negative dur")
        if ev["ph"] == "C" and not all(isinstance(v, (int, float))
                                       for v in ev.get("args", {}).values()):
            problems.append(f"event {k}: counter args must be numbers")
        if ev["ph"] == "M" and "name" not in ev.get("args", {}):
            problems.append(f"event {k}: metadata without args.name")
    return problems + _crossing_slices(events)


def _crossing_slices(events) -> list[str]:
    """X slices of one thread must be disjoint or nested (viewers drop crossing ones)."""
    by_thread: dict[tuple, list] = {}
    for ev in events:
        if ev.get("ph") == "X" and isinstance(ev.get("dur"), (int, float)):
            by_thread.setdefault((ev["pid"], ev["tid"]), []).append(
                (ev["ts"], -(ev["ts"] + ev["dur"]), ev["name"]))
    problems = []
    for thread, slices in by_thread.items():
        open_ends: list[float] = []
        for start, neg_end, name in sorted(slices):
            while open_ends and open_ends[-1] <= start + 1e-9:
                open_ends.pop()
            if open_ends and -neg_end > open_ends[-1] + 1e-9:
                problems.append(f"thread {thread}: slice {name!r} crosses the end of the "
                                "slice it starts in")
            open_ends.append(-neg_end)
    return problems


@dataclass
class WorkloadLike:
    """Stands in for a WorkloadResult: only DataFrame/dict attributes."""

    kernels: pd.DataFrame
    config: dict
    stats: pd.DataFrame = field(default_factory=pd.DataFrame)
    timeline: pd.DataFrame | None = None


def _workload() -> WorkloadLike:
    kernels = pd.DataFrame({
        "name": ["qkv", "attn", "a2a", "out"], "op": ["gemm", "attention", "alltoall", "gemm"],
        "stream": ["compute", "compute", "comm", "compute"],
        "start_us": [0.0, 20.0, 5.0, 30.0], "end_us": [20.0, 30.0, 25.0, 45.0],
        "flops": [4e10, 1e10, 0.0, 3e10], "hbm_bytes": [1e8, 5e7, 2e8, 8e7],
        "args": [{"m": 1}, {"h": 2}, {}, {"m": 3}]})
    timeline = pd.DataFrame({
        "end_us": [10.0, 20.0, 30.0] * 3 + [10.0, 20.0],
        "component": ["memory.hbm"] * 3 + ["sm.0"] * 3 + ["sm.1"] * 3 + ["sm.0"] * 2,
        "stat": ["bytes"] * 3 + ["utilization"] * 6 + ["ctas"] * 2,
        "value": [1e7, 2e7, 5e6, 0.5, 0.9, 0.2, 0.1, 0.3, 0.8, 2, 1]})
    return WorkloadLike(kernels, models.load_preset("h100_sxm").to_dict(), timeline=timeline)


@pytest.fixture(scope="module")
def saxpy_report(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli") / "saxpy"
    assert main(["report", "saxpy", "--variant", "1", "--out", str(out)]) == 0
    return out


def test_cli_report_writes_every_table_plot_and_page(saxpy_report):
    """`ptxsim report` on a real kernel writes tables, config, plots, HTML and trace."""
    names = {p.name for p in saxpy_report.iterdir()}
    assert {"stats.csv", "stats.parquet", "kernels.csv", "kernels.parquet", "config.json",
            "roofline.png", "stalls.png", "utilization.png", "report.html",
            "trace.json"} <= names


def test_tables_parse_back_from_csv_and_parquet(saxpy_report):
    """CSV and Parquet hold the same stats; the kernel table has the declared columns."""
    csv = pd.read_csv(saxpy_report / "stats.csv")
    parquet = pd.read_parquet(saxpy_report / "stats.parquet")
    assert list(csv.columns) == ["run_id", "kernel", "component", "stat", "value", "unit"]
    assert len(csv) == len(parquet) and np.allclose(csv["value"], parquet["value"])
    kernels = pd.read_parquet(saxpy_report / "kernels.parquet")
    assert list(kernels.columns) == [c for c, _, _ in KERNEL_COLUMNS]
    assert kernels["kernel"].tolist() == ["saxpy"]
    cycles = csv[(csv["component"] == "kernel") & (csv["stat"] == "cycles")]["value"].item()
    assert kernels["cycles"].item() == cycles
    assert json.loads((saxpy_report / "config.json").read_text())["sm"]["count"] > 0


def test_pngs_are_png_files(saxpy_report):
    """Every written plot starts with the PNG signature."""
    for png in saxpy_report.glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_kernel_trace_is_valid_trace_event_format(saxpy_report):
    """trace.json validates; the kernel is an X event whose dur is its simulated time."""
    trace = json.loads((saxpy_report / "trace.json").read_text())
    assert validate_trace_events(trace) == []
    kernels = pd.read_csv(saxpy_report / "kernels.csv")
    (event,) = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] == "kernel"]
    assert event["dur"] == pytest.approx(kernels["time_us"].item())


def test_html_is_self_contained_with_tables_and_inline_images(saxpy_report):
    """report.html has the tables and data-URI PNGs and loads nothing from elsewhere."""
    page = (saxpy_report / "report.html").read_text()
    assert '<table id="summary">' in page and '<table id="kernels">' in page
    assert page.count("data:image/png;base64,") == 5
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:|//)""", page)
    assert not re.search(r"url\(|@import|<link|<script", page)
    assert "Per-SM utilization over time: not drawn" not in page
    assert "Gantt by stream: not drawn" in page


def test_workload_report_has_gantt_time_plots_and_counters(tmp_path):
    """With start/end/stream and a timeline: Gantt, heatmap, bandwidth, counter events."""
    out = reports.write_report(_workload(), tmp_path / "wl")
    names = {p.name for p in out.iterdir()}
    assert {"gantt.png", "sm_utilization.png", "bandwidth.png"} <= names
    trace = json.loads((out / "trace.json").read_text())
    assert validate_trace_events(trace) == []
    threads = {e["args"]["name"] for e in trace["traceEvents"]
               if e["ph"] == "M" and e["name"] == "thread_name"}
    assert threads == {"stream compute", "stream comm"}
    counters = [e for e in trace["traceEvents"] if e["ph"] == "C"]
    bandwidth = [e for e in counters if e["name"] == "bandwidth GB/s"]
    assert bandwidth[0]["args"]["hbm"] == pytest.approx(1e7 / (10.0 * 1e3))
    assert any(e["name"] == "CTAs sm.0" for e in counters)
    table = pd.read_parquet(out / "kernels.parquet")
    assert table.set_index("kernel").loc["attn", "time_us"] == 10.0


def test_failed_write_leaves_the_old_folder_and_no_temporary(tmp_path, monkeypatch):
    """An error while writing keeps an existing report as it was and removes the staging."""
    out = reports.write_report(_workload(), tmp_path / "wl")
    before = sorted(p.name for p in out.iterdir())

    def fail(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr("reports.writer.render_html", fail)
    with pytest.raises(RuntimeError, match="disk full"):
        reports.write_report(_workload(), out)
    assert sorted(p.name for p in out.iterdir()) == before
    assert [p.name for p in tmp_path.iterdir()] == ["wl"]


def test_rewriting_a_report_replaces_only_its_own_files(tmp_path):
    """A second write replaces the first run's files; a file a user put beside them makes
    the folder refused, and with force it stays in place."""
    out = reports.write_report(_workload(), tmp_path / "wl")
    first = {p.name for p in out.iterdir()}
    reports.write_report(_workload(), out)
    assert {p.name for p in out.iterdir()} == first
    (out / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="notes.txt"):
        reports.write_report(_workload(), out)
    reports.write_report(_workload(), out, force=True)
    assert (out / "notes.txt").read_text() == "mine"
    assert [p.name for p in tmp_path.iterdir()] == ["wl"]


def test_validator_rejects_crossing_slices_on_one_thread():
    """Two X slices of one thread that overlap without nesting are reported."""
    events = [{"ph": "X", "name": n, "pid": 1, "tid": 1, "ts": ts, "dur": 10}
              for n, ts in (("a", 0), ("b", 5))]
    assert any("crosses" in p for p in validate_trace_events({"traceEvents": events}))
    nested = [{**events[0], "dur": 20}, events[1]]
    assert validate_trace_events({"traceEvents": nested}) == []


def test_validator_rejects_events_without_required_keys():
    """The trace validator flags a missing dur on X and a missing ts."""
    bad = {"traceEvents": [{"ph": "X", "name": "k", "pid": 1, "tid": 1, "ts": 0},
                           {"ph": "B", "name": "k", "pid": 1, "tid": 1}]}
    problems = validate_trace_events(bad)
    assert len(problems) == 2 and "dur" in problems[0] and "ts" in problems[1]


def test_micro_batches_get_a_lane_per_stream_in_the_gantt_and_the_trace():
    """A workload with micro-batches draws each one's compute and comm lanes side by side
    (`compute mb0`, `comm mb0`, ...), in the Gantt and as trace threads."""
    from reports.chrome_trace import chrome_trace
    from reports.plot_timeline import plot_gantt

    table = pd.DataFrame({
        "kernel": ["mb0/attn", "mb0/dispatch", "mb1/attn", "mb1/dispatch"],
        "stream": ["compute", "comm", "compute", "comm"],
        "micro_batch": ["mb0", "mb0", "mb1", "mb1"],
        "start_us": [0.0, 5.0, 5.0, 10.0], "end_us": [5.0, 10.0, 10.0, 15.0],
        "time_us": [5.0] * 4})
    fig = plot_gantt(table)
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == \
        ["compute mb0", "comm mb0", "compute mb1", "comm mb1"]
    threads = {e["args"]["name"] for e in chrome_trace(table, None, title="t")["traceEvents"]
               if e["ph"] == "M" and e["name"] == "thread_name"}
    assert threads == {"stream compute mb0", "stream comm mb0", "stream compute mb1",
                       "stream comm mb1"}
