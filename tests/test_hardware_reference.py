"""The H100 reference data in workloads/reference/h100 loads, has its schema and is sane."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pandas as pd
import pytest

from workloads.kernels.catalog import KERNELS
from workloads.traces.kineto import read_kineto

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "workloads" / "reference" / "h100"
sys.path.insert(0, str(REPO / "benchmarks" / "hardware"))

from own_kernels import HW_SIZES, NOT_YET_MEASURED  # noqa: E402  (harness; no GPU library)

MEASURED_KERNELS = set(KERNELS) - set(NOT_YET_MEASURED)

CLOCK_COLUMNS = ["sm_clock_mhz_median", "sm_clock_mhz_min", "sm_clock_mhz_max",
                 "mem_clock_mhz_median"]
TIME_COLUMNS = ["median_us", "min_us", "max_us"]
TABLES = {
    "own_kernels": ["kernel", "file", "size_index", "sizes", "grid_x", "grid_y", "grid_z",
                    "block_x", "block_y", "block_z", "shared_bytes", "l2_flush", "warmup",
                    "reps", *TIME_COLUMNS, *CLOCK_COLUMNS, "check"],
    "ncu_own_kernels": ["kernel", "size_index", "sizes", "grid", "block", "duration_ns",
                        "sm_cycles_elapsed_avg", "sm_clock_hz", "warp_instructions",
                        "achieved_occupancy_pct", "l1_hit_rate_pct", "l2_hit_rate_pct",
                        "dram_read_bytes", "dram_write_bytes"],
    "pointer_chase": ["footprint_bytes", "lines", "load", "mode", "warm_hops", "hops",
                      "cycles_per_hop", "ns_per_hop", "kernel_clock_mhz", *CLOCK_COLUMNS],
    "pointer_chase_repeat": ["footprint_bytes", "load", "mode", "cycles_per_hop", "ns_per_hop"],
    "microbench": ["group", "metric", "value", "unit", "median_ms", *CLOCK_COLUMNS],
    "microbench_repeat": ["group", "metric", "value", "unit", "median_ms", *CLOCK_COLUMNS],
    "gemm": ["dtype", "m", "n", "k", "model", "projection", "op", "reps", "l2_flush",
             *TIME_COLUMNS, "tflops", *CLOCK_COLUMNS],
    "sdpa": ["batch", "heads", "seq", "head_dim", "causal", "dtype", "backend", "reps",
             *TIME_COLUMNS, "tflops", *CLOCK_COLUMNS],
    "norms": ["op", "rows", "cols", "dtype", "reps", *TIME_COLUMNS, "gbps", *CLOCK_COLUMNS],
    "l2_bandwidth": ["kernel", "mode", "ctas", "chunk_bytes", "gb_per_s", "sm_clock_mhz",
                     "bytes_per_sm_clk_all"],
    "gemm_ncu_l2": ["dtype", "m", "n", "k", "kernel", "cluster_size", "duration_ns",
                    "sm_clock_mhz", "l2_clock_mhz", "l2_bytes", "l2_peak_bytes_per_l2_clk"],
    "template_ops": ["run", "case", "op", "sizes", "entry", "check", "median_us_flushed",
                     "min_us_flushed", "max_us_flushed", "median_us_warm", "min_us_warm",
                     "max_us_warm", "sim_kernel_us", "sim_error_pct"],
    "mbarrier_hw": ["mode", "warps", "lanes", "arrivals", "cycles_per_phase",
                    "cycles_per_arrival"],
    "template_ncu": ["run", "case", "entry", "metric", "value", "unit"],
}
TRACES = ("llama3_8b_layer_prefill", "llama3_8b_layer_decode")
META_KEYS = ("date_utc", "gpu", "nvidia_smi", "torch", "cuda_runtime", "nvcc", "method",
             "clocks_seen", "clocks_max", "table")


def _table(name: str) -> pd.DataFrame:
    return pd.read_csv(DATA / f"{name}.csv")


@pytest.mark.parametrize("name", [*TABLES, *TRACES])
def test_every_file_has_a_sidecar_stating_gpu_versions_clocks_date_method(name):
    """Each table and trace has NAME.meta.json naming the H100, driver, CUDA, torch, clocks."""
    meta = json.loads((DATA / f"{name}.meta.json").read_text())
    missing = [k for k in META_KEYS if k not in meta]
    assert not missing, f"{name}.meta.json lacks {missing}"
    assert "H100" in meta["gpu"] and "580." in meta["nvidia_smi"]
    assert meta["torch"].startswith("2.") and int(meta["cuda_runtime"]) >= 12000
    assert meta["clocks_max"]["sm_mhz"] > 1000
    assert meta["table"].startswith(name)


def test_data_folder_holds_only_described_files_and_stays_small():
    """No stray files; a few MB in all."""
    expected = {f"{n}.csv" for n in TABLES} | {f"{n}.json" for n in TRACES}
    expected |= {f"{n}.meta.json" for n in (*TABLES, *TRACES)}
    expected |= {"README.md", "nvidia_smi_q.txt"}
    present = {p.name for p in DATA.iterdir()}
    assert present == expected
    assert sum(p.stat().st_size for p in DATA.iterdir()) < 4 << 20


@pytest.mark.parametrize("name", list(TABLES))
def test_tables_have_their_columns_and_positive_clocks(name):
    """Expected columns; clocks (where recorded) between idle and the sidecar's maximum."""
    df = _table(name)
    assert len(df) > 0
    missing = [c for c in TABLES[name] if c not in df.columns]
    assert not missing, f"{name}.csv lacks {missing}"
    top = json.loads((DATA / f"{name}.meta.json").read_text())["clocks_max"]
    for col in [c for c in CLOCK_COLUMNS if c in df.columns]:
        limit = top["mem_mhz"] if col.startswith("mem") else top["sm_mhz"]
        assert df[col].between(300, limit).all(), col


