"""Atomics to one address serialize at the L2 (`l2.same_address_atomic_ns`).

The trace keeps, per atomic warp instruction, the most of its lanes that update one address
(`simulator.runner.trace_lanes.lane_depth`); the home slice performs them one after another,
after the
line's earlier atomics from any SM (`models.cached_memory_kernel._atomic_unit`).
"""

import numpy as np
import pytest

import models
from models.cached_memory import CachedMemory
from simulator import simulate_kernel
from simulator.runner.trace_lanes import lane_depth

SUM_PTX = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry add_all(.param .u64 out, .param .u32 spread)
{
    .reg .b32 %r<6>;
    .reg .b64 %rd<4>;
    .reg .f32 %f1;
    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [spread];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %ntid.x;
    mad.lo.u32 %r5, %r3, %r4, %r2;
    mul.lo.u32 %r5, %r5, %r1;          // spread 0: every thread on element 0
    mul.wide.u32 %rd2, %r5, 4;
    add.s64 %rd3, %rd1, %rd2;
    mov.f32 %f1, 0f3F800000;
    atom.global.add.f32 %f1, [%rd3], %f1;
    ret;
}
"""


def _run(ctas: int, spread: int, atomic_ns: float | None = None):
    config = models.load_preset("h100_sxm", {"launch.kernel_front_end_us": 0.0})  # the span
    if atomic_ns is not None:
        config = config.with_overrides({"l2.same_address_atomic_ns": atomic_ns})
    out = np.zeros(max(ctas * 256 * spread, 1), np.float32)
    res = simulate_kernel(SUM_PTX, "add_all", (ctas, 1, 1), (256, 1, 1),
                          [out, np.uint32(spread)], config=config, fidelity="full")
    return res, out


def test_lane_depth_counts_lanes_per_address_per_warp():
    addr = np.array([8, 8, 8, 16, 4, 5, 6, 7, 7])
    group = np.array([0, 0, 0, 0, 1, 1, 1, 1, 1])
    assert lane_depth(addr, group, 3).tolist() == [3, 2, 0]


def test_same_address_adds_take_the_measured_rate_per_lane():
    """Every thread of 64 CTAs x 256 adds to one float: 16384 lane operations, each held
    1.755 ns (h100_sxm) at the home slice; the sum is still exact."""
    res, out = _run(64, 0)
    assert out[0] == 64 * 256
    per_op_ns = res.kernel_time_us * 1e3 / (64 * 256)
    assert 1.755 <= per_op_ns <= 1.755 * 1.1, per_op_ns


def test_serialized_time_grows_with_the_lane_operations():
    """Twice the threads on one address: about twice the time."""
    small, _ = _run(32, 0)
    large, _ = _run(64, 0)
    assert 1.9 <= large.kernel_time_us / small.kernel_time_us <= 2.05


def test_distinct_addresses_are_not_serialized():
    """Each thread on its own element: one operation per warp request, far faster."""
    same, _ = _run(64, 0)
    distinct, out = _run(64, 1)
    assert out.sum() == 64 * 256
    assert distinct.kernel_time_us < same.kernel_time_us / 20


def test_zero_rate_times_atomics_as_plain_accesses():
    off, _ = _run(64, 0, atomic_ns=0.0)
    on, _ = _run(64, 0)
    assert off.kernel_time_us < on.kernel_time_us / 20


def test_atomics_of_all_sms_on_one_line_queue_in_the_table():
    """Direct calls: ops on one line from two SMs (one partition, `i % partitions`) queue
    one after another; a line in another table entry does not wait."""
    config = models.load_preset("h100_sxm")
    line_a, line_b = np.array([1000], np.int64), np.array([1000 + 4 * 1001], np.int64)
    at = 5_000_000

    def memory():
        mem = CachedMemory(config, config.sm.count)
        for sector in (line_a, line_b):             # both lines in the L2 first
            mem.access(0, "load", sector, 0)
        return mem

    mem = memory()
    first = mem.access(0, "atomic", line_a, at, 32)
    second = mem.access(2, "atomic", line_a, at, 32)
    other = mem.access(2, "atomic", line_b, at, 32)
    assert second - first == pytest.approx(32 * 1755, abs=2)
    alone = memory().access(2, "atomic", line_b, at, 32)
    assert abs(other - alone) < 1000             # SM 2's port only, not line a's queue
