"""The what-if drivers' graph surgery and MAC accounting (no simulation)."""

from __future__ import annotations

import pytest

import workloads
from workloads.codesign import codesign_ops as co
from workloads.codesign import whatif as W
from workloads.codesign.precision import GEMM_OPS


def test_without_passes_dependencies_on_and_keeps_the_rest():
    """Dropping every non-GEMM node of a DeepSeek layer leaves the GEMMs in order, each
    waiting for the GEMMs it waited for through the dropped nodes."""
    graph = workloads.layer("deepseek-v3", "prefill", tokens=128)
    kept, dropped = W.without(graph, lambda n: n.op not in GEMM_OPS)
    assert [n.name for n in kept.nodes] == [n.name for n in graph.nodes if n.op in GEMM_OPS]
    assert len(dropped) + len(kept.nodes) == len(graph.nodes)
    deps = {n.name: n.deps for n in kept.nodes}
    assert deps["q_b_proj"] == ("q_a_proj",)
    assert set(deps["o_proj"]) == {"q_b_proj", "kv_a_proj", "kv_b_proj"}
    assert deps["experts.down_proj"] == ("experts.gate_up_proj",)


def test_macs_skipped_is_the_zero_product_share_of_the_gemm_macs():
    """MACs = GEMM flops / 2; skipped = MACs x (1 - raw share); none on the stock part."""
    graph = workloads.layer("bert-base", "prefill", tokens=128)
    macs = sum(n.flops for n in graph.nodes if n.op in GEMM_OPS) / 2
    assert W.macs_skipped(graph, W.config("h800_sxm")) == (macs, 0.0)
    cfg = W.zce(0.5)
    raw = co.codesign_info(cfg, "gemm", "bf16")["raw_share"]
    total, skipped = W.macs_skipped(graph, cfg)
    assert total == macs and skipped == pytest.approx(macs * (1 - raw))
    assert 0.7 < 1 - raw < 0.8          # 1 - 0.5 x 0.5 for independent zeros


def test_zce_rows_are_timed_at_the_sparsity_their_error_side_measures():
    """A ZCE threshold row runs the time side at the zero share the error side measured on
    the reduced layer's activations (GEMM MACs skipped alike), and carries that error."""
    cfg = W.config("codesign", **{"units.zce.threshold": 0.25})
    row = W.layer_row("bert-base", 128, cfg, gemms_only=True)
    assert 0.2 < row["activation_zeros"] < 0.6
    assert row["activation_sparsity"] == round(row["activation_zeros"], 4)
    assert row["macs_skipped"] / row["macs"] == pytest.approx(row["macs_skipped_measured"],
                                                              abs=0.02)
    assert row["rel_error"] > 0.01 and "1/4 width" in row["reduction"]
    assert row["gemm_tflops_issued"] == pytest.approx(
        row["gemm_tflops"] * (1 - row["macs_skipped"] / row["macs"]))


def test_error_rows_follow_the_config_and_typed_sparsity_stays_typed():
    """Threshold 0 on BERT's GELU finds no zeros (no error added, nothing skipped); a typed
    sparsity keeps its config for the time side and prunes on the error side; the 2:4
    baselines differ only in rate."""
    layer = W.N.reduced_layer("bert-base", 128)
    zero = W.error_row(W.config("codesign"), layer)
    off = W.error_row(W.config("codesign", **{"units.zce.enabled": False}), layer)
    assert zero["activation_zeros"] == 0.0 and zero["macs_skipped_measured"] == 0.0
    assert zero["rel_error"] == off["rel_error"]
    typed = W.zce(0.5)
    pruned = W.error_row(typed, layer, sparsity=0.5)
    assert pruned["activation_zeros"] >= 0.5 and pruned["rel_error"] > 10 * zero["rel_error"]
    assert W.timed_config(typed, pruned, typed=True) is typed
    measured = W.timed_config(W.config("codesign"), {"activation_zeros": 0.123456}, False)
    assert measured.units.zce.activation_sparsity == 0.1235
    rates = {name: W.config(name).units.tensor.sparse_rate_multiplier
             for name in ("h800_2:4", "h800_2:4_datasheet")}
    assert rates == {"h800_2:4": pytest.approx(1.45, abs=0.01), "h800_2:4_datasheet": 2.0}
