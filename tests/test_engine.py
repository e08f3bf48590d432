"""Rules of simulated time: integer picoseconds, clock conversions, deterministic ordering."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.framework.engine import Clock, SimEnvironment, make_rng


def test_clock_period_is_exact_inverse_of_frequency():
    """A 1.83 GHz clock has a nominal period of 1e3 / 1.83 ps."""
    assert Clock(1.83).period_ps == pytest.approx(1e3 / 1.83)


def test_clock_edges_never_drift_from_exact_time():
    """Edge k lies within 1 ps above k * 1e3 / f, however large k is."""
    clock = Clock(1.83)
    for cycle in (1, 7, 1_000, 1_830_000_000, 10**13 + 3):
        exact = cycle * 1e3 / 1.83
        assert 0 <= clock.edge_ps(cycle) - exact < 1 + exact * 1e-15


def test_one_second_of_cycles_is_one_second():
    """1.83e9 cycles at 1.83 GHz take exactly 1e12 ps."""
    assert Clock(1.83).cycles_to_ps(1_830_000_000) == 10**12


def test_ps_to_cycles_inverts_cycles_to_ps():
    """Converting n cycles to ps and back gives n for every n."""
    clock = Clock(1.755)
    cycles = np.arange(0, 20_000)
    assert all(clock.ps_to_cycles(clock.cycles_to_ps(int(n))) == n for n in cycles)


def test_next_edge_is_first_edge_at_or_after_time():
    """next_edge_ps(t) is an edge, is >= t, and the edge before it is < t."""
    clock = Clock(1.41)
    for t in range(0, 3_000):
        edge = clock.next_edge_ps(t)
        k = clock.ps_to_cycles(edge)
        assert clock.edge_ps(k) == edge and edge >= t
        assert k == 0 or clock.edge_ps(k - 1) < t


def test_delay_aligns_work_to_clock_edges():
    """Work starting between edges waits for the next edge, then runs whole cycles."""
    clock = Clock(1.0)  # 1000 ps period
    assert clock.delay_ps(0, 3) == 3000
    assert clock.delay_ps(1, 3) == 3999
    assert clock.delay_ps(1000, 0) == 0


def test_clock_rejects_zero_frequency():
    """A clock of 0 GHz is refused."""
    with pytest.raises(ValueError, match="clock_ghz"):
        Clock(0.0)


def test_environment_time_is_integer_picoseconds():
    """Timeouts accept only integers, so env.now stays an int."""
    env = SimEnvironment()
    env.timeout(np.int64(5))
    env.run()
    assert env.now == 5 and type(env.now) is int
    with pytest.raises(TypeError, match="integer"):
        env.timeout(1.5)


def _simultaneous_order() -> list[str]:
    env = SimEnvironment()
    order: list[str] = []

    def worker(name: str, delay_ps: int):
        yield env.timeout(delay_ps)
        order.append(name)

    for name, delay in (("c", 10), ("a", 10), ("b", 5), ("d", 10)):
        env.process(worker(name, delay))
    env.run()
    return order


def test_simultaneous_events_fire_in_scheduling_order():
    """Events at the same picosecond fire in the order they were scheduled (FIFO)."""
    assert _simultaneous_order() == ["b", "c", "a", "d"]


def test_simultaneous_event_order_is_repeatable():
    """Two identical runs produce the identical event order."""
    assert _simultaneous_order() == _simultaneous_order()


def test_same_seed_gives_same_random_stream():
    """Randomness comes only from the seed: equal seeds, equal draws."""
    draws = [make_rng(7).integers(0, 1 << 30, 16) for _ in range(2)]
    assert np.array_equal(draws[0], draws[1])
    assert not np.array_equal(make_rng(7).random(8), make_rng(8).random(8))
