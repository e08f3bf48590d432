"""Warp collectives and atomics: shfl.sync modes with the c operand, vote, atom/red with
colliding lanes, cp.async zero fill. Each kernel writes one value per thread."""

from __future__ import annotations

import numpy as np
import pytest

import isa

HEADER = ".version 9.0\n.target sm_90\n.address_size 64\n"


def _per_thread_kernel(body: str, regs: str = "") -> str:
    """A kernel whose `body` leaves a per-thread u32 result in %r9 (lane in %r1, tid in %r0)."""
    return HEADER + f""".visible .entry k(.param .u64 out, .param .u64 aux)
{{
  .reg .pred %p<8>;
  .reg .b32 %r<16>;
  .reg .b64 %rd<8>;
  {regs}
  ld.param.u64 %rd1, [out];
  ld.param.u64 %rd5, [aux];
  mov.u32 %r0, %tid.x;
  and.b32 %r1, %r0, 31;
  {body}
  mul.wide.u32 %rd2, %r0, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r9;
  ret;
}}
"""


def _run(body, n=64, aux=None, regs=""):
    out = np.zeros(n, dtype=np.uint32)
    aux = np.zeros(64, dtype=np.uint32) if aux is None else aux
    isa.run_kernel(_per_thread_kernel(body, regs), "k", 1, n, [out, aux])
    return out, aux


def _shfl_reference(mode: str, b: int, c: int) -> np.ndarray:
    """The PTX ISA pseudo-code of shfl.sync, per lane, for source values = lane * 10."""
    out = np.zeros(32, dtype=np.int64)
    seg, cval = (c >> 8) & 0x1F, c & 0x1F
    for lane in range(32):
        max_lane = (lane & seg) | (cval & ~seg)
        min_lane = lane & seg
        if mode == "up":
            j, ok = lane - b, lane - b >= max_lane
        elif mode == "down":
            j, ok = lane + b, lane + b <= max_lane
        elif mode == "bfly":
            j = lane ^ b
            ok = j <= max_lane
        else:
            j = min_lane | (b & ~seg)
            ok = j <= max_lane
        out[lane] = (j if ok else lane) * 10
    return out


@pytest.mark.parametrize(("mode", "b", "c"), [
    ("up", 1, 0), ("up", 3, 0), ("down", 1, 31), ("down", 5, 0x101F), ("bfly", 4, 31),
    ("bfly", 8, 0x181F), ("idx", 3, 31), ("idx", 5, 0x181F), ("down", 2, 0x1C1F)])
def test_shfl_sync_follows_the_ptx_pseudo_code_for_clamp_and_segment_mask(mode, b, c):
    """Each mode with full-warp and sub-warp (width 16, 8, 4) c operands matches the ISA."""
    out, _ = _run(f"mul.lo.u32 %r2, %r1, 10;\n"
                  f"shfl.sync.{mode}.b32 %r9, %r2, {b}, {c}, -1;")
    want = _shfl_reference(mode, b, c)
    assert np.array_equal(out[:32], want) and np.array_equal(out[32:], want)


def test_shfl_sync_predicate_says_whether_the_source_lane_was_in_range():
    """The `|p` output of shfl.sync.down is false where the lane copied its own value."""
    out, _ = _run("shfl.sync.down.b32 %r2|%p1, %r1, 4, 31, -1;\nselp.u32 %r9, 1, 0, %p1;")
    assert np.array_equal(out[:32], (np.arange(32) + 4 <= 31).astype(np.uint32))


def test_vote_ballot_any_all_see_only_the_converged_lanes():
    """Ballot of lane parity is 0xAAAAAAAA; any/all over odd lanes inside a branch."""
    body = """
  and.b32 %r2, %r1, 1;
  setp.eq.u32 %p1, %r2, 1;
  vote.sync.ballot.b32 %r3, %p1, -1;
  mov.u32 %r9, %r3;
  @!%p1 bra DONE;
  setp.gt.u32 %p2, %r1, 20;
  vote.sync.any.pred %p3, %p2, -1431655766;
  vote.sync.all.pred %p4, %p2, -1431655766;
  selp.u32 %r4, 1, 0, %p3;
  selp.u32 %r5, 2, 0, %p4;
  or.b32 %r9, %r4, %r5;
DONE:
"""
    out, _ = _run(body)
    lanes = np.arange(64) & 31
    assert (out[lanes % 2 == 0] == 0xAAAAAAAA).all()
    assert (out[lanes % 2 == 1] == 1).all()   # any(lane > 20) true, all false


