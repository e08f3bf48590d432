"""SM timing against closed forms: latency chains, issue throughput, occupancy, policies.

Kernels are small hand-written PTX so the expected cycle counts follow from the preset:
differences between two sizes cancel the fixed prologue/epilogue cost.
"""

import numpy as np
import pytest

import models
from models.cta_dispatch import estimate_registers, occupancy
from simulator.runner.simulate import simulate_kernel

HEADER = ".version 8.0\n.target sm_90\n.address_size 64\n"


def fma_kernel(n_fma: int, chains: int = 1) -> str:
    """Each thread runs `chains` interleaved dependent chains of n_fma/chains FMAs."""
    regs = "\n".join(f"  mov.f32 %f{10 + c}, %f1;" for c in range(chains))
    body = "\n".join(f"  fma.rn.f32 %f{10 + k % chains}, %f{10 + k % chains}, %f2, %f2;"
                     for k in range(n_fma))
    total = "\n".join(f"  add.f32 %f10, %f10, %f{10 + c};" for c in range(1, chains))
    return HEADER + f""".visible .entry chain(.param .u64 out)
{{
  .reg .f32 %f<{10 + chains}>;
  .reg .b32 %r<4>;
  .reg .b64 %rd<6>;
  ld.param.u64 %rd1, [out];
  cvta.to.global.u64 %rd2, %rd1;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mad.lo.s32 %r1, %r2, %r3, %r1;
  mov.f32 %f1, 0f00000000;
  mov.f32 %f2, 0f3F800000;
{regs}
{body}
{total}
  mul.wide.u32 %rd3, %r1, 4;
  add.s64 %rd4, %rd2, %rd3;
  st.global.f32 [%rd4], %f10;
  ret;
}}
"""


def run_chain(n_fma, grid=1, block=32, chains=1, config=None, shared_bytes=0, **kw):
    out = np.zeros(grid * block, np.float32)
    res = simulate_kernel(fma_kernel(n_fma, chains), "chain", grid, block, [out],
                          config=config, shared_bytes=shared_bytes, **kw)
    return res, out


def one_sm(**extra):
    return models.load_preset("h100_sxm", {"sm.count": 1, **extra})


def kernel_stat(res, name):
    frame = res.stats
    return float(frame[(frame.component == "kernel") & (frame.stat == name)].value.iloc[0])


def test_dependent_fma_chain_takes_n_times_fp32_latency():
    """One warp, N dependent FMAs: each waits for the previous result (N x latency cycles)."""
    cfg = one_sm()
    short, out = run_chain(64, config=cfg)
    long, _ = run_chain(192, config=cfg)
    assert np.all(out == 64.0)
    expected = 128 * cfg.units.fp32.latency_cycles
    assert abs((long.cycles - short.cycles) - expected) <= 2


def test_independent_fmas_from_many_warps_are_issue_bound_at_results_per_clock():
    """64 warps of independent FMAs run at fp32.results_per_clk_per_sm lanes per cycle."""
    cfg = one_sm()
    rate_warps_per_cycle = cfg.units.fp32.results_per_clk_per_sm / cfg.sm.warp_size_threads
    warps = 64
    short, _ = run_chain(64, grid=2, block=1024, config=cfg, regs_per_thread=32)
    long, out = run_chain(192, grid=2, block=1024, config=cfg, regs_per_thread=32)
    assert np.all(out == 192.0)
    expected = 128 * warps / rate_warps_per_cycle
    assert abs((long.cycles - short.cycles) - expected) <= 0.02 * expected


def test_cta_needing_over_half_the_shared_memory_runs_alone_and_time_doubles():
    """Two CTAs that fit together overlap; with > half the shared memory each runs alone."""
    cfg = one_sm()
    big = cfg.sm.max_shared_memory_bytes // 2 + 4096
    together, _ = run_chain(1024, grid=2, config=cfg, shared_bytes=16384)
    alone, _ = run_chain(1024, grid=2, config=cfg, shared_bytes=big)
    assert kernel_stat(together, "ctas_per_sm") >= 2
    assert kernel_stat(alone, "ctas_per_sm") == 1
    assert 1.7 <= alone.cycles / together.cycles <= 2.05


def test_occupancy_limits_follow_registers_shared_memory_and_warps():
    """Each per-SM limit caps CTAs per SM as the occupancy calculator computes it."""
    cfg = models.load_preset("h100_sxm")
    assert occupancy(cfg, 1024, 32, 0).ctas_per_sm == 2          # 64 warps / 32 per CTA
    assert occupancy(cfg, 256, 128, 0).limiter == "registers"     # 65536 / (256 * 128) = 2
    assert occupancy(cfg, 256, 128, 0).ctas_per_sm == 2
    assert occupancy(cfg, 64, 16, 100 * 1024).ctas_per_sm == 2    # 228 KiB / 101 KiB
    assert occupancy(cfg, 32, 16, 0).ctas_per_sm == cfg.sm.max_ctas_per_sm


def test_register_estimate_is_below_the_virtual_register_count():
    """Live-range register estimate stays positive and under PTX's virtual register count."""
    import isa
    program = isa.compile_kernel(fma_kernel(64, chains=4), "chain")
    assert 1 <= estimate_registers(program) <= program.regs_per_thread


@pytest.mark.parametrize("policy", ["gto", "lrr"])
def test_both_scheduler_policies_run_and_give_identical_outputs(policy):
    """gto and lrr both time the kernel; the outputs equal those of the other policy's run."""
    cfg = one_sm()
    res, out = run_chain(32, grid=2, block=256, chains=2, config=cfg, policy=policy)
    assert res.cycles > 0
    assert np.all(out == 32.0)


def test_gto_and_lrr_differ_only_in_timing():
    """Policies change the issue order, never what the kernel computes."""
    cfg = one_sm()
    a, out_a = run_chain(48, grid=3, block=512, chains=3, config=cfg, policy="gto")
    b, out_b = run_chain(48, grid=3, block=512, chains=3, config=cfg, policy="lrr")
    assert np.array_equal(out_a, out_b)
    assert a.instructions == b.instructions


def test_unknown_policy_is_rejected_with_the_known_names():
    """A policy name not in the registry raises KeyError listing gto and lrr."""
    with pytest.raises(KeyError, match="gto"):
        run_chain(4, config=one_sm(), policy="fifo")
