"""A single kernel's limits come from its config: the host-memory budget of the functional
run (`limits.host_memory_bytes`) and the HBM/L2 peaks its bandwidth over time stays within."""

import numpy as np
import pytest

import isa
import models
import simulator
from simulator.runner.simulate import level_peaks_gbps
from workloads.kernels.case import load_ptx


def _saxpy(n: int):
    return [n, np.float32(2.0), np.ones(n, np.float32), np.ones(n, np.float32)]


def test_kernel_beyond_the_configured_host_budget_is_refused_with_the_estimate():
    """8 MiB of buffers against a 1 MiB `limits.host_memory_bytes`: a LaunchError naming
    both, before anything runs."""
    n = 1 << 20
    config = models.load_preset("h100_sxm", {"limits.host_memory_bytes": 1 << 20})
    with pytest.raises(isa.LaunchError, match=r"8\.0 MiB .*budget of 1\.0 MiB"):
        simulator.simulate_kernel(load_ptx("saxpy.cu"), "saxpy", n // 128, 128, _saxpy(n),
                                  config=config)


def test_kernel_bandwidth_over_time_stays_within_the_configured_peaks():
    """A 1024^3 bf16 GEMM's L2 bytes complete in bursts (a third above the L2 peak in some
    of its bins when counted at completion); its timeline's HBM and L2 bins never exceed
    bytes at the preset's peak over the bin."""
    from workloads.ops import build_op, simulate_op

    config = models.load_preset("h100_sxm")
    series: list = []
    simulate_op(build_op("gemm", config, m=1024, n=1024, k=1024, dtype="bf16"), config,
                "sampled", timelines=series)
    peaks = level_peaks_gbps(config)
    timelines = [frame for _, _, frame in series if frame is not None]
    assert timelines
    for timeline in timelines:
        for level in ("hbm", "l2"):
            rows = timeline[(timeline["component"] == f"memory.{level}")
                            & (timeline["stat"] == "bytes")]
            assert len(rows) and rows["value"].sum() > 0
            capacity = peaks[level] * 1e3 * (rows["end_us"] - rows["start_us"])
            assert (rows["value"] <= capacity * (1 + 1e-9)).all()
