"""The co-design error model (`workloads.codesign.numerics`) against closed forms."""

from __future__ import annotations

import math

import numpy as np
import pytest

from workloads.codesign import numerics as N
from workloads.codesign import whatif as W
from workloads.codesign.precision import GradientNormPolicy

BF16 = N.Shortcuts(gemm_precision="bf16", attention_precision="bf16")


@pytest.fixture(scope="module")
def relu_layer():
    return N.reduced_layer("bert-base", 64, width_divisor=8, activation="relu")


def test_exact_zeros_lose_nothing(relu_layer):
    """ZCE at threshold 0 on a ReLU layer gives the dense output bit for bit, while the
    zeros it skips are measured on the layer's own activations (about half the FFN's)."""
    data = N.layer_data(relu_layer, 0)
    dense = N.forward(relu_layer, data, BF16)
    zce = N.forward(relu_layer, data, N.Shortcuts(gemm_precision="bf16",
                                                  attention_precision="bf16", zce=True))
    assert np.array_equal(dense["output"], zce["output"])
    fc2_zeros = zce["gemms"][-1][1]
    assert 0.3 < fc2_zeros < 0.7
    assert zce["gemms"][-1][2] == pytest.approx(1 - fc2_zeros, abs=1e-12)  # element skip


def test_zce_threshold_trades_error_for_zeros(relu_layer):
    """A higher threshold makes more zeros and more error; threshold 0 adds none."""
    base = W.config("codesign", **{"units.lut_exp.enabled": False})
    rows = [N.layer_error(base.with_overrides({"units.zce.threshold": t}), relu_layer)
            for t in (0.0, 0.1, 0.5)]
    off = N.layer_error(base.with_overrides({"units.zce.enabled": False}), relu_layer)
    assert rows[0]["rel_error"] == off["rel_error"]
    zeros = [r["activation_zeros"] for r in rows]
    errors = [r["rel_error"] for r in rows]
    assert zeros == sorted(zeros) and zeros[0] < zeros[2]
    assert errors == sorted(errors) and errors[0] < errors[2]
    assert rows[2]["macs_skipped_share"] >= rows[2]["activation_zeros"] - 1e-9


def test_fp8_e4m3_error_within_half_ulp():
    """e4m3 (3 mantissa bits) rounds every normal value within 2^-4 relative (half an ULP),
    ties to even; bf16 within 2^-8, fp16 2^-11, tf32 2^-11."""
    rng = np.random.default_rng(1)
    x = np.concatenate([[448.0], np.exp2(rng.uniform(-6, np.log2(448), 4000))
                        * rng.choice([-1, 1], 4000)])       # amax 448: scale exactly 1
    q = N.quantize(x, "e4m3")
    rel = np.abs(q - x) / np.abs(x)
    assert rel.max() <= 2.0 ** -4 and rel.max() > 2.0 ** -5
    assert N.quantize(np.array([448.0, 1.0625, 1.0626]), "e4m3")[1:].tolist() == [1.0, 1.125]
    for precision, bits in (("bf16", 7), ("fp16", 10), ("tf32", 10)):
        y = np.exp2(rng.uniform(-10, 10, 4000))
        assert (np.abs(N.quantize(y, precision) - y) / y).max() <= 2.0 ** -(bits + 1)
    assert N.round_mantissa(np.float32(1 + 2 ** -11), 10) == 1.0
    assert N.round_mantissa(np.float32(1 + 3 * 2 ** -11), 10) == 1 + 2 ** -9


