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
    (["--reference", str(FIXTURE), "--sm-clock", "preset"], "--sm-clock: only for Kineto"),
    (["--reference", str(EXCERPT), "--sm-clock", "fast"], "--sm-clock fast"),
    (["--regression", "--l2-start", "cold"], "drop --l2-start"),
])
def test_bad_flags_name_the_flag(argv, message, capsys):
    """Exit status 2 and one line naming the flag."""
    assert main(["compare", *argv]) == 2
    assert message in capsys.readouterr().err


def _kineto_with_sidecar(folder: Path, sm_clock_mhz: float | None) -> Path:
    """A Kineto trace of one rms_norm kernel with recorded shapes, and its sidecar."""
    events = [{"ph": "X", "cat": "cpu_op", "name": "rms_norm", "pid": 1, "tid": 1, "ts": 0,
               "dur": 10, "args": {"Input Dims": [[64, 1024], [1024]]}},
              {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
               "tid": 1, "ts": 5, "dur": 1, "args": {"correlation": 1}},
              {"ph": "X", "cat": "kernel", "name": "rms_norm_kernel<float>", "pid": 0,
               "tid": 7, "ts": 100, "dur": 5,
               "args": {"stream": 7, "correlation": 1, "device": 0, "grid": [64, 1, 1],
                        "block": [128, 1, 1]}}]
    path = folder / "layer.json"
    path.write_text(json.dumps({"traceEvents": events}))
    if sm_clock_mhz is not None:
        (folder / "layer.meta.json").write_text(json.dumps(
            {"clocks_seen": {"sm_clock_mhz_median": sm_clock_mhz}}))
    return path


@pytest.fixture()
def seen(monkeypatch):
    """simulate_op -> 1 us, keeping each call's SM clock, L2 slice width and L2 start."""
    import workloads.ops as ops

    calls = []

    def fake(plan, config, fidelity=None):
        calls.append((config.chip.clock_ghz, config.l2.slice_bandwidth_bytes_per_clk,
                      config.fidelity.l2_start))
        return {"time_us": 1.0}

    monkeypatch.setattr(ops, "simulate_op", fake)
    return calls


def test_kineto_compare_runs_at_the_recorded_clock_and_says_so(tmp_path, seen, capsys):
    """The sidecar's 1980 MHz is the clock simulated and reported, with where it came from;
    the L2 slices keep their bytes per second (89 B per clock at 1.83 GHz -> 82 at 1.98);
    the norm starts with warm inputs, and the output says so."""
    path = _kineto_with_sidecar(tmp_path, 1980)
    assert main(["compare", "--reference", str(path), "--json", "--quiet"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["sm_clock_ghz"] == pytest.approx(1.98)
    assert "layer.meta.json" in doc["sm_clock_source"]
    assert doc["l2_start"] == "warm-inputs" and "GEMMs and attention" in doc["l2_start_note"]
    assert seen == [(pytest.approx(1.98), round(89 * 1.83 / 1.98), "warm-inputs")]


@pytest.mark.parametrize(("argv", "sidecar", "expected"), [
    (["--sm-clock", "preset", "--l2-start", "cold"], 1980, (1.83, 89, "cold")),
    (["--sm-clock", "1.7"], 1980, (1.7, round(89 * 1.83 / 1.7), "warm-inputs")),
    ([], None, (1.83, 89, "warm-inputs")),
])
def test_kineto_clock_and_l2_start_options(tmp_path, seen, capsys, argv, sidecar, expected):
    """--sm-clock preset / GHz override the recorded clock, no sidecar keeps the preset's;
    --l2-start cold starts every op cold."""
    path = _kineto_with_sidecar(tmp_path, sidecar)
    assert main(["compare", "--reference", str(path), "--json", "--quiet", *argv]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["sm_clock_ghz"] == pytest.approx(expected[0])
    assert seen == [(pytest.approx(expected[0]), expected[1], expected[2])]
