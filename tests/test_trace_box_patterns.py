"""TMA box sectors from the per-shape pattern cache equal those computed box by box."""

import numpy as np
import pytest

import isa
import models
import simulator.runner.trace_tiles as trace_tiles
from isa.launch import dim3
from simulator.runner.simulate import KernelLaunch
from workloads.ops import build_op


def _trace(op_args: dict, cached: bool, monkeypatch):
    config = models.load_preset("h800_sxm", {"sm.count": 4})
    plan = build_op("gemm", config, **op_args).launches[0]
    program = isa.compile_kernel(plan.ptx, plan.entry)
    launch = KernelLaunch(program, plan.entry, dim3(plan.grid, "grid"),
                          dim3(plan.block, "block"), list(plan.args), plan.shared_bytes,
                          plan.timing_only)
    with monkeypatch.context() as patch:
        if not cached:
            box_sectors = trace_tiles.box_sectors
            patch.setattr(trace_tiles, "box_sectors",
                          lambda m, ins, lane, map_op, coords_op, patterns=None:
                          box_sectors(m, ins, lane, map_op, coords_op))
        recorder = launch.recorder()
        launch.run(recorder)
    return recorder.finish(), recorder


@pytest.mark.parametrize("op_args", [
    dict(m=384, n=512, k=1024, dtype="fp8"),
    dict(m=200, n=300, k=520, dtype="bf16"),
], ids=["fp8-whole-tiles", "bf16-clipped-edges"])
def test_cached_box_sectors_equal_box_by_box(op_args, monkeypatch):
    """Same sectors per event with and without the pattern cache (clipped boxes included)."""
    cached, recorder = _trace(op_args, True, monkeypatch)
    plain, _ = _trace(op_args, False, monkeypatch)
    assert recorder._tiles.box_patterns
    assert cached.sectors.size > 1000
    assert np.array_equal(cached.sectors, plain.sectors)
    assert np.array_equal(cached.sector_start, plain.sector_start)
    assert np.array_equal(cached.detail, plain.detail)
