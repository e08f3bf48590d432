"""Warp traces: per-warp order, global warp ids, coalesced sectors and shared bank conflicts."""

import numpy as np
import pytest

import isa
from simulator.runner.trace import KIND_CONST, KIND_LOAD, KIND_SHARED, KIND_STORE, TraceRecorder
from workloads.kernels.case import load_ptx

HEADER = ".version 8.0\n.target sm_90\n.address_size 64\n"

SHARED_STRIDE = HEADER + """.visible .entry strided(.param .u32 stride, .param .u64 out)
{
  .reg .b32 %r<8>;
  .reg .b64 %rd<4>;
  .shared .align 4 .b8 tile[16384];
  ld.param.u32 %r1, [stride];
  mov.u32 %r2, %tid.x;
  mul.lo.u32 %r3, %r2, %r1;
  shl.b32 %r4, %r3, 2;
  mov.u32 %r5, tile;
  add.u32 %r6, %r5, %r4;
  st.shared.u32 [%r6], %r2;
  ld.shared.u32 %r7, [%r6];
  ld.param.u64 %rd1, [out];
  cvta.to.global.u64 %rd2, %rd1;
  mul.wide.u32 %rd3, %r2, 4;
  add.s64 %rd3, %rd2, %rd3;
  st.global.u32 [%rd3], %r7;
  ret;
}
"""


def record(ptx, entry, grid, block, args, shared_bytes=0):
    program = isa.compile_kernel(ptx, entry)
    grid3 = tuple(grid) + (1,) * (3 - len(grid))
    threads = int(np.prod(block))
    rec = TraceRecorder(grid3, threads, program.local_bytes)
    isa.run_kernel(program, entry, grid, block, args, shared_bytes, observer=rec)
    return program, rec.finish()


@pytest.mark.parametrize(("stride", "degree"), [(0, 1), (1, 1), (2, 2), (3, 1), (8, 8),
                                                (32, 32)])
def test_shared_bank_conflict_degree_is_max_distinct_words_per_bank(stride, degree):
    """Lane i touching word i*stride conflicts gcd(stride, 32)-way (stride 0 = broadcast)."""
    out = np.zeros(32, np.uint32)
    _, trace = record(SHARED_STRIDE, "strided", (1,), (32,), [stride, out])
    shared = trace.kind == KIND_SHARED
    assert shared.sum() == 2
    assert np.all(trace.detail[shared] == degree)
    assert np.array_equal(out, np.arange(32) if stride else np.full(32, out[0]))


def test_coalesced_float_loads_touch_four_sectors_per_warp():
    """A warp reading 32 consecutive floats touches 4 distinct 32-byte sectors."""
    n = 4096
    x, y = np.ones(n, np.float32), np.ones(n, np.float32)
    _, trace = record(load_ptx("saxpy.cu"), "saxpy", (n // 128,), (128,),
                      [n, np.float32(2.0), x, y])
    loads = trace.kind == KIND_LOAD
    assert np.all(trace.detail[loads] == 4)
    assert np.all(trace.detail[trace.kind == KIND_STORE] == 4)
    assert np.all(trace.detail[trace.kind == KIND_CONST] == 0)
    w = trace.events_of(5)
    first_load = np.flatnonzero(trace.kind[w] == KIND_LOAD)[0] + w.start
    sectors = trace.sectors[trace.sector_start[first_load]:][:4]
    assert np.array_equal(np.diff(sectors), [1, 1, 1])


def test_every_warp_has_its_events_in_program_order_with_global_ids():
    """In a 2-D grid each global warp id appears, starting at the entry pc, pcs ascending here."""
    n = 3000
    x, y = np.ones(n, np.float32), np.ones(n, np.float32)
    program, trace = record(load_ptx("saxpy.cu"), "saxpy", (12, 2), (128,),
                            [n, np.float32(2.0), x, y])
    assert trace.n_warps == 12 * 2 * 4
    counts = np.diff(trace.warp_offsets)
    assert np.all(counts > 0)
    for w in range(trace.n_warps):
        pcs = trace.pc[trace.events_of(w)]
        assert pcs[0] == program.entry_pc
        assert np.all(np.diff(pcs) > 0)


def test_partial_warps_report_their_active_lanes():
    """A 48-thread block has a full warp and a warp of 16 active lanes."""
    n = 48
    x, y = np.ones(n, np.float32), np.ones(n, np.float32)
    _, trace = record(load_ptx("saxpy.cu"), "saxpy", (1,), (48,), [n, np.float32(2.0), x, y])
    assert set(trace.active[trace.events_of(0)].tolist()) == {32}
    assert set(trace.active[trace.events_of(1)].tolist()) == {16}
