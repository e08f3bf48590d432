"""Replay sessions copied mid-run (`simulator.runner.replay_session`): a copy stepped to the end
gives the original's figures bit for bit, and the sampled fidelity's growth to k_max waves
from a snapshot of the k-wave replay gives the cold k_max-wave replay's result."""

import pytest

import isa
import models
import simulator.runner.replay_session as replay_session
from isa.launch import dim3
from models.cta_dispatch import estimate_registers, occupancy
from models.sm import DEFAULT_QUANTUM_CYCLES
from simulator.runner.simulate import KernelLaunch, Replay
from workloads.ops import build_op, simulate_op

# (kind, sizes, overrides): sampled ops that grow from their first 4 waves to 7. RoPE's first
# wave marginals differ by 4.4 % (2499 and 2389 cycles, tolerance 1 %). The residual-add's
# are flat (4 SMs, 20 CTAs a wave: 3031, 3038, then 3021-3053 cycles): it grew only while
# the 64 B/clk SM port made them ramp (2976, 3006, 3027, 3055: 1.01 %, at the tolerance's
# edge), not at 90 B/clk; a tolerance of 0 makes any first replay unsteady (|m3 - m2| < 0
# never holds), so it grows whatever the model's wave times.
GROWING = (
    ("residual-add", {"rows": 256, "cols": 2048},
     {"sm.count": 4, "fidelity.wave_sampling_steady_tolerance_fraction": 0.0}),
    ("rope", {"rows": 512, "cols": 2048, "rot_dim": 64},
     {"sm.count": 8, "fidelity.wave_sampling_steady_tolerance_fraction": 0.0}),
)


def _launch_and_replay(config):
    op = build_op("residual-add", config, rows=256, cols=2048)
    spec = op.launches[0]
    program = isa.compile_kernel(spec.ptx, spec.entry)
    launch = KernelLaunch(program, spec.entry, dim3(spec.grid, "grid"),
                          dim3(spec.block, "block"), list(spec.args), spec.shared_bytes,
                          spec.timing_only)
    occ = occupancy(config, launch.block_threads, estimate_registers(program),
                    program.shared_bytes + spec.shared_bytes)
    return launch, Replay(config, None, None, DEFAULT_QUANTUM_CYCLES, occ, "run", spec.entry)


def _figures(run):
    return run.cycles, run.cta_done_cycles, run.sheet.to_frame("r", "k"), run.timeline


def _same(a, b):
    assert a[0] == b[0] and a[1] == b[1]
    assert a[2].equals(b[2])
    assert a[3].equals(b[3])


def test_session_copy_steps_to_the_same_figures_as_the_original():
    """Copy at a boundary mid-run, run both to the end: same cycles, stats and timeline."""
    config = models.load_preset("h800_sxm", {"sm.count": 4})
    launch, replay = _launch_and_replay(config)
    recorder = launch.recorder()
    functional = launch.run(recorder)
    kernel = replay.image(launch, recorder)
    session = replay.session(kernel)
    total = session.dispatcher.n_ctas
    snapshot = session.step_to_end(snapshot_from=total // 2)
    assert snapshot is not None and snapshot.dispatcher.next_cta < total
    snapshot.resume(kernel, total)
    snapshot.step_to_end()
    counts = functional.warp_instructions, functional.thread_instructions
    _same(_figures(replay.finish(snapshot, *counts)), _figures(replay.finish(session, *counts)))


@pytest.mark.parametrize("kind, sizes, overrides", GROWING)
def test_growth_from_snapshot_equals_cold_replay(kind, sizes, overrides, monkeypatch):
    """Sampled op timed with and without the snapshot: same result, stats and timelines."""
    config = models.load_preset("h800_sxm", overrides)
    resumed = []
    resume = replay_session.ReplaySession.resume

    def spy(self, kernel, n_ctas):
        resumed.append(n_ctas)
        return resume(self, kernel, n_ctas)

    monkeypatch.setattr(replay_session.ReplaySession, "resume", spy)
    runs = {}
    for flag in (True, False):
        grown = config.with_overrides({"fidelity.snapshot_growth": flag})
        stats, timelines = [], []
        result = simulate_op(build_op(kind, grown, **sizes), grown, "sampled", stats=stats,
                             timelines=timelines)
        runs[flag] = result, stats, timelines
    assert resumed, "the op did not grow from a snapshot"
    (fast, fast_stats, fast_lines), (cold, cold_stats, cold_lines) = runs[True], runs[False]
    assert fast["time_us"] == cold["time_us"] and fast["cycles"] == cold["cycles"]
    assert fast["hbm_bytes"] == cold["hbm_bytes"]
    for (_, _, a), (_, _, b) in zip(fast_stats, cold_stats, strict=True):
        assert a.equals(b)
    for (_, _, a), (_, _, b) in zip(fast_lines, cold_lines, strict=True):
        assert a.equals(b)