@pytest.mark.parametrize("name", ["own_kernels", "gemm", "sdpa", "norms"])
def test_times_are_positive_and_ordered(name):
    """0 < min <= median <= max for every timed row."""
    df = _table(name)
    assert (df["min_us"] > 0).all()
    assert (df["min_us"] <= df["median_us"]).all() and (df["median_us"] <= df["max_us"]).all()


def test_own_kernels_cover_the_catalog_at_the_harness_sizes_both_flush_modes():
    """Every catalog kernel at each HW_SIZES size, L2 warm and flushed, launch recorded
    (except those added after the measurement, `NOT_YET_MEASURED`, which have sizes)."""
    df = _table("own_kernels")
    assert set(df["kernel"]) == MEASURED_KERNELS
    assert set(NOT_YET_MEASURED) <= set(HW_SIZES) & set(KERNELS)
    for (kernel, index), rows in df.groupby(["kernel", "size_index"]):
        assert json.loads(rows["sizes"].iloc[0]) == HW_SIZES[kernel][index], kernel
        assert sorted(rows["l2_flush"]) == [False, True], kernel
        assert rows["file"].iloc[0] == KERNELS[kernel].file
    assert sorted(df.groupby("kernel")["size_index"].nunique().unique()) == [2]
    threads = df["block_x"] * df["block_y"] * df["block_z"]
    assert threads.between(1, 1024).all()
    assert (df["grid_x"] * df["grid_y"] * df["grid_z"] >= 1).all()


def test_own_kernel_checks_are_ok_or_name_the_element():
    """A check is 'ok' or a FAIL naming the argument and element; nearly all are ok."""
    df = _table("own_kernels")
    checks = df["check"].astype(str)
    assert checks.map(lambda c: c == "ok" or (c.startswith("FAIL: ") and " arg " in c)).all()
    assert (checks == "ok").mean() > 0.95


def test_ncu_counters_cover_the_catalog_and_are_in_range():
    """Two launches per kernel; rates in percent, byte counts and instruction counts >= 0."""
    df = _table("ncu_own_kernels")
    assert set(df["kernel"]) == MEASURED_KERNELS
    assert (df.groupby("kernel").size() == 2).all()
    for col in ("achieved_occupancy_pct", "l1_hit_rate_pct"):
        assert df[col].between(0, 100).all(), col
    # ncu's L2 sector hit rate exceeds 100 % on a few launches (absmax_cas 110 %, as read)
    assert df["l2_hit_rate_pct"].between(0, 120).all()
    for col in ("dram_read_bytes", "dram_write_bytes", "warp_instructions"):
        assert (df[col] >= 0).all(), col
    assert (df["duration_ns"] > 0).all() and (df["sm_cycles_elapsed_avg"] > 0).all()
    # cycles / duration is the SM clock ncu reports beside it (within 5 %)
    ghz = df["sm_cycles_elapsed_avg"] / df["duration_ns"]
    assert ((ghz * 1e9 / df["sm_clock_hz"]).between(0.95, 1.05)).all()


