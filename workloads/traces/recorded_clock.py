"""The SM clock a reference trace ran at, read from its sidecar, and a config at that clock.

A trace taken by `benchmarks/hardware` has a sidecar `NAME.meta.json` beside `NAME.json`
whose `clocks_seen.sm_clock_mhz_median` is the SM clock nvidia-smi read while the trace was
taken (the LLaMA-3-8B H100 traces: 1980 MHz, min = max = median). `recorded_sm_clock(path)`
gives it in GHz with where it came from, or None for a trace without one.

`at_sm_clock(config, clock_ghz)` is `config` with `chip.clock_ghz` at that clock, everything
else as measured: the power-cap model (`chip.power_cap_clock_ghz`, `models.sustained_clock`)
still lowers launches whose tensor load the board's power cannot sustain at it (a clock
read between kernels says nothing of the clock under a GEMM), and the L2 slices keep their
bytes per second: `l2.slice_bandwidth_bytes_per_clk` is given per SM clock but is the L2's
own (h100_sxm: 7680 B per L2 cycle at the L2's 1.70 GHz, which stays there while the SM
clock moves, `workloads/reference/h100/README.md`), so it is scaled by the old over the new
SM clock (rounded to whole bytes, as the field is), and so are the slices' requests per SM
clock (`l2.slice_requests_per_clk`, one per L2 cycle). Latencies stay in SM cycles (the H100's
were measured in cycles of an SM at 1980 MHz, `pointer_chase.csv`).

Left out: other clock domains than the SM's and the L2's (the crossbar's port is an estimate
per SM clock), clocks that change within the trace. Units: GHz, MHz.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from isa.errors import InputError

SIDECAR_KEY = ("clocks_seen", "sm_clock_mhz_median")


def sidecar_path(trace: str | Path) -> Path:
    """`NAME.meta.json` beside `NAME.json`."""
    trace = Path(trace)
    return trace.with_name(trace.stem + ".meta.json")


def recorded_sm_clock(trace: str | Path) -> tuple[float, str] | None:
    """(the SM clock in GHz, where it was read) from the trace's sidecar; None when there is
    no sidecar or it records no SM clock (an `InputError` for a sidecar that is not JSON or
    holds a clock that is not a positive number)."""
    path = sidecar_path(trace)
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: cannot read the trace's sidecar ({exc}); accepted: a JSON "
                         "object, or no sidecar") from None
    value = doc
    for key in SIDECAR_KEY:
        value = value.get(key) if isinstance(value, dict) else None
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value <= 0:
        raise InputError(f"{path}: {'.'.join(SIDECAR_KEY)} = {value!r}; accepted: a positive "
                         "number of MHz")
    return value / 1e3, f"{path.name} {'.'.join(SIDECAR_KEY)} = {value:g} MHz"


def at_sm_clock(config, clock_ghz: float):
    """`config` at SM clock `clock_ghz`, the L2's bytes per second kept (module docstring)."""
    old = config.chip.clock_ghz
    if clock_ghz == old:
        return config
    per_clk = config.l2.slice_bandwidth_bytes_per_clk
    return config.with_overrides({
        "chip.clock_ghz": float(clock_ghz),
        "l2.slice_bandwidth_bytes_per_clk": max(1, round(per_clk * old / clock_ghz)),
        "l2.slice_requests_per_clk": config.l2.slice_requests_per_clk * old / clock_ghz})
