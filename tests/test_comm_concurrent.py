"""Concurrent compute + communication on one chip (`simulator.simulate_concurrent`): a GEMM on
the compute SMs beside an all-to-all dispatch on the reserved SMs shares L2 and HBM."""

from dataclasses import replace

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