@pytest.mark.parametrize("name", ["pointer_chase", "pointer_chase_repeat"])
def test_pointer_chase_levels_are_ordered(name):
    """cycles / ns agrees with the kernel clock; L1 hits < L2 hits < HBM at every footprint."""
    df = _table(name)
    assert (df["cycles_per_hop"] > 0).all() and (df["ns_per_hop"] > 0).all()
    assert set(df["load"]) == {"ca", "cg"} and set(df["mode"]) == {"warm", "cold"}
    if "kernel_clock_mhz" in df:
        derived = 1e3 * df["cycles_per_hop"] / df["ns_per_hop"]
        assert ((derived - df["kernel_clock_mhz"]).abs() < 2).all()
    ca = df[df["load"] == "ca"].set_index("footprint_bytes")["cycles_per_hop"]
    cg = df[df["load"] == "cg"].set_index("footprint_bytes")["cycles_per_hop"]
    l1 = ca[ca.index <= 64 << 10]
    assert len(l1) and (l1 < cg.min()).all()          # L1 hits beat any L2 hit
    assert cg[cg.index <= 16 << 20].max() < cg[cg.index >= 256 << 20].min()   # L2 < HBM
    assert (cg.sort_index().diff().dropna() > -20).all()   # latency never drops with size


@pytest.mark.parametrize("name", ["microbench", "microbench_repeat"])
def test_microbench_units_and_values(name):
    """Known units; every value finite and positive unless its row notes why not."""
    df = _table(name)
    assert set(df["unit"]) <= {"GB/s", "B/clk/SM", "FMA results/clk/SM", "ex2 results/clk/SM",
                               "FMA/clk/SM"}
    for _, row in df.iterrows():
        if not (math.isfinite(row["value"]) and row["value"] > 0):
            assert "ptxas" in str(row["check"]), row["metric"]
    assert {"hbm", "shared", "pipe", "tensor"} <= set(df["group"])


def test_gemm_grid_and_tflops_agree_with_times():
    """M from 64 to 16384 for every (N, K) and dtype; TFLOP/s = 2 M N K / median."""
    df = _table("gemm")
    assert set(df["dtype"]) == {"bf16", "fp8"}
    for _, rows in df.groupby(["n", "k", "dtype"]):
        assert rows["m"].min() == 64 and rows["m"].max() == 16384
    tflops = 2 * df["m"] * df["n"] * df["k"] / (df["median_us"] * 1e-6) / 1e12
    assert ((tflops - df["tflops"]).abs() <= 0.06 + 1e-3 * tflops).all()
    assert (df.loc[df["dtype"] == "bf16", "tflops"] < 990).all()     # dense bf16 peak
    assert (df.loc[df["dtype"] == "fp8", "tflops"] < 1980).all()     # dense fp8 peak


def test_sdpa_covers_head_dims_causal_and_seqlens():
    """Head dims 64/128, causal and not, 512..16K; causal TFLOP/s count half the FLOPs."""
    df = _table("sdpa")
    assert set(df["head_dim"]) == {64, 128} and set(df["causal"]) == {True, False}
    assert df["seq"].min() == 512 and df["seq"].max() == 16384
    flops = 4 * df["batch"] * df["heads"] * df["seq"] ** 2 * df["head_dim"]
    flops = flops.where(~df["causal"], flops / 2)
    tflops = flops / (df["median_us"] * 1e-6) / 1e12
    assert ((tflops - df["tflops"]).abs() <= 0.06 + 1e-3 * tflops).all()


def test_norms_bandwidth_below_hbm_peak():
    """RMSNorm, LayerNorm and softmax rows; GB/s = 4 rows cols / median, under 3.35 TB/s."""
    df = _table("norms")
    assert {"rmsnorm", "layernorm", "softmax"} == set(df["op"])
    gbps = 4 * df["rows"] * df["cols"] / (df["median_us"] * 1e-6) / 1e9
    assert ((gbps - df["gbps"]).abs() <= 0.06 + 1e-3 * gbps).all()
    assert (df["gbps"] < 3350).all()


