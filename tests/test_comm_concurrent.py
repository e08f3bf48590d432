"""Concurrent compute + communication on one chip (`simulator.simulate_concurrent`): a GEMM on
the compute SMs beside an all-to-all dispatch on the reserved SMs shares L2 and HBM."""

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

import models
import simulator
from simulator.runner.concurrent import simulate_concurrent
from workloads.ops import build_op

# A persistent GEMM (one CTA per compute SM) that re-reads its panels, and an L2 cut to
# 4,096,000 B (80 slices x 20 ways x 128 B x 20 sets) so that the short test run already
# shows evictions; at the full 50 MiB the same pair fits and only the slowdown shows.
SMALL_L2 = {"sm.comm_count": 20, "l2.size_bytes": 4096000}


def _l2_miss_sectors(result) -> float:
    s = result.stats
    return float(s[(s.stat == "miss_sectors") & s.component.str.startswith("memory.l2")]
                 .value.sum())


def _alone(launch, config):
    return simulator.simulate_kernel(launch.ptx, launch.entry, launch.grid, launch.block,
                                     list(launch.args), config=config,
                                     shared_bytes=launch.shared_bytes, timing_only=True,
                                     regs_per_thread=launch.regs_per_thread, **launch.options)


def test_single_launch_equals_simulate_kernel_exactly():
    """One launch alone (comm_count 0, nothing beside it) gives simulate_kernel's stats
    (plain CTAs: SimPy and the compiled driver order a cluster's cross-SM wake-ups
    differently, `tests/test_sm_driver.py`)."""
    cfg = models.load_preset("h800_sxm")
    gemm = build_op("gemm", cfg, m=512, n=1024, k=1024, dtype="bf16",
                    rule="last_wave").launches[0]
    ours = simulate_concurrent([gemm], cfg).kernels[gemm.name]
    ref = _alone(gemm, cfg)
    assert ours.cycles == ref.cycles
    pd.testing.assert_frame_equal(ours.stats.reset_index(drop=True),
                                  ref.stats.reset_index(drop=True))


def test_comm_launch_alone_equals_its_op_launch():
    """A dispatch kernel alone on its reserved SMs gives the comm op's own figures."""
    cfg = models.load_preset("h800_sxm")
    plan = build_op("alltoall", cfg, ranks=8, tokens=64, hidden=2048, comm_sms=4)
    launch = plan.launches[0]
    ours = simulate_concurrent([launch], cfg).kernels[launch.name]
    ref = _alone(launch, cfg.with_overrides(launch.overrides))
    assert ours.cycles == ref.cycles
    pd.testing.assert_frame_equal(ours.stats.reset_index(drop=True),
                                  ref.stats.reset_index(drop=True))


@pytest.fixture(scope="module")
def gemm_beside_dispatch():
    cfg = models.load_preset("h800_sxm", SMALL_L2)
    gemm = build_op("gemm", cfg, m=2048, n=2048, k=256, dtype="bf16").launches[0]
    dispatch = build_op("alltoall", cfg, ranks=8, tokens=128, hidden=7168).launches[0]
    alone = simulate_concurrent([gemm], cfg).kernels[gemm.name]
    both = simulate_concurrent([gemm, dispatch], cfg)
    return alone, both, gemm.name, dispatch.name


def test_gemm_beside_dispatch_is_slower(gemm_beside_dispatch):
    """The GEMM takes more cycles while a dispatch shares the L2 and HBM with it."""
    alone, both, gemm, _ = gemm_beside_dispatch
    assert both.kernels[gemm].cycles > alone.cycles


def test_dispatch_chunks_add_l2_misses_to_the_gemm(gemm_beside_dispatch):
    """Chunks landing in L2 evict GEMM lines: the GEMM's own L2 misses rise."""
    alone, both, gemm, _ = gemm_beside_dispatch
    assert _l2_miss_sectors(both.kernels[gemm]) > _l2_miss_sectors(alone)


def test_memory_stats_are_split_by_the_issuing_sms(gemm_beside_dispatch):
    """The GEMM's table has no link counters; the dispatch's has NVLink bytes; the
    makespan is the later of the two."""
    _, both, gemm, dispatch = gemm_beside_dispatch
    g, d = both.kernels[gemm].stats, both.kernels[dispatch].stats
    assert not g.component.str.startswith("link.").any()
    assert d[(d.component == "link.nvlink") & (d.stat == "bytes")].value.sum() > 0
    assert both.cycles == max(k.cycles for k in both.kernels.values())
    assert g[(g.component == "kernel") & (g.stat == "sms_used")].value.iloc[0] == 112


