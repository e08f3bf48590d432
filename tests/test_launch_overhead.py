"""Launch costs: `launch.kernel_overhead_us` is added once per launch to `time_us`, and
`launch.kernel_front_end_us` once to `kernel_time_us`, never to cycles; 0 leaves each out,
exactly as before the parameters existed."""

import numpy as np
import pytest

import models
import simulator
from simulator.framework.config import ConfigError
from simulator.runner.simulate import launch_overhead_us
from workloads.kernels.case import load_ptx
from workloads.kernels.catalog import KERNELS
from workloads.ops import build_op, simulate_op

OVERHEAD_US = 2.75


def _config(overhead_us: float, front_end_us: float = 0.0, slicing: bool = True):
    return models.load_preset("h100_sxm").with_overrides(
        {"launch.kernel_overhead_us": overhead_us, "launch.kernel_front_end_us": front_end_us,
         "fidelity.chip_slicing": slicing})


def _saxpy(config, fidelity="full"):
    spec = KERNELS["saxpy"]
    case = spec.build(np.random.default_rng(0), **spec.variants[0])
    return simulator.simulate_kernel(load_ptx(case.file), case.entry, case.grid, case.block,
                                     case.args, config=config, shared_bytes=case.shared_bytes,
                                     fidelity=fidelity)


def _kernel_stat(res, name: str) -> float:
    frame = res.stats
    return float(frame[(frame.component == "kernel") & (frame.stat == name)].value.iloc[0])


def test_zero_overhead_is_the_kernel_alone():
    """With 0 the time is the cycles at the SM clock, as it was without the parameter."""
    config = _config(0.0)
    res = _saxpy(config)
    assert res.launch_overhead_us == 0.0
    assert res.time_us == res.kernel_time_us
    assert res.time_us == pytest.approx(res.cycles / (config.chip.clock_ghz * 1e3), rel=1e-6)
    assert _kernel_stat(res, "time_us") == res.time_us


@pytest.mark.parametrize("fidelity", ["full", "sampled"])
def test_overhead_adds_to_time_not_to_cycles(fidelity):
    """A nonzero overhead moves time_us by exactly that much; cycles and stats' kernel time
    stay; the stats carry the overhead as its own row."""
    base, more = _saxpy(_config(0.0), fidelity), _saxpy(_config(OVERHEAD_US), fidelity)
    assert more.cycles == base.cycles
    assert more.kernel_time_us == base.kernel_time_us
    assert more.time_us == pytest.approx(base.time_us + OVERHEAD_US, abs=1e-9)
    assert _kernel_stat(more, "time_us") == _kernel_stat(base, "time_us")
    assert _kernel_stat(more, "launch_overhead_us") == OVERHEAD_US
    assert _kernel_stat(base, "launch_overhead_us") == 0.0


def test_sampled_gemm_op_counts_one_overhead():
    """A sampled GEMM op (several reduced launches, extrapolation weights summing to 1)
    adds the overhead of one launch, not of every sample."""
    sizes = {"m": 64, "n": 128, "k": 8192, "dtype": "bf16"}
    base_cfg, more_cfg = _config(0.0), _config(OVERHEAD_US)
    plan = build_op("gemm", base_cfg, **sizes)
    assert len(plan.samples) > 1
    base = simulate_op(plan, base_cfg, "sampled")
    more = simulate_op(build_op("gemm", more_cfg, **sizes), more_cfg, "sampled")
    assert more["cycles"] == base["cycles"]
    assert more["time_us"] == pytest.approx(base["time_us"] + OVERHEAD_US, abs=1e-6)


def test_overhead_read_from_config_object_or_dict():
    """Presets without a [launch] table read 0; dicts (KernelResult.config) work too."""
    config = _config(1.5)
    assert launch_overhead_us(config) == 1.5
    assert launch_overhead_us(config.to_dict()) == 1.5
    assert launch_overhead_us({}) == 0.0


def test_negative_overhead_is_refused_with_its_key():
    with pytest.raises(ConfigError, match="launch.kernel_overhead_us"):
        _config(-1.0)


FRONT_US = 2.5


def test_front_end_adds_to_kernel_time_once():
    """The front end moves kernel_time_us (and time_us, and the stats' time_us row) by
    exactly its value; cycles stay."""
    base, more = _saxpy(_config(0.0)), _saxpy(_config(0.0, FRONT_US))
    assert more.cycles == base.cycles
    assert more.kernel_time_us == pytest.approx(base.kernel_time_us + FRONT_US, abs=1e-9)
    assert more.time_us == pytest.approx(base.time_us + FRONT_US, abs=1e-9)
    assert _kernel_stat(more, "time_us") == pytest.approx(more.kernel_time_us, abs=1e-9)
    assert _kernel_stat(more, "front_end_us") == FRONT_US


@pytest.mark.parametrize("slicing", [False, True])
def test_sampled_front_end_is_not_extrapolated(slicing):
    """A sampled launch adds the front end once: waves extrapolated on the whole chip, or
    the grid's share timed on a slice of the chip (`simulator.runner.chip_slice`)."""
    results = []
    for config in (_config(0.0, slicing=slicing), _config(0.0, FRONT_US, slicing)):
        launch = build_op("residual-add", config, rows=4096, cols=7168, inputs=2).launches[0]
        results.append(simulator.simulate_kernel(
            launch.ptx, launch.entry, launch.grid, launch.block, list(launch.args),
            config=config, shared_bytes=launch.shared_bytes, fidelity="sampled",
            timing_only=launch.timing_only))
    base, more = results
    assert base.fidelity == "sampled"
    assert (base.extrapolated_fraction == 0.0) if slicing else \
        (base.extrapolated_fraction > 0.5)
    assert more.cycles == base.cycles
    assert more.kernel_time_us == pytest.approx(base.kernel_time_us + FRONT_US, abs=1e-9)


def test_front_end_is_not_scaled_by_the_sustained_clock():
    """An op whose launch runs below the preset clock (a compute-bound bf16 GEMM): moving
    microseconds from the launch overhead to the front end leaves its time unchanged."""
    sizes = {"m": 2048, "n": 2048, "k": 2048, "dtype": "bf16"}
    outside, inside = _config(OVERHEAD_US), _config(OVERHEAD_US - FRONT_US, FRONT_US)
    a = simulate_op(build_op("gemm", outside, **sizes), outside, "sampled")
    b = simulate_op(build_op("gemm", inside, **sizes), inside, "sampled")
    assert a["sm_clock_ghz"] < outside.chip.clock_ghz
    assert b["time_us"] == pytest.approx(a["time_us"], abs=1e-6)
