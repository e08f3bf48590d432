"""Transformer-layer CUDA kernels (SwiGLU, GELU, RoPE, n-input add, DeepSeek FP8 block and
per-tensor quantization, MoE top-k routing, norm backward) via `isa.run_kernel`, against numpy.

Tolerances and their reasons are in `workloads/kernels/cases_layer_ops.py`.
"""

import numpy as np
import pytest

from workloads.kernels.catalog import KERNELS

LAYER_KERNELS = ("swiglu_bf16", "swiglu_bwd_bf16", "gelu_bf16", "gelu_bwd_bf16", "rope_bf16",
                 "add_n_bf16", "quantize_e4m3_1x128", "quantize_e4m3_128x1_t",
                 "quantize_e4m3_tensor",
                 "moe_topk_sigmoid", "rmsnorm_bwd_bf16", "layernorm_bwd_bf16")
CASES = [(entry, i) for entry in LAYER_KERNELS for i in range(len(KERNELS[entry].variants))]


@pytest.mark.parametrize(("entry", "variant"), CASES, ids=lambda v: str(v))
def test_layer_kernel_matches_numpy(entry, variant):
    """Each layer kernel's outputs equal the numpy reference within its stated tolerance."""
    spec = KERNELS[entry]
    case = spec.build(np.random.default_rng(70 + variant), **spec.variants[variant])
    case.run()
    case.check()


def test_block_quantize_scale_is_amax_over_448():
    """A 1x128 strip whose largest magnitude is 448 gets scale 1 and keeps its e4m3 values."""
    case = KERNELS["quantize_e4m3_1x128"].build(np.random.default_rng(3), rows=2, cols=128)
    x = case.args[0]
    x[1] = np.linspace(-448, 448, 128).astype(x.dtype)
    case.run()
    assert case.args[2][1, 0] == 1.0
    want = np.clip(x[1].astype(np.float32), -448, 448).astype(case.args[1].dtype)
    assert np.array_equal(case.args[1][1].view(np.uint8), want.view(np.uint8))


def test_topk_routing_picks_by_biased_score_but_weights_unbiased():
    """A bias can move an expert into the top-k; its weight is still its plain sigmoid."""
    case = KERNELS["moe_topk_sigmoid"].build(np.random.default_rng(4), tokens=1, experts=32,
                                             topk=2)
    logits, bias = case.args[0], case.args[1]
    logits[0] = np.array([1.0] + [0.0] * 31, dtype=logits.dtype)
    bias[:] = 0
    bias[7] = 1.0              # expert 7: sigmoid(0) + 1 = 1.5 beats sigmoid(1) = 0.73
    case.run()
    assert list(case.args[2][0]) == [7, 0]
    s0, s7 = 1 / (1 + np.exp(-1.0)), 0.5
    np.testing.assert_allclose(case.args[3][0], np.array([s7, s0]) / (s0 + s7) * 2.5,
                               rtol=1e-5)


# -- the ops over these kernels (workloads.ops.elementwise / gating) ------------------------
@pytest.fixture(scope="module")
def h800():
    import models
    return models.load_preset("h800_sxm")


@pytest.mark.parametrize(("kind", "sizes", "flag"), [
    ("swiglu", dict(rows=4, cols=12), "--cols"),
    ("rope", dict(rows=4, cols=96, rot_dim=64), "--cols"),
    ("quantize", dict(rows=8, cols=256, transpose=True), "--rows"),
    ("quantize", dict(rows=16, cols=256, block=64), "--block"),
    ("quantize", dict(rows=16, cols=256, scaling="row"), "--scaling"),
    ("quantize", dict(rows=16, cols=256, scaling="tensor", transpose=True), "--transpose"),
    ("quantize", dict(rows=16, cols=256, scaling="tensor", block=64), "--block"),
    ("residual-add", dict(rows=4, cols=64, inputs=0), "--inputs"),
    ("moe-gating", dict(tokens=4, hidden=128, experts=512, topk=8), "--experts"),
    ("moe-gating", dict(tokens=4, hidden=128, experts=16, topk=20), "--topk"),
])
def test_layer_op_rejects_bad_sizes_naming_the_flag(h800, kind, sizes, flag):
    """A size the kernel cannot take raises InputError naming its flag."""
    from isa.errors import InputError
    from workloads.ops import build_op

    with pytest.raises(InputError, match=flag):
        build_op(kind, h800, **sizes)


