"""Trace synthesis (`simulator.runner.trace_synthesis`): the waves made from the first one are the
traces the functional run gives, so sampled results are the same bit for bit; kernels
whose CTAs differ, or whose addresses are not affine in the CTA coordinates, are traced."""

from __future__ import annotations

import numpy as np
import pytest

import isa
import models
import simulator
import simulator.runner.trace_synthesis as synthesis
from workloads.ops import build_op
from workloads.ops.registry import _simulate_launch, _supported

CONFIG = models.load_preset("h800_sxm", {"sm.count": 8})

# grids of more than one wave on 8 SMs, 1-D and 2-D (a row per x, column blocks in y)
CASES = [
    pytest.param("rmsnorm", dict(rows=512, cols=7168), id="rmsnorm"),
    pytest.param("residual-add", dict(rows=512, cols=7168, inputs=3), id="residual-add-2d"),
    pytest.param("quantize", dict(rows=1024, cols=2048, block=128, transpose=False),
                 id="quantize-2d"),
    pytest.param("swiglu", dict(rows=512, cols=2048), id="swiglu"),
    pytest.param("rmsnorm", dict(rows=400, cols=1536), id="rmsnorm-few-waves"),
    pytest.param("quantize", dict(rows=2048, cols=512, block=128, transpose=False),
                 id="quantize-period-2"),
    pytest.param("quantize", dict(rows=400, cols=1536, block=128, transpose=False),
                 id="quantize-last-row-differs"),
]


def _run(launch, on: bool):
    config = CONFIG.with_overrides({"fidelity.trace_synthesis": on})
    return _simulate_launch(launch, config, "sampled", _supported())


@pytest.mark.parametrize("kind, sizes", CASES)
def test_synthesized_waves_give_the_traced_result(kind, sizes, monkeypatch):
    """Cycles, time, instructions and every stat of the sampled run are those of the run
    that traces every CTA it simulates, and synthesis took place."""
    (launch,) = build_op(kind, CONFIG, **sizes).launches
    made = []
    real = synthesis.synthesize

    def counted(tpl, first, stop, *args):
        made.append(stop - first)
        return real(tpl, first, stop, *args)

    monkeypatch.setattr(synthesis, "synthesize", counted)
    on = _run(launch, True)
    assert sum(made) > 0
    off = _run(launch, False)
    assert (on.cycles, on.kernel_time_us, on.instructions) == \
        (off.cycles, off.kernel_time_us, off.instructions)
    assert on.stats.equals(off.stats)


def _recorder_trace(program, grid, block, args, stop: int):
    recorder = simulator.runner.simulate.KernelLaunch(program, "k", grid, block, args, 0,
                                               True).recorder()
    isa.run_kernel(program, "k", grid, block, args, observer=recorder, cta_range=(0, stop),
                   timing_only=True)
    return recorder


def _gather_kernel() -> str:
    """CTA c copies row idx[8 c] of `src` (an index array, one 32-byte sector per CTA:
    addresses that need not be affine in c)."""
    return """
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 src, .param .u64 idx, .param .u64 dst)
{
    .reg .b32 %r<8>;
    .reg .b64 %rd<12>;
    .reg .f32 %f<2>;
    ld.param.u64 %rd1, [src];
    ld.param.u64 %rd2, [idx];
    ld.param.u64 %rd3, [dst];
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %tid.x;
    mul.wide.u32 %rd4, %r1, 32;
    add.s64 %rd5, %rd2, %rd4;
    ld.global.u32 %r3, [%rd5];
    mad.lo.u32 %r4, %r3, 128, %r2;
    mul.wide.u32 %rd6, %r4, 4;
    add.s64 %rd7, %rd1, %rd6;
    ld.global.f32 %f1, [%rd7];
    mad.lo.u32 %r5, %r1, 128, %r2;
    mul.wide.u32 %rd8, %r5, 4;
    add.s64 %rd9, %rd3, %rd8;
    st.global.f32 [%rd9], %f1;
    ret;
}
"""


