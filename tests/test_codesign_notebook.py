"""notebooks/codesign_whatifs.ipynb runs top to bottom and its key numbers hold.

The checks are relations that must hold whatever the what-if values: dense operands skip
nothing, more zeros are never slower, the LUT exp never slows ex2 work, an L3 never adds HBM
traffic, the FP8 recipe moves fewer bytes than static bf16.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).parents[1] / "notebooks" / "codesign_whatifs.ipynb"


@pytest.fixture(scope="module")
def numbers() -> dict:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(not c.outputs and c.execution_count is None for c in code)
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOK.parent)}}).execute()
    last = [c for c in nb.cells if c.cell_type == "code"][-1]
    text = "".join(o.get("text", "") for o in last.outputs if o.output_type == "stream")
    return json.loads(text.strip().splitlines()[-1])


def test_zmma_skips_nothing_on_dense_data_and_gains_with_sparsity(numbers):
    """Speedup 1 at zero sparsity, then non-decreasing; skipped MACs grow with sparsity."""
    speedup = numbers["zmma_speedup"]
    assert speedup[0] == 1.0
    assert speedup == sorted(speedup) and speedup[1] > 1
    skipped = numbers["zmma_macs_skipped_pct"]
    assert skipped[0] == 0 and skipped == sorted(skipped)


def test_layer_zce_time_falls_with_sparsity_and_2_4_beats_dense(numbers):
    """Per model, ZCE time falls with sparsity; 2:4 is never slower than dense."""
    for model in ("bert-base", "deepseek-v3"):
        times = [numbers["layer_zce_us"][f"{model}@{s}"] for s in (0.0, 0.5, 0.75, 0.9)]
        assert times == sorted(times, reverse=True)
        assert times[0] >= numbers["layer_dense_us"][model]
        assert numbers["layer_two_four_us"][model] <= numbers["layer_dense_us"][model]


def test_policies_fp8_recipe_moves_fewer_bytes_and_static_bf16_equals_the_h800(numbers):
    """The VPCU at stock rates gives static bf16 the H800's time; fp8 moves fewer bytes."""
    h800, static, recipe, _ = numbers["policy_time_us"]
    assert static == pytest.approx(h800)
    assert recipe < static
    assert numbers["policy_hbm_gb"][2] < numbers["policy_hbm_gb"][1]


def test_lut_exp_and_l3(numbers):
    """The LUT exp never slows the softmax; the L3 hits and cuts HBM traffic."""
    softmax = numbers["softmax_us"]
    assert softmax["h800+lut_exp"] <= softmax["h800_sxm"]
    l3 = numbers["l3"]
    assert l3["h800_sxm"]["l3_hit_rate"] is None
    assert 0 < l3["deepseek_codesign"]["l3_hit_rate"] <= 1
    assert l3["deepseek_codesign"]["hbm_bytes"] < l3["h800_sxm"]["hbm_bytes"]


def test_mma_sp_runs_at_the_sparse_multiplier_and_zmma_near_it_on_2_4_data(numbers):
    """mma.sp = 2 x mma.sync dense-equivalent (the multiplier); zmma skips the same half
    of the products on 2:4 data (at most the multiplier, within 5 % of it)."""
    rates = numbers["sparse_fma_per_clk_per_sm"]
    assert rates["mma.sp"] == pytest.approx(2 * rates["mma.sync"], rel=0.01)
    assert rates["mma.sync"] < rates["zmma"] <= rates["mma.sp"] * 1.001
    assert rates["zmma"] == pytest.approx(rates["mma.sp"], rel=0.05)


def test_simulated_gemm_op_gains_with_sparsity_and_moves_fewer_bytes(numbers):
    """Through the GEMM op's hook: ZCE time and HBM bytes fall with sparsity; the 2:4
    baseline beats the stock dense GEMM."""
    t, hbm = numbers["sim_gemm_us"], numbers["sim_gemm_hbm_mb"]
    zce = [t[f"codesign @ {s}"] for s in (0.0, 0.5, 0.75)]
    assert zce == sorted(zce, reverse=True)
    assert [hbm[f"codesign @ {s}"] for s in (0.0, 0.5, 0.75)] == sorted(
        (hbm[f"codesign @ {s}"] for s in (0.0, 0.5, 0.75)), reverse=True)
    assert t["h800_sxm + 2:4"] < t["h800_sxm"]
    assert hbm["h800_sxm + 2:4"] < hbm["h800_sxm"]
