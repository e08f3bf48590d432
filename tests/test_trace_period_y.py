"""A period in y (`simulator.runner.trace_synthesis`, `CtaTemplate.period_y`): the transposed
FP8 quantization (`quantize_e4m3_128x1_t`, a CTA per 128 x 64 tile, grid x = column tiles,
y = row strips) stores one f32 scale per strip, 4 bytes apart in y, so its scale sectors
move one place every 8 rows of CTAs. The template holds that period, every CTA of the grid
is its traced events and sectors, and the grid is chip-sliced within 3 % of full."""

from __future__ import annotations

import isa
import models
import simulator
import simulator.runner.trace_synthesis as synthesis
from workloads.ops import build_op
from workloads.ops.registry import _simulate_launch, _supported

H800 = models.load_preset("h800_sxm")


def _launch(rows: int, cols: int):
    launch = build_op("quantize", H800, rows=rows, cols=cols, transpose=True).launches[1]
    assert launch.entry == "quantize_e4m3_128x1_t"
    return launch, simulator.runner.simulate.KernelLaunch(
        isa.compile_kernel(launch.ptx, launch.entry), launch.entry, launch.grid,
        launch.block, list(launch.args), launch.shared_bytes, True)


def test_the_scale_stores_give_a_template_of_period_8_in_y():
    """4096 x 512 (grid 8 x 32): from its first 16 CTAs (rows 0 and 1), the rows traced alone
    that the period needs and the check row, a template of period 8 in y whose synthesis is
    every CTA's traced events and sectors."""
    _, kernel = _launch(4096, 512)
    assert kernel.grid == (8, 32, 1)
    part = kernel.recorder()
    counts = kernel.run(part, (0, 16))
    grouped, sectors = part.grouped()
    n_instrs = len(kernel.program.instrs)

    def real(cta):
        probe = kernel.recorder()
        alone = kernel.run(probe, (cta, cta + 1))
        events, found = synthesis.cta_events(probe.finish(), cta, n_instrs, part.fused_runs)
        return events, found, (alone.warp_instructions, alone.thread_instructions)

    tpl = synthesis.template(grouped, sectors, part.warps_per_cta, 16,
                             counts.warp_instructions, counts.thread_instructions,
                             kernel.grid, real)
    assert tpl is not None and tpl.period_y == 8 and tpl.y_offsets.any()
    full = kernel.recorder()
    kernel.run(full)
    trace = full.finish()
    for cta in range(kernel.n_ctas):
        assert synthesis.probe_matches(tpl, cta, synthesis.cta_events(trace, cta, n_instrs,
                                                                      {})), cta


def test_the_transposed_quantization_is_chip_sliced_within_3_percent():
    """16384 x 2048 (grid 32 x 128) on h800_sxm: the chip slice takes it (its probes hold
    with the period), within 3 % of full in cycles, the grid's instructions."""
    launch, _ = _launch(16384, 2048)
    params = _supported()
    sampled = _simulate_launch(launch, H800, "sampled", params)
    full = _simulate_launch(launch, H800, "full", params)
    assert sampled.plan.method == "chip_slice", sampled.plan.method
    assert abs(sampled.cycles / full.cycles - 1) <= 0.03, (sampled.cycles, full.cycles)
    assert sampled.instructions == full.instructions