@pytest.mark.parametrize(("op", "init", "operand", "expect"), [
    ("add.u32", 5, "1", lambda n: 5 + n),
    ("max.u32", 0, "%r0", lambda n: n - 1),
    ("min.u32", 1000, "%r0", lambda n: 0),
    ("inc.u32", 0, "7", lambda n: n % 8),
    ("or.b32", 0, "%r7", lambda n: (1 << 32) - 1 if n >= 32 else (1 << n) - 1),
])
def test_atomics_on_one_address_apply_every_lane(op, init, operand, expect):
    """All threads of the CTA hit aux[0]: the final value accounts for every lane."""
    aux = np.zeros(64, dtype=np.uint32)
    aux[0] = init
    body = f"""
  and.b32 %r6, %r0, 31;
  mov.u32 %r8, 1;
  shl.b32 %r7, %r8, %r6;
  atom.global.{op} %r9, [%rd5], {operand};
"""
    out, aux = _run(body, n=64, aux=aux)
    assert int(aux[0]) == expect(64)


def test_atom_returns_distinct_old_values_to_colliding_lanes():
    """atom.add of 1 by 64 lanes on one counter hands out each old value 0..63 once."""
    out, aux = _run("atom.global.add.u32 %r9, [%rd5], 1;")
    assert sorted(out.tolist()) == list(range(64)) and aux[0] == 64


def test_atom_cas_succeeds_for_exactly_one_lane():
    """Compare-and-swap 0 -> tid+1: one lane wins, the others see its value."""
    out, aux = _run("add.u32 %r3, %r0, 1;\natom.global.cas.b32 %r9, [%rd5], 0, %r3;")
    assert (out == 0).sum() == 1
    winner = int(np.flatnonzero(out == 0)[0])
    assert aux[0] == winner + 1 and (np.delete(out, winner) == winner + 1).all()


def test_red_on_shared_memory_counts_every_lane():
    """red.shared.add by 64 lanes, then a barrier and a read by every thread."""
    body = """
  mov.u32 %r3, sh;
  setp.eq.u32 %p1, %r0, 0;
  @%p1 st.shared.u32 [%r3], 0;
  bar.sync 0;
  red.shared.add.u32 [%r3], 2;
  bar.sync 0;
  ld.shared.u32 %r9, [%r3];
"""
    out, _ = _run(body, regs=".shared .align 4 .b32 sh;")
    assert (out == 128).all()


def test_cp_async_zero_fills_past_the_source_size():
    """cp.async with src-size 4 of 16 copies 4 bytes and zero-fills the other 12."""
    aux = np.arange(64, dtype=np.uint32) + 100
    body = """
  mov.u32 %r3, buf;
  mul.lo.u32 %r4, %r0, 16;
  add.u32 %r5, %r3, %r4;
  mul.wide.u32 %rd6, %r0, 4;
  add.s64 %rd7, %rd5, %rd6;
  setp.lt.u32 %p1, %r0, 4;
  @%p1 cp.async.cg.shared.global [%r5], [%rd7], 16, 4;
  cp.async.commit_group;
  cp.async.wait_group 0;
  bar.sync 0;
  mul.lo.u32 %r6, %r0, 4;
  add.u32 %r7, %r3, %r6;
  ld.shared.u32 %r9, [%r7];
"""
    out, _ = _run(body, n=16, aux=aux, regs=".shared .align 16 .b8 buf[256];")
    want = np.zeros(16, dtype=np.uint32)
    want[[0, 4, 8, 12]] = [100, 101, 102, 103]
    assert np.array_equal(out, want)
