"""Real-CUDA reductions, normalisations, scan, histogram and atomics via `isa.run_kernel`.

Float results are held to the summation-error bound of the order the kernel may use
(see `workloads/kernels/cases_reductions.py`); integer results are exact.
"""

import numpy as np
import pytest

from workloads.kernels.catalog import KERNELS


def run_checked(entry: str, size: dict, seed: int) -> None:
    case = KERNELS[entry].build(np.random.default_rng(seed), **size)
    case.run()
    case.check()


@pytest.mark.parametrize("size", KERNELS["block_reduce_sum"].variants, ids=str)
def test_block_reduce_sum_partials_match_segment_sums(size):
    """The shared-memory tree gives each block the sum of its 2*blockDim inputs."""
    run_checked("block_reduce_sum", size, seed=20)


@pytest.mark.parametrize("size", KERNELS["warp_reduce_sum"].variants, ids=str)
def test_warp_shuffle_reduce_matches_block_sums(size):
    """shfl.down then shfl.bfly reductions give each block the sum of its inputs."""
    run_checked("warp_reduce_sum", size, seed=21)


@pytest.mark.parametrize("size", KERNELS["atomic_sum_f32"].variants, ids=str)
def test_float_atomic_add_loses_no_update(size):
    """Every lane adding to one address with atom.add.f32 yields the full sum."""
    run_checked("atomic_sum_f32", size, seed=22)


@pytest.mark.parametrize("size", KERNELS["absmax_cas"].variants, ids=str)
def test_cas_loop_atomic_max_finds_exact_absmax(size):
    """The atom.cas retry loop leaves exactly max |x| whichever lane wins each round."""
    run_checked("absmax_cas", size, seed=23)


@pytest.mark.parametrize("size", KERNELS["softmax_rows"].variants, ids=str)
def test_softmax_rows_match_numpy_for_odd_widths(size):
    """Warp-per-row softmax matches float64 for widths that are not multiples of 32."""
    run_checked("softmax_rows", size, seed=24)


@pytest.mark.parametrize("size", KERNELS["layernorm_rows"].variants, ids=str)
def test_layernorm_rows_match_numpy(size):
    """Block-per-row LayerNorm with gamma/beta matches float64 to 1e-5."""
    run_checked("layernorm_rows", size, seed=25)


@pytest.mark.parametrize("size", KERNELS["rmsnorm_bf16"].variants, ids=str)
def test_rmsnorm_bf16_is_within_one_bf16_ulp(size):
    """bf16 RMSNorm output is within one bf16 rounding of the exact normalised value."""
    run_checked("rmsnorm_bf16", size, seed=26)


@pytest.mark.parametrize("size", KERNELS["scan_inclusive_block"].variants, ids=str)
def test_block_inclusive_scan_matches_cumsum(size):
    """shfl.up warp scans plus shared warp totals equal numpy.cumsum per block."""
    run_checked("scan_inclusive_block", size, seed=27)


@pytest.mark.parametrize("size", KERNELS["histogram_shared"].variants, ids=str)
def test_histogram_counts_match_bincount(size):
    """Shared-then-global atomic histogram equals numpy.bincount of value % bins."""
    run_checked("histogram_shared", size, seed=28)


@pytest.mark.parametrize("size", KERNELS["ddot_atomic"].variants, ids=str)
def test_f64_dot_with_double_atomics_matches_numpy(size):
    """f64 dot product (shared tree + atom.add.f64) matches numpy within its sum bound."""
    run_checked("ddot_atomic", size, seed=29)