def test_two_launches_on_the_same_sms_are_an_error():
    """Two compute launches, or a name given twice, are refused with what is accepted."""
    cfg = models.load_preset("h800_sxm")
    gemm = build_op("gemm", cfg, m=128, n=128, k=128, dtype="bf16").launches[0]
    with pytest.raises(ValueError, match="at most one launch per role"):
        simulate_concurrent([gemm, replace(gemm, name="other")], cfg)


def test_disagreeing_overrides_are_an_error():
    """Launches that need different sm.comm_count cannot share one chip."""
    cfg = models.load_preset("h800_sxm")
    a = build_op("alltoall", cfg, ranks=8, tokens=64, hidden=2048, comm_sms=4).launches[0]
    b = build_op("alltoall", cfg, ranks=8, tokens=64, hidden=2048, comm_sms=8).launches[0]
    with pytest.raises(ValueError, match="share one config"):
        simulate_concurrent([a, b], cfg)


def test_pair_effect_compares_the_sms_spans_without_the_front_end():
    """`contention.measure_pair` times the SMs' spans: the launch's fixed front end, paid
    once whatever runs beside it, neither dilutes nor adds to the stretch."""
    from simulator.runner.contention import measure_pair

    effects = []
    for front in (0.0, 2.75):
        cfg = models.load_preset("h800_sxm", {**SMALL_L2, "launch.kernel_front_end_us": front})
        gemm = build_op("gemm", cfg, m=512, n=1024, k=1024, dtype="bf16").launches[0]
        dispatch = build_op("alltoall", cfg, ranks=8, tokens=64, hidden=2048).launches[0]
        effects.append(measure_pair(gemm, dispatch, cfg))
    a, b = effects
    assert a.compute_stretch == pytest.approx(b.compute_stretch, rel=1e-12)
    assert a.comm_stretch == pytest.approx(b.comm_stretch, rel=1e-12)
    assert a.compute_alone_us == pytest.approx(b.compute_alone_us, abs=1e-9)


@pytest.fixture(scope="module")
def small_pair():
    cfg = models.load_preset("h800_sxm", SMALL_L2)
    gemm = build_op("gemm", cfg, m=512, n=1024, k=1024, dtype="bf16").launches[0]
    dispatch = build_op("alltoall", cfg, ranks=8, tokens=64, hidden=2048).launches[0]
    return cfg, gemm, dispatch


def test_a_run_stopped_at_the_first_end_reports_progress(small_pair):
    """stop_at="first" ends the run with the shorter launch: it shows progress 1.0 and its
    own end, the other less than 1.0 and the stop; to the end, both reach 1.0."""
    cfg, gemm, dispatch = small_pair
    whole = simulate_concurrent([gemm, dispatch], cfg)
    first = simulate_concurrent([gemm, dispatch], cfg, stop_at="first")
    assert set(whole.progress.values()) == {1.0}
    ends = {name: r.cycles for name, r in whole.kernels.items()}
    shorter = min(ends, key=ends.get)
    longer = max(ends, key=ends.get)
    assert ends[shorter] < ends[longer]
    assert first.progress[shorter] == 1.0
    assert 0.0 < first.progress[longer] < 1.0
    assert first.kernels[shorter].cycles == ends[shorter]
    assert first.cycles < whole.cycles


def test_a_run_stopped_at_a_time_stops_there(small_pair):
    """until_us stops both launches at that time (to within the SMs' quantum), partway."""
    cfg, gemm, dispatch = small_pair
    whole = simulate_concurrent([gemm, dispatch], cfg)
    until = whole.time_us / 4
    part = simulate_concurrent([gemm, dispatch], cfg, until_us=until)
    assert part.time_us == pytest.approx(until, abs=0.01)
    assert all(0.0 < p < 1.0 for p in part.progress.values())
    with pytest.raises(ValueError, match="until_us"):
        simulate_concurrent([gemm], cfg, until_us=0)
    with pytest.raises(ValueError, match="stop_at"):
        simulate_concurrent([gemm], cfg, stop_at="middle")


