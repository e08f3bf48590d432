"""Scoreboard slots (`models.scoreboard_slots`): which registers share a slot, and that
sharing changes no simulated figure."""

import pandas as pd
import pytest

import models
from isa.launch import compile_kernel
from models import scoreboard_slots
from models.units import instruction_timings

HEADER = ".version 8.0\n.target sm_90\n.address_size 64\n"


def kernel(body: str) -> str:
    return HEADER + f""".visible .entry k(.param .u64 out, .param .u32 n)
{{
  .reg .pred %p<4>;
  .reg .f32 %f<20>;
  .reg .b32 %r<20>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [out];
  cvta.to.global.u64 %rd2, %rd1;
  ld.param.u32 %r1, [n];
  mov.u32 %r2, %tid.x;
  mul.wide.u32 %rd3, %r2, 4;
  add.s64 %rd4, %rd2, %rd3;
{body}
  ret;
}}
"""


def slots(ptx: str, compact: bool = True) -> dict[str, int]:
    """Register name -> slot, from the destinations of the program's instructions."""
    program = compile_kernel(ptx, "k")
    old = scoreboard_slots.COMPACT
    scoreboard_slots.COMPACT = compact
    try:
        timings, _ = instruction_timings(program, models.load_preset("h100_sxm"))
    finally:
        scoreboard_slots.COMPACT = old
    out = {}
    for ins, t in zip(program.instrs, timings, strict=True):
        if t.destinations and ins.ops and hasattr(ins.ops[0], "index"):
            name = ins.loc.text.split()[1].rstrip(",")
            out.setdefault(name, t.destinations[0])
    return out


def test_registers_used_one_after_the_other_share_a_slot():
    s = slots(kernel("""
  mov.f32 %f1, 0f3F800000;
  add.f32 %f2, %f1, %f1;
  st.global.f32 [%rd4], %f2;
  mov.f32 %f3, 0f40000000;
  add.f32 %f4, %f3, %f3;
  st.global.f32 [%rd4], %f4;"""))
    assert s["%f3"] == s["%f1"]
    assert s["%f4"] == s["%f2"]
    assert s["%f1"] != s["%f2"]          # %f1 is read by the add that writes %f2


def test_without_compaction_every_register_has_its_own_slot():
    s = slots(kernel("""
  mov.f32 %f1, 0f3F800000;
  st.global.f32 [%rd4], %f1;
  mov.f32 %f3, 0f40000000;
  st.global.f32 [%rd4], %f3;"""), compact=False)
    assert len(set(s.values())) == len(s)


def test_registers_local_to_a_loop_iteration_share_and_those_across_it_keep_apart():
    s = slots(kernel("""
  mov.f32 %f1, 0f00000000;
  mov.f32 %f8, 0f00000000;
  mov.u32 %r3, 0;
LOOP:
  add.f32 %f1, %f1, %f8;
  mov.f32 %f5, 0f3F800000;
  add.f32 %f1, %f1, %f5;
  mov.f32 %f6, 0f40000000;
  add.f32 %f1, %f1, %f6;
  mov.f32 %f8, 0f40400000;
  add.s32 %r3, %r3, 1;
  setp.lt.u32 %p1, %r3, %r1;
  @%p1 bra LOOP;
  st.global.f32 [%rd4], %f1;"""))
    assert s["%f5"] == s["%f6"]          # written and read within one iteration
    # the accumulator, the loop counter and %f8 (read at the top of the next iteration)
    # span the loop: their extents overlap the others'
    assert len({s["%f1"], s["%f5"], s["%f8"], s["%r3"]}) == 4


def test_a_write_that_may_reach_the_exit_unread_keeps_its_slot():
    s = slots(kernel("""
  mov.f32 %f1, 0f3F800000;
  setp.eq.u32 %p1, %r2, 0;
  @%p1 bra DONE;
  st.global.f32 [%rd4], %f1;
DONE:
  mov.f32 %f7, 0f40000000;
  st.global.f32 [%rd4], %f7;"""))
    assert s["%f7"] != s["%f1"]


def test_a_guarded_read_does_not_free_the_slot():
    s = slots(kernel("""
  setp.eq.u32 %p1, %r2, 0;
  mov.f32 %f1, 0f3F800000;
  @%p1 st.global.f32 [%rd4], %f1;
  mov.f32 %f7, 0f40000000;
  st.global.f32 [%rd4], %f7;"""))
    assert s["%f7"] != s["%f1"]


def test_a_read_on_every_path_frees_the_slot():
    s = slots(kernel("""
  mov.f32 %f1, 0f3F800000;
  setp.eq.u32 %p1, %r2, 0;
  @%p1 bra ELSE;
  add.f32 %f2, %f1, %f1;
  bra.uni JOIN;
ELSE:
  mul.f32 %f2, %f1, %f1;
JOIN:
  st.global.f32 [%rd4], %f2;
  mov.f32 %f7, 0f40000000;
  st.global.f32 [%rd4], %f7;"""))
    assert s["%f7"] == s["%f1"]


OPS = [
    ("rmsnorm", dict(rows=64, cols=1024)),
    ("residual-add", dict(rows=64, cols=1024, inputs=3)),
    ("quantize", dict(rows=64, cols=512, block=128, transpose=False)),
    ("softmax", dict(rows=64, cols=1024)),
    ("gemm", dict(m=256, n=256, k=512, dtype="fp8", scaling="deepseek")),
    ("gemm", dict(m=256, n=256, k=256, dtype="bf16")),
    ("attention", dict(batch=1, heads=2, seqlen_q=128, seqlen_k=128, headdim=64,
                       causal=True, dtype="bf16")),
]


@pytest.mark.parametrize("kind, sizes", OPS, ids=[f"{k}-{i}" for i, (k, _) in enumerate(OPS)])
def test_shared_slots_change_no_figure(kind, sizes, monkeypatch):
    from workloads.ops import build_op, simulate_op

    config = models.load_preset("h800_sxm", {"sm.count": 8})
    frames = {}
    for compact in (False, True):
        monkeypatch.setattr(scoreboard_slots, "COMPACT", compact)
        stats: list = []
        res = simulate_op(build_op(kind, config, **sizes), config, "full", stats=stats)
        frames[compact] = (res["time_us"], res["cycles"],
                           pd.concat([s for _, _, s in stats], ignore_index=True))
    assert frames[True][:2] == frames[False][:2]
    pd.testing.assert_frame_equal(frames[True][2], frames[False][2], check_exact=True)
