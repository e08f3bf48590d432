"""Launches keep the caller's data right: aliasing, byte order, read-only inputs, limits.

Pointer arguments reach the device as one buffer per distinct memory region, in native
byte order, and come back only when the kernel changed them, in the caller's byte order;
a kernel writing a read-only array or an overlap the device cannot see as one buffer is a
`LaunchError` with the caller's arrays untouched. An endless kernel stops at `max_steps`,
and a launch whose memory estimate exceeds `memory_budget_bytes` is refused before
anything is allocated (or runs in smaller batches when one cluster of CTAs fits).
"""

import numpy as np
import pytest

import isa
from isa.errors import StepLimitError
from workloads.kernels import cases_vllm
from workloads.kernels.case import load_ptx

HEADER = ".version 9.0\n.target sm_90\n.address_size 64\n"
SAXPY = load_ptx("saxpy.cu")     # saxpy(n, a, x, y): y = a * x + y

POINTERS = HEADER + """.visible .entry ptrs(.param .u64 a, .param .u64 b, .param .u64 out)
{
.reg .b64 %rd<4>;
ld.param.u64 %rd1, [a];
ld.param.u64 %rd2, [b];
ld.param.u64 %rd3, [out];
st.global.u64 [%rd3], %rd1;
st.global.u64 [%rd3+8], %rd2;
ret;
}
"""

SPIN = HEADER + ".visible .entry spin()\n{\nLOOP:\nbra LOOP;\n}\n"


def many_registers(count: int) -> str:
    """out[global thread] = thread index, with `count` 32-bit registers declared."""
    return HEADER + f""".visible .entry wide(.param .u64 out)
{{
.reg .b32 %r<{count}>;
.reg .b64 %rd<4>;
ld.param.u64 %rd1, [out];
mov.u32 %r1, %tid.x;
mov.u32 %r2, %ctaid.x;
mov.u32 %r3, %ntid.x;
mad.lo.s32 %r1, %r2, %r3, %r1;
mul.wide.u32 %rd2, %r1, 4;
add.s64 %rd3, %rd1, %rd2;
st.global.u32 [%rd3], %r1;
ret;
}}
"""


def saxpy(x, y, n: int = 4, a: float = 2.0, **kw):
    return isa.run_kernel(SAXPY, "saxpy", 1, 32, [n, np.float32(a), x, y], **kw)


# -- aliasing ------------------------------------------------------------------------------
def test_array_passed_as_input_and_output_gets_the_result():
    """rms_norm_f16(y, y, w, ...) leaves in y what a separate output would hold."""
    case = cases_vllm.rms_norm_f16(np.random.default_rng(1), tokens=3, hidden=136)
    out, x = case.args[0], case.args[1]
    y = x.copy()
    ptx = load_ptx(case.file)
    isa.run_kernel(ptx, case.entry, case.grid, case.block, case.args)
    aliased = [y, y] + case.args[2:]
    isa.run_kernel(ptx, case.entry, case.grid, case.block, aliased)
    assert not np.array_equal(y, x)
    np.testing.assert_array_equal(y.view(np.uint16), out.view(np.uint16))


def test_views_of_one_array_point_into_one_device_buffer():
    """Overlapping views share one buffer: their device pointers differ by their offset."""
    a = np.zeros(16, np.float32)
    out = np.zeros(2, np.uint64)
    isa.run_kernel(POINTERS, "ptrs", 1, 1, [a, a[3:], out])
    assert int(out[1]) - int(out[0]) == 3 * 4


def test_separate_arrays_get_separate_buffers():
    """Arrays that share no memory are not merged, whatever their values."""
    a, b = np.zeros(16, np.float32), np.zeros(16, np.float32)
    out = np.zeros(2, np.uint64)
    isa.run_kernel(POINTERS, "ptrs", 1, 1, [a, b, out])
    assert int(out[1]) - int(out[0]) >= a.nbytes


def test_only_arguments_the_kernel_changed_are_copied_back():
    """saxpy writes y (argument 3) and only reads x (argument 2)."""
    x, y = np.arange(4, dtype=np.float32), np.ones(4, np.float32)
    assert saxpy(x, y).written_args == (3,)


def test_strided_view_overlapping_a_written_argument_is_refused():
    """x = a[::2] overlaps y = a[:4] in a layout no single device buffer holds."""
    a = np.arange(8, dtype=np.float32)
    before = a.copy()
    with pytest.raises(isa.LaunchError) as info:
        saxpy(a[::2], a[:4])
    assert "wrote argument 3 ('saxpy_param_3')" in str(info.value)
    assert "overlaps argument 2 ('saxpy_param_2')" in str(info.value)
    np.testing.assert_array_equal(a, before)


# -- byte order ----------------------------------------------------------------------------
def test_big_endian_arrays_are_read_and_written_by_value():
    """x = arange(4) as '>f4' is read as [0, 1, 2, 3]; y comes back big-endian."""
    x, y = np.arange(4, dtype=">f4"), np.ones(4, dtype=">f4")
    saxpy(x, y)
    assert y.dtype == np.dtype(">f4")
    np.testing.assert_array_equal(y, [1.0, 3.0, 5.0, 7.0])


