"""The hardware harness for our templates (`benchmarks/hardware/template_export.py` and
`template_run.py`) without a GPU: the export describes every argument of a launch, and
the runner reads our tensor-map stand-ins as the driver's encoder wants them."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

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
