"""Sampled replays of kernels whose footprint outgrows the L2 start from an L2 full of
older, partly dirty lines (`simulator.runner.sampling.steady_dirty_fraction`,
`models.cached_memory.CachedMemory.precondition_l2`)."""

from __future__ import annotations

import numpy as np

import models
from models.cached_memory import FOREIGN_LINE, CachedMemory
from models.cached_memory_layout import LEVEL_L2
from simulator import simulate_kernel
from simulator.runner.sampling import steady_dirty_fraction
from simulator.runner.trace import KIND_LOAD, KIND_STORE
from workloads.kernels.case import load_ptx
from workloads.kernels.catalog import KERNELS


class _Trace:
    """The fields `steady_dirty_fraction` reads: one load and one store event."""

    def __init__(self, loads: np.ndarray, stores: np.ndarray) -> None:
        self.kind = np.array([KIND_LOAD, KIND_STORE], np.int8)
        self.detail = np.array([loads.size, stores.size], np.int32)
        self.sector_start = np.array([0, loads.size], np.int64)
        self.sectors = np.concatenate([loads, stores]).astype(np.int64)


def test_dirty_fraction_from_footprint():
    """Loads of 100 sectors, stores of 50 others, 10 CTAs traced of 1000: footprint 150 x 32
    x 100 = 480 kB; with one partition and a 120 kB L2 the dirty share is 50/150 x (1 -
    120/480) = 0.25; two partitions add copies of half the loaded lines; an L2 that holds
    the footprint needs none."""
    trace = _Trace(np.arange(100), np.arange(1000, 1050))
    assert steady_dirty_fraction(trace, 10, 1000, 120_000, 1) == 50 / 150 * (1 - 120 / 480)
    allocated = 480_000 + 0.5 * 320_000
    assert steady_dirty_fraction(trace, 10, 1000, 120_000, 2) == (
        160_000 / allocated * (1 - 120_000 / allocated))
    assert steady_dirty_fraction(trace, 10, 1000, 480_000, 1) is None


def test_precondition_fills_the_l2_with_old_lines():
    mem = CachedMemory(models.load_preset("h100_sxm"), 4)
    mem.precondition_l2(0.25)
    meta, flags = mem.meta[LEVEL_L2], mem.flags[LEVEL_L2]
    assert (meta[:, :, 0, :] >= FOREIGN_LINE).all()
    assert (meta[:, :, 1, :] == 0).all()
    assert (flags[..., 0] == 15).all()
    dirty = (flags[..., 1] == 15).mean(axis=2)
    assert np.allclose(dirty, 5 / 20)          # 20 ways, one in four dirty


def test_streaming_kernel_sampled_matches_full_past_the_l2():
    """saxpy moving 48 MB through an L2 cut to 160 sets per slice (32.8 MB): the sampled
    waves (13 MB) alone fit in the L2 and write nothing back, the full run writes back once
    the L2 is full. When written: full 25514 cycles, sampled 25896 (+1.5 %); 22091 (-13.4 %)
    with a cold L2."""
    config = models.load_preset("h100_sxm").with_overrides(
        {"l2.size_bytes": 80 * 160 * 20 * 128})
    spec = KERNELS["saxpy"]
    case = spec.build(np.random.default_rng(0), n=1 << 22, block=256)
    runs = {fid: simulate_kernel(load_ptx(spec.file), spec.entry, case.grid, case.block,
                                 case.args, config=config, timing_only=True, fidelity=fid)
            for fid in ("full", "sampled")}
    assert runs["sampled"].fidelity == "sampled"
    assert abs(runs["sampled"].cycles / runs["full"].cycles - 1) < 0.05
