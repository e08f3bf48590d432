"""PyTorch's fp16 softmax and LayerNorm kernels (`workloads/kernels/aten/torch_softmax.cu`,
`torch_layer_norm.cu`) behind `ptxsim op softmax|layernorm --dtype fp16`.

The launches the ops time are run functionally at odd sizes (partial warp batches, rows not
16-byte aligned, tails shorter than a vector, widths that are not a multiple of 4) and their
fp16 outputs compared with numpy in f64 rounded once to fp16; the host-side launch rules are
checked against ATen's formulas; ptxas's register counts against the ones the launches carry.
"""

import re
import shutil
import subprocess

import numpy as np
import pytest

import isa
import models
from isa.errors import InputError
from workloads.kernels.case import KERNEL_DIR
from workloads.ops import build_op
from workloads.ops import torch_norms as tn

F16_RTOL = 2.0**-10       # one fp16 ulp of the reference, relative
F16_ATOL = 2.0**-24       # the smallest fp16 subnormal


@pytest.fixture(scope="module")
def a100():
    return models.load_preset("a100_sxm")


def run_plan(plan) -> None:
    """Run every launch of `plan` in the functional interpreter (outputs change in place)."""
    for launch in plan.launches:
        isa.run_kernel(launch.ptx, launch.entry, launch.grid, launch.block, launch.args,
                       shared_bytes=launch.shared_bytes)


