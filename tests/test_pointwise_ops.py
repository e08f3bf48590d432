"""PyTorch's element-wise, copy and layout kernels as ops (`workloads.ops.pointwise`,
`workloads.ops.layout`): each launch path computes what numpy computes, takes ATen's launch
geometry, and is chosen as ATen's `gpu_kernel` chooses it."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import isa
import models
from isa.errors import InputError
from workloads.ops import OPS, build_op, simulate_op
from workloads.ops.pointwise import coalesce, int_divider

CONFIG = models.load_preset("h100_sxm")
BF16 = ml_dtypes.bfloat16


def run(plan):
    """Run the plan's single launch functionally; its arguments hold the result."""
    (launch,) = plan.launches
    isa.run_kernel(launch.ptx, launch.entry, launch.grid, launch.block, list(launch.args))
    return launch


def strided(buffer, shape, strides):
    """The view of `buffer` a kernel walks with element `strides`."""
    step = buffer.dtype.itemsize
    return np.lib.stride_tricks.as_strided(buffer, shape, [s * step for s in strides])


def test_the_family_is_registered_as_op_kinds():
    """elementwise, copy, memset, memcpy, cat and index-select are op kinds."""
    assert {"elementwise", "copy", "memset", "memcpy", "cat", "index-select"} <= set(OPS)


def test_vectorized_add_covers_full_blocks_and_the_tail():
    """3000 bf16 elements: two 1024-element vector blocks and a tail block, y = a + 2 b."""
    launch = run(build_op("elementwise", CONFIG, functor="add", shape="3000", dtype="bf16",
                          alpha=2.0))
    y, a, b = launch.args[3], launch.args[4], launch.args[5]
    assert launch.entry == "pw_vec_add2_b_b_v8" and launch.grid == (3, 1, 1)
    want = (a.astype(np.float32) + 2 * b.astype(np.float32)).astype(BF16)
    assert np.array_equal(y, want)


def test_generic_broadcast_mul_reads_through_strides():
    """RoPE's x[..., ::2] * cos[:, None, :]: a stride-2 input and a broadcast one."""
    launch = run(build_op("elementwise", CONFIG, functor="mul", shape="16x4x8", dtype="f32",
                          strides="64,16,2;8,0,1"))
    y, a, b = launch.args[3], launch.args[4], launch.args[5]
    assert launch.entry == "pw_gen2_mul2_f_f" and launch.grid == (2, 1, 1)
    want = strided(a, (16, 4, 8), (64, 16, 2)) * strided(b, (16, 4, 8), (8, 0, 1))
    assert np.array_equal(y.reshape(16, 4, 8), want)


def test_generic_silu_of_a_column_slice():
    """silu of the gate half of a [rows, 2 cols] bf16 tensor, one ulp of bf16."""
    launch = run(build_op("elementwise", CONFIG, functor="silu", shape="8x100", dtype="bf16",
                          strides="200,1"))
    x = strided(launch.args[4], (8, 100), (200, 1)).astype(np.float64)
    y = launch.args[3].reshape(8, 100).astype(np.float64)
    assert launch.entry == "pw_gen4_silu1_b_b"
    assert np.allclose(y, x / (1 + np.exp(-x)), rtol=2**-7, atol=1e-6)


def test_unrolled_cast_and_arange():
    """An i64 -> f32 copy takes the unrolled path (512 per block) with run-time casts;
    arange the index path."""
    copy = run(build_op("copy", CONFIG, shape="1000", dtype="i64", out_dtype="f32"))
    assert copy.entry == "pw_unrcast_copy1_f_f" and copy.grid == (2, 1, 1)
    assert np.array_equal(copy.args[3], copy.args[4].astype(np.float32))
    arange = run(build_op("elementwise", CONFIG, functor="arange", shape="64", dtype="i64",
                          alpha=3.0, beta=2.0))
    assert arange.entry == "pw_idx_arange0_l_l" and arange.block == (64, 1, 1)
    assert np.array_equal(arange.args[3], 3 + 2 * np.arange(64))


def test_pow_with_a_broadcast_zero_dim_base():
    """pow(base, exponent) with a 0-dim base (stride 0), as RoPE's inverse frequencies."""
    plan = build_op("elementwise", CONFIG, functor="pow", shape="64", dtype="f32",
                    strides="0;1", vec=4)
    launch = plan.launches[0]
    launch.args[4][:] = np.abs(launch.args[4])
    run(plan)
    want = launch.args[4][0] ** launch.args[5]
    assert launch.entry == "pw_gen4_pow2_f_f"
    assert np.allclose(launch.args[3], want, rtol=1e-6)


def test_transpose_copy_and_cast():
    """A transposed bf16 -> f32 copy compiled for its dtypes (--cast static): the output is
    the input's transpose."""
    launch = run(build_op("copy", CONFIG, shape="24x40", dtype="bf16", out_dtype="f32",
                          strides="1,24", cast="static"))
    x = strided(launch.args[4], (24, 40), (1, 24))
    assert launch.entry == "pw_gen4_copy1_b_f"
    assert np.array_equal(launch.args[3].reshape(24, 40), x.astype(np.float32))


def test_cat_along_the_last_dimension_interleaves_the_inputs():
    """torch.stack([a, b], -1): every input element lands at its scattered place."""
    plan = build_op("cat", CONFIG, shapes="16x4x8x1;16x4x8x1", dim=-1, dtype="f32")
    launch = run(plan)
    out, src = launch.args[0], launch.args[1]
    want = np.stack([src[:512].reshape(16, 4, 8), src[512:1024].reshape(16, 4, 8)], -1)
    assert launch.entry == "cat_aligned4_d4" and launch.grid[1] == 2
    assert np.array_equal(out, want.reshape(-1))


