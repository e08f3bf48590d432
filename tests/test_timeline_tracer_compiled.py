"""The compiled steps of `models.timeline_tracer` add exactly what their Python statements
add: the same floats, bit for bit, in the same order (widening included)."""

from __future__ import annotations

import numpy as np
import pytest

from models import timeline_tracer as tt
from models.timeline_tracer import TimeBuckets


def _spans(rng, n, horizon):
    starts = rng.integers(0, horizon, n)
    lengths = rng.integers(0, horizon // 8, n) * (rng.random(n) < 0.9)
    return starts, starts + lengths, rng.integers(0, 10_000, n)


@pytest.mark.parametrize("seed", range(4))
def test_compiled_span_equals_python_add_span(seed):
    """`_add_span` (CTA residency, stall windows) equals `TimeBuckets.add_span` exactly."""
    rng = np.random.default_rng(seed)
    python, compiled = TimeBuckets(3, width_cycles=8, capacity=16), TimeBuckets(3, 8, 16)
    for start, end, amount in zip(*_spans(rng, 300, 20_000), strict=True):
        row = int(rng.integers(3))
        python.add_span(row, int(start), int(end), int(amount))
        compiled.data, compiled.width_cycles = tt._add_span(
            compiled.data, compiled.width_cycles, row, int(start), int(end), int(amount))
    assert compiled.width_cycles == python.width_cycles > 8
    assert np.array_equal(compiled.data, python.data)


def _python_stalls(buckets, row, at, stalls, start, end, pending):
    """The Python window loop the compiled `_stall_windows` replaced."""
    for cycle, cycles in zip(at.tolist(), stalls.sum(axis=1).tolist(), strict=True):
        if cycle != end:
            if pending:
                buckets.add_span(row, start, end or 0, pending)
                pending = 0
            start, end = end or 0, cycle
        pending += cycles
    return start, end, pending


@pytest.mark.parametrize("seed", range(4))
def test_compiled_stall_windows_equal_the_python_loop(seed):
    """Firings (some at the same cycle, some at cycle 0) close the same windows."""
    rng = np.random.default_rng(seed)
    python, compiled = TimeBuckets(1, width_cycles=8, capacity=16), TimeBuckets(1, 8, 16)
    state_py, state_nb = (0, None, 0), (0, -1, 0)
    cycle = 0
    for _ in range(40):
        k = int(rng.integers(1, 20))
        at = cycle + np.cumsum(rng.integers(0, 3, k) * rng.integers(0, 400, k))
        cycle = int(at[-1])
        log = np.zeros((k, 5), np.int64)          # a column view, as the SM's stall log
        log[:, 0], log[:, 1:] = at, rng.integers(0, 4, (k, 4))
        state_py = _python_stalls(python, 0, log[:, 0], log[:, 1:], *state_py)
        compiled.data, compiled.width_cycles, *nb_state = tt._stall_windows(
            compiled.data, compiled.width_cycles, 0, log[:, 0], log[:, 1:], *state_nb)
        state_nb = tuple(nb_state)
        assert state_nb == (state_py[0], -1 if state_py[1] is None else state_py[1],
                            state_py[2])
    assert compiled.width_cycles == python.width_cycles
    assert np.array_equal(compiled.data, python.data)


def test_compiled_bytes_equal_add_at_per_level():
    """`_add_bytes` adds each level's bytes as `np.add.at` does, repeated buckets included."""
    rng = np.random.default_rng(0)
    rows, buckets = 4, 32
    index = rng.integers(0, buckets, 500)
    counts = rng.integers(0, 9, (500, 16))[:, 1:15]           # a column view
    start = rng.random((rows, buckets)) * 1e6
    expected = start.copy()
    for k, columns in enumerate(tt._LEVEL_COUNTS):
        sectors = counts[:, list(columns)].sum(axis=1)
        np.add.at(expected[k], index, sectors.astype(np.float64) * tt.ck.SECTOR_BYTES_ASSUMED)
    got = start.copy()
    tt._add_bytes(got, 0, index, counts, tt._LEVEL_COLUMNS, tt.ck.SECTOR_BYTES_ASSUMED)
    assert np.array_equal(got, expected)
