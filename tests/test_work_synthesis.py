"""Work synthesis (`simulator.runner.work_synthesis`): a persistent GEMM's (or grouped GEMM's) CTAs
made from a few traced ones are the trace the functional run gives (events, sectors, phase
structure), so the sampled result is the same; a wrong `CtaWork` fails a check and the
kernel is traced."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import isa
import models
import simulator.runner.work_synthesis as ws
from isa.launch import dim3
from models.cta_dispatch import occupancy
from simulator.runner.simulate import KernelLaunch, Replay
from simulator.runner.trace import sector_events
from workloads.kernels.templates.gemm import gemm_kernel
from workloads.ops import build_op
from workloads.ops.registry import _simulate_launch, _supported

CONFIG = models.load_preset("h800_sxm", {"sm.count": 32})

# persistent GEMMs on 32 SMs: several rounds, a partial last round, tiles at the N or M
# edge, 2-CTA clusters multicasting A (DeepSeek-scaled FP8) or B (an odd m-block count: a
# pair's tile outside C), grouped MoE GEMMs (32 groups of 125 rows with N at its edge; 16
# groups of uneven rows; the masked layout; ragged K, each group its own k0 and k-tiles)
CASES = [
    pytest.param(dict(m=1024, n=1000, k=256, dtype="bf16", rule="n128"), id="n-edge"),
    pytest.param(dict(m=1000, n=1024, k=256, dtype="bf16", rule="n128"), id="m-edge"),
    pytest.param(dict(m=2048, n=2048, k=512, dtype="fp8", scaling="deepseek",
                      rule="last_wave_pairs"), id="fp8-deepseek-clusters"),
    pytest.param(dict(m=1920, n=1536, k=256, dtype="bf16", rule="last_wave_pairs"),
                 id="clusters-odd-m-blocks"),
    pytest.param(dict(m=128, n=1000, k=512, dtype="fp8", scaling="deepseek", groups=32,
                      m_total=4000), id="grouped-moe-fp8"),
    pytest.param(dict(m=128, n=2048, k=256, dtype="bf16", groups=16, m_total=1900),
                 id="grouped-moe-uneven"),
    pytest.param(dict(m=128, n=1024, k=512, dtype="fp8", scaling="deepseek", groups=32,
                      layout="masked", valid_m=3000), id="grouped-masked"),
    pytest.param(dict(m=128, n=1024, k=1024, dtype="bf16", groups=16, ragged="k",
                      k_total=8960), id="grouped-ragged-k"),
]


def _launch(sizes: dict):
    plan = build_op("gemm", CONFIG, shape_only=True, **sizes)
    (launch,) = plan.launches
    assert "cta_work" in launch.options, "the case must be a persistent plain GEMM"
    return launch


def _kernel_launch(launch, work=None):
    program = isa.compile_kernel(launch.ptx, launch.entry)
    kl = KernelLaunch(program, launch.entry, dim3(launch.grid, "grid"),
                      dim3(launch.block, "block"), list(launch.args), launch.shared_bytes,
                      launch.timing_only, work or launch.options["cta_work"])
    occ = occupancy(CONFIG, kl.block_threads, launch.regs_per_thread,
                    program.shared_bytes + launch.shared_bytes)
    return kl, Replay(CONFIG, None, None, 1000, occ, "run", launch.entry)


def _sectors(trace) -> np.ndarray:
    has = sector_events(trace.kind, trace.detail)
    return np.concatenate([trace.sectors[s:s + n] for s, n in
                           zip(trace.sector_start[has].tolist(), trace.detail[has].tolist(),
                               strict=True)] or [np.zeros(0, np.int64)])


def assert_same_trace(made, real) -> None:
    """Two `WarpTrace`s have the same events (every field, per warp), the same sectors and
    the same phase slots numbered in order of first use."""
    for name in ("warp_offsets", "pc", "active", "kind", "detail"):
        assert np.array_equal(getattr(made, name), getattr(real, name)), name
    assert np.array_equal(_sectors(made), _sectors(real))
    for a, b in zip(ws.canonical_slots(made.phase_slot, made.slot_events),
                    ws.canonical_slots(real.phase_slot, real.slot_events), strict=True):
        assert np.array_equal(a, b)


@pytest.mark.parametrize("sizes", CASES)
def test_synthesized_trace_is_the_traced_one(sizes):
    """Every event field, every event's sectors and the phase slots (numbered in order of
    first use) equal those of tracing every CTA; fewer CTAs than the grid's were traced."""
    launch = _launch(sizes)
    kl, replay = _kernel_launch(launch)
    recorder = replay.recorder(kl)
    traced = []
    real_run = kl.run

    def counted(rec, cta_range=None, ctas=None):
        traced.append(len(ctas))
        return real_run(rec, cta_range, ctas)

    kl = dataclasses.replace(kl)
    object.__setattr__(kl, "run", counted)
    counts = ws.synthesize_trace(kl, recorder)
    assert counts is not None
    assert traced and traced[0] < kl.n_ctas
    made = recorder.finish()
    full_recorder = replay.recorder(kl)
    functional = real_run(full_recorder)
    real = full_recorder.finish()
    assert_same_trace(made, real)
    assert counts[1] == functional.thread_instructions
    assert counts[0] == functional.warp_instructions


