"""Per-op accuracy against Vidur's LLaMA-2-7B H100 profile stays within the stored baseline
+ 2 points (`workloads.calibration.vidur_accuracy`: declared split, kernel-time convention,
TP-sharded op shapes)."""

import os

import pytest

from workloads.calibration import vidur_accuracy as acc
from workloads.ops.gemm import TILE_RULES

TOLERANCE_POINTS = 2.0
FAST_ROWS = 1

needs_baseline = pytest.mark.skipif(not acc.BASELINE.exists(),
                                    reason="no Vidur baseline: run `python -m "
                                           "workloads.calibration.vidur_accuracy "
                                           "--write-baseline`")


def test_split_is_declared_alternating_and_above_the_resolution():
    """Distinct ops alternate fit / held within each family, every row is >= 10 us, and no
    op shape is both a fit and a held-back row."""
    rows = acc.load_rows()
    assert (rows.measured_us >= acc.MIN_MEASURED_US).all()
    assert set(rows.family) == {"rmsnorm", "gemm", "rope", "swiglu", "add"}
    assert set(rows[rows.subset == "held"].family) == set(rows.family)
    key = [(acc.op_of(r.column, r.tokens, r.tp)[0],
            tuple(sorted(acc.op_of(r.column, r.tokens, r.tp)[1].items())), r.subset)
           for r in rows.itertuples()]
    fit = {k[:2] for k in key if k[2] == "fit"}
    held = {k[:2] for k in key if k[2] == "held"}
    assert not fit & held


def test_ops_are_sharded_as_megatron_splits_llama():
    """QKV and gate/up split by output columns, O and down by the reduction, timed with the
    rows' GEMM tile rule through the config (`kernels.gemm_tile_rule`); the layer kernels
    are the vLLM-style ones."""
    assert acc.op_of("attn_pre_proj", 512, 4)[1] == {"m": 512, "n": 3072, "k": 4096,
                                                     "dtype": "fp16"}
    assert acc.op_of("mlp_down_proj", 512, 2)[1] == {"m": 512, "n": 4096, "k": 5504,
                                                     "dtype": "fp16"}
    assert acc.op_of("mlp_up_proj", 64, 8)[1]["n"] == 2752
    assert acc.GEMM_RULE in TILE_RULES
    assert acc.kernel_config().kernels.gemm_tile_rule == acc.GEMM_RULE
    assert acc.op_of("attn_rope", 64, 2)[1]["cols"] == 4096
    assert {acc.op_of(c, 64, 1)[1].get("kernel") for c in
            ("input_layernorm", "attn_rope", "mlp_act")} == {"vllm"}
    with pytest.raises(KeyError, match="emb"):
        acc.op_of("emb", 64, 1)


def test_simulated_time_is_the_kernel_without_the_launch_overhead():
    """The reference times kernels: the harness's config has no launch overhead, and an
    op's time there is its time on the preset less that overhead."""
    import models
    from workloads.ops import build_op, simulate_op

    cfg = acc.kernel_config()
    preset = models.load_preset(acc.PRESET)
    assert cfg.launch.kernel_overhead_us == 0.0 < preset.launch.kernel_overhead_us
    plan = build_op("residual-add", preset, rows=64, cols=4096)
    assert simulate_op(plan, preset, "full")["time_us"] == pytest.approx(
        acc.simulate_row("add", 64, 1, "full") + preset.launch.kernel_overhead_us)


def _stored(baseline: dict) -> dict:
    return {(r["family"], r["column"], r["tokens"], r["tp"]): abs(r["error_pct"])
            for r in baseline["rows"]}


@needs_baseline
def test_fast_held_back_rows_within_baseline():
    """The cheapest held-back row of each family: |error| <= stored |error| + 2 points."""
    base = acc.load_baseline()
    stored = _stored(base)
    df = acc.simulate(acc.cheapest_held(FAST_ROWS), base["fidelity"])
    for r in df.itertuples():
        want = stored[(r.family, r.column, r.tokens, r.tp)]
        assert abs(r.error_pct) <= want + TOLERANCE_POINTS, (r.family, r.error_pct, want)


@needs_baseline
@pytest.mark.skipif(os.environ.get("PTXSIM_SLOW") != "1", reason="slow: set PTXSIM_SLOW=1")
def test_all_held_back_rows_within_baseline():
    base = acc.load_baseline()
    df = acc.simulate(acc.load_rows().query("subset == 'held'"), base["fidelity"])
    for family, m in acc.metrics(df).items():
        stored = base["metrics"][family]["mape_pct"]
        assert m["mape_pct"] <= stored + TOLERANCE_POINTS, (family, m, stored)