def test_a_prepared_launch_replays_as_the_launch(small_pair):
    """A launch traced once (`prepare_launch`) and replayed gives the launch's own run; one
    traced under another config is refused."""
    from simulator.runner.concurrent import prepare_launch

    cfg, gemm, _ = small_pair
    prepared = prepare_launch(gemm, 0, cfg)
    a = simulate_concurrent([gemm], cfg).kernels[gemm.name]
    b = simulate_concurrent([prepared], cfg).kernels[gemm.name]
    c = simulate_concurrent([prepared], cfg).kernels[gemm.name]
    assert a.cycles == b.cycles == c.cycles
    pd.testing.assert_frame_equal(a.stats, c.stats)
    with pytest.raises(ValueError, match="another config"):
        simulate_concurrent([prepared], cfg.with_overrides({"l2.size_bytes": 8192000}))


def test_measure_pair_reuses_what_it_measured_and_windows_shorten_it(small_pair):
    """The memo keeps each launch's image and whole run alone (a second pair sharing the
    GEMM traces and times it alone no more: same figures); a window stops the measurement
    there and compares each alone at the same progress."""
    from simulator.runner.contention import measure_pair

    cfg, gemm, dispatch = small_pair
    memo: dict = {}
    first = measure_pair(gemm, dispatch, cfg, memo=memo)
    kept = len(memo)
    again = measure_pair(gemm, dispatch, cfg, memo=memo)
    assert len(memo) == kept
    assert again == first
    assert first == measure_pair(gemm, dispatch, cfg)
    assert first.overlap_us == pytest.approx(min(first.compute_beside_us,
                                                 first.comm_beside_us))
    window = first.overlap_us / 2
    part = measure_pair(gemm, dispatch, cfg, window_us=window)
    assert part.compute_beside_us == pytest.approx(window, abs=0.01)
    assert part.comm_beside_us == pytest.approx(window, abs=0.01)
    assert 0 < part.compute_alone_us <= part.compute_beside_us + 1e-9
    assert part.compute_stretch >= 1.0 and part.comm_stretch >= 1.0


def test_the_compute_launch_serves_its_requests_inside_the_loop_with_the_same_figures(
        small_pair, monkeypatch):
    """Beside a collective, the compute launch's SMs send their requests to the cached memory
    inside the link memory (compiled service), the collective's SMs to the link memory; the
    figures equal those of every SM going through the link memory."""
    import simulator.runner.concurrent as concurrent
    from models.cached_memory import CachedMemory
    from models.link_memory import LinkMemory

    cfg, gemm, dispatch = small_pair
    seen = {}
    chosen = concurrent._memory_of

    def spy(prepared, memory):
        seen[prepared.role] = chosen(prepared, memory)
        return seen[prepared.role]

    monkeypatch.setattr(concurrent, "_memory_of", spy)
    ours = simulate_concurrent([gemm, dispatch], cfg)
    assert isinstance(seen["compute"], CachedMemory)
    assert isinstance(seen["comm"], LinkMemory)
    monkeypatch.setattr(concurrent, "_memory_of", lambda prepared, memory: memory)
    through = simulate_concurrent([gemm, dispatch], cfg)
    for name, result in ours.kernels.items():
        assert result.cycles == through.kernels[name].cycles
        pd.testing.assert_frame_equal(result.stats, through.kernels[name].stats)


def _event_sectors(trace):
    """Every sector event's sectors, in event order (however the trace stores them)."""
    from isa.trace_format import SECTOR_KINDS

    events = np.isin(trace.kind, sorted(SECTOR_KINDS))
    starts, counts = trace.sector_start[events], trace.detail[events].astype(np.int64)
    within = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    return trace.sectors[np.repeat(starts, counts) + within]


