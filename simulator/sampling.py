"""Sampled fidelity: time the first waves of a kernel's CTAs and extrapolate the rest.

What it models
--------------
A wave is the CTAs resident at once on all compute SMs: `W = ctas_per_sm * compute SMs`
(the occupancy calculation of `models.cta_dispatch`); the grid has `n = n_ctas / W` waves
(fractional). `simulate_sampled` traces CTAs wave by wave (`isa.run_kernel(cta_range=...)`,
one recorder, so earlier waves are traced once) and replays the first k waves from a cold
system for k = 1, 2, 3, ..., giving t(k) cycles and the marginal wave time
m(k) = t(k) - t(k - 1). It stops at the first k >= 3 whose marginal changed by less than
`TOLERANCE` (1 %) against m(k - 1), at `MAX_WAVES`, or when one more wave would leave
fewer than one wave to extrapolate. Then

    cycles = t(k) + (n - k) * m(k)

(the final partial wave counts in proportion to its CTAs). A grid of fewer than
`MIN_WAVES` waves is timed in full. The result says what was done:
`KernelResult.fidelity` ("sampled" or "full"), `waves_simulated` (k) and
`extrapolated_fraction` ((n - k) * m(k) / cycles).

Stats: the kernel's `cycles` and `time_us` are the extrapolated ones. Rows that count work
(units `count`, `B`, `cycles`: instructions, issues, busy and stall cycles, requests,
sectors, bytes) are scaled by n_ctas / simulated CTAs, except the kernel's `ctas_per_sm`
and `sms_used`; ratios (`fraction`, hit rates, occupancy) are those of the simulated
waves. `KernelResult.instructions` is scaled the same way.

Left out: the outputs of a sampled run (the caller's arrays are not written), tail effects
beyond the proportional partial wave, kernels whose waves differ by design (persistent
kernels with one wave are simply timed in full). Units: SM cycles, waves, CTAs.
"""

from __future__ import annotations

import math

TOLERANCE = 0.01
MIN_WAVES = 3.0
MAX_WAVES = 6
_UNSCALED_KERNEL_STATS = frozenset({"cycles", "time_us", "ctas_per_sm", "sms_used"})
_SCALED_UNITS = frozenset({"count", "B", "cycles"})


def _scale_stats(frame, factor: float, cycles: int, time_us: float):
    """The stats table with count-like rows scaled by `factor`, kernel time replaced."""
    frame = frame.copy()
    kernel = frame["component"] == "kernel"
    scaled = frame["unit"].isin(_SCALED_UNITS) & ~(kernel & frame["stat"].isin(
        _UNSCALED_KERNEL_STATS))
    frame.loc[scaled, "value"] = frame.loc[scaled, "value"].astype(float) * factor
    frame.loc[kernel & (frame["stat"] == "cycles"), "value"] = cycles
    frame.loc[kernel & (frame["stat"] == "time_us"), "value"] = time_us
    return frame


def simulate_sampled(launch, replay):
    """A `KernelResult` of `launch` timed by `replay` at sampled fidelity (module docstring)."""
    n_ctas = launch.n_ctas
    wave = max(replay.ctas_per_wave(replay.config.sm.compute_count), 1)
    n_waves = n_ctas / wave
    recorder = launch.recorder()
    warp_instr = thread_instr = traced = 0

    def time_waves(k: int):
        nonlocal warp_instr, thread_instr, traced
        stop = min(k * wave, n_ctas)
        if stop > traced:
            functional = launch.run(recorder, (traced, stop))
            warp_instr += functional.warp_instructions
            thread_instr += functional.thread_instructions
            traced = stop
        return replay.run(launch, recorder, warp_instr, thread_instr, stop)

    if n_waves < MIN_WAVES:
        full = time_waves(math.ceil(n_waves))
        return replay.result(full, fidelity="full", waves_simulated=n_waves)
    runs = [time_waves(1), time_waves(2)]
    marginals = [runs[1].cycles - runs[0].cycles]
    k = 2
    while k < MAX_WAVES and k + 1 <= n_waves - 1:
        k += 1
        runs.append(time_waves(k))
        marginals.append(runs[-1].cycles - runs[-2].cycles)
        if abs(marginals[-1] - marginals[-2]) < TOLERANCE * max(marginals[-2], 1):
            break
    last, marginal = runs[-1], max(marginals[-1], 0)
    extra = (n_waves - k) * marginal
    cycles = int(round(last.cycles + extra))
    time_us = last.time_us * cycles / max(last.cycles, 1)
    factor = n_ctas / last.ctas
    result = replay.result(last, fidelity="sampled", waves_simulated=float(k),
                           extrapolated_fraction=extra / max(cycles, 1))
    result.cycles, result.time_us = cycles, time_us
    result.instructions = int(round(last.warp_instructions * factor))
    result.stats = _scale_stats(result.stats, factor, cycles, time_us)
    return result
