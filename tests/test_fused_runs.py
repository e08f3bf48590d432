"""Runs of plain one-cycle ops traced as one event: fewer events, the same timing bit for bit."""

from __future__ import annotations

import numpy as np
import pytest

import isa
import models
import simulator
import simulator.runner.simulate as simulate_mod
from models.units import fusable_run_ends, instruction_timings
from simulator.runner.trace import TraceRecorder

H800 = models.load_preset("h800_sxm", {"sm.int_pipe_model": "int32_unit"})
"""Integer ops on their own unit, so the FP32 unit's issues are the FFMAs."""
N_FMA = 40


def _kernel(chain_at: int = 10) -> str:
    """A loop: a global load, then N_FMA FFMAs, the one at `chain_at` reading the result of
    the one before it (a dependency inside the run), then integer loop control."""
    body = []
    for i in range(N_FMA):
        src = f"%f{i + 1}" if i == chain_at else "%f1"
        body.append(f"    fma.rn.f32 %f{i + 2}, {src}, %f0, %f{i + 2};")
    fmas = "\n".join(body)
    return f"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p, .param .u32 n)
{{
    .reg .f32 %f<{N_FMA + 4}>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<8>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, 0;
    mov.f32 %f0, 0f3F800000;
LOOP:
    mul.wide.u32 %rd2, %r2, 4;
    add.s64 %rd3, %rd1, %rd2;
    ld.global.f32 %f1, [%rd3];
{fmas}
    add.s32 %r2, %r2, 4096;
    add.s32 %r3, %r3, 1;
    setp.lt.u32 %p1, %r3, %r1;
    @%p1 bra LOOP;
    st.global.f32 [%rd3], %f2;
    ret;
}}
"""


def test_run_ends_cover_plain_one_cycle_ops_of_one_unit():
    """The FFMAs form one run (each pc's end is the run's end); the integer, memory and
    control instructions around them start none."""
    program = isa.compile_kernel(_kernel(), "k")
    timings, _ = instruction_timings(program, H800)
    ends = fusable_run_ends(program, timings)
    fma = [pc for pc, ins in enumerate(program.instrs) if ins.opname == "fma"]
    assert len(fma) == N_FMA and fma == list(range(fma[0], fma[0] + N_FMA))
    assert all(ends[pc] == fma[-1] + 1 for pc in fma)
    others = [pc for pc in range(len(program.instrs)) if pc not in fma]
    assert all(ends[pc] == pc + 1 for pc in others)


def test_recorder_traces_a_run_as_one_event_per_warp():
    """With the run table the trace holds one event per warp and iteration for the FFMAs
    (a pc after the program's), without it one per FFMA."""
    program = isa.compile_kernel(_kernel(), "k")
    timings, _ = instruction_timings(program, H800)
    args = [isa.ShapeOnly((1 << 16,)), 4]
    traces = []
    for fuse_end in (None, fusable_run_ends(program, timings)):
        recorder = TraceRecorder((1, 1, 1), 64, program.local_bytes, fuse_end)
        isa.run_kernel(program, "k", (1, 1, 1), (64, 1, 1), args, observer=recorder,
                       timing_only=True)
        traces.append(recorder.finish())
    plain, fused = traces
    assert fused.fused_runs and not plain.fused_runs
    assert plain.n_events - fused.n_events == 2 * 4 * (N_FMA - 1)
    assert (fused.pc >= len(program.instrs)).sum() == 2 * 4


@pytest.mark.parametrize("warps,quantum", [(1, 64), (8, 64), (16, 8)])
def test_fused_timing_equals_the_instructions_traced_one_by_one(monkeypatch, warps, quantum):
    """Cycles and every stat are those of the unfused trace: a dependency inside the run
    stops its issue (other warps of the scheduler go first), a short SimPy window stops it
    at the window's edge, as greedy-then-oldest does with the FFMAs traced one by one."""
    ptx = _kernel()
    args = [isa.ShapeOnly((1 << 16,)), 6]

    def run():
        res = simulator.simulate_kernel(ptx, "k", (4, 1, 1), (32 * warps, 1, 1), list(args),
                                        H800, timing_only=True, quantum_cycles=quantum)
        return res.cycles, res.stats.sort_values(["component", "stat"]).reset_index(drop=True)

    fused = run()
    monkeypatch.setattr(simulate_mod, "fusable_run_ends", lambda program, timings: None)
    plain = run()
    assert fused[0] == plain[0]
    assert fused[1].equals(plain[1])
    issued = plain[1].set_index(["component", "stat"]).value
    assert issued[("sm.units.fp32", "issued")] == 4 * warps * 6 * N_FMA


def test_no_fusion_under_loose_round_robin():
    """Loose round robin interleaves warps between the FFMAs: the recorder gets no table."""
    program = isa.compile_kernel(_kernel(), "k")
    launch = simulate_mod.KernelLaunch(program, "k", (1, 1, 1), (64, 1, 1),
                                       [isa.ShapeOnly((1 << 16,)), 2], 0, True)
    occ = models.cta_dispatch.occupancy(H800, 64, 32, 0)
    lrr = simulate_mod.Replay(H800, None, "lrr", 64, occ, "run", "k")
    gto = simulate_mod.Replay(H800, None, None, 64, occ, "run", "k")
    assert lrr.recorder(launch).fuse_end is None
    assert isinstance(gto.recorder(launch).fuse_end, np.ndarray)
