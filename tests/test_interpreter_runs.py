"""Runs of skipped instructions (timing mode) stepped at once by the functional loop
(`isa.interpreter.run_machine`): every instruction is counted and observed with the same
threads, in the same order, as step by step, also where other threads wait inside a run."""

import numpy as np

import isa
import isa.interpreter as interpreter
from isa.dataflow import data_only_pcs

PTX = """
.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 y)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .f32 %f<6>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [y];
    mov.u32 %r1, %tid.x;
    mov.f32 %f1, 0f3F800000;
    setp.lt.u32 %p1, %r1, 40;
    @%p1 bra SHORT;
    add.f32 %f2, %f1, %f1;
    mul.f32 %f3, %f2, %f1;
SHORT:
    add.f32 %f4, %f1, %f1;
    mul.f32 %f5, %f4, %f4;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r1;
    ret;
}
"""


class _Log:
    """Observer keeping (pc, threads, warps) per observed instruction."""

    def __init__(self) -> None:
        self.rows = []

    def __call__(self, m, ins, exec_lanes, n_warps) -> None:
        self.rows.append((ins.pc, tuple(m.lane_ids(exec_lanes).tolist()), n_warps))


def _run(monkeypatch, runs: bool):
    if not runs:
        monkeypatch.setattr(interpreter, "_run_ends", lambda instrs, skip: None)
    log = _Log()
    y = np.zeros(96, np.uint32)
    res = isa.run_kernel(PTX, "k", grid=1, block=96, args=[y], observer=log,
                         timing_only=True)
    monkeypatch.undo()
    return log.rows, res.warp_instructions, res.thread_instructions, y


def test_skipped_instructions_are_data_only_here():
    skip = data_only_pcs(isa.compile_kernel(PTX, "k"))
    assert int(skip.sum()) >= 4                 # the four float ops


def test_runs_observe_what_single_steps_observe(monkeypatch):
    """Same observations (pc, threads, warps) in the same order, same counts."""
    stepped = _run(monkeypatch, runs=False)
    batched = _run(monkeypatch, runs=True)
    assert batched[0] == stepped[0]
    assert batched[1:3] == stepped[1:3]
    np.testing.assert_array_equal(batched[3], stepped[3])
    pcs = [row[0] for row in stepped[0]]
    assert len(set(pcs)) == len(pcs)            # each pc stepped once: groups met at SHORT


def test_run_stops_where_other_threads_wait(monkeypatch):
    """The run from the first add stops at SHORT, where the other threads wait."""
    program = isa.compile_kernel(PTX, "k")
    skip = data_only_pcs(program)
    ends = interpreter._run_ends(program.instrs, [bool(s) for s in skip])
    texts = [ins.loc.text.strip() for ins in program.instrs]
    first = next(i for i, t in enumerate(texts) if t.startswith("add.f32 %f2"))
    short = next(i for i, t in enumerate(texts) if t.startswith("add.f32 %f4"))
    assert ends[first] > short                  # the skipped ops run on past SHORT ...
    rows = _run(monkeypatch, runs=True)[0]
    at_short = [row for row in rows if row[0] == short]
    assert len(at_short) == 1 and len(at_short[0][1]) == 96   # ... but all meet there
