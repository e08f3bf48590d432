"""One definition per figure: the three times of a kernel reconcile, one roofline, time
columns that are points are never called `time_us`, achieved TFLOP/s count the MACs issued,
and bandwidth over time stays under the chip's peaks."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import models
import simulator
import workloads
from models import cached_memory_layout as ck
from models.roofline import chip_peaks, roofline_time_us
from models.timeline_tracer import TIMELINE_COLUMNS, TimelineTracer
from reports.kernel_table import KERNEL_COLUMNS, column_units, kernel_table
from reports.plot_timeline import TIMELINE_COLUMNS as PLOTTED_COLUMNS
from reports.workload_timeline import COLUMNS as LAYER_COLUMNS
from reports.workload_timeline import workload_timeline
from simulator.framework.stats import within_peak
from tests.test_reports_tables import _config, _stats
from workloads.kernels.case import load_ptx

N, BLOCK = 1 << 14, 256


@pytest.fixture(scope="module")
def h800():
    return models.load_preset("h800_sxm")


@pytest.fixture(scope="module")
def saxpy(h800):
    x = np.arange(N, dtype=np.float32)
    y = np.ones(N, np.float32)
    return simulator.simulate_kernel(load_ptx("saxpy.cu"), "saxpy", (N // BLOCK, 1, 1),
                                     (BLOCK, 1, 1), [N, np.float32(1.5), x, y], config=h800)


@pytest.fixture(scope="module")
def bert(h800):
    graph = workloads.layer("bert-base", batch=1, seqlen=128)
    return simulator.simulate_workload(graph, config=h800, fidelity="sampled")


def test_kernel_cycles_span_kernel_time_and_time_reconcile(saxpy, h800):
    """cycles / SM clock = span_us; + front end = kernel_time_us (the stats' and the
    result's); + launch overhead = time_us (`KernelResult.time_us`)."""
    row = kernel_table(saxpy.stats, saxpy.config).iloc[0]
    assert row["cycles"] == saxpy.cycles
    assert row["sm_clock_ghz"] == h800.chip.clock_ghz
    assert row["span_us"] == pytest.approx(saxpy.cycles / (h800.chip.clock_ghz * 1e3))
    assert row["front_end_us"] == h800.launch.kernel_front_end_us > 0
    assert row["launch_overhead_us"] == h800.launch.kernel_overhead_us > 0
    assert row["kernel_time_us"] == saxpy.kernel_time_us
    assert row["kernel_time_us"] == pytest.approx(row["span_us"] + row["front_end_us"],
                                                  abs=1e-6)
    assert row["time_us"] == pytest.approx(saxpy.time_us, rel=1e-12)
    assert row["time_us"] == pytest.approx(row["kernel_time_us"] + row["launch_overhead_us"])


def test_each_time_column_carries_its_unit_and_definition():
    """The three times and the span are declared with their unit and the formula that links
    them; the duplicate names a reader met before are gone."""
    meaning = {name: text for name, _, text in KERNEL_COLUMNS}
    units = column_units()
    assert {units[c] for c in ("time_us", "kernel_time_us", "span_us")} == {"us"}
    assert units["cycles"] == "cycles" and units["sm_clock_ghz"] == "GHz"
    assert "kernel_time_us + launch_overhead_us" in meaning["time_us"]
    assert "span_us + front_end_us" in meaning["kernel_time_us"]
    assert "cycles / sm_clock_ghz" in meaning["span_us"]
    assert not {"roofline_time_us", "gap", "tflops"} & set(meaning)


def test_a_workload_kernel_table_has_one_roofline_the_ops_own(bert, h800):
    """The kernel table of a workload carries the op's roofline_us and bound (no second
    roofline, no `gap`/`tflops` beside roofline_gap/achieved_tflops), and the table's peaks
    and bytes reproduce it through the one function."""
    table = kernel_table(bert.stats, h800.to_dict(), bert.kernels).set_index("kernel")
    assert not {"gap", "tflops", "roofline_time_us"} & set(table.columns)
    ops = bert.kernels.set_index("name")
    assert np.allclose(table["roofline_us"], ops.loc[table.index, "roofline_us"])
    assert list(table["bound"]) == list(ops.loc[table.index, "bound"])
    assert np.allclose(table["roofline_gap"], table["time_us"] / table["roofline_us"])
    again = roofline_time_us(table["flops"], table["roofline_bytes"], table["peak_tflops"],
                             table["peak_hbm_gbps"])
    assert np.allclose(again, table["roofline_us"], rtol=1e-12)


def test_a_workload_node_shows_launch_times_only_where_its_stats_add_up_to_it(bert, h800):
    """Nodes timed as launched: cycles, span, kernel time and time reconcile; a node whose
    time is not its stats' (stretched, re-timed, sampled) shows none rather than another."""
    table = kernel_table(bert.stats, h800.to_dict(), bert.kernels)
    assert table["cycles"].notna().all()
    assert np.allclose(table["kernel_time_us"] + table["launch_overhead_us"],
                       table["time_us"])
    assert np.allclose(table["span_us"] + table["front_end_us"], table["kernel_time_us"],
                       atol=1e-6)
    stretched = bert.kernels.copy()
    stretched.loc[0, "time_us"] *= 1.5
    row = kernel_table(bert.stats, h800.to_dict(), stretched).iloc[0]
    assert row["time_us"] == stretched.loc[0, "time_us"]
    assert np.isnan(row["cycles"]) and np.isnan(row["kernel_time_us"])


def test_achieved_tflops_count_the_macs_issued():
    """A GEMM whose co-design units skip half its MACs: issued FLOPs are half its dense
    FLOPs; causal attention's skipped zeros lie outside its FLOPs, which it all issues."""
    kernels = pd.DataFrame({"name": ["gemm", "attn", "plain"],
                            "op": ["gemm", "attention", "gemm"],
                            "kind": ["gemm", "attention", "gemm"],
                            "flops": [1e12, 1e12, 1e12], "time_us": [10.0, 10.0, 10.0],
                            "macs": [5e11, 5e11, 5e11], "macs_skipped": [2.5e11, 1e10, 0.0]})
    table = kernel_table(None, _config(), kernels).set_index("kernel")
    assert table.loc["gemm", "issued_flops"] == 5e11
    assert table.loc["gemm", "achieved_tflops"] == pytest.approx(5e11 / (10.0 * 1e6))
    assert table.loc["attn", "issued_flops"] == table.loc["plain", "issued_flops"] == 1e12
    assert table.loc["gemm", "flops"] == 1e12


def test_stats_only_kernel_without_launch_rows_costs_its_kernel_time():
    """Stats without front-end or overhead rows: those count 0 and time_us = kernel time."""
    row = kernel_table(_stats(), _config()).iloc[0]
    assert row["launch_overhead_us"] == 0 and row["time_us"] == row["kernel_time_us"]


def test_timeline_times_are_points_and_none_is_called_time_us(saxpy):
    """Kernel, layer and plotted timelines name a bin's bounds start_us and end_us (points
    in time); `time_us` stays a duration."""
    for columns in (TIMELINE_COLUMNS, LAYER_COLUMNS, PLOTTED_COLUMNS):
        assert "end_us" in columns and "time_us" not in columns
    tl = saxpy.timeline
    buckets = tl[tl["stat"] != "cta_span"]
    assert (buckets["end_us"] > buckets["start_us"]).all()


def _over_peak(frame: pd.DataFrame, peaks: dict) -> dict[str, float]:
    """Level -> the largest bandwidth above its peak (empty: none above)."""
    out = {}
    for level in ("hbm", "l2"):
        bw = frame[(frame["component"] == f"memory.{level}")
                   & (frame["stat"] == "bandwidth_gbps")]["value"]
        if len(bw) and bw.max() > peaks[f"{level}_gbps"] * (1 + 1e-12):
            out[level] = float(bw.max())
    return out


def test_within_peak_carries_each_buckets_excess_to_the_buckets_before():
    """[1, 5, 1, 9] under 3 per bucket: 9 keeps 3 and passes 6 back, ... the first bucket
    keeps what no earlier bucket can take; the total stays 16."""
    assert within_peak([1, 5, 1, 9], 3).tolist() == [7, 3, 3, 3]
    assert within_peak([1, 2, 3], np.inf).tolist() == [1, 2, 3]
    assert within_peak([4, 0, 0], 3).tolist() == [4, 0, 0]


def test_a_tracer_given_the_peaks_keeps_each_level_within_them():
    """A burst of HBM reads completing in one bucket: given the HBM peak, no bucket of the
    frame reads above it and the bytes sum to what the requests moved."""
    peak_gbps, clock_ghz, sector = 100.0, 1.0, ck.SECTOR_BYTES_ASSUMED
    tracer = TimelineTracer([0], subpartitions=4, clock_ghz=clock_ghz,
                            level_peaks_gbps={"hbm": peak_gbps})
    counts = np.zeros((64, ck.N_COUNTS), np.int64)
    counts[:, ck.C_HBM_READ] = 4
    done_ps = np.full(64, 1_000_000)              # all done at 1 us: 8 KiB in one bucket
    tracer._add_memory(done_ps, counts)
    tl = tracer.frame("run", "k", 2000)
    hbm = tl[tl["component"] == "memory.hbm"].pivot_table(index="end_us", columns="stat",
                                                          values="value")
    assert hbm["bytes"].sum() == pytest.approx(64 * 4 * sector)
    assert hbm["bandwidth_gbps"].max() <= peak_gbps * (1 + 1e-12)
    free = TimelineTracer([0], subpartitions=4, clock_ghz=clock_ghz)
    free._add_memory(done_ps, counts)
    bw = free.frame("run", "k", 2000)
    assert bw[(bw["component"] == "memory.hbm")
              & (bw["stat"] == "bandwidth_gbps")]["value"].max() > peak_gbps


def test_layer_bandwidth_over_time_never_exceeds_the_chip_peak(bert, h800):
    """No bin of the layer's timeline lies above the HBM or L2 peak of `chip_peaks`, though
    single launches show bursts above it in their own short buckets; the layer's bins hold
    the kernel table's bytes."""
    peaks = chip_peaks(h800.to_dict())
    tl = workload_timeline(bert, bins=200)
    assert _over_peak(tl, peaks) == {}
    hbm = tl[(tl["component"] == "memory.hbm") & (tl["stat"] == "bytes")]["value"].sum()
    assert hbm == pytest.approx(bert.kernels["hbm_bytes"].sum(), rel=1e-9)
    fine = workload_timeline(bert, bins=4000)
    assert _over_peak(fine, peaks) == {}