def softmax_reference(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def assert_fp16_close(got: np.ndarray, want: np.ndarray, atol: float = F16_ATOL) -> None:
    want16 = want.astype(np.float16).astype(np.float64)
    err = np.abs(got.astype(np.float64) - want16)
    bound = F16_RTOL * np.abs(want16) + atol
    assert (err <= bound).all(), (float(err.max()), np.argwhere(err > bound)[:5].tolist())


@pytest.mark.parametrize("rows, cols", [(5, 1), (7, 3), (9, 33), (3, 100), (2, 128),
                                        (3, 129), (5, 1000), (1, 1024)])
def test_persistent_softmax_matches_numpy_at_odd_sizes(a100, rows, cols):
    """softmax_warp_forward_f16_<L>: every row (a partial last warp batch included) is the
    softmax of its fp16 inputs, rounded once to fp16."""
    plan = build_op("softmax", a100, rows=rows, cols=cols, dtype="fp16", shape_only=False)
    (launch,) = plan.launches
    assert launch.entry == f"softmax_warp_forward_f16_{tn.log2_ceil(cols)}"
    y, x = launch.args[0], launch.args[1]
    x[:] = (x.astype(np.float32) * 3.0).astype(np.float16)
    run_plan(plan)
    assert_fp16_close(y, softmax_reference(x))


@pytest.mark.parametrize("rows, cols", [(3, 1025), (4, 1500), (2, 2051), (2, 4096),
                                        (1, 9000)])
def test_block_softmax_matches_numpy_with_unaligned_rows_and_tails(a100, rows, cols):
    """cunn_softmax_forward_f16: rows that start off a 16-byte boundary (odd widths) take the
    scalar head, widths past the last 8 x blockDim block the scalar tail; each row still
    comes out as its softmax."""
    plan = build_op("softmax", a100, rows=rows, cols=cols, dtype="fp16", shape_only=False)
    (launch,) = plan.launches
    assert launch.entry == "cunn_softmax_forward_f16"
    y, x = launch.args[0], launch.args[1]
    x[:] = (x.astype(np.float32) * 3.0).astype(np.float16)
    run_plan(plan)
    assert_fp16_close(y, softmax_reference(x))


def layer_norm_reference(x, gamma, beta, eps=1e-5):
    x = x.astype(np.float64)
    mean = x.mean(axis=1)
    rstd = 1.0 / np.sqrt(x.var(axis=1) + eps)
    y = (x - mean[:, None]) * rstd[:, None] * gamma.astype(np.float64) + beta.astype(np.float64)
    return y, mean, rstd


@pytest.mark.parametrize("rows, cols, entries", [
    (3, 4, ("vectorized_layer_norm_f16",)),
    (5, 1000, ("vectorized_layer_norm_f16",)),
    (3, 4100, ("vectorized_layer_norm_f16",)),
    (3, 1, ("rowwise_moments_f16", "layer_norm_forward_f16")),
    (2, 333, ("rowwise_moments_f16", "layer_norm_forward_f16")),
    (4, 1001, ("rowwise_moments_f16", "layer_norm_forward_f16")),
])
def test_layer_norm_matches_numpy_and_writes_mean_and_rstd(a100, rows, cols, entries):
    """The vectorized Welford kernel (widths divisible by 4) and the two-kernel fallback give
    gamma (x - mean) rstd + beta in fp16 and the f32 mean and rstd of every row."""
    plan = build_op("layernorm", a100, rows=rows, cols=cols, dtype="fp16", shape_only=False)
    assert tuple(lau.entry for lau in plan.launches) == entries
    if len(entries) == 1:
        x, gamma, beta, mean, rstd, y = plan.launches[0].args[2:]
    else:
        _, x, mean, rstd, gamma, beta, y = plan.launches[1].args
    x[:] = (x.astype(np.float32) * 2.0 + 1.0).astype(np.float16)
    run_plan(plan)
    want, want_mean, want_rstd = layer_norm_reference(x, gamma, beta)
    assert_fp16_close(y, want, atol=1e-5)
    np.testing.assert_allclose(mean, want_mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rstd, want_rstd, rtol=1e-5)


@pytest.mark.parametrize("cols, threads", [(1025, 64), (2048, 128), (4096, 256), (8192, 512),
                                           (16384, 512), (32768, 512)])
def test_block_softmax_threads_follow_aten_block_size_rule(cols, threads):
    """SoftMax_getBlockSize with ILP 8: the power of two reaching min(cols / 8, 1024) / 2."""
    assert tn.softmax_block_threads(cols) == threads


@pytest.mark.parametrize("cols, geometry", [(1, (0, 1, 2)), (32, (5, 32, 2)),
                                            (100, (7, 32, 2)), (129, (8, 32, 1)),
                                            (1024, (10, 32, 1))])
def test_persistent_softmax_geometry_follows_aten(cols, geometry):
    """(log2 of next_pow2(cols), WARP_SIZE = min(next_pow2, 32), WARP_BATCH = 2 up to 128)."""
    assert tn.persistent_softmax_geometry(cols) == geometry


def test_softmax_dispatch_switches_to_the_block_kernel_above_1024_columns(a100):
    """Up to 1024 columns the warp kernel, 128 threads (4 rows) a block; above, a block per row with
    blockDim.x floats of dynamic shared memory."""
    warp = build_op("softmax", a100, rows=4096, cols=1024, dtype="fp16").launches
    block = build_op("softmax", a100, rows=4096, cols=1025, dtype="fp16").launches
    assert [(lau.grid, lau.block) for lau in warp] == [((1024, 1, 1), (32, 4, 1))]
    assert [(lau.grid, lau.block, lau.shared_bytes) for lau in block] == [
        ((4096, 1, 1), (64, 1, 1), 256)]


def test_persistent_softmax_launches_once_per_2_to_the_30_elements(a100):
    """ATen's chunk loop: 2^30 / cols rows a launch, the last launch takes the rest."""
    rows = (1 << 20) + 3
    plan = build_op("softmax", a100, rows=rows, cols=1024, dtype="fp16", shape_only=True)
    assert [lau.args[2] for lau in plan.launches] == [1 << 20, 3]
    assert [lau.grid[0] for lau in plan.launches] == [1 << 18, 1]


def test_fp16_plans_count_two_bytes_an_element(a100):
    """bytes: x and y at 2 bytes each (layernorm: plus gamma, beta, and f32 mean and rstd)."""
    assert build_op("softmax", a100, rows=64, cols=512, dtype="fp16").bytes == 4 * 64 * 512
    assert build_op("layernorm", a100, rows=64, cols=512, dtype="fp16").bytes == \
        2 * (2 * 64 * 512 + 2 * 512) + 8 * 64


def test_default_dtype_keeps_the_f32_catalog_kernels(a100):
    """Without --dtype the ops launch softmax_rows and layernorm_rows, as before."""
    assert build_op("softmax", a100, rows=8, cols=64).launches[0].entry == "softmax_rows"
    assert build_op("layernorm", a100, rows=8, cols=64).launches[0].entry == "layernorm_rows"


@pytest.mark.parametrize("kind", ["softmax", "layernorm"])
def test_unknown_dtype_is_refused_naming_the_flag(a100, kind):
    with pytest.raises(InputError, match="--dtype 'bf16': accepted f32, fp16"):
        build_op(kind, a100, rows=4, cols=64, dtype="bf16")


SOURCES = ("torch_softmax", "torch_layer_norm")


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not on PATH")
@pytest.mark.parametrize("target", ["sm_80", "sm_90"])
@pytest.mark.parametrize("stem", SOURCES)
def test_ptxas_registers_are_the_ones_the_launches_carry(stem, target):
    """ptxas -v on each committed build: no spills, and each entry's register count is
    PTXAS_REGISTERS[target][entry]."""
    name = f"{stem}.sm_80.ptx" if target == "sm_80" else f"{stem}.ptx"
    out = subprocess.run(["ptxas", f"-arch={target}", "-v", str(KERNEL_DIR / "aten" / name),
                          "-o", "/dev/null"], capture_output=True, text=True, check=True,
                         timeout=300).stderr
    found = dict(re.findall(r"entry function '(\w+)'.*?Used (\d+) registers", out, re.S))
    assert found and "spill stores" in out
    assert all(m == ("0", "0") for m in
               re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", out))
    for entry, regs in found.items():
        assert tn.PTXAS_REGISTERS[target][entry] == int(regs), entry
