"""Reference comparison logic: every kernel gets a status and a reason, errors, MAPE, Pearson
r and category sums follow their formulas (op timing stubbed by a closed form)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import models
import workloads.ops as ops
from reports import compare
from workloads.ops.registry import Flag
from workloads.traces import map_kernels, read_kernel_csv
from workloads.traces.reference_ops import op_kind, row_sizes, simulate_reference, sizes_from_dims

FIXTURE = Path(__file__).parent / "fixtures" / "reference_kernels.csv"


@pytest.fixture()
def stubbed(monkeypatch):
    """simulate_op -> 1 us per million FLOP + 1 us; counts the calls."""
    calls = []

    def fake(plan, config, fidelity=None):
        calls.append((plan.kind, json.dumps(plan.sizes, sort_keys=True, default=str)))
        return {"time_us": plan.flops / 1e6 + 1.0}

    monkeypatch.setattr(ops, "simulate_op", fake)
    return calls


@pytest.fixture()
def result(stubbed):
    mapped = map_kernels(read_kernel_csv(FIXTURE))
    return simulate_reference(mapped, models.load_preset("h100_sxm"), "sampled")


def test_every_kernel_is_kept_with_a_status_and_unsimulated_ones_have_a_reason(result):
    """8 rows in, 8 out; unmatched, no-op and rejected sizes are named, never dropped."""
    assert len(result) == 8
    by_name = dict(zip(result["name"], result["status"], strict=False))
    assert by_name["custom_fused_router_v3"] == "unmatched"
    assert by_name["void dpsk::grouped_gemm::cuda::fill_tensormaps_kernel(TensorMapParams)"] \
        == "no_op"
    assert (result["status"] == "error").sum() == 1
    rest = result[result["status"] != "simulated"]
    assert rest["reason"].map(lambda r: isinstance(r, str) and len(r) > 10).all()
    assert "--k 0" in rest.loc[rest["status"] == "error", "reason"].item()


def test_identical_kernels_are_simulated_once(result, stubbed):
    """The repeated 128x128x256 GEMM is one simulation; every distinct shape is one."""
    assert len(stubbed) == len(set(stubbed)) == 4


def test_simulated_time_is_the_op_time_of_the_csv_sizes(result):
    """A GEMM row's simulated time is the stub's 2mnk/1e6 + 1 us."""
    row = result[(result["kind"] == "gemm") & (result["status"] == "simulated")].iloc[1]
    sizes = json.loads(row["sizes"])
    assert row["simulated_us"] == pytest.approx(2 * sizes["m"] * sizes["n"] * sizes["k"] / 1e6
                                                + 1)


def test_error_mape_and_pearson_follow_their_formulas(result):
    """error % = 100 (sim - meas) / meas; MAPE = mean |error %|; r = corrcoef."""
    table = compare.kernel_errors(result)
    done = table[table["status"] == "simulated"]
    meas, sim = done["measured_us"].to_numpy(), done["simulated_us"].to_numpy()
    assert np.allclose(done["error_pct"], 100 * (sim - meas) / meas)
    summary = compare.error_summary(result)
    assert summary["mape_pct"] == pytest.approx(np.mean(np.abs(100 * (sim - meas) / meas)))
    assert summary["pearson_r"] == pytest.approx(np.corrcoef(meas, sim)[0, 1])
    assert summary["coverage"] == pytest.approx(meas.sum() / table["measured_us"].sum())
    assert summary["simulated"] + summary["not_simulated"] == summary["kernels"] == 8


def test_category_sums_add_up_to_the_totals(result):
    """Per-category measured time sums to the trace's; simulated sums to the summary's."""
    cats = compare.category_summary(result)
    summary = compare.error_summary(result)
    assert cats["dur_us"].sum() == pytest.approx(result["dur_us"].sum())
    assert cats["simulated_sum_us"].sum() == pytest.approx(summary["simulated_sum_us"])
    assert "unmatched" in set(cats["category"])


def test_pearson_is_undefined_for_fewer_than_two_points():
    """One point or a constant column gives NaN, not a number."""
    assert math.isnan(compare.pearson_r([1.0], [2.0]))
    assert math.isnan(compare.pearson_r([1.0, 2.0], [3.0, 3.0]))


def test_write_compare_files_and_scatter(result, tmp_path):
    """The folder has the three CSVs, summary.json, a PNG scatter, a page without links and
    the manifest listing exactly those files."""
    out = compare.write_compare(result, tmp_path / "cmp", about={"model": "h100_sxm"})
    names = {p.name for p in out.iterdir()}
    written = {"kernels.csv", "categories.csv", "unsimulated.csv", "streams.csv",
               "timeline.csv", "summary.json", "scatter.png", "timeline.png", "compare.html"}
    assert names == written | {".ptxsim-manifest.json"}
    assert set(json.loads((out / ".ptxsim-manifest.json").read_text())["files"]) == written
    assert (out / "scatter.png").read_bytes()[:4] == b"\x89PNG"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["model"] == "h100_sxm" and summary["kernels"] == 8
    assert len(pd.read_csv(out / "unsimulated.csv")) == 3
    assert "<table id=\"categories\">" in (out / "compare.html").read_text()


@pytest.mark.parametrize(("op", "kind"), [("gemm", "gemm"), ("grouped_gemm", "gemm"),
                                          ("residual_add", "residual-add"), ("setup", None),
                                          (None, None)])
def test_mapped_op_names_resolve_to_registry_kinds(op, kind):
    """Exact name, `_` as `-`, or an alias; None where nothing is registered."""
    registry = {"gemm": 1, "residual-add": 1}
    assert op_kind(op, registry) == kind


def test_kineto_input_dims_give_gemm_and_row_sizes():
    """aten::mm [[m,k],[k,n]], aten::linear [[b,s,k],[n,k]], bmm and a norm's [rows, cols]."""
    gemm = {"m", "n", "k", "groups"}
    assert sizes_from_dims("gemm", "aten::mm", [[64, 32], [32, 16]], gemm) == \
        {"m": 64, "k": 32, "n": 16}
    assert sizes_from_dims("gemm", "aten::linear", [[2, 8, 32], [16, 32], [16]], gemm) == \
        {"m": 16, "k": 32, "n": 16}
    assert sizes_from_dims("gemm", "aten::bmm", [[4, 8, 32], [4, 32, 16]], gemm) == \
        {"groups": 4, "m": 8, "k": 32, "n": 16}
    assert sizes_from_dims("rmsnorm", "rms_norm", [[2, 8, 512], [512]], {"rows", "cols"}) == \
        {"rows": 16, "cols": 512}


