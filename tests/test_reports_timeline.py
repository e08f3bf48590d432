"""Time series of a run (`KernelResult.timeline`): sums agree with the stats table, buckets
keep their sums when they widen, and the report draws them and exports them as counters."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import models
import simulator
from models.timeline_tracer import LEVELS, TIMELINE_COLUMNS, TimeBuckets
from tests.test_reports_files import validate_trace_events
from workloads.kernels.case import load_ptx

N = 1 << 16
BLOCK = 256


def _saxpy(config):
    x = np.arange(N, dtype=np.float32)
    y = np.ones(N, np.float32)
    return simulator.simulate_kernel(load_ptx("saxpy.cu"), "saxpy", (N // BLOCK, 1, 1),
                                     (BLOCK, 1, 1), [N, np.float32(1.5), x, y], config=config)


@pytest.fixture(scope="module")
def config():
    return models.load_preset("h100_sxm")


@pytest.fixture(scope="module")
def run(config):
    return _saxpy(config)


def _stat(stats, prefix, stat):
    rows = stats[stats["component"].str.startswith(prefix) & (stats["stat"] == stat)]
    return float(rows["value"].sum())


def _bucket_cycles(timeline, config):
    width_us = (timeline["end_us"] - timeline["start_us"]).iloc[0]
    return width_us * config.chip.clock_ghz * 1e3


def test_timeline_has_the_declared_columns_and_contiguous_buckets(run):
    """Columns as declared; each series' buckets tile [0, kernel end] without gaps."""
    tl = run.timeline
    assert tuple(tl.columns) == TIMELINE_COLUMNS
    hbm = tl[(tl["component"] == "memory.hbm") & (tl["stat"] == "bytes")]
    assert hbm["start_us"].iloc[0] == 0.0
    assert np.allclose(hbm["start_us"].to_numpy()[1:], hbm["end_us"].to_numpy()[:-1])
    span_us = run.kernel_time_us - run.config["launch"]["kernel_front_end_us"]   # the SMs'
    assert hbm["end_us"].iloc[-1] >= span_us
    assert hbm["end_us"].iloc[-1] - span_us < (hbm["end_us"] - hbm["start_us"]).iloc[0]


def test_bytes_per_level_over_time_sum_to_the_stats_bytes(run):
    """Each level's bytes summed over the buckets equal that level's bytes in the stats."""
    tl, stats = run.timeline, run.stats
    for level in LEVELS:
        series = tl[(tl["component"] == f"memory.{level}") & (tl["stat"] == "bytes")]
        assert series["value"].sum() == pytest.approx(_stat(stats, f"memory.{level}", "bytes"))
    assert _stat(stats, "memory.hbm", "bytes") > 0


def test_bandwidth_is_bytes_over_bucket_duration(run):
    """bandwidth_gbps = bytes / (bucket duration in ns)."""
    tl = run.timeline
    l2 = tl[tl["component"] == "memory.l2"].pivot_table(index="end_us", columns="stat",
                                                         values="value")
    width_ns = (tl["end_us"] - tl["start_us"]).iloc[0] * 1e3
    assert np.allclose(l2["bandwidth_gbps"], l2["bytes"] / width_ns)


def test_issued_slots_over_time_match_the_issued_warp_instructions(run, config):
    """Utilization x sub-partitions x bucket cycles, summed over SMs and time, is the number
    of warp-instructions issued (one scheduler slot each), within 2 %."""
    tl = run.timeline
    per_sm = tl[tl["component"].str.fullmatch(r"sm\.\d+") & (tl["stat"] == "utilization")]
    assert per_sm["value"].between(0, 1).all()
    slots = per_sm["value"].sum() * config.sm.subpartitions * _bucket_cycles(tl, config)
    issued = _stat(run.stats, "sm.units.", "issued")
    assert slots == pytest.approx(issued, rel=0.02)


