"""Golden kernels: simulated figures stay at the accepted values in tests/golden."""

from __future__ import annotations

import pytest

from simulator.app import golden

ACCEPTED = golden.load_golden()


@pytest.mark.parametrize("name, kernel, variant", golden.GOLDEN_CASES,
                         ids=[c[0] for c in golden.GOLDEN_CASES])
def test_golden_kernel_keeps_instruction_counts_and_cycles_within_2_percent(name, kernel,
                                                                            variant):
    """Instruction/issue counts exact, cycles and HBM/L2 bytes within +-2 % of the golden."""
    assert name in ACCEPTED, "run `ptxsim golden --update` to record this case"
    changes = golden.compare({name: ACCEPTED[name]}, {name: golden.measure(kernel, variant)})
    assert [c.line() for c in changes if not c.allowed] == []


def test_golden_file_lists_exactly_the_golden_cases():
    """tests/golden/kernels.json holds one record per GOLDEN_CASES entry, no more."""
    assert sorted(ACCEPTED) == sorted(name for name, _, _ in golden.GOLDEN_CASES)


@pytest.mark.parametrize("figure, old, new, allowed", [
    ("cycles", 1000, 1020, True),
    ("cycles", 1000, 1021, False),
    ("bytes.l2.load", 1000, 979, False),
    ("warp_instructions", 60, 61, False),
    ("issued.fp32", 3, 3, True),
    ("cycles", None, 5, False),
])
def test_compare_rule_is_exact_for_counts_and_2_percent_for_cycles(figure, old, new, allowed):
    """figure_allowed: counts must match, cycles/bytes may move by at most 2 %."""
    assert golden.figure_allowed(figure, old, new) is allowed


def test_change_line_shows_old_new_and_percent():
    """A change prints as `case figure: old -> new (+x.xx %)`."""
    line = golden.Change("k", "cycles", 1000, 1010, True).line()
    assert line == "k cycles: 1000 -> 1010 (+1.00 %)"
