"""ATen's run-time casts (`workloads/kernels/aten/torch_elementwise_cast.cu`, `--cast`): each
entry computes what numpy computes for every operand dtype it is given at run time, `auto`
takes them where ATen's `gpu_kernel_impl` casts dynamically, a trace's kernel name selects
them, and ptxas assembles them without spills."""

from __future__ import annotations

import re
import shutil
import subprocess

import ml_dtypes
import numpy as np
import pytest

import models
from isa.errors import InputError
from tests.test_pointwise_ops import run, strided
from workloads.kernels.case import KERNEL_DIR
from workloads.ops import build_op, simulate_op
from workloads.traces.operators import kernel_cast

CONFIG = models.load_preset("h100_sxm")
BF16 = ml_dtypes.bfloat16
CAST_PTX = KERNEL_DIR / "aten" / "torch_elementwise_cast"


def test_generic_bf16_to_f32_copy_of_a_row_slice_is_exact():
    """The query slice of a fused QKV buffer (row stride 6144 scaled down to 211), odd sizes:
    gencast4, 4 elements per thread, every value exact."""
    launch = run(build_op("copy", CONFIG, shape="37x5x33", dtype="bf16", out_dtype="f32",
                          strides="211,33,1"))
    x = strided(launch.args[4], (37, 5, 33), (211, 33, 1))
    assert launch.entry == "pw_gencast4_copy1_f_f"
    assert launch.grid == (-(-37 * 5 * 33 // 512), 1, 1)
    assert np.array_equal(launch.args[3].reshape(37, 5, 33), x.astype(np.float32))


def test_unrolled_i64_to_f32_copy_of_an_odd_count_is_exact():
    """1001 i64 positions into f32 (LoadWithCast / StoreWithCast): the tail block too."""
    launch = run(build_op("copy", CONFIG, shape="1001x1", dtype="i64", out_dtype="f32",
                          strides="1,0"))
    assert launch.entry == "pw_unrcast_copy1_f_f" and launch.grid == (2, 1, 1)
    assert np.array_equal(launch.args[3], launch.args[4].astype(np.float32))


def test_unrolled_i64_times_a_scalar_into_f32():
    """RoPE's positions * inv_freq step: BUnaryFunctor<float> on an i64 tensor, 777 elements."""
    launch = run(build_op("elementwise", CONFIG, functor="mul", shape="777", inputs=1,
                          dtype="i64", out_dtype="f32", alpha=0.375))
    assert launch.entry == "pw_unrcast_mul1_f_f"
    want = launch.args[4].astype(np.float32) * np.float32(0.375)
    assert np.array_equal(launch.args[3], want)


def test_generic_f32_to_bf16_transpose_rounds_on_store():
    """A transposed f32 -> bf16 copy: cast_and_store rounds to nearest even, as numpy."""
    launch = run(build_op("copy", CONFIG, shape="23x41", dtype="f32", out_dtype="bf16",
                          strides="1,23"))
    x = strided(launch.args[4], (23, 41), (1, 23))
    assert launch.entry == "pw_gencast4_copy1_f_f"
    assert np.array_equal(launch.args[3].reshape(23, 41), x.astype(BF16))


@pytest.mark.parametrize(("dtype", "out_dtype"), [("f16", "f32"), ("f32", "i64"),
                                                  ("f64", "f32"), ("bf16", "f16")])
def test_unrolled_copy_switches_on_each_operand_dtype(dtype, out_dtype):
    """One entry for every dtype pair: the switch takes the operand's ScalarType (f16
    buffers are float16 here, not bf16 as on the compile-time path)."""
    launch = run(build_op("copy", CONFIG, shape="515", dtype=dtype, out_dtype=out_dtype))
    out, x = launch.args[3], launch.args[4]
    assert launch.entry == "pw_unrcast_copy1_f_f"
    assert out.dtype == {"f32": np.float32, "i64": np.int64, "f16": np.float16}[out_dtype]
    assert np.array_equal(out, x.astype(np.float32).astype(out.dtype))


def test_unrolled_add_of_bf16_inputs_into_f32():
    """x0 + x1 of two bf16 tensors into f32: exact in f32."""
    launch = run(build_op("elementwise", CONFIG, functor="add", shape="999", dtype="bf16",
                          out_dtype="f32", alpha=1.0))
    a, b = (launch.args[k].astype(np.float32) for k in (4, 5))
    assert launch.entry == "pw_unrcast_add2_f_f"
    assert np.array_equal(launch.args[3], a + b)


def test_generic_pow_with_a_broadcast_base_through_run_time_casts():
    """pow(base, exponent) of RoPE's frequencies as the trace's gpu_kernel_impl runs it."""
    plan = build_op("elementwise", CONFIG, functor="pow", shape="64", dtype="f32",
                    strides="0;1", cast="dynamic")
    launch = plan.launches[0]
    launch.args[4][:] = np.abs(launch.args[4])
    run(plan)
    assert launch.entry == "pw_gencast4_pow2_f_f"
    assert np.allclose(launch.args[3], launch.args[4][0] ** launch.args[5], rtol=1e-6)


@pytest.mark.parametrize(("sizes", "entry"), [
    ({"functor": "copy", "shape": "8x8", "dtype": "bf16", "out_dtype": "f32",
      "strides": "16,1"}, "pw_gencast4_copy1_f_f"),
    ({"functor": "copy", "shape": "8x8", "dtype": "bf16", "out_dtype": "f32",
      "strides": "16,1", "cast": "static"}, "pw_gen4_copy1_b_f"),
    ({"functor": "mul", "shape": "8x8", "dtype": "f32", "strides": "16,1;0,1"},
     "pw_gen2_mul2_f_f"),
    ({"functor": "copy", "shape": "64", "dtype": "f32", "out_dtype": "bf16"},
     "pw_vec_copy1_f_b_v8"),
])
def test_auto_casts_at_run_time_only_where_aten_does(sizes, entry):
    """auto: a dtype change on the unrolled or generic path casts at run time; one dtype, or
    the vectorized f32 -> bf16 copy, compiles its casts; static forces the compiled one."""
    assert build_op("elementwise", CONFIG, shape_only=True, **sizes).launches[0].entry == entry


@pytest.mark.parametrize(("sizes", "message"), [
    ({"functor": "add", "shape": "64", "dtype": "f32", "cast": "dynamic"}, "vectorized path"),
    ({"functor": "copy", "shape": "8x8", "dtype": "bf16", "out_dtype": "f32",
      "strides": "16,1", "vec": 2}, "4 elements per thread"),
    ({"functor": "silu", "shape": "8x8", "dtype": "bf16", "out_dtype": "f32",
      "strides": "16,1"}, "no run-time-cast kernel"),
    ({"functor": "copy", "shape": "8", "cast": "sometimes"}, "--cast"),
])
def test_impossible_run_time_casts_name_what_is_accepted(sizes, message):
    """A run-time cast ATen never launches, or one without an entry, is refused up front."""
    with pytest.raises(InputError, match=message):
        build_op("elementwise", CONFIG, **sizes)


@pytest.mark.parametrize(("name", "cast"), [
    ("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl<at::native::"
     "direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}", "dynamic"),
    ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::"
     "TensorIteratorBase&)::{lambda()#3}, std::array<char*, 2ul>, 4, TrivialOffsetCalculator"
     "<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::"
     "LoadWithCast<1>, at::native::memory::StoreWithCast<1> >", "dynamic"),
    ("void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::"
     "native::BinaryFunctor<float, float, float>", None),
    ("void at::native::vectorized_elementwise_kernel<8, at::native::bfloat16_copy_kernel_cuda",
     None),
])
def test_kernel_name_says_whether_aten_cast_at_run_time(name, cast):
    """gpu_kernel_impl< and LoadWithCast< are run-time casts; _nocast and vectorized not."""
    assert kernel_cast(name) == cast


def test_run_time_casts_cost_time_on_a_strided_copy():
    """The prefill's query copy scaled down (bf16 -> f32, row stride 6144): the switch per
    access makes the run-time-cast kernel slower than the one compiled for its dtypes."""
    sizes = {"shape": "256x32x128", "dtype": "bf16", "out_dtype": "f32",
             "strides": "6144,128,1"}
    times = {cast: simulate_op(build_op("copy", CONFIG, cast=cast, **sizes), CONFIG,
                               "sampled")["time_us"] for cast in ("static", "dynamic")}
    assert times["dynamic"] > times["static"]


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not on PATH")
@pytest.mark.parametrize(("arch", "suffix"), [("sm_90a", ".ptx"), ("sm_80", ".sm_80.ptx")])
def test_ptxas_assembles_the_run_time_casts_without_spills(arch, suffix):
    """ptxas -v: every entry of the committed build, no spill stores or loads."""
    out = subprocess.run(["ptxas", f"-arch={arch}", "-v", str(CAST_PTX) + suffix,
                          "-o", "/dev/null"], capture_output=True, text=True, check=True,
                         timeout=300).stderr
    entries = re.findall(r"entry function '(\w+)'", out)
    spills = re.findall(r"(\d+) bytes spill stores, (\d+) bytes spill loads", out)
    assert len(entries) == 10 and len(spills) == 10
    assert set(spills) == {("0", "0")}
