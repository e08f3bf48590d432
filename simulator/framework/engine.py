"""Simulated time: integer picoseconds on a SimPy environment, per-block clocks, seeded randomness.

What it models
--------------
* `SimEnvironment` is a `simpy.Environment` whose time is an integer count of picoseconds.
  `timeout()` refuses anything but a non-negative integer, so no float ever enters the clock.
* `Clock` turns one block's frequency into picoseconds with integer math. The frequency is
  held as an integer number of kHz (`freq_khz = round(clock_ghz * 1e6)`); clock edge `k` sits
  at `ceil(k * 1e9 / freq_khz)` ps. Edges are computed from the edge index, never by adding a
  rounded period, so rounding never accumulates: every edge is within 1 ps of the exact value.
* `make_rng(seed)` is the only way randomness enters: a `numpy.random.Generator` that callers
  pass to whatever needs it.

Ordering of simultaneous events (the rule every block relies on)
----------------------------------------------------------------
SimPy keeps one heap of `(time_ps, priority, event_id, event)`. `event_id` is a counter that
grows with every `schedule()` call. Hence, for events at the same picosecond:

1. urgent events (process start, interrupts) go before normal ones (timeouts, store puts/gets);
2. among equal priority, events fire in the order they were scheduled (FIFO).

We rely on nothing else: processes are started in the documented assembly order, components
never iterate over sets or `id()`-keyed dicts to decide what to schedule, and all randomness
comes from a seeded Generator. So the same inputs give the same event order, bit for bit.

Left out: clock-domain crossing synchronisers, jitter, dynamic frequency scaling (a run uses
the preset's clock throughout). Units: ps (int), GHz / kHz for clocks, cycles (int).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from numbers import Integral

import numpy as np
import simpy
from simpy.events import Timeout

PS_PER_SECOND = 10**12
KHZ_PS_PRODUCT = 10**9  # period_ps * freq_khz == 1e9


def as_time_ps(value: object, what: str = "delay") -> int:
    """Return `value` as a non-negative Python int of picoseconds, or raise TypeError/ValueError."""
    if type(value) is int and value >= 0:
        return value
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{what} must be an integer number of picoseconds, got {value!r}")
    ps = int(value)
    if ps < 0:
        raise ValueError(f"{what} must be >= 0 ps, got {ps}")
    return ps


class SimEnvironment(simpy.Environment):
    """A SimPy environment whose clock counts integer picoseconds from 0."""

    def __init__(self) -> None:
        super().__init__(initial_time=0)

    def timeout(self, delay: int = 0, value: object = None) -> Timeout:  # type: ignore[override]
        """Event that fires `delay` ps from now; `delay` must be a non-negative integer."""
        return Timeout(self, as_time_ps(delay), value)

    def wait_until(self, time_ps: int, value: object = None) -> Timeout:
        """Event that fires at absolute time `time_ps` (now if it has already passed)."""
        return Timeout(self, max(as_time_ps(time_ps, "time") - self.now, 0), value)


@dataclass(frozen=True, slots=True)
class Clock:
    """The clock of one block; converts cycles to integer picoseconds and back.

    Edge `k` is at `edge_ps(k) = ceil(k * 1e9 / freq_khz)`; `ps_to_cycles(t)` is the index of
    the last edge at or before `t`, so `ps_to_cycles(cycles_to_ps(n)) == n` for every n >= 0.
    """

    clock_ghz: float
    freq_khz: int = field(init=False)

    def __post_init__(self) -> None:
        if isinstance(self.clock_ghz, bool) or not self.clock_ghz > 0:
            raise ValueError(f"clock_ghz must be > 0, got {self.clock_ghz!r}")
        freq_khz = round(self.clock_ghz * 1e6)
        if freq_khz < 1 or freq_khz > KHZ_PS_PRODUCT:
            raise ValueError(f"clock_ghz must be between 1e-6 and 1000, got {self.clock_ghz!r}")
        object.__setattr__(self, "freq_khz", freq_khz)

    @property
    def period_ps(self) -> float:
        """Nominal period in ps (for reports). Time arithmetic uses the integer methods."""
        return KHZ_PS_PRODUCT / self.freq_khz

    def edge_ps(self, cycle: int) -> int:
        """Time of clock edge number `cycle` (edge 0 is at 0 ps), rounded up to whole ps."""
        return -(-int(cycle) * KHZ_PS_PRODUCT // self.freq_khz)

    def cycles_to_ps(self, cycles: int) -> int:
        """Duration of `cycles` cycles in ps, rounded up (exactly `edge_ps(cycles)`)."""
        return self.edge_ps(cycles)

    def ps_to_cycles(self, time_ps: int) -> int:
        """Whole cycles elapsed at `time_ps`: the index of the last edge at or before it."""
        return int(time_ps) * self.freq_khz // KHZ_PS_PRODUCT

    def next_edge_ps(self, time_ps: int) -> int:
        """The first clock edge at or after `time_ps`."""
        t = int(time_ps)
        if t <= 0:
            return 0
        return self.edge_ps(self.ps_to_cycles(t - 1) + 1)

    def delay_ps(self, now_ps: int, cycles: int) -> int:
        """Wait from `now_ps` until `cycles` edges after the next edge (aligned work start).

        `cycles=0` waits only for the next edge; the result is always >= 0.
        """
        start_cycle = self.ps_to_cycles(self.next_edge_ps(now_ps))
        return self.edge_ps(start_cycle + int(cycles)) - int(now_ps)


def make_rng(seed: int) -> np.random.Generator:
    """The project's only source of randomness: a PCG64 Generator from an explicit seed."""
    if isinstance(seed, bool) or not isinstance(seed, Integral):
        raise TypeError(f"seed must be an integer, got {seed!r}")
    return np.random.Generator(np.random.PCG64(int(seed)))