def test_gathered_rows_are_not_synthesized():
    """Addresses read from an index array (a random permutation) are not affine in the
    CTA index: no template."""
    program = isa.compile_kernel(_gather_kernel(), "k")
    n = 64
    idx = np.zeros(n * 8, np.uint32)
    idx[::8] = np.random.default_rng(0).permutation(n)
    args = [np.zeros(n * 128, np.float32), idx, np.zeros(n * 128, np.float32)]
    recorder = _recorder_trace(program, (n, 1, 1), (128, 1, 1), args, 16)
    grouped, sectors = recorder.grouped()
    assert synthesis.template(grouped, sectors, recorder.warps_per_cta, 16, 16 * 15,
                              16 * 15 * 128, (n, 1, 1), lambda c: None) is None


def test_identity_gather_fails_the_probe():
    """An index array that is the identity for the traced CTAs and not after them passes
    the template's checks; the probe of a synthesized CTA catches it."""
    program = isa.compile_kernel(_gather_kernel(), "k")
    n = 64
    idx = np.zeros(n * 8, np.uint32)
    idx[::8] = np.arange(n)
    idx[8 * 32::8] = idx[8 * 32::8][::-1]
    args = [np.zeros(n * 128, np.float32), idx, np.zeros(n * 128, np.float32)]
    launch = simulator.runner.simulate.KernelLaunch(program, "k", (n, 1, 1), (128, 1, 1), args, 0,
                                             True)
    recorder = _recorder_trace(program, (n, 1, 1), (128, 1, 1), args, 16)
    grouped, sectors = recorder.grouped()
    tpl = synthesis.template(grouped, sectors, recorder.warps_per_cta, 16, 16 * 15,
                             16 * 15 * 128, (n, 1, 1), lambda c: None)
    assert tpl is not None

    def real(cta):
        probe = launch.recorder()
        launch.run(probe, (cta, cta + 1))
        return synthesis.cta_events(probe.finish(), cta, len(program.instrs),
                                    recorder.fused_runs)

    assert synthesis.probe_matches(tpl, 20, real(20))
    assert not synthesis.probe_matches(tpl, 40, real(40))