def test_resident_ctas_over_time_integrate_to_the_resident_warp_cycles(run, config):
    """Mean resident CTAs x bucket cycles x warps per CTA, summed, is the resident-warp
    integral of the stats."""
    tl = run.timeline
    ctas = tl[tl["component"].str.fullmatch(r"sm\.\d+") & (tl["stat"] == "ctas")]
    warp_cycles = ctas["value"].sum() * _bucket_cycles(tl, config) * (BLOCK // 32)
    assert warp_cycles == pytest.approx(_stat(run.stats, "sm", "resident_warp_cycles"))


def test_mean_utilization_is_the_mean_over_the_kernels_sms(run, config):
    """Component `sm` holds the mean of the per-SM utilization at every bucket."""
    tl = run.timeline
    util = tl[tl["stat"] == "utilization"]
    per_sm = util[util["component"] != "sm"].groupby("end_us")["value"].mean()
    mean = util[util["component"] == "sm"].set_index("end_us")["value"]
    assert np.allclose(per_sm.loc[mean.index], mean)
    assert util["component"].nunique() == config.sm.compute_count + 1


def test_same_inputs_give_the_same_timeline(run, config):
    """A second identical run gives the identical table."""
    pd.testing.assert_frame_equal(_saxpy(config).timeline, run.timeline)


def test_buckets_double_their_width_and_keep_the_sums():
    """Running past the capacity merges neighbours pairwise: width x2, totals unchanged."""
    buckets = TimeBuckets(1, width_cycles=10, capacity=4)
    buckets.add_span(0, 0, 40, 40.0)
    assert buckets.data[0].tolist() == [10.0, 10.0, 10.0, 10.0]
    buckets.add_span(0, 70, 80, 5.0)
    assert buckets.width_cycles == 20
    assert buckets.data[0].tolist() == [20.0, 20.0, 0.0, 5.0]


def test_a_span_is_spread_in_proportion_to_its_overlap_with_each_bucket():
    """Amount 100 over cycles [5, 35) with 10-cycle buckets: 5/30, 10/30, 10/30, 5/30."""
    buckets = TimeBuckets(1, width_cycles=10, capacity=8)
    buckets.add_span(0, 5, 35, 100.0)
    assert np.allclose(buckets.data[0, :4], np.array([5, 10, 10, 5]) * 100 / 30)


def test_summed_groups_buckets_to_at_most_the_limit():
    """Ten 10-cycle buckets summed to at most 3: groups of 4 (the last one partial)."""
    buckets = TimeBuckets(1, width_cycles=10, capacity=16)
    buckets.add_span(0, 0, 100, 100.0)
    sums, width = buckets.summed(100, 3)
    assert width == 40 and sums[0].tolist() == [40.0, 40.0, 20.0]


def test_kernel_report_draws_time_plots_and_exports_counters(run, tmp_path):
    """write_report of a KernelResult: heatmap and bandwidth PNGs, embedded in the page, and
    utilization/bandwidth counters in a valid trace."""
    import reports

    out = reports.write_report(run, tmp_path / "saxpy")
    for name in ("sm_utilization.png", "bandwidth.png", "stalls.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pd.testing.assert_frame_equal(pd.read_parquet(out / "timeline.parquet"), run.timeline)
    html = (out / "report.html").read_text()
    assert "Per-SM utilization over time" in html and "Bandwidth per level over time" in html
    trace = json.loads((out / "trace.json").read_text())
    assert validate_trace_events(trace) == []
    names = {ev["name"] for ev in trace["traceEvents"] if ev["ph"] == "C"}
    assert {"SM utilization", "bandwidth GB/s", "utilization sm.0", "CTAs sm.0"} <= names
    counters = [ev for ev in trace["traceEvents"]
                if ev["ph"] == "C" and ev["name"] == "SM utilization"]
    assert counters[0]["ts"] == 0.0
    assert max(ev["args"]["utilization"] for ev in counters) > 0


def test_every_cta_has_one_span_inside_the_kernel_and_sms_respect_occupancy(run):
    """One `cta_span` row per CTA of the grid, within [0, kernel end]; no SM ever holds more
    CTAs at once than the occupancy limit."""
    tl = run.timeline
    spans = tl[tl["stat"] == "cta_span"]
    assert sorted(spans["value"].astype(int)) == list(range(N // BLOCK))
    assert (spans["start_us"] >= 0).all() and (spans["end_us"] <= run.kernel_time_us + 1e-9).all()
    assert (spans["end_us"] > spans["start_us"]).all()
    limit = run.stats.query("component == 'kernel' and stat == 'ctas_per_sm'")["value"].item()
    for _, group in spans.groupby("component"):
        edges = sorted([(t, 1) for t in group["start_us"]] + [(t, -1) for t in group["end_us"]],
                       key=lambda e: (e[0], e[1]))
        assert max(np.cumsum([step for _, step in edges])) <= limit


def test_trace_has_one_slice_per_cta_on_slot_threads_that_never_overlap(run):
    """chrome_trace: an X event of category `cta` per CTA on a slot thread of its SM; the
    slices of one thread are disjoint, and an SM has at most its occupancy limit of slots."""
    from reports.chrome_trace import SLOTS_PER_SM, SM_PID, chrome_trace

    table = pd.DataFrame({"kernel": ["saxpy"], "time_us": [run.time_us]})
    trace = chrome_trace(table, run.timeline)
    assert validate_trace_events(trace) == []
    ctas = [ev for ev in trace["traceEvents"] if ev.get("cat") == "cta"]
    assert len(ctas) == N // BLOCK == trace["otherData"]["ctas"]
    spans = run.timeline[run.timeline["stat"] == "cta_span"]
    first = spans.iloc[0]
    (event,) = [ev for ev in ctas if ev["name"] == f"CTA {int(first['value'])}"]
    assert event["pid"] == SM_PID and event["tid"] // SLOTS_PER_SM == int(first["component"][3:])
    assert event["dur"] == pytest.approx(first["end_us"] - first["start_us"])
    by_thread: dict[int, list] = {}
    for ev in ctas:
        by_thread.setdefault(ev["tid"], []).append((ev["ts"], ev["ts"] + ev["dur"]))
    for slices in by_thread.values():
        slices.sort()
        assert all(a[1] <= b[0] + 1e-9 for a, b in zip(slices, slices[1:], strict=False))
    limit = run.stats.query("component == 'kernel' and stat == 'ctas_per_sm'")["value"].item()
    assert max(tid % SLOTS_PER_SM for tid in by_thread) < limit


def test_sampled_report_says_its_time_plots_cover_the_simulated_waves(run, tmp_path):
    """A result marked sampled with an extrapolated share gets a note saying so."""
    import dataclasses

    import reports

    sampled = dataclasses.replace(run, fidelity="sampled", extrapolated_fraction=0.4)
    page = (reports.write_report(sampled, tmp_path / "s") / "report.html").read_text()
    assert "40% of the time is extrapolated" in page
    full = (reports.write_report(run, tmp_path / "f") / "report.html").read_text()
    assert "extrapolated" not in full
