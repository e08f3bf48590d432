"""A cluster-scope release on an mbarrier arrival (`mbarrier.arrive.release.cluster`) holds
the warp `sm.cluster_release_cycles` (ptxas puts MEMBAR.ALL.GPU before it; measured on an
H100, `workloads/reference/h100/mbarrier_hw.csv`), after the warp's wgmma groups in flight;
a CTA-scope one (the default) does not."""

from __future__ import annotations

import numpy as np
import pytest

import models
import simulator

H100 = models.load_preset("h100_sxm")

KERNEL = """
.version 8.0
.target sm_90a
.address_size 64
.visible .entry rel(.param .u64 out)
{{
    .shared .align 8 .b64 bar;
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    .reg .f32 %f<16>;
    mov.u32 %r1, %tid.x;
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra INIT_DONE;
    mbarrier.init.shared::cta.b64 [bar], 32;
INIT_DONE:
    bar.sync 0;
    mov.u64 %rd1, 0;
{work}
    mbarrier.arrive{sem}.shared::cta.b64 %rd2, [bar];
WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p0, [bar], 0;
    @!%p0 bra WAIT;
    ret;
}}
"""
WGMMA = ("    wgmma.fence.sync.aligned;\n"
         "    wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%f0, %f1, %f2, %f3, %f4, "
         "%f5, %f6, %f7, %f8, %f9, %f10, %f11, %f12, %f13, %f14, %f15}, %rd1, %rd1, 0, 1, 1, "
         "0, 0;\n    wgmma.commit_group.sync.aligned;")


def cycles(sem: str, config, work: str = "") -> int:
    ptx = KERNEL.format(sem=sem, work=work)
    return simulator.simulate_kernel(ptx, "rel", 1, 32, [np.zeros(1, np.float32)], config,
                                     timing_only=True).cycles


def test_cluster_scope_release_adds_its_cycles_and_cta_scope_none():
    """The phase completes `cluster_release_cycles` later with `.release.cluster`; the
    explicit `.release.cta` is the default's timing."""
    plain, cta, cluster = (cycles(s, H100) for s in ("", ".release.cta", ".release.cluster"))
    assert cta == plain
    assert cluster - plain == pytest.approx(H100.sm.cluster_release_cycles, abs=8)


def test_relaxed_and_a_zero_cost_leave_the_arrival_alone():
    """`.relaxed.cluster` orders nothing; with `sm.cluster_release_cycles = 0` (a100_sxm's
    default) a cluster-scope release costs what a CTA-scope one does."""
    free = models.load_preset("h100_sxm", {"sm.cluster_release_cycles": 0})
    assert cycles(".relaxed.cluster", H100) == cycles("", H100)
    assert cycles(".release.cluster", free) == cycles("", free)


def test_cluster_release_waits_for_the_warps_wgmma_in_flight():
    """A wgmma group still running when the warp arrives: the fence starts after it."""
    plain = cycles("", H100, WGMMA)
    cluster = cycles(".release.cluster", H100, WGMMA)
    assert cluster - plain >= H100.sm.cluster_release_cycles
    assert cluster >= H100.units.tensor.wgmma_latency_cycles + H100.sm.cluster_release_cycles