@pytest.mark.parametrize("name", TRACES)
def test_traces_parse_with_the_kineto_importer(name):
    """Kernels with launch ops and shapes; GEMMs under aten::mm; two profiled steps."""
    df = read_kineto(DATA / f"{name}.json")
    kernels = df[df["kind"] == "kernel"]
    assert len(kernels) > 50
    assert (kernels["dur_us"] > 0).all()
    assert kernels["cpu_op"].notna().mean() > 0.9
    assert (kernels["cpu_op"] == "aten::mm").sum() >= 8     # 4 projections x 2 steps
    phase = name.rsplit("_", 1)[1]
    assert (kernels["annotation"] == phase).mean() > 0.9


def test_template_ops_checks_pass_and_times_are_ordered():
    """Our templates on the H100: checked outputs within bf16 error, min <= median <= max,
    and every simulated row's error is what its two times say."""
    df = _table("template_ops")
    checked = df["check"].dropna()
    assert len(checked) >= 2 and checked.str.startswith("ok").all()
    for mode in ("flushed", "warm"):
        assert (df[f"min_us_{mode}"] > 0).all()
        assert (df[f"min_us_{mode}"] <= df[f"median_us_{mode}"]).all()
        assert (df[f"median_us_{mode}"] <= df[f"max_us_{mode}"]).all()
    sim = df.dropna(subset=["sim_kernel_us"])
    err = 100 * (sim["sim_kernel_us"] / sim["median_us_flushed"] - 1)
    assert (err - sim["sim_error_pct"]).abs().max() < 0.1


def test_mbarrier_phases_cover_every_mode_and_cluster_release_costs_more():
    """Four arrival modes x warps x lanes; a cluster-scope release (modes 1, 3) makes a
    phase several times longer than a CTA-scope one (modes 0, 2)."""
    df = _table("mbarrier_hw")
    assert set(df["mode"]) == {0, 1, 2, 3} and (df["cycles_per_phase"] > 0).all()
    assert (df["arrivals"] == df["warps"] * df["lanes"]).all()
    by_mode = df.groupby("mode")["cycles_per_phase"].median()
    assert by_mode[1] > 2 * by_mode[2] and by_mode[3] > 2 * by_mode[0]


def test_layer_ncu_table_reads_ncus_raw_csv(tmp_path):
    """`layer_ncu.py --table`: ncu's raw CSV (header, units row, `==PROF==` notes between)
    becomes one row per launch in launch order, values in the table's units (bytes, ns)."""
    import layer_ncu

    metrics = list(layer_ncu.METRICS)
    header = ["ID", "Kernel Name", "Grid Size", "Block Size", *metrics]
    units = ["", "", "", "", "usecond", "Mbyte", "Kbyte", *[""] * (len(metrics) - 3)]
    rows = [["0", "CatArrayBatchedCopy_x", "(4224, 2, 1)", "(128, 1, 1)", "187.9", "1,34.5",
             "67.1", *["8"] * (len(metrics) - 3)],
            ["1", "elementwise_kernel", "(32768, 1, 1)", "(128, 1, 1)", "42.3", "10", "5",
             *["1"] * (len(metrics) - 3)]]
    raw = tmp_path / "raw.csv"
    text = "==PROF== Connected\n" + "\n".join(",".join(f'"{v}"' for v in r)
                                            for r in (header, units, rows[0]))
    raw.write_text(text + "\n==PROF== note\n" + ",".join(f'"{v}"' for v in rows[1]) + "\n")
    assert layer_ncu.table(raw, tmp_path / "out.csv") == 0
    out = pd.read_csv(tmp_path / "out.csv")
    assert out["launch"].tolist() == [0, 1]
    assert out["kernel"].tolist() == ["CatArrayBatchedCopy_x", "elementwise_kernel"]
    assert out["duration_ns"].tolist() == [187900.0, 42300.0]
    assert out["dram_read_bytes"].tolist() == [134.5e6, 10e6]
    assert out["dram_write_bytes"].tolist() == [67.1e3, 5e3]
    assert out["lts_write_sectors"].tolist() == [8, 1]
    assert json.loads((tmp_path / "out.meta.json").read_text())["rows"] == 2
