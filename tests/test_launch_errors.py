"""Impossible launches and runtime faults are reported clearly, and nothing half-runs.

Launch errors (`isa.LaunchError`) are raised before any thread runs and name the limit or
the parameter. Runtime faults (`isa.PtxError`) carry the faulting instruction's file, line
and column and name the thread and CTA; after any error the caller's arrays hold exactly
what they held before the call.
"""

import numpy as np
import pytest

import isa

HEADER = ".version 9.0\n.target sm_90\n.address_size 64\n"

STORE_TID = HEADER + """.visible .entry k(.param .u64 out)
{
.reg .b32 %r<4>;
.reg .b64 %rd<4>;
ld.param.u64 %rd1, [out];
cvta.to.global.u64 %rd1, %rd1;
mov.u32 %r1, %tid.x;
mov.u32 %r2, %ctaid.x;
mov.u32 %r3, %ntid.x;
mad.lo.s32 %r1, %r2, %r3, %r1;
mul.wide.u32 %rd2, %r1, 4;
add.s64 %rd3, %rd1, %rd2;
st.global.u32 [%rd3], %r1;
ret;
}
"""
STORE_LINE = 16

SCALARS = HEADER + """.visible .entry k(.param .u64 out, .param .u8 small, .param .s32 count,
                         .param .f32 scale)
{
ret;
}
"""


def launch_error(ptx, grid, block, args, **kw) -> isa.LaunchError:
    with pytest.raises(isa.LaunchError) as info:
        isa.run_kernel(ptx, "k", grid, block, args, **kw)
    return info.value


def fault(ptx, grid, block, args, **kw) -> isa.PtxError:
    with pytest.raises(isa.PtxError) as info:
        isa.run_kernel(ptx, "k", grid, block, args, file="f.ptx", **kw)
    return info.value


# -- launch shape ------------------------------------------------------------------------
def test_block_over_1024_threads_is_rejected():
    """32 x 33 = 1056 threads exceed the 1024-thread CTA limit."""
    err = launch_error(STORE_TID, 1, (32, 33), [np.zeros(2048, np.uint32)])
    assert "block (32, 33, 1) has 1056 threads; at most 1024 are allowed" in str(err)


def test_block_z_over_64_is_rejected():
    """blockDim.z is at most 64."""
    err = launch_error(STORE_TID, 1, (1, 1, 65), [np.zeros(65, np.uint32)])
    assert "block dimension z = 65 exceeds 64" in str(err)


def test_grid_dimension_too_large_is_rejected():
    """gridDim.y is at most 65535."""
    err = launch_error(STORE_TID, (1, 65536), 32, [np.zeros(32, np.uint32)])
    assert "grid dimension y = 65536 exceeds 65535" in str(err)


@pytest.mark.parametrize("grid, message", [((0, 1), "grid dimensions must be >= 1"),
                                           ((1, 2, 3, 4), "grid must have 1 to 3 dimensions"),
                                           ("8", "grid must be an int or a tuple"),
                                           ((2.5, 1), "grid must be an int or a tuple")])
def test_malformed_grid_is_rejected(grid, message):
    """Grids are 1-3 positive ints."""
    assert message in str(launch_error(STORE_TID, grid, 32, [np.zeros(32, np.uint32)]))


def test_too_much_shared_memory_is_rejected():
    """Static plus dynamic shared memory above 227 KiB per CTA cannot launch."""
    err = launch_error(STORE_TID, 1, 32, [np.zeros(32, np.uint32)], shared_bytes=240_000)
    assert "needs 240000 bytes of shared memory (0 static + 240000 dynamic); at most " \
           "232448 per CTA" in str(err)


# -- arguments -------------------------------------------------------------------------------
def test_wrong_argument_count_lists_the_parameter_names():
    """Two arguments for four parameters: the message lists the parameters."""
    err = launch_error(SCALARS, 1, 32, [np.zeros(4, np.uint32), 1])
    assert "kernel 'k' takes 4 arguments (out, small, count, scale), got 2" in str(err)


