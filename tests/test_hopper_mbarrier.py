"""mbarrier phases: arrival counts, tx-counts, parity waits, and polling under min-PC."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import isa
from isa.semantics.hopper_mbarrier import decode_state, encode_state

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "hopper"
PHASES = (FIXTURES / "mbarrier_phases.ptx").read_text()
SPIN = (FIXTURES / "mbarrier_spin.ptx").read_text()


@pytest.fixture(scope="module")
def phases():
    words = np.zeros(7, np.uint64)
    flags = np.zeros(64, np.uint32)
    isa.run_kernel(PHASES, "mbarrier_phases", 1, 64, [words, flags])
    return [decode_state(w) for w in words], flags


def test_init_sets_pending_to_count_at_parity_zero(phases):
    """mbarrier.init: expected = pending = count, tx-count 0, phase parity 0."""
    assert phases[0][0] == (64, 64, 0, 0)


def test_partial_arrival_lowers_pending_count_only(phases):
    """32 of 64 arrivals leave 32 pending in the same phase."""
    assert phases[0][1] == (64, 32, 0, 0)


def test_last_arrival_flips_parity_and_resets_pending(phases):
    """The 64th arrival completes the phase: parity 1, pending back to 64."""
    assert phases[0][2] == (64, 64, 0, 1)


def test_phase_waits_for_tx_count_after_all_arrivals(phases):
    """expect_tx raises the tx-count; all arrivals with tx outstanding keep the phase open."""
    assert phases[0][3] == (64, 64, 256, 1)
    assert phases[0][4] == (64, 0, 256, 1)


def test_complete_tx_to_zero_completes_the_phase(phases):
    """complete_tx of the outstanding bytes completes the phase (parity back to 0)."""
    assert phases[0][5] == (64, 64, 0, 0)


def test_waits_on_completed_phases_return_true(phases):
    """test_wait.parity on the completed odd phase and try_wait with its state are true."""
    assert (phases[1] == 3).all()


def test_arrive_drop_lowers_the_expected_count(phases):
    """arrive_drop counts as an arrival and removes the thread from later phases."""
    assert phases[0][6] == (63, 63, 0, 0)


def test_state_encoding_round_trips():
    """The documented barrier word encodes negative tx-counts in two's complement."""
    assert decode_state(encode_state(5, 3, -48, 1)) == (5, 3, -48, 1)


def test_poll_loop_below_the_producer_does_not_livelock():
    """Consumers spinning on try_wait at a lower pc let the producer warp arrive."""
    out = np.zeros(32, np.uint32)
    isa.run_kernel(SPIN, "mbarrier_spin", 1, 64, [out, 32])
    np.testing.assert_array_equal(out, np.arange(100, 132))


def test_phase_that_never_completes_is_a_deadlock_error():
    """One arrival short: the waiters are reported at the try_wait, nothing hangs."""
    with pytest.raises(isa.PtxError, match="deadlock.*mbarrier.try_wait"):
        isa.run_kernel(SPIN, "mbarrier_spin", 1, 64, [np.zeros(32, np.uint32), 31])


def test_more_arrivals_than_pending_is_a_fault():
    """Arriving 64 times on a count-32 barrier phase is reported, not wrapped around."""
    bad = SPIN.replace("mbarrier.init.shared::cta.b64 [%r2], 32;",
                       "mbarrier.init.shared::cta.b64 [%r2], 16;")
    with pytest.raises(isa.PtxError, match="32 arrivals on an mbarrier phase with 16"):
        isa.run_kernel(bad, "mbarrier_spin", 1, 64, [np.zeros(32, np.uint32), 32])


def test_unknown_mbarrier_modifier_lists_accepted_ones():
    """A misspelt modifier is rejected at decode with the accepted list."""
    bad = SPIN.replace("try_wait.parity.acquire", "try_wait.parity.acquired")
    with pytest.raises(isa.PtxError, match=r"unknown modifier '\.acquired'.*\.parity"):
        isa.run_kernel(bad, "mbarrier_spin", 1, 64, [np.zeros(32, np.uint32), 32])
