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
