"""Loop synthesis (`simulator.runner.loop_synthesis`): persistent GEMM units traced with their
k-loops starting S k-tiles late, then expanded, are the trace of the whole loops (events,
sectors, phase slots, instruction counts); a failed check traces the loops whole."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from test_work_synthesis import _kernel_launch, _launch, assert_same_trace

import isa
import simulator.runner.loop_synthesis as ls
import simulator.runner.work_synthesis as ws
from simulator.runner.simulate import KernelLaunch
from workloads.kernels.templates.gemm import gemm_kernel

# K deep enough for a skip: FP8 with DeepSeek scaling in 2-CTA clusters (6 stages of 128
# k: 32 k-tiles, 18 skipped), BF16 at the N edge (64 k-tiles of 64, 7 stages: the first
# k-step's predicate), grouped FP8 MoE, grouped BF16 with each group's own K (ragged)
CASES = [
    pytest.param(dict(m=1024, n=1024, k=4096, dtype="fp8", scaling="deepseek",
                      rule="last_wave_pairs"), id="fp8-deepseek-clusters"),
    pytest.param(dict(m=1024, n=1000, k=4096, dtype="bf16", rule="n128"), id="bf16-n-edge"),
    pytest.param(dict(m=128, n=1000, k=4096, dtype="fp8", scaling="deepseek", groups=8,
                      m_total=1000), id="grouped-fp8"),
    pytest.param(dict(m=128, n=1024, k=4096, dtype="bf16", groups=16, ragged="k",
                      k_total=65536), id="grouped-ragged-k"),
]


def _bound(sizes: dict, ptx_of=None):
    """(`KernelLaunch`, `Replay`) of a GEMM case whose `KLoop` is bound to the launch's
    text (as `simulate_kernel` binds it); `ptx_of` changes that text first."""
    launch = _launch(sizes)
    if ptx_of is not None:
        launch = dataclasses.replace(launch, ptx=ptx_of(launch.ptx))
    work = launch.options["cta_work"]
    work = dataclasses.replace(work, k_loop=work.k_loop.bound(launch.ptx))
    return _kernel_launch(launch, work)


def _count_runs(monkeypatch) -> list:
    """A list that every functional run of a `KernelLaunch` appends (program, CTAs) to."""
    calls, real_run = [], KernelLaunch.run

    def counted(self, rec, cta_range=None, ctas=None):
        calls.append((self.program, None if ctas is None else len(ctas)))
        return real_run(self, rec, cta_range, ctas)

    monkeypatch.setattr(KernelLaunch, "run", counted)
    return calls


def _events_per_cta(trace) -> np.ndarray:
    return np.diff(trace.warp_offsets[::trace.warps_per_cta])


@pytest.mark.parametrize("sizes", CASES)
def test_expanded_trace_is_the_whole_loops_trace(sizes, monkeypatch):
    """Every event field, sector, phase slot (in order of first use) and both instruction
    counts equal tracing every CTA with whole loops; the units ran the short kernel."""
    kl, replay = _bound(sizes)
    loop = kl.work.k_loop
    assert loop is not None and loop.skip > 0 and loop.skip % loop.period == 0
    calls = _count_runs(monkeypatch)
    recorder = replay.recorder(kl)
    counts = ws.synthesize_trace(kl, recorder)
    assert counts is not None
    assert len(calls) == 1 and calls[0][0] is not kl.program and calls[0][1] < kl.n_ctas
    full = replay.recorder(kl)
    functional = kl.run(full)
    assert_same_trace(recorder.finish(), full.finish())
    assert counts == (functional.warp_instructions, functional.thread_instructions)


def test_short_loops_trace_fewer_events():
    """The units' functional run with S k-tiles skipped records fewer events per CTA than
    the same CTAs with whole loops (what the expansion saves)."""
    kl, replay = _bound(dict(CASES[0].values[0]))
    short = dataclasses.replace(kl, program=isa.compile_kernel(kl.work.k_loop.ptx, kl.entry))
    traced = []
    for launch in (short, kl):
        rec = replay.recorder(launch)
        launch.run(rec, ctas=[0, 1])
        traced.append(_events_per_cta(rec.finish())[:2].sum())
    assert traced[0] < 0.8 * traced[1]


def test_the_launch_text_is_the_one_rewritten(monkeypatch):
    """A launch whose text was changed after its builder made it (an instruction inserted
    in the consumers' prologue, as co-design inserts `vpcu.setprec`) is traced short from
    that text: the expanded trace is that launch's whole-loop trace."""
    def inserted(ptx: str) -> str:
        head = "    setmaxnreg.inc.sync.aligned.u32"
        at = ptx.index("\n", ptx.index(head)) + 1
        return ptx[:at] + "    mov.u32 %r23, 0;\n" + ptx[at:]

    kl, replay = _bound(dict(CASES[1].values[0]), inserted)
    assert "mov.u32 %r23, 0;" in kl.work.k_loop.ptx
    calls = _count_runs(monkeypatch)
    recorder = replay.recorder(kl)
    counts = ws.synthesize_trace(kl, recorder)
    assert counts is not None and len(calls) == 1 and calls[0][0] is not kl.program
    full = replay.recorder(kl)
    functional = kl.run(full)
    assert_same_trace(recorder.finish(), full.finish())
    assert counts == (functional.warp_instructions, functional.thread_instructions)


def test_a_failed_expansion_traces_whole_loops(monkeypatch):
    """When the expansion fails a check, the units are traced again with whole loops and
    the synthesized trace is still the real one."""
    kl, replay = _bound(dict(CASES[1].values[0]))
    monkeypatch.setattr(ls, "expand", lambda *a: None)
    calls = _count_runs(monkeypatch)
    recorder = replay.recorder(kl)
    counts = ws.synthesize_trace(kl, recorder)
    assert counts is not None and len(calls) == 2
    assert calls[1][0] is kl.program
    full = replay.recorder(kl)
    functional = kl.run(full)
    assert np.array_equal(recorder.finish().pc, full.finish().pc)
    assert counts == (functional.warp_instructions, functional.thread_instructions)


def test_too_few_traced_iterations_fail_the_check():
    """A loop claimed to skip more than the kernel leaves room for (fewer traced iterations
    than its first `stages` plus `stages` to copy) is not expanded."""
    kl, replay = _bound(dict(CASES[1].values[0]))
    loop = kl.work.k_loop
    greedy = dataclasses.replace(loop, ptx=gemm_kernel_ptx(kl, loop.skip + loop.period),
                                 skip=loop.skip + loop.period)
    work = dataclasses.replace(kl.work, k_loop=greedy)
    assert ws._synthesize(dataclasses.replace(kl, work=work), replay.recorder(kl),
                          replay.config.fidelity) is None


def gemm_kernel_ptx(kl, skip: int) -> str:
    """The launch's kernel text with its k-loops starting at k-tile `skip`."""
    return kl.work.k_loop.ptx.replace(f"mov.u32 %kt, {kl.work.k_loop.skip};",
                                      f"mov.u32 %kt, {skip};").replace(
        f"%pacc, %kt, {kl.work.k_loop.skip};", f"%pacc, %kt, {skip};")


@pytest.mark.parametrize("k, expected", [(1024, None), (4096, 49), (8192, 112)])
def test_skip_keeps_the_loop_head_and_a_period(k, expected):
    """S is the largest multiple of `stages` leaving 2 x stages + 1 k-tiles per tile (7
    stages of 64: 16 k-tiles skip nothing, 64 skip 49, 128 skip 112)."""
    kernel = gemm_kernel(m_tile=128, n_tile=128, k_tile=64, stages=7, dtype="bf16",
                         persistent=True, sm_count=4)
    loop = kernel.k_loop(k)
    assert (loop and loop.skip) == expected
    if loop:
        short = loop.bound(kernel.ptx).ptx
        assert loop.edits == 3 and short.count(f"mov.u32 %kt, {expected};") == 2
        assert short.replace(f"%kt, {expected};", "%kt, 0;") == kernel.ptx
        assert loop.bound(kernel.ptx.replace("mov.u32 %kt, 0;", "mov.u32 %kt, 1;")) is None
    assert gemm_kernel(persistent=False, sm_count=4).k_loop(8192) is None


def test_silent_instructions_follow_the_control_flow():
    """Between two events the silent instructions are the pcs the warp passed without an
    event: after a fall-through or from a taken branch's target, the shorter way."""
    flow = ls.ProgramFlow(first=np.arange(6), end=np.arange(1, 7),
                          target=np.array([-1, -1, 0, -1, 5, -1]), loops=(), entry_pc=0)
    before, after = ls.silent_after(np.array([1, 2, 1, 4, 5]), flow)
    # pc 0 silent before; 2 branches back to 0, 0 silent, then 1; 1 -> 4 passes 2, 3
    # silently (falls through); 4 branches to 5
    assert before == 1 and after.tolist() == [0, 1, 2, 0, 0]
    assert ls.silent_after(np.array([3, 1]), flow) is None