def test_array_passed_to_a_scalar_parameter_is_rejected():
    """A numpy array for `.s32 count` is not a pointer parameter."""
    out = np.zeros(4, np.uint32)
    err = launch_error(SCALARS, 1, 32, [out, 1, out, 1.0])
    assert "argument 2 ('count', .s32) is a .s32 scalar; got an array" in str(err)
    assert "pointer parameters are .u64/.b64" in str(err)


@pytest.mark.parametrize("small, count, message", [
    (256, 0, "argument 1 ('small', .u8) = 256 does not fit in .u8 (range -128..255)"),
    (-129, 0, "argument 1 ('small', .u8) = -129 does not fit in .u8"),
    (0, 2**31, "argument 2 ('count', .s32) = 2147483648 does not fit in .s32 "
               "(range -2147483648..2147483647)"),
    (0, -2**31 - 1, "does not fit in .s32"),
])
def test_scalar_that_does_not_fit_its_parameter_is_rejected(small, count, message):
    """Integers outside the parameter type's range are errors, not wrapped values."""
    err = launch_error(SCALARS, 1, 32, [np.zeros(4, np.uint32), small, count, 1.0])
    assert message in str(err)


def test_float_passed_to_an_integer_parameter_is_rejected():
    """3.0 for `.s32 count` is refused rather than truncated."""
    err = launch_error(SCALARS, 1, 32, [np.zeros(4, np.uint32), 1, 3.0, 1.0])
    assert "argument 2 ('count', .s32) is an integer parameter; got float 3.0" in str(err)
    err = launch_error(SCALARS, 1, 32, [np.zeros(4, np.uint32), 1, np.float32(2.5), 1.0])
    assert "got float" in str(err)


@pytest.mark.parametrize("value", ["3", True, None])
def test_non_number_scalar_is_rejected(value):
    """Strings, booleans and None are not numbers."""
    err = launch_error(SCALARS, 1, 32, [np.zeros(4, np.uint32), 1, value, 1.0])
    assert "argument 2 ('count', .s32) needs a number" in str(err)


def test_integer_and_numpy_scalars_are_accepted():
    """ints and numpy integers fit integer params; ints and floats fit float params."""
    isa.run_kernel(SCALARS, "k", 1, 32, [np.zeros(4, np.uint32), np.uint8(255), -5, 2])
    isa.run_kernel(SCALARS, "k", 1, 32, [np.zeros(4, np.uint32), -1, np.int64(7), 0.5])


# -- runtime faults ---------------------------------------------------------------------------
def test_out_of_bounds_global_store_names_instruction_thread_and_buffers():
    """Thread 40 of CTA 0 stores past the 40-element array."""
    out = np.zeros(40, np.uint32)
    err = fault(STORE_TID, 2, 48, [out])
    assert err.message.startswith("out-of-bounds global access of 4 bytes at ")
    assert "(thread (40, 0, 0) of CTA (0, 0, 0)) in 'st.global.u32'" in err.message
    assert (err.file, err.line, err.col) == ("f.ptx", STORE_LINE, 1)
    assert "an address inside a buffer: arg 0 'out'" in err.expected


def test_misaligned_access_names_the_address_and_alignment():
    """A 4-byte store at a 2-byte stride misaligns thread 1."""
    ptx = STORE_TID.replace("mul.wide.u32 %rd2, %r1, 4;", "mul.wide.u32 %rd2, %r1, 2;")
    err = fault(ptx, 1, 8, [np.zeros(8, np.uint32)])
    assert "misaligned 4-byte access at address 0x" in err.message
    assert "(thread (1, 0, 0) of CTA (0, 0, 0))" in err.message
    assert (err.line, err.col) == (STORE_LINE, 1)
    assert err.expected == "an address that is a multiple of 4"


