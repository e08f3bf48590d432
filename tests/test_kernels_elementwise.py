"""Real-CUDA elementwise and data-movement kernels run through `isa.run_kernel`.

Each test runs the committed nvcc PTX on two launch shapes from the catalog (sizes that
leave a partial block) and compares with a float64 numpy reference; tolerances are stated
where each case is built in `workloads/kernels/cases_elementwise.py`.
"""

import numpy as np
import pytest

from workloads.kernels.catalog import KERNELS


def run_checked(entry: str, size: dict, seed: int) -> None:
    case = KERNELS[entry].build(np.random.default_rng(seed), **size)
    case.run()
    case.check()


@pytest.mark.parametrize("size", KERNELS["saxpy"].variants, ids=str)
def test_saxpy_is_one_fused_multiply_add_per_element(size):
    """saxpy writes a*x + y rounded once, and leaves elements past n alone."""
    run_checked("saxpy", size, seed=10)


@pytest.mark.parametrize("size", KERNELS["gelu_tanh"].variants, ids=str)
def test_gelu_tanh_matches_numpy_within_tanhf_error(size):
    """GELU (tanh form) via tanhf's approx-SFU lowering matches float64 within a few ulp."""
    run_checked("gelu_tanh", size, seed=11)


@pytest.mark.parametrize("size", KERNELS["silu"].variants, ids=str)
def test_silu_matches_numpy_within_expf_error(size):
    """SiLU via __expf (ex2.approx) and div.rn matches float64 to 2e-6 relative."""
    run_checked("silu", size, seed=12)


@pytest.mark.parametrize("size", KERNELS["daxpy"].variants, ids=str)
def test_daxpy_f64_matches_numpy_to_one_rounding(size):
    """daxpy in f64 (fma.rn.f64) matches numpy's a*x + y to one rounding."""
    run_checked("daxpy", size, seed=13)


@pytest.mark.parametrize("size", KERNELS["transpose_tiled"].variants, ids=str)
def test_transpose_tiled_is_exact_for_ragged_tiles(size):
    """The padded shared-tile transpose is bit-exact when rows and cols are not tile multiples."""
    run_checked("transpose_tiled", size, seed=14)
