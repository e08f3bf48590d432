"""Per-kernel table and roofline: columns with units, closed forms, bounded fractions."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import models
from models.roofline import chip_peaks, roofline_bound, roofline_time_us
from reports.kernel_table import KERNEL_COLUMNS, STALL_COLUMNS, column_units, kernel_table

CYCLES, TIME_US, SMS, SUBPARTITIONS = 1000, 2.0, 4, 4


def _config() -> dict:
    return models.load_preset("h100_sxm", overrides={"sm.count": SMS}).to_dict()


def _stats(kernel: str = "k", fp32_issued: int = 500, hbm_bytes: int = 64_000) -> pd.DataFrame:
    rows = [
        ("kernel", "cycles", CYCLES, "cycles"), ("kernel", "time_us", TIME_US, "us"),
        ("kernel", "achieved_occupancy", 0.25, "fraction"),
        ("kernel", "theoretical_occupancy", 0.5, "fraction"),
        ("sm.units.fp32", "issued", fp32_issued, "count"),
        ("sm.units.fp32", "busy_cycles", 8000, "cycles"),
        ("sm.units.lsu", "issued", 100, "count"),
        ("sm.units.lsu", "busy_cycles", 400, "cycles"),
        ("sm.scheduler.memory", "stall_cycles", 600, "cycles"),
        ("sm.scheduler.dependency", "stall_cycles", 200, "cycles"),
        ("sm.scheduler.barrier", "stall_cycles", 100, "cycles"),
        ("sm.scheduler.pipe_busy", "stall_cycles", 50, "cycles"),
        ("sm.scheduler.no_warp", "stall_cycles", 50, "cycles"),
        ("memory.l1.load", "bytes", 4000, "B"),
        ("memory.l1.load", "hit_sectors", 30, "count"),
        ("memory.l1.load", "miss_sectors", 90, "count"),
        ("memory.l1.store", "bytes", 1000, "B"),
        ("memory.l2.load", "bytes", 3000, "B"),
        ("memory.hbm.load", "bytes", hbm_bytes, "B"),
    ]
    return pd.DataFrame([("run", kernel, c, s, float(v), u) for c, s, v, u in rows],
                        columns=["run_id", "kernel", "component", "stat", "value", "unit"])


def test_table_has_every_declared_column_with_a_unit():
    """The table's columns are exactly KERNEL_COLUMNS, and its attrs carry their units."""
    table = kernel_table(_stats(), _config())
    assert list(table.columns) == [name for name, _, _ in KERNEL_COLUMNS]
    assert table.attrs["units"] == column_units()
    assert column_units()["time_us"] == "us" and column_units()["hbm_gbps"] == "GB/s"
    text = {"run_id", "kernel", "op", "stream", "flops_source", "compute_peak", "bound"}
    assert all(unit for name, unit, _ in KERNEL_COLUMNS if name not in text)


def test_chip_peaks_match_the_live_config_closed_forms():
    """Peaks read from the config dict equal the GpuSpec methods (same closed forms)."""
    cfg = models.load_preset("h100_sxm")
    peaks = chip_peaks(cfg.to_dict())
    assert peaks["tensor_bf16_tflops"] == pytest.approx(cfg.peak_tensor_tflops("bf16"))
    assert peaks["vector_fp32_tflops"] == pytest.approx(cfg.peak_vector_tflops("fp32"))
    assert peaks["hbm_gbps"] / 1e3 == pytest.approx(cfg.hbm_peak_tbps)
    assert peaks["l2_gbps"] / 1e3 == pytest.approx(cfg.l2_peak_tbps)


def test_roofline_time_is_the_larger_of_compute_and_memory_time():
    """1e12 FLOP at 100 TFLOP/s = 10 ms; 1e9 B at 1000 GB/s = 1 ms -> 10 ms, compute."""
    assert roofline_time_us(1e12, 1e9, 100.0, 1000.0) == pytest.approx(10_000.0)
    assert roofline_bound(1e12, 1e9, 100.0, 1000.0) == "compute"
    assert roofline_time_us(1e9, 1e10, 100.0, 1000.0) == pytest.approx(10_000.0)
    assert roofline_bound(1e9, 1e10, 100.0, 1000.0) == "memory"


def test_flops_estimate_counts_fp32_warp_instructions_as_full_warp_fma():
    """500 FP32 warp-instructions x 32 lanes x 2 FLOP = 32000 FLOP; TFLOP/s = FLOP / time."""
    row = kernel_table(_stats(), _config()).iloc[0]
    assert row["flops"] == 500 * 32 * 2
    assert row["flops_source"].startswith("estimated")
    assert row["achieved_tflops"] == pytest.approx(32_000 / (TIME_US * 1e6))