def test_a_synthesized_trace_runs_beside_a_collective_as_the_traced_one():
    """`prepare_launch` builds the CTAs after the first ones from their template
    (`fidelity.trace_synthesis`): the pair's run and each launch's figures are those of the
    launch traced CTA by CTA, bit for bit."""
    from simulator.runner.concurrent import prepare_launch
    from simulator.runner.contention import measure_pair

    cfg = models.load_preset("h800_sxm", SMALL_L2)
    add = build_op("residual-add", cfg, rows=2048, cols=1024, inputs=2).launches[0]
    dispatch = build_op("alltoall", cfg, ranks=8, tokens=128, hidden=7168).launches[0]
    traced = cfg.with_overrides({"fidelity.trace_synthesis": False})
    synthesized_image = prepare_launch(add, 0, cfg).image.trace
    traced_image = prepare_launch(add, 0, traced).image.trace
    assert synthesized_image.n_ctas > cfg.fidelity.trace_synthesis_first_ctas
    for name in ("warp_offsets", "pc", "active", "kind", "detail"):
        assert (getattr(synthesized_image, name) == getattr(traced_image, name)).all()
    assert _event_sectors(traced_image).size > 0
    assert (_event_sectors(synthesized_image) == _event_sectors(traced_image)).all()
    ours = simulate_concurrent([add, dispatch], cfg)
    ref = simulate_concurrent([add, dispatch], traced)
    for name in (add.name, dispatch.name):
        assert ours.kernels[name].cycles == ref.kernels[name].cycles
        pd.testing.assert_frame_equal(ours.kernels[name].stats, ref.kernels[name].stats)
    assert measure_pair(add, dispatch, cfg) == measure_pair(add, dispatch, traced)


def test_progress_counts_a_fused_run_as_the_instructions_it_stands_for():
    """Under greedy-then-oldest a run of plain unit ops is one event of the prepared trace;
    the progress count gives every warp the events its trace has without fusion."""
    from simulator.runner.concurrent import prepare_launch

    cfg = models.load_preset("h800_sxm")
    add = build_op("residual-add", cfg, rows=256, cols=7168, inputs=9).launches[0]
    fused = prepare_launch(add, 0, cfg)
    plain = prepare_launch(add, 0, cfg, policy="lrr")
    assert fused.fused_events.size > 0
    assert fused.image.offsets[-1] < plain.image.offsets[-1]
    assert (fused.instructions_before(fused.image.offsets) == plain.image.offsets).all()


def _assert_same_runs(ours, ref) -> None:
    """Concurrent results equal run by run: cycles, time, progress, and per kernel its
    cycles, stats and timeline."""
    for a, b in zip(ours, ref, strict=True):
        assert (a.cycles, a.time_us, a.progress) == (b.cycles, b.time_us, b.progress)
        for name, result in a.kernels.items():
            other = b.kernels[name]
            assert result.cycles == other.cycles
            pd.testing.assert_frame_equal(result.stats, other.stats)
            pd.testing.assert_frame_equal(result.timeline, other.timeline)


def test_the_compiled_driver_steps_a_launch_as_its_simpy_processes(small_pair, monkeypatch):
    """The SMs of a launch on the cached memory, in no clusters, step in a compiled driver
    of their own (`models.sm_driver.SmDriver.share`), alone or beside a collective's driver,
    to the end or to a stop: the same cycles, progress, stats and timeline as their SimPy
    processes, bit for bit, and so the same pair measurements."""
    import simulator.runner.concurrent as concurrent
    from simulator.framework.engine import Clock
    from simulator.runner.contention import measure_pair

    cfg, gemm, dispatch = small_pair
    add = build_op("residual-add", cfg, rows=2048, cols=1024, inputs=2).launches[0]
    plain = build_op("gemm", cfg, m=512, n=1024, k=1024, dtype="bf16",
                     rule="last_wave").launches[0]
    prepared = [concurrent.prepare_launch(launch, 0, cfg) for launch in (plain, add)]
    assert not any(p.clustered for p in prepared)
    assert concurrent.prepare_launch(gemm, 0, cfg).clustered     # SimPy for it (test_sm_driver)
    comm = concurrent.prepare_launch(dispatch, 1, cfg)
    clock = Clock(cfg.chip.clock_ghz)
    compiled = []
    chosen = concurrent._compiled

    def spy(run):
        compiled.append(chosen(run))
        return compiled[-1]

    def runs():
        out = []
        for p in prepared:
            whole = simulate_concurrent([p], cfg)
            out.append(whole)
            for share in (0.1, 0.37, 0.8):      # stops at an SM cycle's edge, as measure_pair's
                stop = clock.cycles_to_ps(int(whole.cycles * share)) / 1e6
                out.append(simulate_concurrent([p], cfg, until_us=stop))
            out.append(simulate_concurrent([p], cfg, until_us=whole.time_us * 0.55))
            out.append(simulate_concurrent([p, comm], cfg))
            out.append(simulate_concurrent([p, comm], cfg, stop_at="first"))
            out.append(simulate_concurrent([p, comm], cfg, until_us=whole.time_us * 0.3))
        window = out[0].time_us / 3
        return out, [measure_pair(gemm, dispatch, cfg), measure_pair(add, dispatch, cfg),
                     measure_pair(gemm, dispatch, cfg, window_us=window),
                     measure_pair(add, dispatch, cfg, window_us=window)]

    monkeypatch.setattr(concurrent, "_compiled", spy)
    ours, our_pairs = runs()
    # the runs above and the residual add's in pairs (20); the collective's runs (14): its
    # SMs serve the link windows inside their loop (`models.link_memory_kernel`)
    assert compiled.count(True) == 2 * 8 + 4 + 14
    monkeypatch.setattr(concurrent, "_compiled", lambda run: False)
    ref, ref_pairs = runs()
    assert our_pairs == ref_pairs
    assert any(0.0 < p < 1.0 for r in ours for p in r.progress.values())
    _assert_same_runs(ours, ref)


