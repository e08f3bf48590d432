"""The compiled SM loop (`models.sm_core`, state in `models.sm_state`): room that grows on
demand, policies by code."""

from __future__ import annotations

import numpy as np
import pytest

import models
import simulator
from models import sm_state
from models.warp_scheduler import policy_code
from tests.test_tile_timing import CHAIN, RATES, WAIT_KERNEL

H100 = models.load_preset("h100_sxm")


def _groups_kernel(groups: int, keep: int) -> str:
    regs = ", ".join(f"%f{i}" for i in range(128))
    op = (f"    wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {{{regs}}}, %rd1, %rd1, "
          "%p1, 1, 1, 0, 0;\n    wgmma.commit_group.sync.aligned;")
    kernel = WAIT_KERNEL.format(wgmmas="\n".join([op] * groups), keep=keep,
                                chain="\n".join(["    add.u32 %r1, %r1, 1;"] * CHAIN))
    return kernel.replace("    wgmma.commit_group.sync.aligned;\n    wgmma.wait_group",
                          "    wgmma.wait_group", 1)


def test_more_open_wgmma_groups_than_the_first_room_holds():
    """40 open groups (over `GROUPS_START`): the work after wait_group 0 starts when the
    last group completes, after wait_group 39 when the first does (it then overlaps)."""
    groups = 40
    assert groups > sm_state.GROUPS_START
    out = np.zeros(4, np.float32)
    held, early = (simulator.simulate_kernel(_groups_kernel(groups, keep), "wg", 1, 128, [out],
                                             H100, timing_only=True).cycles
                   for keep in (0, groups - 1))
    interval = 16 * 256 * 16 // (RATES["bf16"] // 4)
    chain = CHAIN * H100.units.int32.latency_cycles
    assert held >= groups * interval + chain
    assert held - early >= 0.9 * chain


def test_unknown_policy_names_the_known_ones():
    assert policy_code("gto") == sm_state.POLICY_GTO
    assert policy_code("lrr") == sm_state.POLICY_LRR
    with pytest.raises(KeyError, match="gto.*lrr"):
        policy_code("fifo")


def test_phase_table_grows_keeping_its_slots():
    table = sm_state.PhaseTable(2)
    table.table[1, sm_state.H_DONE] = 17
    table.ensure(5)
    assert table.table.shape[0] == 5
    assert table.table[1, sm_state.H_DONE] == 17
    assert (table.table[2:, sm_state.H_DONE] == -1).all()


NAMED_BARRIERS = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry nb(.param .u64 out)
{{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    mov.u32 %r0, %tid.x;
    mov.u32 %r1, 0;
    setp.lt.u32 %p0, %r0, 64;
    @%p0 bra FIRST;
    bar.sync {second_id}, {second_count};   // warps 2, 3
{chain}
    ret;
FIRST:
{chain}
    bar.sync 1, {first_count};              // warps 0, 1 (with 2, 3 when 128)
    ret;
}}
"""


def _named_barrier_cycles(second_id: int, count: int) -> int:
    chain = "\n".join(["    add.u32 %r1, %r1, 1;"] * CHAIN)
    ptx = NAMED_BARRIERS.format(second_id=second_id, second_count=count, first_count=count,
                                chain=chain)
    return simulator.simulate_kernel(ptx, "nb", 1, 128, [np.zeros(4, np.float32)], H100,
                                     timing_only=True).cycles


def test_named_barriers_hold_only_their_warps():
    """bar.sync b, n waits for n / 32 warps at barrier b: warps 2-3 at barrier 2 (64
    threads) go on at once and their chain overlaps that of warps 0-1; at one barrier of
    128 threads they wait for warps 0-1's chain, so theirs runs after it."""
    chain = CHAIN * H100.units.int32.latency_cycles
    apart = _named_barrier_cycles(2, 64)
    joined = _named_barrier_cycles(1, 128)
    assert chain <= apart < 1.5 * chain
    assert joined >= 2 * chain
