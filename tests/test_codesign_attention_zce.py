"""ZCE in causal attention: the engine skips the zero products of P.V in the blocks that
straddle the diagonal (`codesign_ops.causal_pv_skip`); off, or non-causal, the plan and the
simulated time are the stock ones exactly."""

from __future__ import annotations

import numpy as np
import pytest

import models
from workloads.codesign import codesign_ops as co
from workloads.ops import build_op, simulate_op

ATTN = {"batch": 2, "heads": 4, "seqlen": 1024, "headdim": 128, "causal": True}
UNITS_OFF = {"units.vpcu.enabled": False, "units.zce.enabled": False,
             "units.lut_exp.enabled": False, "l3.enabled": False}
ZCE_ONLY = {**UNITS_OFF, "units.zce.enabled": True, "units.zce.granularity": "element",
            "units.zce.min_issue_fraction": 0.01}


def _cfg(**overrides):
    return models.load_preset("deepseek_codesign", overrides)


def _brute_force(sq: int, m_tile: int, kv_block: int, d: int, dv: int) -> tuple[float, float]:
    """(issued share, zero products per head) from the whole causal mask."""
    visible = np.tril(np.ones((sq, sq), bool))
    blocks = visible.reshape(sq // m_tile, m_tile, sq // kv_block, kv_block).any(axis=(1, 3))
    computed = int(blocks.sum())
    zeros = computed * m_tile * kv_block - int(visible.sum())
    return 1 - zeros * dv / (computed * m_tile * kv_block * (d + dv)), zeros * dv


def test_causal_pv_share_and_skipped_macs_match_the_mask():
    """Element granularity: issued share and skipped MACs from the full mask."""
    cfg = _cfg(**ZCE_ONLY)
    plan = build_op("attention", cfg, **ATTN)
    tiles = plan.launches[0].detail["tiles"]
    share, zeros = _brute_force(1024, tiles["m_tile"], tiles["kv_block"], 128, 128)
    assert plan.sizes["mma_share"] == pytest.approx(share, rel=1e-12)
    counts = co.op_counts(plan)
    assert counts["macs_skipped"] == pytest.approx(2 * 4 * zeros, rel=1e-12)
    stock = build_op("attention", _cfg(**UNITS_OFF), **ATTN)
    key = "units.tensor.bf16_fma_per_clk_per_sm"
    base = cfg.units.tensor.fma_per_clk_per_sm("bf16")
    assert stock.launches[0].overrides.get(key) is None
    assert plan.launches[0].overrides[key] == int(round(base / share))
    assert plan.launches[0].ptx == stock.launches[0].ptx


def test_group_granularity_skips_no_more_than_element():
    """Coarser granularity skips less (the same zeros, grouped by 4 along K)."""
    element = build_op("attention", _cfg(**ZCE_ONLY), **ATTN).sizes["mma_share"]
    group = build_op("attention", _cfg(**{**ZCE_ONLY, "units.zce.granularity": "group"}),
                     **ATTN).sizes["mma_share"]
    assert element < group < 1


def test_non_causal_and_zce_off_are_the_stock_attention():
    """Non-causal attention has no zeros in P; with the ZCE off the plan is the stock one;
    simulated, the ZCE-off time equals h800_sxm's and the ZCE's is shorter."""
    small = {**ATTN, "batch": 1, "heads": 1, "seqlen": 512}
    on = _cfg(**ZCE_ONLY)
    dense = build_op("attention", on, **{**small, "causal": False})
    assert "mma_share" not in dense.sizes and co.op_counts(dense)["macs_skipped"] == 0
    off = _cfg(**UNITS_OFF)
    h800 = models.load_preset("h800_sxm")
    t_off = simulate_op(build_op("attention", off, **small), off, "full")["time_us"]
    t_h800 = simulate_op(build_op("attention", h800, **small), h800, "full")["time_us"]
    t_on = simulate_op(build_op("attention", on, **small), on, "full")["time_us"]
    assert t_off == t_h800
    assert t_on < t_off