# -- read-only inputs ----------------------------------------------------------------------
def test_read_only_input_is_accepted():
    """An input with flags.writeable = False is only read: the launch runs."""
    x = np.arange(4, dtype=np.float32)
    x.flags.writeable = False
    y = np.ones(4, np.float32)
    saxpy(x, y)
    np.testing.assert_array_equal(y, [1.0, 3.0, 5.0, 7.0])


def test_broadcast_input_is_accepted():
    """np.broadcast_to views (stride 0, read-only) are passed as their dense values."""
    y = np.ones(4, np.float32)
    saxpy(np.broadcast_to(np.float32(3.0), (4,)), y)
    np.testing.assert_array_equal(y, [7.0, 7.0, 7.0, 7.0])


@pytest.mark.parametrize("make, why", [
    (lambda: np.broadcast_to(np.float32(1.0), (4,)), "a broadcast view"),
    (lambda: np.require(np.ones(4, np.float32), requirements="C"), "flags.writeable is False"),
])
def test_kernel_writing_a_read_only_array_is_refused_naming_it(make, why):
    """The error names the parameter and why it is read-only; no array is touched."""
    y = make()
    if y.flags.writeable:
        y.flags.writeable = False
    before = y.copy()
    with pytest.raises(isa.LaunchError) as info:
        saxpy(np.arange(4, dtype=np.float32), y)
    message = str(info.value)
    assert "kernel 'saxpy' wrote argument 3 ('saxpy_param_3'), a read-only array" in message
    assert why in message
    np.testing.assert_array_equal(y, before)


def test_object_array_is_refused():
    """An array of Python objects holds pointers, not numbers: refused before running."""
    with pytest.raises(isa.LaunchError, match="array of Python objects"):
        saxpy(np.array([1.0, 2.0, 3.0, 4.0], dtype=object), np.ones(4, np.float32))


# -- step limit ----------------------------------------------------------------------------
def test_endless_kernel_stops_at_max_steps_naming_kernel_and_limit():
    """A `bra` to itself stops with a StepLimitError (a LaunchError) at the loop."""
    with pytest.raises(isa.LaunchError) as info:
        isa.run_kernel(SPIN, "spin", 1, 32, [], file="spin.ptx", max_steps=1000)
    err = info.value
    assert isinstance(err, StepLimitError)
    assert "kernel 'spin': step limit of 1000 reached" in str(err)
    assert (err.file, err.line) == ("spin.ptx", 7)
    assert "max_steps=1000" in err.expected


@pytest.mark.parametrize("value", [0, -1, 2.5, True, "10"])
def test_max_steps_must_be_a_positive_int_or_none(value):
    """Zero, negative, float, bool and string limits are refused before running."""
    with pytest.raises(isa.LaunchError, match="max_steps"):
        isa.run_kernel(SPIN, "spin", 1, 32, [], max_steps=value)


# -- memory guard --------------------------------------------------------------------------
def test_huge_shape_only_tensor_is_refused_with_the_estimate():
    """ShapeOnly((1 << 40,)) f32 is 4 TiB of address space: refused, nothing allocated."""
    with pytest.raises(isa.LaunchError) as info:
        saxpy(isa.ShapeOnly((1 << 40,)), isa.ShapeOnly((4,)), timing_only=True)
    message = str(info.value)
    assert "needs an estimated 4.0 TiB of host memory, beyond the budget of 16.0 GiB" in message
    assert "arg 2 'saxpy_param_2' (shape only) with 4.0 TiB" in message


def test_registers_beyond_the_budget_are_refused_with_the_estimate():
    """3000 registers x 256 threads is about 3 MiB for one CTA, above a 1 MiB budget."""
    out = np.zeros(256, np.uint32)
    with pytest.raises(isa.LaunchError) as info:
        isa.run_kernel(many_registers(3000), "wide", 1, 256, [out],
                       memory_budget_bytes=1 << 20)
    message = str(info.value)
    assert "beyond the budget of 1.0 MiB" in message
    regs = 3000 * 4 + 4 * 8 + 2 + 1     # %r, %rd, an empty .b16 file and an empty .pred one
    assert f"{regs} bytes of registers" in message
    assert not out.any()


def test_batch_shrinks_to_fit_the_memory_budget_with_the_same_results():
    """8 CTAs of about 3 MiB each run in batches under an 8 MiB budget, as without one."""
    ptx = many_registers(3000)
    small, free = np.zeros(8 * 256, np.uint32), np.zeros(8 * 256, np.uint32)
    r_small = isa.run_kernel(ptx, "wide", 8, 256, [small], memory_budget_bytes=8 << 20)
    r_free = isa.run_kernel(ptx, "wide", 8, 256, [free], memory_budget_bytes=None)
    np.testing.assert_array_equal(small, np.arange(8 * 256))
    np.testing.assert_array_equal(small, free)
    assert r_small.warp_instructions == r_free.warp_instructions


@pytest.mark.parametrize("shape", [(-1,), (2.0,), ("4",)])
def test_shape_only_shape_must_be_non_negative_ints(shape):
    """A ShapeOnly shape of negative, float or string sizes is refused when made."""
    with pytest.raises(isa.LaunchError, match="ShapeOnly shape"):
        isa.ShapeOnly(shape)
