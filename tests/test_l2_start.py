"""`[fidelity] l2_start`: a launch from a cold L2, or with its inputs resident as the kernel
before it left them (`simulator.runner.l2_start`, `CachedMemory.preload_l2`)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import models
from models.cached_memory import CachedMemory, _l2_places
from simulator.runner import trace as trace_mod
from simulator.runner.l2_start import L2WarmStart
from workloads.ops import build_op, simulate_op

ADD = {"alpha": 1.0, "dtype": "f32", "functor": "add", "inputs": 2, "out_dtype": "f32",
       "path": "vectorized", "shape": "64x32x64", "strides": "2048,64,1;2048,64,1", "vec": 4}
"""RoPE's f32 add of the LLaMA-3-8B decode trace: two 512 KiB inputs, one output."""


def _add(l2_start: str):
    config = models.load_preset("h100_sxm").with_overrides({"fidelity.l2_start": l2_start})
    stats: list = []
    result = simulate_op(build_op("elementwise", config, **ADD), config, "sampled", stats=stats)
    frame = stats[0][2]
    return result, {(c, s): v for c, s, v in zip(frame.component, frame.stat, frame.value,
                                                  strict=True)}


@pytest.fixture(scope="module")
def runs():
    return {start: _add(start) for start in ("cold", "warm-inputs")}


def test_warm_inputs_turn_every_input_load_into_an_l2_hit(runs):
    """Cold, the 2 x 512 KiB of inputs all miss the L2; warm, all 32768 sectors hit, and
    exactly those (not the output's) started resident."""
    _, cold = runs["cold"]
    _, warm = runs["warm-inputs"]
    inputs = 2 * 64 * 32 * 64 * 4 // 32
    assert cold[("memory.l2.load", "hit_sectors")] == 0
    assert cold[("memory.l2.load", "miss_sectors")] == inputs
    assert ("memory.l2", "warm_start_sectors") not in cold
    assert warm[("memory.l2", "warm_start_sectors")] == inputs
    assert warm[("memory.l2.load", "hit_sectors")] == inputs
    assert warm[("memory.l2.load", "miss_sectors")] == 0
    assert warm.get(("memory.hbm.load", "bytes"), 0) == 0


def test_warm_start_is_faster_and_deterministic(runs):
    """Inputs in the L2 shorten the launch (an L2 hit instead of an HBM read per load);
    the same launch again gives the same cycles, bit for bit."""
    cold, _ = runs["cold"]
    warm, _ = runs["warm-inputs"]
    assert warm["cycles"] < cold["cycles"]
    again, _ = _add("warm-inputs")
    assert (again["cycles"], again["time_us"]) == (warm["cycles"], warm["time_us"])


def _trace(sectors_by_kind: list[tuple[int, list[int]]]):
    """A trace of one request per (kind, sectors) entry."""
    kinds = np.array([k for k, _ in sectors_by_kind], np.int64)
    counts = np.array([len(s) for _, s in sectors_by_kind], np.int64)
    flat = np.array([x for _, s in sectors_by_kind for x in s], np.int64)
    return SimpleNamespace(kind=kinds, detail=counts, sectors=flat,
                           sector_start=np.cumsum(counts) - counts)


def test_only_loaded_arguments_warm_and_only_when_they_fit():
    """Sectors loaded inside an argument warm; stored ones and loads outside every argument
    do not; inputs larger than the limit together start cold."""
    warm = L2WarmStart(np.array([0, 4096]), np.array([1024, 8192]), limit_bytes=8192)
    trace = _trace([(trace_mod.KIND_LOAD, [0, 1, 2]), (trace_mod.KIND_STORE, [130, 131]),
                    (trace_mod.KIND_LOAD_CG, [200]), (trace_mod.KIND_LOAD, [1000])])
    assert list(warm.sectors(trace)) == [0, 1, 2, 200]
    small = L2WarmStart(warm.starts, warm.ends, limit_bytes=4096)
    assert small.sectors(trace).size == 0


def test_preload_keeps_the_last_lines_written_to_a_set():
    """More lines of one set than it has ways: the later lines (in address order) stay,
    every sector of them dirty."""
    config = models.load_preset("h100_sxm")
    memory = CachedMemory(config, 1)
    per_line = config.l2.line_bytes // config.l2.sector_bytes
    ways = config.l2.associativity
    slices, sets = memory.meta[1].shape[0], memory.meta[1].shape[1]
    places = _l2_places(np.arange(64 * slices * sets, dtype=np.int64), slices, sets)
    same_set = np.flatnonzero(places == places[0])[:ways + 2].tolist()
    target = divmod(int(places[0]), sets)
    sectors = np.concatenate([np.arange(x * per_line, (x + 1) * per_line) for x in same_set])
    assert memory.preload_l2(sectors) == ways * per_line
    unit, s = target
    held = sorted(memory.meta[1][unit, s, 0, :].tolist())
    assert held == same_set[2:]
    assert (memory.flags[1][unit, s, :, 1] == (1 << per_line) - 1).all()
