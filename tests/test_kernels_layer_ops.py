"""Transformer-layer CUDA kernels (SwiGLU, GELU, RoPE, n-input add, DeepSeek FP8 block
quantization, MoE top-k routing, norm backward) via `isa.run_kernel`, against numpy.

Tolerances and their reasons are in `workloads/kernels/cases_layer_ops.py`.
"""

import numpy as np
import pytest

from workloads.kernels.catalog import KERNELS

LAYER_KERNELS = ("swiglu_bf16", "swiglu_bwd_bf16", "gelu_bf16", "gelu_bwd_bf16", "rope_bf16",
                 "add_n_bf16", "quantize_e4m3_1x128", "quantize_e4m3_128x1_t",
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
