"""Timing mode of the functional run: shape-only tensors, skipped tensor data, CTA sub-ranges."""

import numpy as np
import pytest

import isa
from workloads.kernels.case import load_ptx
from workloads.kernels.catalog import KERNELS


def _case(name, variant=0):
    spec = KERNELS[name]
    return spec.build(np.random.default_rng(0), **spec.variants[variant])


def _shape_only(args):
    return [isa.ShapeOnly(a.shape, a.dtype) if isinstance(a, np.ndarray) else a for a in args]


def test_timing_only_run_executes_the_same_instructions_as_the_full_run():
    """Skipping tensor-core data changes no control flow: identical per-pc counts."""
    case = _case("mma_bf16_gemm")
    ptx = load_ptx(case.file)
    full = isa.run_kernel(ptx, case.entry, case.grid, case.block, case.args, case.shared_bytes)
    timed = isa.run_kernel(ptx, case.entry, case.grid, case.block, _shape_only(case.args),
                           case.shared_bytes, timing_only=True)
    assert np.array_equal(full.per_instruction, timed.per_instruction)


def test_timing_mode_leaves_the_callers_arrays_untouched():
    """With timing_only the outputs are not meaningful, so nothing is written back."""
    case = _case("saxpy")
    before = [a.copy() if isinstance(a, np.ndarray) else a for a in case.args]
    isa.run_kernel(load_ptx(case.file), case.entry, case.grid, case.block, case.args,
                   timing_only=True)
    for want, got in zip(before, case.args, strict=True):
        if isinstance(want, np.ndarray):
            assert np.array_equal(want, got)


def test_cta_range_runs_only_those_ctas():
    """Running CTAs [0, k) of a uniform kernel executes k/n of its warp-instructions."""
    case = _case("sgemm_tiled")
    ptx = load_ptx(case.file)
    n = int(np.prod(case.grid))
    full = isa.run_kernel(ptx, case.entry, case.grid, case.block, case.args)
    part = isa.run_kernel(ptx, case.entry, case.grid, case.block, case.args,
                          cta_range=(0, 1))
    assert part.warp_instructions * n >= full.warp_instructions * 0.5
    assert part.warp_instructions < full.warp_instructions


def test_cta_range_outside_the_grid_is_a_launch_error():
    """A sub-range must lie inside the grid; the error names the CTA count."""
    case = _case("saxpy")
    with pytest.raises(isa.LaunchError, match="cta_range"):
        isa.run_kernel(load_ptx(case.file), case.entry, case.grid, case.block, case.args,
                       cta_range=(0, 10_000))


def test_shape_only_tensor_needs_a_pointer_parameter():
    """A ShapeOnly passed for a scalar parameter is rejected before running."""
    case = _case("saxpy")
    args = list(case.args)
    args[0] = isa.ShapeOnly((4,), np.float32)
    with pytest.raises(isa.LaunchError, match="ShapeOnly"):
        isa.run_kernel(load_ptx(case.file), case.entry, case.grid, case.block, args)
