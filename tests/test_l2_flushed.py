"""`[fidelity] l2_start = "flushed"`: a launch after a benchmark's L2 flush (a buffer larger
than the L2 written just before), every L2 line dirty with another buffer's data
(`simulator.runner.l2_start`, `CachedMemory.precondition_l2`)."""

from __future__ import annotations

import models
from workloads.ops import build_op, simulate_op

ADD = {"alpha": 1.0, "dtype": "f32", "functor": "add", "inputs": 2, "out_dtype": "f32",
       "path": "vectorized", "shape": "64x32x64", "strides": "2048,64,1;2048,64,1", "vec": 4}
"""Two 512 KiB f32 inputs and one output: 49152 sectors touched, all L2 misses when cold."""


def _add(l2_start: str):
    config = models.load_preset("h100_sxm").with_overrides({"fidelity.l2_start": l2_start})
    stats: list = []
    result = simulate_op(build_op("elementwise", config, **ADD), config, "full", stats=stats)
    frame = stats[0][2]
    return config, result, {(c, s): v for c, s, v in
                            zip(frame.component, frame.stat, frame.value, strict=True)}


def test_flushed_start_writes_back_what_the_launch_evicts_and_is_deterministic():
    """Cold, the launch writes nothing back before its end; flushed, every L2 line starts
    dirty (the stat counts them all), the launch's misses evict dirty lines, so HBM sees
    write-backs and the launch takes longer; the same launch again gives the same cycles."""
    config, cold, cold_stats = _add("cold")
    _, flushed, stats = _add("flushed")
    lines = config.l2.size_bytes // config.l2.line_bytes
    assert stats[("memory.l2", "flushed_start_lines")] == lines
    assert ("memory.l2", "flushed_start_lines") not in cold_stats
    assert cold_stats.get(("memory.hbm.writeback", "bytes"), 0) == 0
    assert stats[("memory.hbm.writeback", "bytes")] > 0
    assert flushed["cycles"] > cold["cycles"]
    _, again, _ = _add("flushed")
    assert (again["cycles"], again["time_us"]) == (flushed["cycles"], flushed["time_us"])
