"""Lookup-table exp: ex2 latency and throughput from units.lut_exp when enabled, else stock."""

from __future__ import annotations

import numpy as np
import pytest

import models
import simulator
from workloads.codesign.exp_kernels import ex2_loop_kernel


def _lut(latency_cycles: int, results_per_clk_per_sm: float, enabled: bool = True):
    return models.load_preset("h800_sxm", {
        "units.lut_exp.enabled": enabled, "units.lut_exp.latency_cycles": latency_cycles,
        "units.lut_exp.results_per_clk_per_sm": results_per_clk_per_sm})


def _run(config, unroll, chains, threads, iters, ptx=None):
    out = np.zeros(threads * chains, np.float32)
    res = simulator.simulate_kernel(ptx or ex2_loop_kernel(unroll, chains), "ex2_loop", 1,
                                    threads, [out, iters], config=config)
    return res, out


def _latency(config) -> float:
    """Cycles per step of one dependent ex2 chain (difference of 48 and 16 steps, 4 loops)."""
    short, _ = _run(config, 16, 1, 32, 4)
    long, _ = _run(config, 48, 1, 32, 4)
    return (long.cycles - short.cycles) / (32 * 4)


def _throughput(config) -> float:
    """ex2 results per clock per SM: 16 warps of 8 chains, 8 steps a loop, 24 - 8 loops."""
    few, _ = _run(config, 8, 8, 512, 8)
    many, _ = _run(config, 8, 8, 512, 24)
    return 8 * 8 * 512 * 16 / (many.cycles - few.cycles)


@pytest.mark.parametrize(("latency", "rate"), [(3, 64), (3, 32), (12, 64)])
def test_dependent_ex2_chain_takes_max_of_latency_and_interval(latency, rate):
    """One chain issues an ex2 every max(latency, 128 / rate) cycles (12 -> 3 is the what-if)."""
    interval = 32 * 4 / rate
    assert _latency(_lut(latency, rate)) == max(latency, interval)


@pytest.mark.parametrize("rate", [32, 64])
def test_ex2_throughput_is_the_lut_rate(rate):
    """With enough warps the SM completes `results_per_clk_per_sm` ex2 per clock (within 1 %)."""
    assert _throughput(_lut(3, rate)) == pytest.approx(rate, rel=0.01)


def test_lut_off_reproduces_the_stock_sfu_exactly():
    """Disabled, any LUT parameters leave cycles and every stat equal to the baseline."""
    base = models.load_preset("h800_sxm")
    off = _lut(1, 128, enabled=False)
    a, out_a = _run(base, 8, 8, 256, 4)
    b, out_b = _run(off, 8, 8, 256, 4)
    assert a.cycles == b.cycles
    assert a.stats.value.tolist() == b.stats.value.tolist()
    assert _latency(off) == base.units.sfu.latency_cycles
    assert _throughput(off) == pytest.approx(base.units.sfu.results_per_clk_per_sm, rel=0.01)
    assert np.array_equal(out_a, out_b)


def test_lut_changes_only_ex2_not_results_or_other_sfu_ops():
    """rcp keeps the SFU timing with the LUT on; ex2 results are the same with and without."""
    base, lut = models.load_preset("h800_sxm"), _lut(3, 64)
    rcp = ex2_loop_kernel(8, 8).replace("ex2.approx.ftz.f32", "rcp.approx.ftz.f32")
    assert _run(base, 8, 8, 256, 4, rcp)[0].cycles == _run(lut, 8, 8, 256, 4, rcp)[0].cycles
    stock, out_stock = _run(base, 8, 8, 256, 4)
    fast, out_fast = _run(lut, 8, 8, 256, 4)
    assert fast.cycles < stock.cycles
    assert np.array_equal(out_stock, out_fast)