SHARED_STORE = HEADER + """.visible .entry k()
{
.reg .b32 %r<4>;
.shared .align 4 .b8 s[128];
mov.u32 %r1, %tid.x;
shl.b32 %r2, %r1, 2;
mov.u32 %r3, s;
add.s32 %r3, %r3, %r2;
  st.shared.u32 [%r3], %r1;
ret;
}
"""


def test_out_of_bounds_shared_store_names_the_first_bad_thread():
    """A 128-byte shared array holds 32 words; thread 32 of CTA (1, 0, 0) overflows it."""
    err = fault(SHARED_STORE, (2, 1), 64, [], max_batch_threads=64)
    assert err.message.startswith("out-of-bounds shared access of 4 bytes at offset 0x80 "
                                  "(thread (32, 0, 0) of CTA (0, 0, 0))")
    assert (err.line, err.col) == (12, 3)
    assert err.expected == "an offset in [0, 128) of shared memory"


def test_out_of_bounds_local_store_is_a_fault():
    """A 16-byte local array overflows at thread 4's word."""
    ptx = HEADER + """.visible .entry k()
{
.reg .b32 %r<4>;
.reg .b64 %rd<4>;
.local .align 4 .b8 d[16];
mov.u32 %r1, %tid.x;
mul.wide.u32 %rd1, %r1, 4;
mov.u64 %rd2, d;
add.s64 %rd2, %rd2, %rd1;
st.local.u32 [%rd2], %r1;
ret;
}
"""
    err = fault(ptx, 1, 8, [])
    assert err.message.startswith("out-of-bounds local access of 4 bytes at offset 0x10 "
                                  "(thread (4, 0, 0) of CTA (0, 0, 0))")
    assert (err.line, err.col) == (13, 1)
    assert err.expected == "an offset in [0, 16) of local memory"


def test_barrier_in_a_branch_some_threads_skip_deadlocks_with_a_message():
    """Threads below 16 wait at barrier 0 while the rest wait at barrier 1: a deadlock."""
    ptx = HEADER + """.visible .entry k()
{
.reg .b32 %r<4>;
.reg .pred %p<2>;
mov.u32 %r1, %tid.x;
setp.lt.u32 %p1, %r1, 16;
@!%p1 bra SKIP;
bar.sync 0;
SKIP:
bar.sync 1;
ret;
}
"""
    err = fault(ptx, 1, 64, [])
    assert err.message.startswith("barrier deadlock in CTA (0, 0, 0): of 64 live threads")
    assert "16 at 'bar.sync 0' (line 11)" in err.message
    assert "48 at 'bar.sync 1' (line 13)" in err.message
    assert (err.file, err.line, err.col) == ("f.ptx", 11, 1)
    assert err.expected == "every live thread of the CTA to reach the same barrier"


def test_infinite_loop_stops_at_the_step_limit():
    """`max_steps` turns a loop that never ends into a fault at the looping instruction."""
    ptx = HEADER + ".visible .entry k()\n{\nLOOP:\nbra LOOP;\n}\n"
    err = fault(ptx, 1, 32, [], max_steps=100)
    assert "step limit of 100 reached (infinite loop?)" in err.message
    assert (err.line, err.col) == (7, 1)


# -- nothing half-runs ---------------------------------------------------------------------
def test_fault_leaves_the_callers_arrays_unchanged():
    """CTA 0 writes its 48 elements before CTA 1 faults; the caller still sees the old data."""
    out = np.full(60, 7, np.uint32)
    before = out.copy()
    fault(STORE_TID, 2, 48, [out], max_batch_threads=64)
    np.testing.assert_array_equal(out, before)


def test_launch_error_after_earlier_arguments_leaves_arrays_unchanged():
    """An argument error is found before any thread runs or any array is touched."""
    out = np.full(32, 3, np.uint32)
    launch_error(SCALARS, 1, 32, [out, 1, 2.5, 1.0])
    assert (out == 3).all()
