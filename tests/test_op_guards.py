"""Op size guards: an op beyond the host budget or the device memory is refused before it
allocates, with its sizes, the estimate and the budget in the message."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

import isa
import models
from isa.errors import InputError
from simulator.app.commands import op as op_command
from workloads.ops import OPS, Launch, OpPlan, build_op, simulate_op
from workloads.ops.registry import HOST_BYTES_PER_CTA, check_plan, plan_footprint

H100 = models.load_preset("h100_sxm")
BIG = 10_000_000

OVERSIZED = {
    "gemm": dict(m=BIG, n=BIG, k=BIG),
    "attention": dict(batch=64, heads=128, seqlen=BIG),
    "mla-decode": dict(batch=BIG, heads=128, kv_len=BIG),
    "softmax": dict(rows=100 * BIG, cols=BIG),
    "rmsnorm": dict(rows=100 * BIG, cols=BIG),
    "layernorm": dict(rows=100 * BIG, cols=BIG),
    "swiglu": dict(rows=100 * BIG, cols=8 * BIG),
    "gelu": dict(rows=100 * BIG, cols=8 * BIG),
    "rope": dict(rows=100 * BIG, cols=8 * BIG),
    "residual-add": dict(rows=100 * BIG, cols=8 * BIG),
    "quantize": dict(rows=100 * BIG, cols=128 * BIG),
    "rmsnorm-bwd": dict(rows=100 * BIG, cols=8 * BIG),
    "layernorm-bwd": dict(rows=100 * BIG, cols=8 * BIG),
    "moe-gating": dict(tokens=100 * BIG, hidden=7168, experts=256, topk=8),
    "alltoall": dict(ranks=8, tokens=100 * BIG, hidden=7168),
    "allreduce": dict(ranks=8, bytes=100 * BIG * BIG),
    "elementwise": dict(functor="add", shape=f"{BIG}x{BIG}"),
    "copy": dict(shape=f"{BIG}x{BIG}"),
    "memset": dict(bytes=BIG * BIG),
    "memcpy": dict(bytes=BIG * BIG),
    "cat": dict(shapes=f"{BIG}x{BIG};{BIG}x{BIG}"),
    "index-select": dict(rows=BIG, cols=BIG),
}
VARIANTS = {
    "gemm grouped": ("gemm", dict(m=BIG, n=4096, k=4096, groups=64)),
    "attention backward": ("attention", dict(batch=64, heads=128, seqlen=BIG, backward=True)),
    "rmsnorm vllm": ("rmsnorm", dict(rows=100 * BIG, cols=BIG, kernel="vllm")),
    "allreduce compressed": ("allreduce", dict(ranks=8, bytes=BIG * BIG, compress="topk4bit")),
}
CASES = {**{kind: (kind, sizes) for kind, sizes in OVERSIZED.items()}, **VARIANTS}


def test_every_op_kind_has_an_oversized_case():
    """The table below covers each registered op kind."""
    assert set(OVERSIZED) == set(OPS)


@pytest.mark.parametrize("case", sorted(CASES))
def test_oversized_op_is_refused_with_its_estimate_and_budget(case):
    """Each op kind at an absurd size raises InputError naming op, sizes, estimate, budget."""
    kind, sizes = CASES[case]
    with pytest.raises(InputError) as info:
        build_op(kind, H100, **sizes)
    message = str(info.value)
    assert message.startswith("op ") and "(" in message and "=" in message
    assert any(unit in message for unit in ("GiB", "TiB", "PiB"))
    assert ("limits.host_memory_bytes = 17179869184" in message
            or "hbm.capacity_bytes = 85899345920" in message)


def test_gemm_of_the_issue_is_refused_by_the_command():
    """`ptxsim op gemm --m 1e7 --n 1e7 --k 1e7` is an InputError, not an out-of-memory kill."""
    parser = argparse.ArgumentParser()
    op_command.add_arguments(parser)
    args = parser.parse_args(["gemm", "--m", str(BIG), "--n", str(BIG), "--k", str(BIG)])
    with pytest.raises(InputError, match=r"op gemm \(m=10000000, n=10000000, k=10000000.*"
                       r"GiB of host memory.*tile work tables"):
        op_command.run(args)


def test_host_budget_comes_from_the_config():
    """A GEMM that fits the default budget is refused under a 64 KiB one, with that budget."""
    sizes = dict(m=4096, n=4096, k=4096)
    assert build_op("gemm", H100, **sizes).kind == "gemm"
    tight = H100.with_overrides({"limits.host_memory_bytes": 1 << 16})
    with pytest.raises(InputError, match=r"limits\.host_memory_bytes = 65536 \(64 KiB\)"):
        build_op("gemm", tight, **sizes)


def _plan(*args, grid=(1, 1, 1)) -> OpPlan:
    launch = Launch("probe", "", "probe", grid, (32, 1, 1), list(args))
    return OpPlan("probe", {"n": 1}, (launch,), 0.0, 0.0, "vector_fp32_tflops")


def test_shape_only_tensors_count_by_shape_and_stay_unallocated():
    """An 8 TiB ShapeOnly counts 8 TiB on the device and 0 B of numpy tensors on the host."""
    plan = _plan(isa.ShapeOnly((1 << 40,), np.float64), np.zeros(16, np.float32))
    host, device = plan_footprint(plan)
    assert device == 8 * (1 << 40) + 64
    assert host["numpy tensors"] == 64 and host["their copy in the simulated memory"] == 64
    with pytest.raises(InputError, match=r"its tensors take 8 TiB.*hbm\.capacity_bytes"):
        check_plan(plan, H100)


def test_per_cta_state_counts_the_largest_grid():
    """The host estimate holds `HOST_BYTES_PER_CTA` per CTA of the largest launch."""
    host, _ = plan_footprint(_plan(grid=(1000, 20, 1)))
    assert host["per-CTA state"] == 20_000 * HOST_BYTES_PER_CTA


def test_simulate_op_checks_a_plan_built_without_build_op():
    """A plan made by calling a builder directly is still refused before it is simulated."""
    plan = OPS["softmax"](H100, rows=100 * BIG, cols=BIG)
    with pytest.raises(InputError, match=r"op softmax \(rows=1000000000.*per-CTA state"):
        simulate_op(plan, H100)


def test_op_within_budget_carries_no_null_reasons():
    """A valid op's result has every figure finite and no `null_reasons`."""
    res = simulate_op(build_op("rmsnorm", H100, rows=64, cols=1024), H100)
    assert "null_reasons" not in res
    assert all(np.isfinite(res[k]) for k in ("time_us", "tflops", "gbps", "gap"))
