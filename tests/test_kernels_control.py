"""Real-CUDA control-flow kernels via `isa.run_kernel`: divergent loops, grid-stride loops,
a non-inlined device call with a local array, and warp votes.
"""

import numpy as np
import pytest

from workloads.kernels.catalog import KERNELS


def run_checked(entry: str, size: dict, seed: int) -> None:
    case = KERNELS[entry].build(np.random.default_rng(seed), **size)
    case.run()
    case.check()


@pytest.mark.parametrize("size", KERNELS["collatz_steps"].variants, ids=str)
def test_collatz_step_counts_survive_divergent_loop_exits(size):
    """Lanes leaving a data-dependent while loop at different trips each get their count."""
    run_checked("collatz_steps", size, seed=50)


@pytest.mark.parametrize("size", KERNELS["scale_shift_grid_stride"].variants, ids=str)
def test_grid_stride_loop_covers_every_element_once(size):
    """A grid much smaller than n still writes x*scale + shift to every element."""
    run_checked("scale_shift_grid_stride", size, seed=51)


@pytest.mark.parametrize("size", KERNELS["poly_derivative_call"].variants, ids=str)
def test_noinline_call_with_local_array_evaluates_derivative(size):
    """call.uni into a .func reading a caller's local array returns the Horner value."""
    run_checked("poly_derivative_call", size, seed=52)


@pytest.mark.parametrize("size", KERNELS["ballot_popc"].variants, ids=str)
def test_ballot_popc_any_all_match_per_warp_votes(size):
    """vote.sync ballot/any/all and popc agree with the per-warp predicate bits."""
    run_checked("ballot_popc", size, seed=53)
