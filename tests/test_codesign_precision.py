"""Precision policies by name, gradient norms, and the policy's effect on a train step."""

from __future__ import annotations

import numpy as np
import pytest

import models
import workloads
from isa.errors import InputError
from workloads.codesign import precision as P
from workloads.codesign.train_step import gemm_peak_tflops, train_step


def _node(graph, name):
    return graph.node(name)


def test_policies_are_registered_by_name_and_unknown_names_list_the_choices():
    """static, per_kernel and gradient_norm are registered; a typo names what exists."""
    assert {"static", "per_kernel", "gradient_norm"} <= set(P.POLICIES)
    with pytest.raises(InputError, match="gradient_norm, per_kernel, static"):
        P.make_policy("gradnorm")


@pytest.mark.parametrize(("norm", "expected"), [(5e-4, "e4m3"), (1e-3, "fp16"), (0.05, "fp16"),
                                                (0.1, "fp16"), (0.2, "fp32")])
def test_gradient_norm_policy_thresholds(norm, expected):
    """Below 1e-3 fp8, above 1e-1 fp32, else fp16 (the bounds themselves are fp16)."""
    graph = workloads.layer("deepseek-v3", "train", tokens=256)
    policy = P.make_policy("gradient_norm")
    assert policy.precision(_node(graph, "o_proj.wgrad"), norm) == expected
    assert policy.precision(_node(graph, "attn_norm"), norm) is None


def test_gradient_norm_policy_needs_a_norm():
    """Without the layer's norm the policy says what it needs."""
    graph = workloads.layer("deepseek-v3", "train", tokens=256)
    with pytest.raises(InputError, match="gradient norm"):
        P.make_policy("gradient_norm").precision(_node(graph, "o_proj"), None)


def test_per_kernel_deepseek_recipe_and_name_patterns():
    """The default table is DeepSeek's recipe; a name pattern wins over the op kind."""
    graph = workloads.layer("deepseek-v3", "train", tokens=256)
    recipe = P.make_policy("per_kernel")
    assert recipe.precision(_node(graph, "q_a_proj")) == "e4m3"
    assert recipe.precision(_node(graph, "experts.down_proj.wgrad")) == "e4m3"
    assert recipe.precision(_node(graph, "attention")) == "bf16"
    assert recipe.precision(_node(graph, "attn_norm")) == "bf16"
    assert recipe.precision(_node(graph, "rope")) is None
    custom = P.make_policy("per_kernel", table={"o_proj*": "bf16", "gemm": "e5m2"})
    assert custom.precision(_node(graph, "o_proj.dgrad")) == "bf16"
    assert custom.precision(_node(graph, "q_a_proj")) == "e5m2"
    with pytest.raises(InputError, match="table\\['gemm'\\] = 'fp64'"):
        P.make_policy("per_kernel", table={"gemm": "fp64"})


def test_apply_policy_rebuilds_gemm_bytes_at_the_operand_width():
    """A static fp32 GEMM moves 4-byte operands: bytes = 4 (mk + kn) + out mn, same flops."""
    graph = workloads.layer("llama3-8b", "train", tokens=512)
    out = P.apply_policy(graph, P.make_policy("static", precision="fp32"))
    before, after = graph.node("o_proj"), out.node("o_proj")
    a = after.args
    out_bytes = {"bf16": 2, "f32": 4, "f16": 2}[a["out_dtype"]]
    assert after.flops == before.flops
    assert after.bytes_min == 4 * (a["m"] * a["k"] + a["k"] * a["n"]) + out_bytes * a["m"] * a["n"]
    assert out.node("attention") == graph.node("attention")


def test_generated_norms_are_seeded_and_files_round_trip(tmp_path):
    """Same seed, same norms; a CSV and a .npy give back what was written."""
    a, b = P.GradientNorms.generated(8, seed=3), P.GradientNorms.generated(8, seed=3)
    assert a == b and a != P.GradientNorms.generated(8, seed=4)
    path = tmp_path / "norms.csv"
    path.write_text("layer,grad_norm\n1,0.5\n0,0.001\n")
    assert P.GradientNorms.from_file(path).values == (0.001, 0.5)
    np.save(tmp_path / "n.npy", np.array([1e-4, 2e-2]))
    assert P.GradientNorms.from_file(tmp_path / "n.npy")[1] == 2e-2
    (tmp_path / "bad.csv").write_text("layer,norm\n0,1\n")
    with pytest.raises(InputError, match="layer,grad_norm"):
        P.GradientNorms.from_file(tmp_path / "bad.csv")


def test_fp8_recipe_halves_compute_bound_gemm_time_on_a_vpcu_with_twice_the_rate():
    """With fp8 at 2x the bf16 rate, every compute-bound GEMM takes half the static-bf16 time."""
    rates = {"fp32": 1024, "tf32": 2048, "fp16": 4096, "bf16": 4096, "e4m3": 8192, "e5m2": 8192}
    config = models.load_preset("h800_sxm", {"units.vpcu.enabled": True} | {
        f"units.vpcu.{p}_flop_per_clk_per_sm": r for p, r in rates.items()})
    assert gemm_peak_tflops(config, "e4m3") == 2 * gemm_peak_tflops(config, "bf16")
    bf16, _ = train_step("llama3-8b", P.make_policy("static", precision="bf16"), config,
                         8192, range(1))
    fp8, totals = train_step("llama3-8b", P.make_policy("per_kernel"), config, 8192, range(1))
    both = (bf16.op == "gemm") & (bf16.bound == "compute") & (fp8.bound == "compute")
    assert both.sum() > 0
    np.testing.assert_allclose(fp8.time_us[both], bf16.time_us[both] / 2, rtol=1e-12)
    assert totals["gemm_flops_by_precision"] == {"e4m3": float(bf16.flops[bf16.op == "gemm"]
                                                               .sum())}


def test_gradient_norm_policy_switches_precision_with_the_layer_norms():
    """Norms 1e-4 / 0.5 on two layers run their GEMMs in fp8 / fp32, and count the switch."""
    config = models.load_preset("h800_sxm")
    norms = P.GradientNorms((1e-4, 0.5))
    table, totals = train_step("llama3-8b", P.make_policy("gradient_norm"), config, 512,
                               range(2), norms)
    gemms = table[table.op == "gemm"]
    assert set(gemms[gemms.layer == 0].precision) == {"e4m3"}
    assert set(gemms[gemms.layer == 1].precision) == {"fp32"}
    assert totals["precision_switches"] >= 1


def test_vpcu_operand_bytes_set_the_gemm_traffic():
    """With fp32 operands packed in 3 bytes, each GEMM moves one byte less per A/B element."""
    rates = {"fp32": 1024, "tf32": 2048, "fp16": 4096, "bf16": 4096, "e4m3": 8192, "e5m2": 8192}
    base = {"units.vpcu.enabled": True} | {f"units.vpcu.{p}_flop_per_clk_per_sm": r
                                           for p, r in rates.items()}
    policy = P.make_policy("static", precision="fp32")
    wide, _ = train_step("llama3-8b", policy, models.load_preset("h800_sxm", base), 512,
                         range(1))
    packed, _ = train_step("llama3-8b", policy, models.load_preset(
        "h800_sxm", base | {"units.vpcu.fp32_operand_bytes": 3}), 512, range(1))
    graph = P.apply_policy(workloads.layer("llama3-8b", "train", tokens=512), policy)
    gemms = [n for n in graph.nodes if n.op == "gemm"]
    saved = wide.hbm_bytes.sum() - packed.hbm_bytes.sum()
    assert saved == sum(sum(P.operand_elements(n)) for n in gemms)
