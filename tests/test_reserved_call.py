"""`models.jit_cache.reserved_call`: a call from a frame holding a reserve of the
interpreter's data stack, so that a deep recursion inside (numba compiling the SM loop) maps no
new stack chunk when it crosses a chunk boundary back and forth."""

import resource

import pytest

from models.jit_cache import RESERVED_STACK_SLOTS, _reserve, reserved_call


def _leaf(a, b, c):
    return a


def _down(depth, calls):
    if depth:
        return _down(depth - 1, calls)
    for _ in range(calls):
        _leaf(1, 2, 3)
    return depth


def _churn():
    """Calls at every depth up to 600 frames: some depth lies at a 16 KiB chunk boundary of
    CPython 3.11's data stack, where each call maps and unmaps a chunk."""
    for depth in range(1, 600):
        _down(depth, 400)
    return "done"


def _minor_faults(fn):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    result = fn()
    return result, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before


def test_reserved_call_returns_the_calls_result_and_holds_the_reserve():
    assert reserved_call(divmod, 17, 5) == (3, 2)
    assert reserved_call(lambda *a, **k: (a, k), 1, 2) == ((1, 2), {})
    assert _reserve().__code__.co_nlocals == RESERVED_STACK_SLOTS + 2
    with pytest.raises(ZeroDivisionError):
        reserved_call(divmod, 1, 0)


def test_a_recursion_inside_the_reserve_maps_no_stack_chunks():
    """Where a plain recursion page-faults on fresh stack chunks (thousands of faults), the
    same recursion through `reserved_call` faults only on the reserve's own first touch
    (2.4 MB: about 600 pages)."""
    _, plain = _minor_faults(_churn)
    if plain < 4000:
        pytest.skip(f"this interpreter maps no stack chunk per call ({plain} faults)")
    result, reserved = _minor_faults(lambda: reserved_call(_churn))
    assert result == "done"
    assert reserved < plain / 4, (reserved, plain)