@pytest.mark.parametrize("kind", ["dispatch", "combine"])
def test_link_windows_served_in_the_loop_as_in_python(small_pair, monkeypatch, kind):
    """The collective's SMs serve their link windows inside the compiled loop
    (`models.link_memory_kernel`): the same cycles, stats (link bytes, transfers and busy
    time included) and timelines as when every request goes through `LinkMemory.access` in
    Python, alone and beside a compute launch, over NVLink and the network."""
    from models.link_memory import LinkMemory

    cfg, _, _ = small_pair
    add = build_op("residual-add", cfg, rows=1024, cols=1024, inputs=2).launches[0]
    comm = build_op("alltoall", cfg, kind=kind, ranks=16, tokens=64, hidden=2048).launches[0]
    assert {w.link for w in comm.options["memory"].windows} == {"nvlink", "network"}

    def runs():
        return [simulate_concurrent([comm], cfg), simulate_concurrent([add, comm], cfg),
                simulate_concurrent([add, comm], cfg, stop_at="first")]

    ours = runs()
    monkeypatch.setattr(LinkMemory, "inline_state", None)     # every request through Python
    ref = runs()
    _assert_same_runs(ours, ref)
    links = ours[0].kernels[comm.name].stats
    assert links[links.component.str.startswith("link.")].value.sum() > 0


def test_a_window_traces_part_of_the_grid_with_the_same_figures():
    """Under a window, `measure_pair` traces the CTAs the launch reaches alone in a little
    more than the window (its time alone given) and runs again, with twice as many, a run
    that handed them all out: the figures are those of the whole grid traced, whether the
    time given was right or far too long (a grid traced 1 % and grown)."""
    from simulator.runner.concurrent import prepare_launch
    from simulator.runner.contention import WINDOW_TRACE_WAVES, measure_pair, window_share

    cfg = models.load_preset("h800_sxm", SMALL_L2)
    add = build_op("residual-add", cfg, rows=8192, cols=1024, inputs=2).launches[0]
    dispatch = build_op("alltoall", cfg, ranks=8, tokens=128, hidden=7168).launches[0]
    alone = simulate_concurrent([add], cfg)
    alone_us = alone.time_us
    window = alone_us / 4
    whole = measure_pair(add, dispatch, cfg, window_us=window)
    assert whole.compute_beside_us == pytest.approx(window, abs=0.01)
    grown_from = {}
    for hint in (alone_us, 100 * alone_us):
        memo: dict = {}
        part = measure_pair(add, dispatch, cfg, window_us=window, memo=memo,
                            alone_us=(hint, None))
        assert part.compute_alone_us == pytest.approx(whole.compute_alone_us, rel=1e-12)
        assert part.comm_alone_us == pytest.approx(whole.comm_alone_us, rel=1e-12)
        assert (part.compute_beside_us, part.comm_beside_us) == (whole.compute_beside_us,
                                                                 whole.comm_beside_us)
        assert part.compute_l2_miss_beside == whole.compute_l2_miss_beside
        (image,) = [p for key, (_, p) in memo.items() if key[0] == "prepared"
                    and p.name == add.name]
        assert image.partial
        grown_from[hint] = image.ctas
    first = prepare_launch(add, 0, cfg, share=window_share(window, 100 * alone_us),
                           waves=WINDOW_TRACE_WAVES)
    assert first.ctas < grown_from[100 * alone_us] < first.grid_ctas
    ran = simulate_concurrent([first], cfg, until_us=window)
    assert ran.ran_out == (add.name,)
