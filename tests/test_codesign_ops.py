"""Co-design variants of the GEMM and attention ops (workloads/codesign/codesign_ops.py):
off = the stock plans and figures exactly; VPCU precision by policy; ZCE zero-skipping and
compressed loads; the 2:4 baseline; each against its closed form."""

from __future__ import annotations

import math

import pytest

import models
from isa.errors import InputError
from isa.tensor_map import read_tensor_map
from workloads.codesign import codesign_ops as co
from workloads.ops import build_op, simulate_op

OFF = {"units.vpcu.enabled": False, "units.lut_exp.enabled": False,
       "units.zce.enabled": False, "l3.enabled": False}
GEMM = {"m": 256, "n": 512, "k": 1024, "dtype": "bf16"}
ATTN = {"batch": 1, "heads": 4, "seqlen": 256, "headdim": 64}


def _h800(**extra):
    return models.load_preset("h800_sxm", extra or None)


def _codesign(**extra):
    return models.load_preset("deepseek_codesign", extra or None)


def test_units_off_build_the_stock_plans_and_times():
    """No unit active: the hook calls the stock builder, plans and simulated figures equal
    h800_sxm's (the preset's remaining differences are the unified array's carve-outs)."""
    base, off = _h800(), _codesign(**OFF)
    assert not co.active(base) and not co.active(off)
    for kind, sizes in (("gemm", GEMM), ("attention", ATTN)):
        p_base, p_off = build_op(kind, base, **sizes), build_op(kind, off, **sizes)
        assert [x.ptx for x in p_base.launches] == [x.ptx for x in p_off.launches]
        assert [x.overrides for x in p_off.launches] == [{}] * len(p_off.launches)
    plan = build_op("gemm", base, **GEMM)
    assert simulate_op(plan, base, "sampled") == simulate_op(build_op("gemm", off, **GEMM),
                                                             off, "sampled")


@pytest.mark.parametrize(("policy", "extra", "precision", "template", "rate"), [
    ("dtype", {}, "bf16", "bf16", 2048),
    ("static", {"units.vpcu.static_precision": "fp32"}, "fp32", "tf32", 512),
    ("static", {"units.vpcu.static_precision": "e5m2"}, "e5m2", "fp8", 4096),
    ("per_kernel", {}, "e4m3", "fp8", 4096),
    ("gradient_norm", {"units.vpcu.grad_norm": 1e-4}, "e4m3", "fp8", 4096),
    ("gradient_norm", {"units.vpcu.grad_norm": 1e-2}, "fp16", "fp16", 2048),
    ("gradient_norm", {"units.vpcu.grad_norm": 1.0}, "fp32", "tf32", 512),
])
def test_vpcu_gemm_runs_at_the_policy_precision(policy, extra, precision, template, rate):
    """The GEMM is planned at the precision's storage, its consumers set the precision once,
    and its tensor pipe runs at units.vpcu.<p>_flop_per_clk_per_sm / 2."""
    config = _codesign(**{"units.vpcu.policy": policy, **extra})
    plan = build_op("gemm", config, **GEMM)
    launch = plan.launches[0]
    assert plan.sizes["precision"] == precision and plan.sizes["dtype"] == template
    assert launch.overrides == {f"units.tensor.{template}_fma_per_clk_per_sm": rate}
    code = co.PRECISION_CODES[precision]
    assert launch.ptx.count(f"vpcu.setprec.b32 %vprec, {code};") == 1
    assert rate == config.units.vpcu.flop_per_clk_per_sm(precision) / 2


def test_vpcu_attention_keeps_bf16_under_the_deepseek_recipe():
    config = _codesign(**{"units.vpcu.policy": "per_kernel"})
    plan = build_op("attention", config, **ATTN)
    assert plan.sizes["precision"] == "bf16"
    assert "vpcu.setprec.b32 %vprec, 3;" in plan.launches[0].ptx
    bad = _codesign(**{"units.vpcu.policy": "static"})
    assert build_op("attention", bad, **ATTN).sizes["precision"] == "bf16"  # GEMMs only


def test_vpcu_precision_switch_costs_its_cycles_per_launch():
    """Each consumer warp runs one setprec that holds its sub-partition's tensor pipe
    units.vpcu.switch_cycles: with 2 consumer warpgroups (2 warps per sub-partition) a
    one-CTA GEMM takes 2 x 2000 cycles more at 4000 than at 2000 cycles per switch (both
    longer than the first TMA loads they overlap)."""
    sizes = {"m": 128, "n": 128, "k": 256, "dtype": "bf16"}
    times = {}
    for cycles in (2000, 4000):
        config = _codesign(**{**OFF, "units.vpcu.enabled": True,
                              "units.vpcu.switch_cycles": cycles})
        res = simulate_op(build_op("gemm", config, **sizes), config, "full")
        times[cycles] = res["cycles"]
    assert times[4000] - times[2000] == pytest.approx(2 * 2000, rel=0.02)


SLOW = {"units.tensor.bf16_fma_per_clk_per_sm": 256}
"""A bf16 rate cut 8x, so that the tensor pipe (4096 cycles per 128 x 128 x 64 k-tile), not
the per-SM operand delivery (~570 cycles per k-tile), bounds the GEMM."""