def test_synthesized_ctas_equal_the_traced_ones_event_for_event():
    """The grouped events and sectors of CTAs 16 .. 47 made from CTAs 0 .. 15 of a 2-D
    grid (rows in x, blocks of columns in y) equal those the functional run records."""
    (launch,) = build_op("residual-add", CONFIG, rows=16, cols=7168, inputs=2).launches
    plan_launch = simulator.runner.simulate.KernelLaunch(
        isa.compile_kernel(launch.ptx, launch.entry), launch.entry, launch.grid,
        launch.block, list(launch.args), launch.shared_bytes, True)
    n_ctas = plan_launch.n_ctas
    assert launch.grid[1] > 1 and n_ctas >= 48
    full = plan_launch.recorder()
    plan_launch.run(full, (0, 48))
    part = plan_launch.recorder()
    counts = plan_launch.run(part, (0, 16))
    grouped, sectors = part.grouped()

    def real(cta):
        probe = plan_launch.recorder()
        plan_launch.run(probe, (cta, cta + 1))
        return synthesis.cta_events(probe.finish(), cta, len(plan_launch.program.instrs),
                                    part.fused_runs)

    tpl = synthesis.template(grouped, sectors, part.warps_per_cta, 16,
                             counts.warp_instructions, counts.thread_instructions,
                             plan_launch.grid, real)
    assert tpl is not None and tpl.strides[1].any()
    made, made_sectors = synthesis.synthesize(tpl, 16, 48, n_ctas * part.warps_per_cta,
                                              part.sector_count)
    part.append_grouped(made, made_sectors)
    a, b = part.finish(), full.finish()
    for name in ("warp_offsets", "pc", "active", "kind", "detail"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    for cta in range(48):        # sectors per event (the arrays are laid out differently)
        assert np.array_equal(synthesis.cta_events(a, cta, 0, {})[1],
                              synthesis.cta_events(b, cta, 0, {})[1]), cta


def test_ctas_that_share_sectors_take_a_period():
    """Quantizing 512-column rows writes 16 bytes of scales per CTA, so two CTAs share a
    sector: the template repeats every 2 CTAs in x."""
    (launch,) = build_op("quantize", CONFIG, rows=256, cols=512, block=128,
                         transpose=False).launches
    kernel = simulator.runner.simulate.KernelLaunch(
        isa.compile_kernel(launch.ptx, launch.entry), launch.entry, launch.grid,
        launch.block, list(launch.args), launch.shared_bytes, True)
    recorder = kernel.recorder()
    counts = kernel.run(recorder, (0, 64))
    grouped, sectors = recorder.grouped()
    tpl = synthesis.template(grouped, sectors, recorder.warps_per_cta, 64,
                             counts.warp_instructions, counts.thread_instructions,
                             kernel.grid, lambda c: None)
    assert tpl is not None and tpl.sectors0.shape[0] == 2


def _tail_case(rows: int):
    """Quantizing 1536 columns: 12 strips of 128 in CTAs of 8, so the grid's second row
    (y = 1) quantizes 4 strips per CTA, the first 8."""
    (launch,) = build_op("quantize", CONFIG, rows=rows, cols=1536, block=128,
                         transpose=False).launches
    kernel = simulator.runner.simulate.KernelLaunch(
        isa.compile_kernel(launch.ptx, launch.entry), launch.entry, launch.grid,
        launch.block, list(launch.args), launch.shared_bytes, True)
    assert kernel.grid[1] == 2
    return kernel


def _real(kernel, fused_runs):
    def real(cta):
        probe = kernel.recorder()
        counts = kernel.run(probe, (cta, cta + 1))
        return (*synthesis.cta_events(probe.finish(), cta, len(kernel.program.instrs),
                                      fused_runs),
                (counts.warp_instructions, counts.thread_instructions))
    return real


def test_last_row_of_other_events_takes_a_tail_template_event_for_event():
    """The grid's last row runs fewer lanes: the template keeps a tail for it, and CTAs
    16 .. end made from the two parts equal the functional run's, with its instruction
    counts."""
    kernel = _tail_case(64)
    n_ctas = kernel.n_ctas
    full = kernel.recorder()
    whole = kernel.run(full, (0, n_ctas))
    part = kernel.recorder()
    counts = kernel.run(part, (0, 16))
    grouped, sectors = part.grouped()
    tpl = synthesis.template(grouped, sectors, part.warps_per_cta, 16,
                             counts.warp_instructions, counts.thread_instructions,
                             kernel.grid, _real(kernel, part.fused_runs))
    assert tpl is not None and tpl.tail is not None and tpl.tail.first_cta == 64
    assert tpl.tail.thread_instructions < tpl.thread_instructions
    ctas = np.arange(16, n_ctas, dtype=np.int64)
    warp, thread, place = counts.warp_instructions, counts.thread_instructions, 16
    for piece_tpl, piece in synthesis.pieces(tpl, ctas):
        made, made_sectors = synthesis.synthesize(
            piece_tpl, place, place + piece.size, n_ctas * part.warps_per_cta,
            part.sector_count)
        part.append_grouped(made, made_sectors)
        warp += piece_tpl.warp_instructions * piece.size
        thread += piece_tpl.thread_instructions * piece.size
        place += piece.size
    assert (warp, thread) == (whole.warp_instructions, whole.thread_instructions)
    a, b = part.finish(), full.finish()
    for name in ("warp_offsets", "pc", "active", "kind", "detail"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    for cta in (0, 63, 64, 100, n_ctas - 1):
        assert np.array_equal(synthesis.cta_events(a, cta, 0, {})[1],
                              synthesis.cta_events(b, cta, 0, {})[1]), cta


def test_tail_template_needs_its_ctas_traced():
    """Without a way to trace the last row's CTAs alone, a grid whose rows differ has no
    template (it is traced in full)."""
    kernel = _tail_case(64)
    part = kernel.recorder()
    counts = kernel.run(part, (0, 16))
    grouped, sectors = part.grouped()
    assert synthesis.template(grouped, sectors, part.warps_per_cta, 16,
                              counts.warp_instructions, counts.thread_instructions,
                              kernel.grid, lambda c: None) is None


def test_grid_whose_last_row_differs_is_not_wave_sampled():
    """16 waves on 8 SMs, the second row of CTAs doing half the work: the first waves
    (all of the first row) do not stand for the grid, so it is timed in full (the wave
    sampler read such a grid 18 % long: 4 strips of work counted as 8)."""
    (launch,) = build_op("quantize", CONFIG, rows=1024, cols=1536, block=128,
                         transpose=False).launches
    sampled = _run(launch, True)
    full = _simulate_launch(launch, CONFIG, "full", _supported())
    assert sampled.waves_simulated >= 8
    assert (sampled.cycles, sampled.instructions) == (full.cycles, full.instructions)
