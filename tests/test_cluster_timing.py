"""Timing of thread-block clusters (`models.sm_driver`'s cross-SM phase wake-ups, groups of
phase slots in `simulator.runner.trace_tiles`): a cluster barrier holds a CTA until its partner on
another SM arrives, a multicast box is read from the L2 once for both CTAs, and launches
the model cannot time yet are refused with a clear error."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import isa
import simulator
from isa.tensor_map import make_tensor_map

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "hopper"
DELAY = (FIXTURES / "cluster_delay.ptx").read_text()
MULTICAST = (FIXTURES / "tma_multicast.ptx").read_text()
DSMEM = (FIXTURES / "cluster_dsmem.ptx").read_text()


@pytest.mark.parametrize("n", [100, 400])
def test_cluster_barrier_holds_a_cta_until_its_partner_arrives(n):
    """Rank 1 waits at the barrier (its SM parks) until rank 0, on another SM, arrives after
    n loop steps, then runs its own n: about twice the kernel without the wait."""
    out = np.zeros(2 * 64, np.uint32)
    waits = simulator.simulate_kernel(DELAY, "cluster_delay", 2, 64, [out, n]).cycles
    free = simulator.simulate_kernel(DELAY.replace("    barrier.cluster.wait;\n", ""),
                                     "cluster_delay", 2, 64, [out, n]).cycles
    assert 1.6 * free < waits < 2.1 * free


def _multicast_run(src, clusters=8):
    a = np.arange(clusters * 16 * 64, dtype=np.uint16).reshape(clusters * 16, 64)
    tm = make_tensor_map(a, (16, 64), swizzle=128, arg=1)
    seen = np.zeros(clusters * 2, np.uint32)
    args = [tm, a, np.zeros(clusters * 2 * 2048, np.uint8), seen, 16, 2048, 0b11]
    r = simulator.simulate_kernel(src, "tma_multicast", clusters * 2, 64, args)
    stats = r.stats.set_index(["component", "stat"])["value"]
    return r, seen, float(stats[("memory.l2.bulk_load", "bytes")])


def test_multicast_box_is_read_once_for_both_ctas():
    """The multicast completes both CTAs' mbarriers (and rank 1's remote arrive rank 0's):
    the timed run finishes with the functional results, reading half the L2 bytes of the
    same kernel with one load per CTA."""
    own = MULTICAST.replace("    setp.ne.u32 %p2, %r5, 0;\n    @%p2 bra WAIT;\n", "").replace(
        ".multicast::cluster [%r2], [%rd3, {%r11, %r10}], [%r3], %rs1;",
        " [%r2], [%rd3, {%r11, %r10}], [%r3];")
    assert own != MULTICAST
    _, seen, multicast_bytes = _multicast_run(MULTICAST)
    np.testing.assert_array_equal(seen, np.tile([1, 0], 8))
    _, _, own_bytes = _multicast_run(own)
    assert multicast_bytes == 8 * 2048 and own_bytes == 2 * multicast_bytes


def test_cluster_timing_is_deterministic():
    a = _multicast_run(MULTICAST)[0]
    b = _multicast_run(MULTICAST)[0]
    assert a.cycles == b.cycles
    out = np.zeros(2 * 64, np.uint32)
    c = [simulator.simulate_kernel(DELAY, "cluster_delay", 2, 64, [out, 50]).cycles
         for _ in range(2)]
    assert c[0] == c[1]


def test_cluster_grids_beyond_one_wave_are_refused():
    """Later waves would need the dispatcher to place whole clusters: a clear error."""
    ctas = 2 * 132 * 32                 # more than 32 CTAs of 128 threads per SM
    with pytest.raises(isa.LaunchError, match="grids of one wave"):
        simulator.simulate_kernel(DSMEM, "dsmem_swap", ctas, 128,
                                  [np.zeros(ctas * 128, np.float32),
                                   np.zeros(ctas * 128, np.float32)])


@pytest.mark.parametrize("memory", ["flat", None])
def test_cluster_barrier_times_alike_on_simpy_processes(memory):
    """Under SimPy processes (the flat memory; the cached one runs the compiled driver) the
    parked SM is woken by its partner too: about twice the kernel without the wait."""
    out = np.zeros(2 * 64, np.uint32)
    waits = simulator.simulate_kernel(DELAY, "cluster_delay", 2, 64, [out, 400],
                                      memory=memory).cycles
    free = simulator.simulate_kernel(DELAY.replace("    barrier.cluster.wait;\n", ""),
                                     "cluster_delay", 2, 64, [out, 400], memory=memory).cycles
    assert 1.6 * free < waits < 2.1 * free


def test_concurrent_launches_time_clusters():
    """`simulate_concurrent` (SimPy processes on the cached memory) times a cluster launch
    beside another kernel."""
    from simulator.runner.concurrent import simulate_concurrent
    from workloads.ops.registry import Launch
    out = np.zeros(2 * 64, np.uint32)
    launch = Launch("delay", DELAY, "cluster_delay", (2, 1, 1), (64, 1, 1), [out, 400])
    alone = simulator.simulate_kernel(DELAY, "cluster_delay", 2, 64, [out, 400]).cycles
    both = simulate_concurrent([launch]).kernels["delay"].cycles
    assert abs(both - alone) <= 0.05 * alone


def _gemm_l2_bytes(multicast, m=64, n=1024, k=512):
    """(cycles, L2 bytes read by TMA) of a timed persistent bf16 GEMM with 64x32 tiles."""
    import ml_dtypes

    from isa.tensor_map import make_tensor_map
    from workloads.kernels.templates import gemm_kernel
    kern = gemm_kernel(m_tile=64, n_tile=32, stages=4, persistent=True, multicast=multicast)
    bf16, cfg = ml_dtypes.bfloat16, kern.config
    args = [make_tensor_map(0, (cfg.a_box_rows, 64), swizzle=128, arg=2, shape=(m, k),
                            dtype=bf16),
            make_tensor_map(0, (cfg.b_box_rows, 64), swizzle=128, arg=3, shape=(n, k),
                            dtype=bf16),
            isa.ShapeOnly((m, k), bf16), isa.ShapeOnly((n, k), bf16),
            isa.ShapeOnly((m, n), bf16), m, n, k]
    r = simulator.simulate_kernel(kern.ptx, kern.entry, kern.grid(m, n), kern.block, args,
                                  shared_bytes=kern.shared_bytes, timing_only=True)
    stats = r.stats.set_index(["component", "stat"])["value"]
    return r.cycles, float(stats[("memory.l2.bulk_load", "bytes")])


def test_cluster_gemm_reads_the_shared_a_box_once_per_pair():
    """The persistent GEMM template in 2-CTA clusters (multicast="a") is timed: each pair
    of tiles reads its A box from the L2 once (32 tiles of 64x512 bf16 A: 2 MiB alone,
    1 MiB in pairs; B 1 MiB either way)."""
    _, alone = _gemm_l2_bytes(None)
    _, pairs = _gemm_l2_bytes("a")
    assert alone == 3 * 2 ** 20 and pairs == 2 * 2 ** 20
