"""The hardware harness for our templates (`benchmarks/hardware/template_export.py` and
`template_run.py`) without a GPU: the export describes every argument of a launch, and
the runner reads our tensor-map stand-ins as the driver's encoder wants them."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import models
from isa.tensor_map import read_tensor_map
from workloads.ops import build_op

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "hardware"))

import template_export  # noqa: E402
import template_run  # noqa: E402


def _decode_launch():
    config = models.load_preset("h100_sxm", {"kernels.decode_attention": "fa3"})  # as exported
    plan = build_op("attention", config, batch=2, heads=8, kv_heads=2, seqlen=1,
                    seqlen_k=40, headdim=128, shape_only=False)
    return plan.launches[0]


def test_export_describes_every_argument_with_its_ptx_type():
    """Tensor maps, arrays and scalars in order; one PTX type per argument (b8 for the
    by-value tensor maps); the tensor-map operands are generic addresses (cvta.param)."""
    launch = _decode_launch()
    arrays: dict = {}
    args = template_export._args(launch, "c0_l0", arrays)
    types = template_export.entry_params(launch.ptx, launch.entry)
    assert len(args) == len(types) == len(launch.args)
    assert [a["kind"] for a in args[:3]] == ["tmap"] * 3 and types[:3] == ["b8"] * 3
    assert all(a["kind"] == "array" for a in args[3:8])
    assert {a["kind"] for a in args[8:]} >= {"scalar"}
    assert all(key in arrays for key in (a["key"] for a in args if a["kind"] == "tmap"))
    assert launch.ptx.count("cvta.param.u64") == 3


def test_runner_reads_the_stand_in_fields_the_simulator_wrote():
    """rank, dtype, swizzle, global address (the named argument's pointer plus the offset),
    dims, strides (of dims 1..) and box are what `isa.tensor_map.read_tensor_map` reads."""
    launch = _decode_launch()
    base = {i: 0x10000 * (i + 1) for i in range(len(launch.args))}
    for raw in launch.args[:3]:
        tm = read_tensor_map(raw)
        got = template_run.encode_args(np.asarray(raw), base)
        assert got["rank"] == tm.rank and got["dtype"] == tm.dtype_code
        assert got["address"] == tm.address + base[tm.base_arg]
        assert tuple(got["dims"]) == tm.dims and tuple(got["box"]) == tm.box
        assert tuple(got["strides"]) == tm.strides_bytes[1:]
        assert {0: 0, 1: 32, 2: 64, 3: 128}[got["swizzle"]] == tm.swizzle_bytes


def test_xqa_cases_export_the_xqa_kernel_with_a_checked_output(tmp_path):
    """The XQA cases follow the GEMMs, one per GQA row of the attention cases, built with
    `kernels.decode_attention = "xqa"`; the checked one carries inputs and the numpy output,
    which the kernel run here reproduces, at the argument the runner's check reads."""
    import shutil

    import isa

    if shutil.which("ptxas") is None:
        pytest.skip("ptxas not installed")
    first = len(template_export.ATTENTION) + len(template_export.GEMM)
    assert len(template_export.XQA) == sum(h > hk for _, h, hk, _ in template_export.ATTENTION)
    index = template_export.XQA.index(next(iter(template_export.XQA_CHECKED)))
    key = f"c{first + index}"
    (case,) = template_export.export(tmp_path, simulate=False, only={key})
    assert case["decode_attention"] == "xqa" and case["check"]
    (spec,) = case["launches"]
    assert spec["entry"].startswith("xqa_decode_bf16_g4")
    arrays = np.load(tmp_path / "arrays.npz")
    want = arrays[f"{key}_expected"]
    shaped = [i for i, a in enumerate(spec["args"])
              if a["kind"] == "array" and tuple(a["shape"]) == want.shape]
    assert shaped[-1] == 5                        # the output, as template_run._check reads it
    config = models.load_preset("h100_sxm", {"kernels.decode_attention": "xqa"})
    b, h, hk, sk = template_export.XQA[index]
    (launch,) = build_op("attention", config, batch=b, heads=h, kv_heads=hk, seqlen=1,
                         seqlen_k=sk, headdim=128, shape_only=False).launches
    for i in (2, 3, 4):
        assert np.array_equal(np.asarray(launch.args[i]).view(np.uint16),
                              arrays[f"{key}_l0_a{i}"].view(np.uint16))
    isa.run_kernel(launch.ptx, launch.entry, launch.grid, launch.block, launch.args,
                   launch.shared_bytes)
    got = np.asarray(launch.args[5]).astype(np.float32)
    assert np.abs(got - want).max() <= 1e-2 * np.abs(want).max()
