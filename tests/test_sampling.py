"""Sampled fidelity: first waves timed, the rest extrapolated, within 3 % of the full run."""

from __future__ import annotations

import numpy as np
import pytest

import isa
import models
import simulator
from simulator.runner.sampling import wave_marginals
from workloads.kernels.case import load_ptx

H100 = models.load_preset("h100_sxm")


def sgemm(m, n, k):
    return (load_ptx("sgemm.cu"), "sgemm_tiled", (n // 16, m // 16), (16, 16),
            [m, n, k, np.float32(1.5), isa.ShapeOnly((m, k)), isa.ShapeOnly((k, n)),
             np.float32(0.5), isa.ShapeOnly((m, n))])


def saxpy(n):
    return (load_ptx("saxpy.cu"), "saxpy", -(-n // 256), 256,
            [n, np.float32(2), isa.ShapeOnly((n,)), isa.ShapeOnly((n,))])


def mma_bf16(m, n, k, warps=2):
    return (load_ptx("mma_bf16.cu"), "mma_bf16_gemm", (-(-n // 8), -(-m // (16 * warps))),
            (32, warps), [isa.ShapeOnly((m, k), np.uint16), isa.ShapeOnly((n, k), np.uint16),
                          isa.ShapeOnly((m, n)), m, n, k])


CASES = {
    "sgemm_tiled_1536x1536x32": sgemm(1536, 1536, 32),
    "saxpy_8_waves": saxpy(8 * 1056 * 256 + 5000),
    "mma_bf16_4096x2048x64": mma_bf16(4096, 2048, 64),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_sampled_cycles_within_3_percent_of_full(name):
    """Sampled extrapolation lands within 3 % of timing every CTA (timing mode)."""
    ptx, entry, grid, block, args = CASES[name]
    full = simulator.simulate_kernel(ptx, entry, grid, block, args, H100, timing_only=True)
    sampled = simulator.simulate_kernel(ptx, entry, grid, block, args, H100, timing_only=True,
                                        fidelity="sampled")
    assert (full.fidelity, sampled.fidelity) == ("full", "sampled")
    assert sampled.waves_simulated >= 4 and 0 < sampled.extrapolated_fraction < 1
    assert abs(sampled.cycles / full.cycles - 1) < 0.03, (sampled.cycles, full.cycles)
    assert abs(sampled.instructions / full.instructions - 1) < 0.01
    stat = sampled.stats.set_index(["component", "stat"])["value"]
    assert stat[("kernel", "cycles")] == sampled.cycles


def test_small_grid_is_timed_in_full():
    """A grid of less than the minimum waves is not extrapolated (nor, with
    `fidelity.chip_slicing` off, timed on a slice of the chip)."""
    unsliced = H100.with_overrides({"fidelity.chip_slicing": False})
    ptx, entry, grid, block, args = saxpy(1056 * 256)
    res = simulator.simulate_kernel(ptx, entry, grid, block, args, unsliced, timing_only=True,
                                    fidelity="sampled")
    assert res.fidelity == "full" and res.extrapolated_fraction == 0


def test_grid_under_eight_waves_is_timed_in_full():
    """Under `fidelity.wave_sampling_min_waves` (8) waves the grid is timed in full, not
    extrapolated from fewer waves: mma_bf16 2048x1024x64, 6.2 waves of 1320 CTAs, whose marginals at
    5 waves are not steady and whose last waves are shorter; the cycles are those of the full
    run."""
    ptx, entry, grid, block, args = mma_bf16(2048, 1024, 64)
    sampled = simulator.simulate_kernel(ptx, entry, grid, block, args, H100, timing_only=True,
                                        fidelity="sampled")
    full = simulator.simulate_kernel(ptx, entry, grid, block, args, H100, timing_only=True)
    assert sampled.fidelity == "full" and sampled.extrapolated_fraction == 0
    assert sampled.cycles == full.cycles and sampled.instructions == full.instructions


def test_wave_marginals_are_milestone_differences_without_the_last_wave():
    """M_j = cycle the (j*W)-th CTA finished; m_j = M_j - M_(j-1), last wave left out."""
    done = [10, 20, 30, 45, 50, 70, 80, 100]
    assert wave_marginals(done, 2, 4) == [25, 25]


def test_unknown_fidelity_is_rejected_with_the_accepted_names():
    """fidelity='fast' is no fidelity; the error lists full and sampled."""
    ptx, entry, grid, block, args = saxpy(1000)
    with pytest.raises(ValueError, match="full, sampled"):
        simulator.simulate_kernel(ptx, entry, grid, block, args, H100, fidelity="fast")
