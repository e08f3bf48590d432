"""PyTorch's bf16 RMSNorm kernel (`workloads/kernels/aten/torch_rms_norm.cu`,
`vectorized_layer_norm_kernel<c10::BFloat16, float, true>`) behind `ptxsim op rmsnorm
--kernel aten` and the traces' rms_norm operator: its output against numpy, its launch
against the trace's, ptxas's register count against the launch's."""

import re
import shutil
import subprocess

import ml_dtypes
import numpy as np
import pytest

import isa
import models
from isa.errors import InputError
from workloads.kernels.case import KERNEL_DIR
from workloads.ops import build_op
from workloads.ops import torch_norms as tn
from workloads.traces.operators import map_operator

BF16_RTOL = 2.0**-7        # one bf16 ulp of the reference, relative (8-bit significand)


@pytest.fixture(scope="module")
def h100():
    return models.load_preset("h100_sxm")


def rms_reference(x: np.ndarray, gamma: np.ndarray, eps: float) -> np.ndarray:
    x64 = x.astype(np.float64)
    rstd = 1.0 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + eps)
    return gamma.astype(np.float64) * (x64 * rstd), rstd[:, 0]


@pytest.mark.parametrize("rows, cols", [(3, 4), (2, 36), (5, 512), (2, 4096), (1, 5000)])
def test_aten_rms_norm_matches_numpy(h100, rows, cols):
    """Every row is gamma * x / sqrt(mean(x^2) + eps) within a bf16 ulp and rstd within f32
    rounding, at widths below one vector per thread, a partial round and beyond 128 x 4."""
    plan = build_op("rmsnorm", h100, rows=rows, cols=cols, kernel="aten", shape_only=False)
    (launch,) = plan.launches
    n, eps, x, gamma, rstd, y = launch.args
    x[:] = (x.astype(np.float32) * 3.0).astype(ml_dtypes.bfloat16)
    isa.run_kernel(launch.ptx, launch.entry, launch.grid, launch.block, launch.args,
                   shared_bytes=launch.shared_bytes)
    want, want_rstd = rms_reference(x, gamma, float(eps))
    want16 = want.astype(ml_dtypes.bfloat16).astype(np.float64)
    err = np.abs(y.astype(np.float64) - want16)
    assert (err <= BF16_RTOL * np.abs(want16) + 1e-30).all(), float(err.max())
    assert np.allclose(rstd, want_rstd, rtol=1e-5)


def test_aten_rms_norm_launches_as_the_trace_shows(h100):
    """A block of (32, 4) per row with 24 bytes of dynamic shared memory: the LLaMA-3-8B
    traces' vectorized_layer_norm_kernel<c10::BFloat16, float, true> launch."""
    (launch,) = build_op("rmsnorm", h100, rows=64, cols=4096, kernel="aten").launches
    assert launch.grid == (64, 1, 1) and launch.block == (32, 4, 1)
    assert launch.shared_bytes == 24


def test_aten_rms_norm_refuses_widths_off_the_vector(h100):
    """ATen's fallback for widths not divisible by 4 is not written: refused naming --cols."""
    with pytest.raises(InputError, match="--cols 6"):
        build_op("rmsnorm", h100, rows=2, cols=6, kernel="aten")


def test_rms_norm_operator_maps_to_the_aten_kernel_its_trace_names():
    """aten::_fused_rms_norm launching vectorized_layer_norm_kernel<..., true> runs as
    `rmsnorm --kernel aten`; launching another kernel, as the catalog's."""
    stack = ('[{"name": "aten::_fused_rms_norm", "id": 3, "dims": [[64, 4096], [], [4096], '
             '[]], "types": ["c10::BFloat16", "ScalarList", "c10::BFloat16", "Scalar"], '
             '"concrete": ["", "[4096]", "", "1e-05"], "strides": [[4096, 1], [], [1], []]}]')
    aten = ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel"
            "<c10::BFloat16, float, true>(int, float, c10::BFloat16 const*)")
    for name, sizes in ((aten, {"rows": 64, "cols": 4096, "kernel": "aten"}),
                        ("my_rms_norm_kernel", {"rows": 64, "cols": 4096})):
        mapped, reason = map_operator({"kind": "kernel", "name": name, "op_stack": stack}, [])
        assert reason is None and mapped.op == "rmsnorm" and mapped.sizes == sizes


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not on PATH")
def test_ptxas_registers_are_the_ones_the_launch_carries():
    """ptxas -v on the committed sm_90a build: no spills, the entry's count is
    PTXAS_REGISTERS["sm_90a"]."""
    out = subprocess.run(["ptxas", "-arch=sm_90a", "-v",
                          str(KERNEL_DIR / "aten" / "torch_rms_norm.ptx"), "-o", "/dev/null"],
                         capture_output=True, text=True, check=True, timeout=300).stderr
    found = dict(re.findall(r"entry function '(\w+)'.*?Used (\d+) registers", out, re.S))
    assert found == {"vectorized_rms_norm_bf16": str(tn.PTXAS_REGISTERS["sm_90a"][
        "vectorized_rms_norm_bf16"])}
    assert re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", out) == \
        [("0", "0")]
