"""The ideal (fixed-latency) memory: a bound that measures what the real hierarchy costs."""

import numpy as np

import models
import simulator
from models.fixed_latency_memory import FixedLatencyMemory
from workloads.kernels.case import load_ptx
from workloads.kernels.catalog import KERNELS


def _run(name, memory, variant=0):
    spec = KERNELS[name]
    case = spec.build(np.random.default_rng(0), **spec.variants[variant])
    return simulator.simulate_kernel(load_ptx(case.file), case.entry, case.grid, case.block,
                                     case.args, shared_bytes=case.shared_bytes, memory=memory)


def test_fixed_latency_memory_completes_each_access_after_its_latency():
    """access() returns issue time + the configured latency, whatever the sectors."""
    cfg = models.load_preset("h100_sxm")
    mem = FixedLatencyMemory(cfg, latency_cycles=100)
    period_ps = 1e3 / cfg.chip.clock_ghz
    done = mem.access(0, "load", np.arange(64, dtype=np.int64), 5000)
    assert abs((done - 5000) - 100 * period_ps) <= 1


def test_ideal_memory_is_never_slower_than_the_cached_hierarchy():
    """A memory-bound kernel runs faster on ideal memory; outputs are the same."""
    ideal, real = _run("saxpy", "ideal"), _run("saxpy", "cached")
    assert ideal.cycles < real.cycles


def test_ideal_memory_is_selected_by_name():
    """build_system(memory="ideal") assembles a FixedLatencyMemory."""
    system = simulator.build_system(models.load_preset("h100_sxm"), memory="ideal")
    assert isinstance(system.memory, FixedLatencyMemory)
