"""Loads with the `.cg` / `.cv` cache operators (and `cp.async.cg`) skip the L1: the trace
marks them `KIND_LOAD_CG`, the cached memory neither looks them up in nor fills the L1.
`.L1::no_allocate` loads (DeepEP's `ld.global.nc.L1::no_allocate`) look the L1 up but never
fill it (isa.semantics.cache_policy)."""

import numpy as np
import pytest

import models
from simulator import simulate_kernel

REREAD_PTX = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry reread(.param .u64 src, .param .u64 out)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<6>;
    .reg .pred %p;
    ld.param.u64 %rd1, [src];
    ld.param.u64 %rd2, [out];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd3, %r1, 4;
    add.s64 %rd4, %rd1, %rd3;
    mov.u32 %r2, 0;
    mov.u32 %r3, 0;
LOOP:
    ld.global.OP.u32 %r4, [%rd4];
    add.u32 %r3, %r3, %r4;
    add.u32 %r2, %r2, 1;
    setp.lt.u32 %p, %r2, 8;
    @%p bra LOOP;
    add.s64 %rd5, %rd2, %rd3;
    st.global.u32 [%rd5], %r3;
    ret;
}
"""


def _run(op: str):
    config = models.load_preset("h100_sxm")
    src = np.arange(1024, dtype=np.uint32)
    out = np.zeros(1024, np.uint32)
    res = simulate_kernel(REREAD_PTX.replace("OP", op), "reread", (1, 1, 1), (1024, 1, 1),
                          [src, out], config=config, fidelity="full")
    assert (out == 8 * src).all()
    frame = res.stats
    return res, frame.set_index(["component", "stat"]).value


def test_cached_loads_hit_the_l1_on_the_second_pass():
    _, stats = _run("ca")
    assert stats[("memory.l1.load", "hit_rate")] == pytest.approx(7 / 8)


@pytest.mark.parametrize("op", ["cg", "cv"])
def test_cg_and_cv_loads_go_to_the_l2_every_time(op):
    res, stats = _run(op)
    assert ("memory.l1.load", "hit_rate") not in stats.index
    assert ("memory.l1.load_cg", "sectors") not in stats.index     # never looked up in L1
    assert stats[("memory.l2.load_cg", "sectors")] == 8 * 1024 * 4 // 32
    assert res.cycles > _run("ca")[0].cycles


def test_no_allocate_loads_look_up_the_l1_but_never_fill_it():
    """ld.global.nc.L1::no_allocate rereads: every pass looks the L1 up and misses (nothing
    was allocated), so all 8 passes go to the L2, as .cg does, but as "load" requests."""
    res, stats = _run("nc.L1::no_allocate")
    assert stats[("memory.l1.load", "sectors")] == 8 * 1024 * 4 // 32
    assert stats[("memory.l1.load", "hit_rate")] == 0.0
    assert stats[("memory.l2.load", "sectors")] == 8 * 1024 * 4 // 32
    assert res.cycles > _run("nc")[0].cycles
