"""vLLM-style fp16 layer kernels (`workloads/kernels/vllm_layer_ops.cu`) against numpy, and the
`--kernel vllm` variants of the rmsnorm, swiglu and rope ops that time them."""

import numpy as np
import pytest

from workloads.kernels.catalog import KERNELS

VLLM_KERNELS = ("rms_norm_f16", "silu_and_mul_f16", "rotary_neox_f16")
CASES = [(entry, i) for entry in VLLM_KERNELS for i in range(len(KERNELS[entry].variants))]


@pytest.mark.parametrize(("entry", "variant"), CASES, ids=lambda v: str(v))
def test_vllm_kernel_matches_numpy(entry, variant):
    spec = KERNELS[entry]
    case = spec.build(np.random.default_rng(90 + variant), **spec.variants[variant])
    case.run()
    case.check()


def test_rotary_kernel_leaves_columns_past_the_rotary_dim_alone():
    """With rot_dim < head_size only the first rot_dim columns of each head move."""
    case = KERNELS["rotary_neox_f16"].build(np.random.default_rng(1), tokens=2, heads=2,
                                            kv_heads=1, head_size=64, rot_dim=32)
    q_before = case.args[1].copy()
    case.run()
    case.check()
    assert np.array_equal(case.args[1][..., 32:], q_before[..., 32:])
    assert not np.array_equal(case.args[1][..., :32], q_before[..., :32])


@pytest.fixture(scope="module")
def h100():
    import models
    return models.load_preset("h100_sxm")


@pytest.mark.parametrize(("kind", "sizes", "entry", "block"), [
    ("rmsnorm", dict(rows=6, cols=4096), "rms_norm_f16", 1024),
    ("swiglu", dict(rows=6, cols=1376), "silu_and_mul_f16", 1024),
    ("rope", dict(rows=6, cols=1024, rot_dim=128), "rotary_neox_f16", 512),
])
def test_vllm_op_launches_a_cta_per_token(h100, kind, sizes, entry, block):
    """--kernel vllm: one launch of the fp16 kernel, a CTA per row, min(width, cap) threads;
    the same FLOPs as the default kernel's plan."""
    from workloads.ops import build_op

    plan = build_op(kind, h100, kernel="vllm", **sizes)
    (lau,) = plan.launches
    assert (lau.entry, lau.grid, lau.block) == (entry, (6, 1, 1), (block, 1, 1))
    assert plan.flops == build_op(kind, h100, **sizes).flops
    assert plan.sizes["kernel"] == "vllm"


def test_vllm_rmsnorm_runs_the_tensor_twice_and_is_slower_than_the_vector_kernel(h100):
    """Scalar 2-byte accesses and a second pass over the row: over several waves the
    simulated vLLM-style RMSNorm takes longer than the 16-byte vector kernel on the same
    tensor (at one wave both wait on latency and read alike)."""
    from workloads.ops import build_op, simulate_op

    vec = simulate_op(build_op("rmsnorm", h100, rows=1024, cols=4096), h100, "sampled")
    vllm = simulate_op(build_op("rmsnorm", h100, rows=1024, cols=4096, kernel="vllm"), h100,
                       "sampled")
    assert vllm["time_us"] > 1.3 * vec["time_us"]


@pytest.mark.parametrize(("kind", "sizes", "flag"), [
    ("swiglu", dict(rows=4, cols=64, backward=True, kernel="vllm"), "--kernel"),
    ("rope", dict(rows=4, cols=64, rot_dim=64, backward=True, kernel="vllm"), "--kernel"),
    ("rmsnorm", dict(rows=4, cols=64, kernel="cuda"), "--kernel"),
])
def test_vllm_variant_rejects_what_it_cannot_run(h100, kind, sizes, flag):
    from isa.errors import InputError
    from workloads.ops import build_op

    with pytest.raises(InputError, match=flag):
        build_op(kind, h100, **sizes)