@pytest.mark.parametrize("sizes", [CASES[0], CASES[2], CASES[4]])
def test_sampled_result_is_the_traced_one(sizes, monkeypatch):
    """Cycles, time, instructions and every stat of the sampled run are those with
    synthesis off (`fidelity.work_synthesis`)."""
    launch = _launch(sizes)
    made, real = [], ws.synthesize_trace
    monkeypatch.setattr(ws, "synthesize_trace",
                        lambda *a: made.append(real(*a)) or made[-1])
    runs = []
    for on in (True, False):
        config = CONFIG.with_overrides({"fidelity.work_synthesis": on})
        runs.append(_simulate_launch(launch, config, "sampled", _supported()))
    on, off = runs
    assert (on.cycles, on.kernel_time_us, on.instructions) == \
        (off.cycles, off.kernel_time_us, off.instructions)
    assert on.stats.equals(off.stats)
    assert len(made) == 1 and made[0] is not None


def test_listed_ctas_must_be_whole_clusters_in_order():
    """`isa.run_kernel(ctas=...)` refuses CTAs out of order, outside the grid or cutting a
    cluster, saying what it accepts."""
    launch = _launch(dict(CASES[2].values[0]))          # 2-CTA clusters
    kl, _ = _kernel_launch(launch)
    for ctas, words in (([2, 0], "ascending"), ([0, 1, 99], "ascending"),
                        ([0, 1, 2], "whole clusters")):
        with pytest.raises(isa.LaunchError, match=words):
            kl.run(kl.recorder(), ctas=ctas)


def test_wrong_coordinates_are_caught():
    """Coordinates the addresses are not affine in (the CTA index, where the tiles' m-block
    is t % tiles_m) fail the sector check on a probe: nothing is synthesized."""
    launch = _launch(dict(CASES[0].values[0]))
    work = launch.options["cta_work"]
    bad = ws.CtaWork(work.classes, np.arange(work.classes.size)[:, None])
    kl, replay = _kernel_launch(launch, bad)
    assert ws.synthesize_trace(kl, replay.recorder(kl)) is None


def test_cta_work_follows_the_kernel_loop():
    """A plain persistent kernel's CTA c walks tiles c, c + P, ...: its class counts its
    rounds and edge tiles, its coordinates are each tile's (m-block, n-block)."""
    kernel = gemm_kernel(m_tile=128, n_tile=128, k_tile=64, stages=4, dtype="bf16",
                         persistent=True, sm_count=4)
    classes, coords = kernel.cta_work(300, 256, 64)     # 3 x 2 tiles, the last m-block partial
    assert kernel.grid(300, 256)[0] == 4
    assert coords.tolist() == [[0, 0, 1, 1], [1, 0, 2, 1], [2, 0, 0, 0], [0, 1, 0, 0]]
    assert len(set(classes.tolist())) == 4      # (2 rounds, edge 2nd), (2, none), edge, none
    assert classes[0] != classes[1] and classes[2] != classes[3]
    assert gemm_kernel(persistent=False, sm_count=4).cta_work(300, 256, 64) is None


def test_cta_work_of_another_grid_is_refused():
    """A `CtaWork` with a row count other than the grid's CTAs is an error naming both."""
    import simulator

    launch = _launch(dict(CASES[0].values[0]))
    work = launch.options["cta_work"]
    short = ws.CtaWork(work.classes[:-1], work.coords[:-1])
    with pytest.raises(ValueError, match="one row per CTA of the grid"):
        simulator.simulate_kernel(launch.ptx, launch.entry, launch.grid, launch.block,
                                  list(launch.args), CONFIG, launch.shared_bytes,
                                  timing_only=True, fidelity="sampled", cta_work=short)


@pytest.mark.parametrize("rows", [1, 2, 5])
def test_distinct_columns_are_numpys(rows):
    """`distinct_columns` finds the distinct columns `np.unique(axis=1)` finds (in its own
    order), each column's index into them reproduces the matrix, and columns that differ
    only in one row, or by values that wrap the hash, stay apart."""
    rng = np.random.default_rng(rows)
    pool = rng.integers(-2**40, 2**40, size=(rows, 7))
    pool[:, 1] = pool[:, 0]
    pool[-1, 1] += 1                            # differs from column 0 in the last row
    pool[0, 2] = 2**62                          # large entries: the hash wraps
    m = pool[:, rng.integers(0, 7, size=500)]
    columns, place = ws.distinct_columns(m)
    assert np.array_equal(columns[:, place], m)
    expected = np.unique(m, axis=1)
    assert columns.shape == expected.shape
    assert {tuple(c) for c in columns.T.tolist()} == {tuple(c) for c in expected.T.tolist()}


def test_distinct_columns_survive_a_hash_collision():
    """Two columns built to share the hash (delta = (w1, -w0) for row weights w0, w1) are
    still told apart (the exact check falls back to `np.unique`)."""
    w = np.random.default_rng(0).integers(1, 2**62, size=2, dtype=np.int64)
    m = np.array([[0, int(w[1]), 0], [0, -int(w[0]), 0]], np.int64)
    columns, place = ws.distinct_columns(m)
    assert columns.shape == (2, 2)
    assert np.array_equal(columns[:, place], m)