def test_missing_required_sizes_are_named():
    """A trace row without shapes lists the builder's required flags as missing."""
    flags = (Flag("--rows", "rows", required=True), Flag("--cols", "cols", required=True))
    sizes, missing = row_sizes({"input_shapes": None, "cpu_op": None}, "rmsnorm", flags)
    assert sizes == {} and missing == ["--rows", "--cols"]


def test_kineto_trace_with_input_dims_is_simulated_from_its_cpu_ops(stubbed, tmp_path):
    """A Kineto trace whose kernels were launched inside aten::mm / rms_norm CPU ops with
    recorded "Input Dims": both kernels get their sizes from those dims."""
    from workloads.traces import read_kineto

    def op(name, ts, shapes):
        return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts,
                "dur": 10, "args": {"Input Dims": shapes}}

    def launch(corr, ts):
        return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                "tid": 1, "ts": ts, "dur": 1, "args": {"correlation": corr}}

    def kernel(corr, name, ts):
        return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts,
                "dur": 5, "args": {"stream": 7, "correlation": corr, "device": 0,
                                   "grid": [1, 1, 1], "block": [128, 1, 1]}}

    gemm_name = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_kernel"
    events = [op("aten::mm", 0, [[128, 256], [256, 64]]), launch(1, 5),
              op("rms_norm", 20, [[64, 1024], [1024]]), launch(2, 25),
              kernel(1, gemm_name, 100), kernel(2, "rms_norm_kernel<float>", 110)]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    result = simulate_reference(map_kernels(read_kineto(path)),
                                models.load_preset("h100_sxm"), "sampled")
    assert list(result["status"]) == ["simulated", "simulated"]
    assert [json.loads(s) for s in result["sizes"]] == [{"k": 256, "m": 128, "n": 64},
                                                        {"cols": 1024, "rows": 64}]