def test_fp8_block_scales_beat_one_scale_with_outlier_channels():
    """With a channel 1e5 x the rest, DeepSeek's 1 x 128 tiles keep the channels of the
    other tile at e4m3's rounding, where one scale for the tensor pushes them into
    subnormals."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((32, 256))
    x[:, 5] *= 1e5
    other = slice(128, 256)                    # the tiles without the large channel
    err = {tile: np.linalg.norm((N.quantize(x, "e4m3", tile) - x)[:, other])
           / np.linalg.norm(x[:, other]) for tile in (None, (1, 128))}
    assert err[None] > 1.4 * err[(1, 128)]
    assert err[(1, 128)] < 2.0 ** -4 / math.sqrt(3) * 1.2       # uniform rounding RMS


def test_lut_linear_interpolation_within_h2_over_8_bound():
    """|lut_exp2(f) - 2^f| <= h^2/8 max|f''| on [0, 1) for linear interpolation (plus the
    FP32 table's rounding), tight to 10 %; nearest is within h/2 max|f'|."""
    f = np.linspace(0, 1, 200001)[:-1]
    for entries in (8, 64, 256):
        bound = N.linear_interpolation_bound(entries)
        err = np.abs(N.lut_exp2(f, entries) - np.exp2(f)).max()
        assert 0.9 * bound < err <= bound + 2.0 ** -23
        nearest = np.abs(N.lut_exp2(f, entries, "nearest") - np.exp2(f)).max()
        assert nearest <= 0.5 / entries * 2 * math.log(2) + 2.0 ** -23
    x = np.array([-3.25, 0.0, 5.5])
    assert np.allclose(N.lut_exp2(x, 1024), np.exp2(x), rtol=1e-6)


def test_lut_with_more_entries_has_smaller_softmax_error():
    """Softmax error falls with the table's entries (about 4x per doubling, the h^2 law)
    and stays within twice the relative interpolation bound h^2/8 ln(2)^2."""
    s = np.random.default_rng(3).standard_normal((64, 128)) * 3
    ref = N.softmax(s)
    errors = [N.error_metrics(N.softmax(s, (e, "linear")), ref)["rel_error"]
              for e in (8, 16, 32, 64, 128)]
    assert errors == sorted(errors, reverse=True)
    assert 3 < errors[0] / errors[1] < 5
    for e, err in zip((8, 16, 32, 64, 128), errors, strict=True):
        assert err <= 2 * (1 / e) ** 2 / 8 * math.log(2) ** 2


def test_lut_exp_changes_only_the_softmax_error():
    """On the co-design preset the layer's softmax error is the LUT's (0 with it off)."""
    layer = N.reduced_layer("bert-base", 64, width_divisor=8)
    on = N.layer_error(W.config("codesign"), layer)
    off = N.layer_error(W.config("codesign", **{"units.lut_exp.enabled": False}), layer)
    assert off["softmax_rel_error"] == 0.0
    assert 0 < on["softmax_rel_error"] <= 2 * N.linear_interpolation_bound(64)


def test_error_feedback_makes_the_compressed_sum_converge():
    """With error feedback the running compressed sum differs from the exact one by the
    ranks' residuals (bounded), so its relative error falls like 1/t; without it the
    dropped mass adds up (absolute error ~ t, relative error flat)."""
    grads = N.gradient_stream(40, 2, 2 * 2048, seed=0)
    ef = N.compressed_allreduce_error(grads, error_feedback=True)
    plain = N.compressed_allreduce_error(grads, error_feedback=False)
    ranks = grads.shape[1]
    assert np.all(ef["cumulative_abs_error"] <= ranks * ef["residual_norm"] * (1 + 1e-5))
    assert ef["residual_norm"][20:].max() <= 1.2 * ef["residual_norm"][10:20].max()
    assert ef["cumulative_rel_error"][-1] < 0.1 < plain["cumulative_rel_error"][-1]
    assert ef["cumulative_rel_error"][-1] < 0.6 * ef["cumulative_rel_error"][19]
    assert plain["cumulative_abs_error"][39] > 1.8 * plain["cumulative_abs_error"][19]
    assert 0.079 < ef["wire_share"] < 0.08


def test_mlp_gradient_norms_match_finite_differences():
    """The backward pass's gradient equals central differences of the loss."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((16, 8))
    labels = rng.integers(0, 3, 16)
    ws = [rng.standard_normal((8, 8)) * 0.5 for _ in range(3)]
    head = rng.standard_normal((8, 3))

    def loss(weights):
        a = x
        for w in weights:
            a = np.maximum(a @ w, 0)
        z = a @ head
        z = z - z.max(axis=1, keepdims=True)
        return float(np.mean(np.log(np.exp(z).sum(axis=1)) - z[np.arange(16), labels]))

    grads, _ = N._mlp_backward(x, labels, ws, head)
    for layer, (i, j) in ((0, (1, 2)), (2, (5, 0))):
        eps = 1e-6
        plus = [w.copy() for w in ws]
        minus = [w.copy() for w in ws]
        plus[layer][i, j] += eps
        minus[layer][i, j] -= eps
        assert grads[layer][i, j] == pytest.approx((loss(plus) - loss(minus)) / (2 * eps),
                                                   rel=1e-5, abs=1e-9)


def test_gradient_norm_policy_follows_the_training_phase():
    """Measured norms fall with training: the seed's rule picks fp32 for every layer of a
    seeded 4-layer MLP at initialization and fp16 after 100 SGD steps."""
    policy = GradientNormPolicy()
    node = type("Node", (), {"op": "gemm", "name": "fc"})()
    norms = {steps: N.mlp_gradient_norms(4, width=32, batch=64, steps=steps, lr=0.2).values
             for steps in (0, 100)}
    assert max(norms[100]) < min(norms[0]) / 10
    picks = {steps: {policy.precision(node, n) for n in v} for steps, v in norms.items()}
    assert picks == {0: {"fp32"}, 100: {"fp16"}}


def test_shortcuts_follow_the_config():
    """Own dtype on the stock part (DeepSeek: FP8 with block scales); a policy's FP8 on
    BERT gets one scale per tensor; 2:4 prunes exactly two of every four weights."""
    deepseek = N.reduced_layer("deepseek-v3", 128)
    bert = N.reduced_layer("bert-base", 128)
    assert (bert.hidden, bert.ffn, bert.heads, bert.width_divisor) == (192, 768, 3, 4)
    assert "1/4 width" in bert.reduction and "128 tokens" in bert.reduction
    sc = N.Shortcuts.of(W.config("h800_sxm"), deepseek)
    assert (sc.gemm_precision, sc.fp8_scaling, sc.zce, sc.lut) == ("e4m3", "block", False, None)
    fp8 = W.config("codesign", **{"units.vpcu.policy": "per_kernel"})
    sc = N.Shortcuts.of(fp8, bert)
    assert (sc.gemm_precision, sc.attention_precision, sc.fp8_scaling) == ("e4m3", "bf16",
                                                                           "tensor")
    w = np.random.default_rng(5).standard_normal((16, 4))
    pruned = N.prune_two_four(w)
    groups = np.abs(pruned.T.reshape(4, 4, 4))
    assert np.all((groups == 0).sum(axis=2) == 2)
    kept_min = np.where(groups > 0, groups, np.inf).min(axis=2)
    dropped_max = np.abs(w.T.reshape(4, 4, 4))[groups == 0].reshape(4, 4, 2).max(axis=2)
    assert np.all(kept_min >= dropped_max)
