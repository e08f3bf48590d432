"""The sustained SM clock under tensor load (`models.sustained_clock`), its fit
(`workloads.calibration.clock_fit`) and the op-level re-timing in `workloads.ops.registry`."""

from __future__ import annotations

import pandas as pd
import pytest

import models
import simulator
from models.sustained_clock import sustained_clock_ghz, tensor_busy_fraction
from workloads.calibration import clock_fit
from workloads.ops.registry import build_op, simulate_op

SMALL = {"sm.count": 16}


def _chip(**over):
    return models.load_preset("h100_sxm", {f"chip.{k}": v for k, v in over.items()}).chip


def test_sustained_clock_follows_the_cube_root_cap_below_the_preset_clock():
    """f = min(clock, cap / (u ratio)^(1/3)): bf16 at u = 0.9, fp8 with its ratio, ceiling."""
    chip = _chip(power_cap_clock_ghz=1.5, fp8_tensor_power_ratio=1.25)
    assert sustained_clock_ghz(chip, 0.9, "bf16") == pytest.approx(1.5 / 0.9 ** (1 / 3))
    assert sustained_clock_ghz(chip, 0.8, "fp8") == pytest.approx(1.5 / 1.0)
    assert sustained_clock_ghz(chip, 0.2, "bf16") == chip.clock_ghz
    assert sustained_clock_ghz(chip, 0.0, "fp8") == chip.clock_ghz


def test_zero_cap_turns_the_model_off_and_a100_has_it_off():
    """power_cap_clock_ghz = 0: every launch at the preset clock; a100_sxm has no fit."""
    assert sustained_clock_ghz(_chip(power_cap_clock_ghz=0.0), 1.0, "fp8") == 1.83
    a100 = models.load_preset("a100_sxm").chip
    assert a100.power_cap_clock_ghz == 0
    assert sustained_clock_ghz(a100, 1.0, "bf16") == a100.clock_ghz


def test_tensor_busy_fraction_divides_busy_cycles_by_all_subpartition_cycles():
    """busy / (kernel cycles x SMs x sub-partitions), summing the rows of each stat."""
    frame = pd.DataFrame({"component": ["sm.units.tensor", "sm.units.tensor", "kernel",
                                        "sm.units.fp32"],
                          "stat": ["busy_cycles", "busy_cycles", "cycles", "busy_cycles"],
                          "value": [300.0, 100.0, 100.0, 9999.0]})
    assert tensor_busy_fraction(frame, sm_count=2, subpartitions=4) == pytest.approx(0.5)
    assert tensor_busy_fraction(frame.iloc[2:], 2, 4) == 0.0


def test_preset_values_are_the_fit_of_the_ncu_clocks():
    """h100_sxm's cap and fp8 ratio are what clock_fit finds on gemm_ncu_l2.csv."""
    cap, ratio, rms_mhz = clock_fit.fit(clock_fit.fit_rows())
    chip = models.load_preset("h100_sxm").chip
    assert (chip.power_cap_clock_ghz, chip.fp8_tensor_power_ratio) == (cap, ratio)
    assert models.load_preset("h800_sxm").chip.power_cap_clock_ghz == cap
    assert rms_mhz < 50.0


def test_model_off_times_an_op_as_the_simulator_times_its_launch():
    """With the model off, simulate_op's time is simulate_kernel's (today's numbers)."""
    config = models.load_preset("h100_sxm", {**SMALL, "chip.power_cap_clock_ghz": 0.0})
    plan = build_op("gemm", config, m=256, n=256, k=1024, dtype="bf16")
    (launch,) = plan.launches
    res = simulator.simulate_kernel(launch.ptx, launch.entry, launch.grid, launch.block,
                                    list(launch.args), config=config,
                                    shared_bytes=launch.shared_bytes, fidelity="full",
                                    timing_only=launch.timing_only, **launch.options)
    op = simulate_op(plan, config, "full")
    assert op["time_us"] == float(res.time_us)
    assert op["sm_clock_ghz"] == 1.83


@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_post_scaling_matches_a_resimulation_at_the_sustained_clock(dtype):
    """Re-timing a compute-bound GEMM at its sustained clock agrees within 1 % with
    simulating it at that clock."""
    on = models.load_preset("h100_sxm", SMALL)
    scaled = simulate_op(build_op("gemm", on, m=512, n=512, k=4096, dtype=dtype), on, "sampled")
    clock = scaled["sm_clock_ghz"]
    assert clock < 1.83 * 0.95
    at = models.load_preset("h100_sxm", {**SMALL, "chip.power_cap_clock_ghz": 0.0,
                                         "chip.clock_ghz": clock})
    resim = simulate_op(build_op("gemm", at, m=512, n=512, k=4096, dtype=dtype), at, "sampled")
    assert scaled["time_us"] == pytest.approx(resim["time_us"], rel=0.01)


def test_hbm_bound_gemm_keeps_the_preset_clock():
    """A decode GEMM (m = 16, weights streamed from HBM) stays below the cap: preset clock
    and time (post-scaling its whole kernel would overstate a clock drop's cost there)."""
    on = models.load_preset("h100_sxm")
    off = models.load_preset("h100_sxm", {"chip.power_cap_clock_ghz": 0.0})
    a = simulate_op(build_op("gemm", on, m=16, n=4096, k=4096, dtype="fp8"), on, "sampled")
    b = simulate_op(build_op("gemm", off, m=16, n=4096, k=4096, dtype="fp8"), off, "sampled")
    assert a["sm_clock_ghz"] == 1.83
    assert a["time_us"] == b["time_us"]


def test_sampled_gemm_takes_the_clock_of_the_whole_launch():
    """Op-level samples (reduced launches, extrapolating weights) give the clock the full
    launch sustains: their busy fraction is taken together, not per reduced launch."""
    config = models.load_preset("h100_sxm", SMALL)
    plan = build_op("gemm", config, m=1024, n=1024, k=4096, dtype="bf16")
    assert plan.samples
    sampled = simulate_op(plan, config, "sampled")["sm_clock_ghz"]
    assert sampled < 1.83 * 0.95
    assert sampled == pytest.approx(simulate_op(plan, config, "full")["sm_clock_ghz"], rel=0.005)
