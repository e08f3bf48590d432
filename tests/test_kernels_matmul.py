"""Real-CUDA GEMM kernels via `isa.run_kernel`: tiled SGEMM, WMMA, mma.sync bf16 and e4m3.

References are float64 products of the stored inputs; the tolerance is the f32
accumulation bound (K + 1) u |A| @ |B|, since the PTX ISA leaves the tensor-core
accumulation order unspecified (see `workloads/kernels/cases_matmul.py`).
"""

import numpy as np
import pytest

from workloads.kernels.catalog import KERNELS


def run_checked(entry: str, size: dict, seed: int) -> None:
    case = KERNELS[entry].build(np.random.default_rng(seed), **size)
    case.run()
    case.check()


@pytest.mark.parametrize("size", KERNELS["sgemm_tiled"].variants, ids=str)
def test_tiled_sgemm_matches_numpy_for_ragged_shapes(size):
    """16x16-tiled SGEMM computes alpha*A@B + beta*C for M, N, K not multiples of 16."""
    run_checked("sgemm_tiled", size, seed=30)


@pytest.mark.parametrize("size", KERNELS["wmma_gemm_f16"].variants, ids=str)
def test_wmma_f16_gemm_matches_numpy(size):
    """wmma m16n16k16 f16 GEMM with f32 accumulation matches the exact product."""
    run_checked("wmma_gemm_f16", size, seed=31)


@pytest.mark.parametrize("size", KERNELS["mma_bf16_gemm"].variants, ids=str)
def test_mma_bf16_gemm_with_cp_async_and_ldmatrix_matches_numpy(size):
    """cp.async-staged, ldmatrix-loaded mma.m16n8k16 bf16 GEMM matches, edges zero-filled."""
    run_checked("mma_bf16_gemm", size, seed=32)


@pytest.mark.parametrize("size", KERNELS["mma_fp8_gemm"].variants, ids=str)
def test_mma_e4m3_gemm_matches_numpy(size):
    """mma.m16n8k32 e4m3 GEMM with a scale matches the exact product of the fp8 inputs."""
    run_checked("mma_fp8_gemm", size, seed=33)
