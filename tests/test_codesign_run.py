"""`ptxsim run --model deepseek_codesign`: the kernels table, the printed summary, run.json and
report.html carry the MACs the co-design units skip (and the precision mix, operand bytes);
the stock h800_sxm skips none. A BERT-base layer of 32 tokens keeps each run to seconds."""

from __future__ import annotations

import contextlib
import io
import json

import pandas as pd
import pytest

import workloads
from simulator.app.cli import main
from workloads.codesign import codesign_ops as co
from workloads.codesign import whatif as W

SPARSITY = 0.5
ZCE = ["--set", "units.zce.activation_sparsity_source=config",
       "--set", f"units.zce.activation_sparsity={SPARSITY}",
       "--set", f"units.zce.weight_sparsity={SPARSITY}"]


def _run(tmp_path_factory, name: str, args: list[str]) -> tuple[str, dict, object]:
    out = tmp_path_factory.mktemp("runs") / name
    text, js = io.StringIO(), io.StringIO()
    base = ["run", "--workload", "bert-base", "--tokens", "32", "--out", str(out), *args]
    with contextlib.redirect_stdout(js):
        assert main([*base, "--json"]) == 0
    with contextlib.redirect_stdout(text):       # same graph again: the printed summary
        assert main(base) == 0
    return text.getvalue(), json.loads(js.getvalue()), out


@pytest.fixture(scope="module")
def codesign_run(tmp_path_factory):
    return _run(tmp_path_factory, "codesign", ["--model", "deepseek_codesign", *ZCE])


@pytest.fixture(scope="module")
def h800_run(tmp_path_factory):
    return _run(tmp_path_factory, "h800", [])


def test_codesign_run_skips_the_op_level_macs(codesign_run):
    """kernels.csv sums to the op-level figure: GEMM MACs x (1 - share of products done)."""
    _, report, out = codesign_run
    kernels = pd.read_csv(out / "kernels.csv")
    graph = workloads.layer("bert-base", "prefill", tokens=32)
    cfg = W.zce(SPARSITY)
    gemm_macs, op_skipped = W.macs_skipped(graph, cfg)
    assert op_skipped > 0
    assert kernels["macs_skipped"].sum() == pytest.approx(op_skipped, rel=1e-12)
    assert report["units"]["macs_skipped"] == pytest.approx(op_skipped, rel=1e-12)
    gemms = kernels[kernels["op"] == "gemm"]
    assert gemms["macs"].sum() == pytest.approx(gemm_macs, rel=1e-12)
    share = co.codesign_info(cfg, "gemm", "bf16")["raw_share"]
    assert list(gemms["macs_skipped"]) == pytest.approx(list(gemms["macs"] * (1 - share)))
    assert (kernels.loc[kernels["op"] == "layernorm", "macs"] == 0).all()


def test_codesign_run_reports_compressed_operands_and_precision(codesign_run):
    """GEMM operands are stored compressed (fewer bytes than dense); the precision mix and
    the skipped MACs are printed and written into report.html."""
    text, report, out = codesign_run
    u = report["units"]
    assert 0 < u["operand_bytes_stored"] < u["operand_bytes"]
    from workloads.node_ops import GEMM_DTYPES

    graph = workloads.layer("bert-base", "prefill", tokens=32)
    own = {co.OWN_PRECISION[GEMM_DTYPES[n.args["dtype"]]] for n in graph.nodes
           if n.op == "gemm"}
    precision = co.precision_of(W.zce(SPARSITY), "gemm", own.pop())   # the preset's policy
    assert set(u["macs_by_precision"]) == {precision}
    assert sum(u["macs_by_precision"].values()) == pytest.approx(u["macs"])
    pct = 100 * u["macs_skipped"] / u["macs"]
    assert f"skipped {u['macs_skipped']:.4g} ({pct:.1f}%)" in text
    assert f"precision mix {precision} 100%" in text
    html = (out / "report.html").read_text()
    assert "macs_skipped [MAC]" in html and "skipped by the co-design units" in html


def test_h800_run_skips_nothing(h800_run):
    """On the stock preset every MAC is done and operands are stored dense."""
    text, report, out = h800_run
    kernels = pd.read_csv(out / "kernels.csv")
    assert kernels["macs"].sum() > 0 and kernels["macs_skipped"].sum() == 0
    u = report["units"]
    assert u["macs_skipped"] == 0 and u["operand_bytes_stored"] == u["operand_bytes"]
    assert "skipped 0 (0.0%)" in text


def test_two_four_counts_half_the_products_skipped():
    """The stock 2:4 baseline skips half the products of every GEMM (weights 2 of 4)."""
    from workloads.ops import build_op

    cfg = W.config("h800_2:4")
    counts = co.op_counts(build_op("gemm", cfg, m=256, n=512, k=256))
    assert counts["macs"] == 256 * 512 * 256
    assert counts["macs_skipped"] == counts["macs"] / 2
    dense = (256 + 512) * 256 * 2
    assert counts["operand_bytes"] == dense
    assert counts["operand_bytes_stored"] == (256 * 256 * 2 + 512 * 256 * 2 * 80 / 128)


def test_an_op_without_a_dtype_flag_takes_its_tensor_peaks_precision():
    """The MoE router has no --dtype: its gate GEMM's MACs count as bf16 (its peak), not
    as a precision named None in the mix."""
    import models
    from workloads.ops import build_op

    config = models.load_preset("h800_sxm")
    plan = build_op("moe-gating", config, tokens=256, hidden=7168, experts=256, topk=8)
    counts = co.op_counts(plan)
    assert plan.peak == "tensor_bf16_tflops"
    assert counts["macs"] > 0 and counts["precision"] == "bf16"