def _tensor_bound_gemm(config, k=1024):
    """Two CTAs of 128 x 128 (rule "waves"), k / 64 k-tiles: tensor-bound on the SLOW rate."""
    plan = build_op("gemm", config, m=128, n=256, k=k, dtype="bf16", rule="waves")
    return plan, simulate_op(plan, config, "full")


def _cycles_per_k_tile(config) -> float:
    """Cycles per added k-tile (16 -> 32 k-tiles: prologue and epilogue cancel)."""
    short = _tensor_bound_gemm(config, 1024)[1]["cycles"]
    return (_tensor_bound_gemm(config, 2048)[1]["cycles"] - short) / 16


def test_zce_gemm_time_and_bytes_follow_the_closed_form():
    """At 50 % / 50 % sparsity: cycles per k-tile x the issued share (zmma's closed form), and
    A/B read from HBM at the compressed bytes per 128-byte atom, in whole sectors (3 %)."""
    dense_cfg = _codesign(**OFF, **SLOW)
    sparse_cfg = _codesign(**{**OFF, **SLOW, "units.zce.enabled": True,
                              "units.zce.activation_sparsity": 0.5,
                              "units.zce.weight_sparsity": 0.5})
    info = co.codesign_info(sparse_cfg, "gemm", "bf16")
    assert 0.2 < info["share"] < 0.3                  # independent masks: 0.5 x 0.5
    ratio = _cycles_per_k_tile(sparse_cfg) / _cycles_per_k_tile(dense_cfg)
    assert ratio == pytest.approx(info["share"], rel=0.03)
    plan, sparse = _tensor_bound_gemm(sparse_cfg)
    _, dense = _tensor_bound_gemm(dense_cfg)
    ca, cb = info["a_atom_bytes"], info["b_atom_bytes"]
    maps = [read_tensor_map(a) for a in plan.launches[0].args[:2]]
    assert [m.box[0] * m.elem_bytes for m in maps] == [ca, cb]
    a_bytes, b_bytes = 128 * 1024 * 2, 256 * 1024 * 2      # C stays in the write-back L2
    sector = lambda x: math.ceil(x / 32) * 32  # noqa: E731  (HBM moves 32-byte sectors)
    expected = a_bytes * sector(ca) / 128 + b_bytes * sector(cb) / 128
    assert sparse["hbm_bytes"] == pytest.approx(expected, rel=0.03)
    assert dense["hbm_bytes"] == pytest.approx(a_bytes + b_bytes, rel=0.03)


def test_two_four_baseline_doubles_the_rate_and_halves_the_weights():
    """units.tensor.sparse_2_4 at the datasheet's rate multiplier 2: rate x 2, B atoms of 80
    bytes (64 values + 8 of metadata, 16-byte granule); the preset's own multiplier is the
    measured 1.45; ZCE sparsity together with it is refused."""
    datasheet = {"units.tensor.sparse_2_4": True, "units.tensor.sparse_rate_multiplier": 2.0}
    measured = co.codesign_info(_h800(**{"units.tensor.sparse_2_4": True}), "gemm", "bf16")
    assert measured["fma_per_clk_per_sm"] == pytest.approx(2048 * 1770 / 1217, abs=1)
    info = co.codesign_info(_h800(**datasheet), "gemm", "bf16")
    assert info["fma_per_clk_per_sm"] == 2 * 2048 and info["b_atom_bytes"] == 80
    assert co.two_four_atom_bytes(1) == 80 and co.two_four_atom_bytes(4) == 80
    ratio = (_cycles_per_k_tile(_h800(**datasheet, **SLOW))
             / _cycles_per_k_tile(_h800(**SLOW)))
    assert ratio == pytest.approx(0.5, rel=0.03)
    both = _codesign(**{"units.tensor.sparse_2_4": True, "units.zce.weight_sparsity": 0.5})
    with pytest.raises(InputError, match="sparse_2_4"):
        build_op("gemm", both, **GEMM)


def test_two_four_deepseek_fp8_gemm_keeps_the_scale_a_bytes_on_the_stage_barrier():
    """The DeepSeek-scaled fp8 template's stage barrier also expects the stage's scale_a box;
    the compressed expect_tx keeps those bytes (it once dropped them and the 128x1536x7168
    GEMM deadlocked at its first stage barrier)."""
    config = _h800(**{"units.tensor.sparse_2_4": True})
    sizes = {"m": 128, "n": 1536, "k": 7168, "dtype": "fp8", "scaling": "deepseek"}
    stock = build_op("gemm", _h800(), **sizes).launches[0].ptx
    plan = build_op("gemm", config, **sizes)
    (dense,), (compressed,) = (co._EXPECT_TX.findall(p) for p in (stock, plan.launches[0].ptx))
    tiles = plan.launches[0].detail["tiles"]
    ab = tiles["k_tile"] * (tiles["m_tile"] + tiles["n_tile"])      # fp8: one byte each
    scale_a = int(dense[1]) - ab
    assert scale_a > 0
    assert int(compressed[1]) == tiles["k_tile"] // 128 * (
        tiles["m_tile"] * 128 + tiles["n_tile"] * 80) + scale_a
    res = simulate_op(plan, config, "sampled")
    assert res["time_us"] > 0


def test_atom_bytes_round_up_to_the_tma_granule():
    assert [co.atom_bytes(r) for r in (0.0, 0.1, 0.5, 0.51, 1.0, 1.2)] == \
        [16, 16, 64, 80, 128, 128]
    assert math.isclose(co.two_four_atom_bytes(2), 80)
