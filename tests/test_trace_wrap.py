"""A declared wrap in x (`simulate_kernel(cta_wrap_x=Q)`, `fidelity.trace_synthesis_wrap`):
RoPE's cos/sin rows start over every seqlen CTAs along grid x, so its CTAs past the first
period equal the template's synthesis only with the table's places taken at x mod Q. The
synthesized CTAs are the traced ones, the grid is sliced within 3 % of full, and a wrong
declaration or a grid without one still falls back to timing every CTA."""

from __future__ import annotations

import dataclasses

import numpy as np

import isa
import models
import simulator
import simulator.runner.trace_synthesis as synthesis
from workloads.ops import build_op
from workloads.ops.registry import _simulate_launch, _supported

H800 = models.load_preset("h800_sxm")


def _kernel(rows: int, seqlen: int):
    (launch,) = build_op("rope", H800, rows=rows, cols=8256, rot_dim=64,
                         seqlen=seqlen).launches
    return launch, simulator.runner.simulate.KernelLaunch(
        isa.compile_kernel(launch.ptx, launch.entry), launch.entry, launch.grid,
        launch.block, list(launch.args), launch.shared_bytes, True)


def _template(kernel, traced: int, wrap_x: int):
    part = kernel.recorder()
    counts = kernel.run(part, (0, traced))
    grouped, sectors = part.grouped()

    def real(cta):
        probe = kernel.recorder()
        alone = kernel.run(probe, (cta, cta + 1))
        events, found = synthesis.cta_events(probe.finish(), cta,
                                             len(kernel.program.instrs), part.fused_runs)
        return events, found, (alone.warp_instructions, alone.thread_instructions)

    return synthesis.template(grouped, sectors, part.warps_per_cta, traced,
                              counts.warp_instructions, counts.thread_instructions,
                              kernel.grid, real, wrap_x)


def test_wrapped_template_gives_every_ctas_traced_sectors():
    """RoPE over 96 rows at 32 positions (grid 96 x 5, the last column chunk short): from
    the first 16 CTAs and CTA x = 32 traced alone, the table's places wrap and every CTA of
    the grid, the last row's included, is its traced events and sectors; without the wrap
    (or with a wrong one) a CTA past the first period is not."""
    launch, kernel = _kernel(96, 32)
    assert launch.options == {"cta_wrap_x": 32} and kernel.grid == (96, 5, 1)
    tpl = _template(kernel, 16, 32)
    assert tpl is not None and tpl.wrapped is not None and tpl.tail is not None
    assert 0 < tpl.wrapped.sum() < tpl.wrapped.size
    full = kernel.recorder()
    kernel.run(full)
    trace = full.finish()
    n_instrs = len(kernel.program.instrs)
    for cta in range(kernel.n_ctas):
        assert synthesis.probe_matches(tpl, cta, synthesis.cta_events(trace, cta, n_instrs,
                                                                      {})), cta
    past = synthesis.cta_events(trace, 40, n_instrs, {})       # x = 40, row 0
    plain = _template(kernel, 16, 0)
    assert plain is not None and plain.wrapped is None
    assert not synthesis.probe_matches(plain, 40, past)
    wrong = _template(kernel, 16, 24)
    assert wrong is None or not synthesis.probe_matches(wrong, 40, past)


def test_rope_with_a_shorter_table_is_row_sliced_within_3_percent():
    """RoPE 2048 x 8256 at 1024 positions on h800_sxm (8.6 waves): its middle CTA is past
    the table's first period, so without the wrap it would be timed in full; with it the
    row slice takes it (the first 256 of every 1024 CTAs of each row), +0.8 % against full
    (3 % the sampled-vs-full goal), the grid's instructions. A wrong declaration (a wrap
    of 1000) fails the checks and times every CTA, the full run's cycles, as does the key
    `fidelity.trace_synthesis_wrap` off."""
    launch, _ = _kernel(2048, 1024)
    params = _supported()
    full = _simulate_launch(launch, H800, "full", params)
    sliced = _simulate_launch(launch, H800, "sampled", params)
    assert sliced.plan.method == "row_slice" and sliced.fidelity == "sampled"
    assert abs(sliced.cycles / full.cycles - 1) <= 0.03, (sliced.cycles, full.cycles)
    assert sliced.instructions == full.instructions
    wrong = dataclasses.replace(launch, options={"cta_wrap_x": 1000})
    fallback = _simulate_launch(wrong, H800, "sampled", params)
    assert fallback.plan.method in ("full", "full+synthesized_ctas")
    assert fallback.cycles == full.cycles
    off = _simulate_launch(launch, H800.with_overrides({"fidelity.trace_synthesis_wrap": False}),
                           "sampled", params)
    assert off.plan.method in ("full", "full+synthesized_ctas")
    assert np.isclose(off.kernel_time_us, full.kernel_time_us)
