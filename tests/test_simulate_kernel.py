"""simulate_kernel end to end: outputs equal the functional run, determinism, bandwidth, SMs."""

import copy

import numpy as np
import pandas as pd
import pytest

import isa
import models
import simulator
from simulator.framework.stats import STATS_COLUMNS
from workloads.kernels.case import load_ptx
from workloads.kernels.catalog import KERNELS


def _copy_args(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def _bits(a):
    return a.view(np.uint8) if isinstance(a, np.ndarray) else a


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_timing_never_changes_outputs(name):
    """Every catalogued kernel leaves exactly the bytes `isa.run_kernel` leaves."""
    spec = KERNELS[name]
    case = spec.build(np.random.default_rng(1), **spec.variants[0])
    functional_args, timed_args = _copy_args(case.args), _copy_args(case.args)
    ptx = load_ptx(case.file)
    isa.run_kernel(ptx, case.entry, case.grid, case.block, functional_args, case.shared_bytes)
    res = simulator.simulate_kernel(ptx, case.entry, case.grid, case.block, timed_args,
                                    shared_bytes=case.shared_bytes)
    assert res.cycles > 0 and res.instructions > 0
    for want, got in zip(functional_args, timed_args, strict=True):
        if isinstance(want, np.ndarray):
            assert np.array_equal(_bits(want), _bits(got))


def _sgemm(size=48, **kw):
    spec = KERNELS["sgemm_tiled"]
    case = spec.build(np.random.default_rng(0), m=size, n=size, k=size)
    res = simulator.simulate_kernel(load_ptx(case.file), case.entry, case.grid, case.block,
                                    case.args, shared_bytes=case.shared_bytes, **kw)
    return res, case


def test_same_inputs_give_identical_stats():
    """Two runs of the same launch produce bit-identical stats frames and cycles."""
    a, _ = _sgemm()
    b, _ = _sgemm()
    assert a.cycles == b.cycles
    pd.testing.assert_frame_equal(a.stats, b.stats)


def test_stats_are_one_long_table_with_units():
    """Stats use the project columns; every row has a unit; key stats are present."""
    res, case = _sgemm()
    case.check()
    frame = res.stats
    assert tuple(frame.columns) == STATS_COLUMNS
    assert frame.unit.map(bool).all()
    stats = set(zip(frame.component, frame.stat, strict=True))
    for key in [("kernel", "cycles"), ("kernel", "achieved_occupancy"),
                ("sm.units.fp32", "issued"), ("sm.units.fp32", "busy_cycles"),
                ("memory.l2.load", "bytes"), ("memory.hbm.load", "bytes")]:
        assert key in stats
    issued = frame[frame.stat == "issued"].value.sum()
    assert 0 < issued <= res.instructions  # guarded-off warps issue nothing
    assert res.config["sm"]["count"] == 132


def test_streaming_kernel_time_is_bytes_over_hbm_bandwidth():
    """saxpy over 1M floats moves 12 MiB; the SMs' span = bytes / HBM peak within 10 % (flat
    memory); `kernel_time_us` adds the front end, `time_us` the launch overhead on top."""
    n = 1 << 20
    cfg = models.load_preset("h100_sxm")
    x = np.ones(n, np.float32)
    y = np.ones(n, np.float32)
    res = simulator.simulate_kernel(load_ptx("saxpy.cu"), "saxpy", n // 256, 256,
                                    [n, np.float32(2.0), x, y], config=cfg, memory="flat")
    assert np.all(y == 3.0)
    expected_us = 3 * 4 * n / (cfg.hbm.peak_bandwidth_gbps * 1e3)
    span_us = res.kernel_time_us - cfg.launch.kernel_front_end_us
    deviation = span_us / expected_us - 1
    assert abs(deviation) <= 0.10, (expected_us, span_us, deviation)
    assert span_us == pytest.approx(res.cycles / (cfg.chip.clock_ghz * 1e3), rel=1e-6)
    assert res.time_us == pytest.approx(res.kernel_time_us + cfg.launch.kernel_overhead_us)


def test_comm_count_reserves_sms_from_compute_kernels():
    """With sm.comm_count = 20, a 132-CTA kernel uses 112 SMs and takes longer."""
    n = 132 * 256
    base = models.load_preset("h100_sxm")
    reserved = models.load_preset("h100_sxm", {"sm.comm_count": 20})
    results = {}
    for label, cfg in (("all", base), ("reserved", reserved)):
        x = np.ones(n, np.float32)
        y = np.ones(n, np.float32)
        results[label] = simulator.simulate_kernel(
            load_ptx("saxpy.cu"), "saxpy", 132, 256, [n, np.float32(1.0), x, y], config=cfg,
            regs_per_thread=255)
    used = {k: float(r.stats.query("component == 'kernel' and stat == 'sms_used'").value.iloc[0])
            for k, r in results.items()}
    assert used == {"all": 132.0, "reserved": 112.0}
    assert results["reserved"].cycles > results["all"].cycles


def test_simulate_kernel_accepts_a_compiled_program():
    """A Program from isa.compile_kernel times the same as its PTX text."""
    program = isa.compile_kernel(load_ptx("saxpy.cu"), "saxpy")
    args = [1000, np.float32(1.0), np.ones(1000, np.float32), np.ones(1000, np.float32)]
    a = simulator.simulate_kernel(program, "saxpy", 4, 256, copy.deepcopy(args))
    b = simulator.simulate_kernel(load_ptx("saxpy.cu"), "saxpy", 4, 256, copy.deepcopy(args))
    assert a.cycles == b.cycles