def test_roofline_columns_follow_the_closed_form_for_the_kernel():
    """Roofline time, bound and gap from FLOP, HBM bytes (a kernel without minimum bytes) and
    the config's peaks."""
    peaks = chip_peaks(_config())
    row = kernel_table(_stats(), _config()).iloc[0]
    expected = max(32_000 / (peaks["vector_fp32_tflops"] * 1e6), 64_000 / (peaks["hbm_gbps"] * 1e3))
    assert row["roofline_us"] == pytest.approx(expected)
    assert row["roofline_bytes"] == 64_000
    assert row["bound"] == "memory"
    assert row["roofline_gap"] == pytest.approx(TIME_US / expected)
    assert row["compute_peak"] == "vector fp32"


def test_given_flops_win_over_the_estimate():
    """A kernels table with a flops column replaces the FP-issue estimate."""
    kernels = pd.DataFrame({"name": ["k"], "flops": [1e9], "stream": ["compute"]})
    row = kernel_table(_stats(), _config(), kernels).iloc[0]
    assert row["flops"] == 1e9 and row["flops_source"] == "given"
    assert row["stream"] == "compute" and row["cycles"] == CYCLES


def test_bytes_bandwidth_and_hit_rates_per_level():
    """Bytes sum over access kinds; GB/s = B / (us x 1e3); hit rate = hits / sectors."""
    row = kernel_table(_stats(), _config()).iloc[0]
    assert row["l1_bytes"] == 5000 and row["l2_bytes"] == 3000 and row["hbm_bytes"] == 64_000
    assert row["hbm_gbps"] == pytest.approx(64_000 / (TIME_US * 1e3))
    assert row["l1_hit_rate"] == pytest.approx(30 / 120)
    assert np.isnan(row["l3_bytes"])


def test_utilization_is_busy_over_cycles_sms_subpartitions_and_at_most_one():
    """util = busy / (cycles x SMs x sub-partitions), within [0, 1]."""
    row = kernel_table(_stats(), _config()).iloc[0]
    assert row["util_fp32"] == pytest.approx(8000 / (CYCLES * SMS * SUBPARTITIONS))
    utils = row[[c for c in row.index if c.startswith("util_")]].dropna().astype(float)
    assert ((utils >= 0) & (utils <= 1)).all()


def test_stall_fractions_sum_to_one():
    """Stall shares by reason add up to 1; pipe busy is 'issue', no warp is 'idle'."""
    row = kernel_table(_stats(), _config()).iloc[0]
    shares = [row[f"stall_{s}_frac"] for s in STALL_COLUMNS]
    assert sum(shares) == pytest.approx(1.0)
    assert row["stall_memory_frac"] == pytest.approx(0.6)
    assert row["stall_issue_frac"] == pytest.approx(0.05)
    assert row["stall_idle_frac"] == pytest.approx(0.05)


def test_workload_kernels_without_stats_get_roofline_from_graph_columns():
    """A graph's flops and bytes_min give the bound; GEMMs use the tensor peak."""
    kernels = pd.DataFrame({"name": ["gemm", "norm"], "op": ["gemm", "rmsnorm"],
                            "flops": [1e12, 1e6], "bytes_min": [1e8, 1e8],
                            "start_us": [0.0, 10.0], "end_us": [10.0, 12.0]})
    table = kernel_table(None, _config(), kernels)
    peaks = chip_peaks(_config())
    assert list(table["compute_peak"]) == ["tensor bf16", "vector fp32"]
    assert list(table["bound"]) == ["compute", "memory"]
    assert table["roofline_us"].iloc[1] == pytest.approx(1e8 / (peaks["hbm_gbps"] * 1e3))
    assert list(table["time_us"]) == [10.0, 2.0]


def test_one_row_per_kernel_of_a_multi_kernel_stats_table():
    """Stats of two kernels give two rows in their order."""
    stats = pd.concat([_stats("a"), _stats("b", fp32_issued=10)], ignore_index=True)
    table = kernel_table(stats, _config())
    assert list(table["kernel"]) == ["a", "b"]
    assert list(table["flops"]) == [32_000, 640]


def test_a_kernel_with_no_flops_and_no_hbm_bytes_has_no_roofline_bound():
    """A link-timed communication node (no FLOPs, no HBM bytes, no stats) is bound 'none'."""
    kernels = pd.DataFrame({"name": ["k", "dispatch"], "flops": [1e9, 0.0],
                            "stream": ["compute", "comm"], "time_us": [TIME_US, 50.0]})
    table = kernel_table(_stats(), _config(), kernels).set_index("kernel")
    assert table.loc["dispatch", "bound"] == "none"
    assert table.loc["k", "bound"] in ("compute", "memory")
