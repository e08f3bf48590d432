"""Real-CUDA low-precision kernels via `isa.run_kernel`: half2 math and fp8 e4m3 conversion.

All results here are bit-exact against numpy/ml_dtypes (see
`workloads/kernels/cases_lowprec.py` for why).
"""

import numpy as np
import pytest

from workloads.kernels.catalog import KERNELS


def run_checked(entry: str, size: dict, seed: int) -> None:
    case = KERNELS[entry].build(np.random.default_rng(seed), **size)
    case.run()
    case.check()


@pytest.mark.parametrize("size", KERNELS["half2_fma_relu_mul"].variants, ids=str)
def test_half2_fma_max_mul_round_once_per_op(size):
    """__hfma2, __hmax2 and __hmul2 on both halves equal one f16 rounding per operation."""
    run_checked("half2_fma_relu_mul", size, seed=40)


@pytest.mark.parametrize("size", KERNELS["quantize_e4m3"].variants, ids=str)
def test_e4m3_quantize_rounds_to_nearest_and_saturates(size):
    """x * inv_scale converts to e4m3 round-to-nearest-even, clamped to +-448 (satfinite)."""
    run_checked("quantize_e4m3", size, seed=41)


@pytest.mark.parametrize("size", KERNELS["quantize_e4m3_pairs"].variants, ids=str)
def test_e4m3x2_pair_quantize_puts_first_element_in_low_byte(size):
    """__nv_cvt_float2_to_fp8x2 stores element 2i in the low byte of pair i."""
    run_checked("quantize_e4m3_pairs", size, seed=42)


@pytest.mark.parametrize("size", KERNELS["dequantize_e4m3"].variants, ids=str)
def test_e4m3_dequantize_is_exact_for_every_code(size):
    """Every e4m3 bit pattern, NaN included, dequantizes to its value times scale."""
    run_checked("dequantize_e4m3", size, seed=43)
