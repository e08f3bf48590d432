"""Sustained SM clock of a launch under tensor load (the board's power limit).

What it models
--------------
Under a power cap the clock settles where the dynamic power f * V(f)^2 * activity meets the
limit; with the voltage rising about linearly with the clock in that range the power goes as
f^3 * activity, so f = f_cap / activity^(1/3). The activity is the tensor pipes' busy
fraction u (busy cycles over the launch's cycles on every SM sub-partition, what ncu's
`sm__throughput` reads for a GEMM) times a per-precision power ratio (fp8 cycles draw more
than bf16 ones). The clock never exceeds the preset's `chip.clock_ghz`:

    f = min(clock_ghz, power_cap_clock_ghz / (u * ratio) ** (1/3))

Parameters (`chip.power_cap_clock_ghz`, `chip.fp8_tensor_power_ratio`) are fitted by
`workloads.calibration.clock_fit` on ncu's in-kernel SM clocks of cuBLAS GEMMs on our H100.
`power_cap_clock_ghz = 0` turns the model off.

Left out: memory traffic's share of the power (the fit did not need it on its rows:
adding an L2 term did not lower the leave-one-shape-out error), temperature, the
controller's time constants (a launch runs at one clock), clock domains other than the SM's.
Units: GHz, fractions.
"""

from __future__ import annotations

CAP_EXPONENT = 1.0 / 3.0   # power ~ f^3 (f * V^2, V ~ f): f = f_cap * activity^(-1/3)


def tensor_busy_fraction(stats, sm_count: int, subpartitions: int) -> float:
    """The tensor pipes' busy cycles over (kernel cycles x SMs x sub-partitions) of one
    launch's stats table (`simulator.simulate_kernel(...).stats`); 0 without tensor work."""
    busy = stats[(stats.component == "sm.units.tensor") & (stats.stat == "busy_cycles")]
    cycles = stats[(stats.component == "kernel") & (stats.stat == "cycles")]
    total = float(cycles.value.sum()) * sm_count * subpartitions
    return float(busy.value.sum()) / total if total > 0 else 0.0


FP8_PRECISIONS = ("fp8", "e4m3", "e5m2")


def power_ratio(chip, precision: str) -> float:
    """Power of a tensor-busy cycle of `precision` relative to bf16 (the fp8 ratio for the
    8-bit float formats, 1 for the others: no clock data for them)."""
    return chip.fp8_tensor_power_ratio if precision in FP8_PRECISIONS else 1.0


def sustained_clock_ghz(chip, busy_fraction: float, precision: str) -> float:
    """The clock a launch with tensor pipes busy `busy_fraction` of its cycles sustains
    (`chip.clock_ghz` when the model is off or the cap does not bind)."""
    activity = busy_fraction * power_ratio(chip, precision)
    if chip.power_cap_clock_ghz <= 0 or activity <= 0:
        return chip.clock_ghz
    return min(chip.clock_ghz, chip.power_cap_clock_ghz * activity ** -CAP_EXPONENT)