def test_transposed_quantize_adds_the_column_kernel_and_its_bytes(h800):
    """--transpose launches the 128x1 kernel too and writes a second e4m3 copy + scales."""
    from workloads.ops import build_op

    one = build_op("quantize", h800, rows=256, cols=512)
    two = build_op("quantize", h800, rows=256, cols=512, transpose=True)
    assert [lau.entry for lau in two.launches] == ["quantize_e4m3_1x128",
                                                   "quantize_e4m3_128x1_t"]
    assert two.bytes - one.bytes == 256 * 512 + 4 * 512 * 2      # e4m3 copy + 2 strips/col


def test_tensor_scaled_quantize_is_one_vector_kernel_over_the_tensor(h800):
    """--scaling tensor: one quantize_e4m3_tensor launch, a thread per 16-byte vector, bf16
    read once, e4m3 written once (+ the 4-byte scale); its functional run matches numpy."""
    from workloads.ops import build_op

    plan = build_op("quantize", h800, rows=24, cols=136, scaling="tensor")
    (lau,) = plan.launches
    assert lau.entry == "quantize_e4m3_tensor"
    assert lau.grid[0] * lau.block[0] * 8 >= 24 * 136 > (lau.grid[0] - 1) * lau.block[0] * 8
    assert plan.bytes == 2 * 24 * 136 + 24 * 136 + 4


def test_tensor_quantize_saturates_and_uses_the_scale_from_memory():
    """A scale of 1/448 maps 1.0 to the e4m3 maximum; larger magnitudes saturate."""
    case = KERNELS["quantize_e4m3_tensor"].build(np.random.default_rng(5), n=16, threads=32)
    x = case.args[0]
    x[:] = np.array([1.0, -1.0, 2.0, -2.0, 0.5, 0.0] + [0.25] * 10, np.float32).astype(x.dtype)
    case.args[2][0] = np.float32(1.0 / 448.0)
    case.run()
    got = case.args[1].astype(np.float32)
    assert list(got[:6]) == [448.0, -448.0, 448.0, -448.0, 224.0, 0.0]


def test_gating_forward_is_the_gate_gemm_then_topk(h800):
    """moe-gating forward = a bf16 GEMM tokens x experts x hidden, then the top-k kernel;
    backward = the two gradient GEMMs."""
    from workloads.ops import build_op

    fwd = build_op("moe-gating", h800, tokens=64, hidden=256, experts=64, topk=4)
    assert fwd.launches[-1].entry == "moe_topk_sigmoid"
    assert fwd.flops >= 2 * 64 * 256 * 64
    bwd = build_op("moe-gating", h800, tokens=64, hidden=256, experts=64, topk=4,
                   backward=True)
    assert "moe_topk_sigmoid" not in [lau.entry for lau in bwd.launches]
    assert bwd.flops == 2 * (2 * 64 * 256 * 64)


def test_residual_add_op_reads_more_with_more_inputs(h800):
    """Summing 4 tensors moves 5/3 the bytes of summing 2; the simulated HBM bytes grow."""
    from workloads.ops import build_op, simulate_op

    two = simulate_op(build_op("residual-add", h800, rows=64, cols=512, inputs=2), h800, "full")
    four = simulate_op(build_op("residual-add", h800, rows=64, cols=512, inputs=4), h800,
                       "full")
    assert four["bytes"] == pytest.approx(two["bytes"] * 5 / 3)
    assert four["hbm_bytes"] > two["hbm_bytes"] > 0