def test_index_select_gathers_rows():
    """out[r] = table[index[r]] for random indices."""
    launch = run(build_op("index-select", CONFIG, rows=50, cols=24, table_rows=100))
    out, table, index = launch.args[0], launch.args[1], launch.args[2]
    assert np.array_equal(out.reshape(50, 24), table.reshape(100, 24)[index])


@pytest.mark.parametrize(("sizes", "path", "entry"), [
    ({"functor": "add", "shape": "4096x4096", "dtype": "bf16"}, "vectorized", "pw_vec_add2_b_b_v8"),
    ({"functor": "add", "shape": "64", "dtype": "i64", "inputs": 1, "out_dtype": "f32"},
     "unrolled", "pw_unrcast_add1_f_f"),
    ({"functor": "mul", "shape": "4096x32x64", "dtype": "f32", "strides": "4096,128,2;64,0,1"},
     "generic", "pw_gen2_mul2_f_f"),
    ({"functor": "mul", "shape": "4096x14336", "dtype": "bf16", "strides": "14336,1;28672,1"},
     "generic", "pw_gen4_mul2_b_b"),
])
def test_auto_path_is_atens_choice(sizes, path, entry):
    """Contiguous one-dtype: vectorized; contiguous with a cast: unrolled, cast at run time;
    strided: generic, 2 elements per thread for cast-free 4-byte values, else 4."""
    launch = build_op("elementwise", CONFIG, shape_only=True, **sizes).launches[0]
    assert (launch.detail["path"], launch.entry) == (path, entry)


def test_f32_to_bf16_copy_is_vectorized_by_eight():
    """ATen's bfloat16_copy_kernel_cuda: vectorized<8> although the dtypes differ."""
    launch = build_op("copy", CONFIG, shape="4096x32x128", dtype="f32", out_dtype="bf16",
                      shape_only=True).launches[0]
    assert launch.entry == "pw_vec_copy1_f_b_v8" and launch.grid == (16384, 1, 1)


@pytest.mark.parametrize(("kind", "sizes", "grid"), [
    ("elementwise", {"functor": "silu", "shape": "4096x14336", "strides": "28672,1"}, 114688),
    ("elementwise", {"functor": "mul", "shape": "4096x32x64", "dtype": "f32",
                     "strides": "4096,128,2;64,0,1"}, 32768),
    ("elementwise", {"functor": "add", "shape": "4096x32x64", "dtype": "f32"}, 8192),
    ("cat", {"shapes": "4096x32x64x1;4096x32x64x1", "dim": -1, "dtype": "f32"}, 4224),
    ("cat", {"shapes": "4096x8x64x1;4096x8x64x1", "dim": -1, "dtype": "f32"}, 4096),
])
def test_grids_are_the_traces(kind, sizes, grid):
    """Grid sizes of the LLaMA-3-8B prefill trace's kernels at the same shapes."""
    launch = build_op(kind, CONFIG, shape_only=True, **sizes).launches[0]
    assert launch.grid[0] == grid


def test_coalescing_merges_contiguous_dims_and_drops_size_one():
    """[4096, 32, 128] read from [6144, 128, 1] into contiguous: 2 dims, [4096, 4096]."""
    shape, strides = coalesce((4096, 32, 1, 128), [(4096, 128, 128, 1), (6144, 128, 0, 1)])
    assert shape == (4096, 4096) and strides == [(4096, 1), (6144, 1)]


def test_int_divider_divides_exactly():
    """ATen's magic-number division equals // for 32-bit numerators."""
    rng = np.random.default_rng(0)
    for divisor in (1, 3, 7, 64, 100, 14336, 2049, 2**31 - 1):
        magic, shift = int_divider(divisor)
        for n in rng.integers(0, 2**32, 200).tolist() + [0, divisor - 1, divisor, 2**32 - 1]:
            assert (((n * magic) >> 32) + n) >> shift == n // divisor


@pytest.mark.parametrize(("sizes", "message"), [
    ({"functor": "silu", "shape": "64", "dtype": "i64"}, "instantiated for this path and functor"),
    ({"functor": "add", "shape": "8x8", "strides": "16,1;8,1", "path": "vectorized"},
     "contiguous operands only"),
    ({"functor": "add", "shape": "8x0"}, "--shape"),
    ({"functor": "add", "shape": "8x8", "strides": "8,1"}, "--strides"),
    ({"functor": "copy", "shape": "8", "inputs": 2}, "--inputs"),
])
def test_bad_sizes_name_the_flag(sizes, message):
    """What is wrong and what would be accepted, before anything runs."""
    with pytest.raises(InputError, match=message):
        build_op("elementwise", CONFIG, **sizes)


def test_vectorized_copy_is_no_faster_than_the_hbm_peak():
    """A 64 MiB f32 -> bf16 copy takes at least its bytes over the HBM peak."""
    plan = build_op("copy", CONFIG, shape="4096x4096", dtype="f32", out_dtype="bf16")
    result = simulate_op(plan, CONFIG, "sampled")
    assert plan.bytes == 4096 * 4096 * 6
    assert result["time_us"] >= result["roofline_us"] > 0
    assert math.isfinite(result["hbm_bytes"])
