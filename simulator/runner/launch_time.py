"""The host-side time around a kernel: launch overhead and the front end before the first CTA.

Both are preset values (`launch.kernel_overhead_us`, `launch.kernel_front_end_us`,
microseconds); a kernel's duration is its SM cycles at `chip.clock_ghz` plus the front end.
"""

from __future__ import annotations

from simulator.framework.engine import Clock


def _launch_value(config, name: str) -> float:
    if isinstance(config, dict):
        return float(config.get("launch", {}).get(name, 0.0))
    launch = getattr(config, "launch", None)
    return float(getattr(launch, name, 0.0)) if launch is not None else 0.0


def launch_overhead_us(config) -> float:
    """`launch.kernel_overhead_us` of a config object or its `to_dict()` (0 when absent)."""
    return _launch_value(config, "kernel_overhead_us")


def front_end_us(config) -> float:
    """`launch.kernel_front_end_us` of a config object or its `to_dict()` (0 when absent)."""
    return _launch_value(config, "kernel_front_end_us")


def kernel_us(config, cycles: float) -> float:
    """A kernel's duration: `cycles` of the SMs at the config's clock plus the front end."""
    return Clock(config.chip.clock_ghz).cycles_to_ps(cycles) / 1e6 + front_end_us(config)
