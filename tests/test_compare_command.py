"""`ptxsim compare` end to end: a small CSV reference simulated for real, a Kineto excerpt
whose kernels are all listed, and flag errors that name the flag."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

import models
from simulator.app.cli import main
from workloads.ops import build_op, simulate_op

FIXTURE = Path(__file__).parent / "fixtures" / "reference_kernels.csv"
EXCERPT = Path(__file__).parents[1] / "workloads" / "reference" / \
    "deepseek_v3_trace_excerpt.json"


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    out = tmp_path_factory.mktemp("compare") / "csv"
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = main(["compare", "--reference", str(FIXTURE), "--model", "h100_sxm",
                       "--json", "--out", str(out)])
    assert status == 0
    return json.loads(printed.getvalue()), out


def test_json_has_the_summary_categories_and_every_kernel(compared):
    """Kernels, MAPE, Pearson r, categories and the three kernels not simulated."""
    doc, _ = compared
    assert doc["kernels"] == len(doc["per_kernel"]) == 8
    assert doc["simulated"] == 5 and doc["not_simulated"] == 3
    assert doc["mape_pct"] > 0 and -1 <= doc["pearson_r"] <= 1
    assert {c["category"] for c in doc["categories"]} == {"gemm", "norm", "setup", "unmatched"}
    assert {u["status"] for u in doc["unsimulated"]} == {"unmatched", "no_op", "error"}


def test_simulated_gemm_time_is_the_op_time_on_the_preset(compared):
    """The 128x128x256 GEMM row holds what simulate_op gives for that op on h100_sxm."""
    doc, _ = compared
    config = models.load_preset("h100_sxm")
    expected = simulate_op(build_op("gemm", config, m=128, n=128, k=256), config,
                           doc["fidelity"])["time_us"]
    rows = [k for k in doc["per_kernel"]
            if k["kind"] == "gemm" and json.loads(k["sizes"]) == {"m": 128, "n": 128, "k": 256}]
    assert len(rows) == 2
    for row in rows:
        assert row["simulated_us"] == pytest.approx(expected, rel=1e-12)
        assert row["error_pct"] == pytest.approx(
            100 * (expected - row["measured_us"]) / row["measured_us"])


def test_out_folder_has_tables_scatter_and_page(compared):
    """--out writes the CSVs, summary.json, scatter.png and compare.html."""
    _, out = compared
    assert {"kernels.csv", "categories.csv", "unsimulated.csv", "summary.json",
            "scatter.png", "compare.html"} <= {p.name for p in out.iterdir()}


def test_kineto_excerpt_without_shapes_says_so_and_lists_every_kernel(capsys):
    """DeepSeek's excerpt has no input shapes: only its memset and device copy (whose bytes
    the trace records) simulate, the other 9 activities are listed with a reason, and the
    summary points to the chunk-pair comparison."""
    assert main(["compare", "--reference", str(EXCERPT), "--model", "h800_sxm", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kernels"] == 11 and doc["simulated"] == 2
    assert {k["kind"] for k in doc["per_kernel"] if k["status"] == "simulated"} == \
        {"memset", "memcpy"}
    assert sum(u["count"] for u in doc["unsimulated"]) == 9
    assert all(u["reason"] for u in doc["unsimulated"])
    assert "no operator input shapes" in doc["note"] and "chunk_pair_report" in doc["note"]
    assert doc["figure"].startswith("kernel duration")


def test_kineto_streams_show_measured_busy_time_and_overlap(capsys):
    """The excerpt's compute (7), communication (27) and weight-gradient (23) streams: the
    union is at most the span and the summed busy time; overlapped time is at most what
    the busy times exceed the union by (equal without three-way overlap)."""
    assert main(["compare", "--reference", str(EXCERPT), "--model", "h800_sxm", "--json"]) == 0
    rows = {r["what"]: r["us"] for r in json.loads(capsys.readouterr().out)["streams"]}
    busy = sum(us for what, us in rows.items() if what.startswith("stream "))
    assert {"stream 7", "stream 23", "stream 27"} <= set(rows)
    assert 0 < rows["union"] <= min(busy, rows["span"])
    assert 0 <= rows["overlap"] <= busy - rows["union"] + 1e-9


@pytest.mark.parametrize(("argv", "message"), [
    (["--reference", "missing.csv"], "--reference missing.csv: no such file"),
    (["--reference", str(Path(__file__))], "cannot tell the format"),
    (["--reference", str(FIXTURE), "--device", "0"], "--device: only for Kineto"),
    (["--reference", str(FIXTURE), "--model", "nope"], "--model"),
    (["--reference", str(FIXTURE), "--top", "-1"], "--top -1"),
    (["--reference", str(FIXTURE), "--front-end-us", "0.5"], "--front-end-us: only for Kineto"),
    (["--reference", str(EXCERPT), "--front-end-us", "-1"], "--front-end-us -1"),
])
def test_bad_flags_name_the_flag(argv, message, capsys):
    """Exit status 2 and one line naming the flag."""
    assert main(["compare", *argv]) == 2
    assert message in capsys.readouterr().err
