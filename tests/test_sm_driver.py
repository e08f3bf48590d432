"""The compiled driver of a replay's SMs (`models.sm_driver`): its queue pops entries in
SimPy's order, and a replay stepped by it gives the figures of the same replay run as SimPy
processes (`StreamingMultiprocessor.process`), bit for bit."""

import numpy as np
import pytest

import models
import simulator.runner.replay_session as replay_session
from models.sm_driver import SmQueue, pop
from workloads.ops import build_op, simulate_op


def test_queue_pops_by_time_then_priority_then_order():
    """Random entries, ties included, come out sorted by (time, priority, push order)."""
    rng = np.random.default_rng(7)
    queue = SmQueue(200)
    pushed = []
    for order in range(200):
        at, priority = int(rng.integers(0, 20)), int(rng.integers(0, 2))
        queue.push(at, priority, order)
        pushed.append((at, priority, order))
    assert queue.entries() == [(a, p, o, o) for a, p, o in sorted(pushed)]
    popped = [int(pop(queue.q, queue.ctl)) for _ in range(len(pushed))]
    assert popped == [o for _, _, o in sorted(pushed)]
    assert len(queue) == 0


@pytest.mark.parametrize("kind, sizes, overrides, fidelity", [
    ("residual-add", {"rows": 256, "cols": 2048}, {"sm.count": 4}, "sampled"),
    # plain CTAs: a cluster's cross-SM wake-ups agree only closely (the test below)
    ("gemm", {"m": 256, "n": 512, "k": 1024, "dtype": "fp8", "scaling": "deepseek",
              "rule": "last_wave"}, {"sm.count": 3}, "full"),
    ("attention", {"batch": 1, "heads": 2, "seqlen_q": 256, "seqlen_k": 256, "headdim": 64,
                   "causal": True, "dtype": "bf16"}, {"sm.count": 2}, "full"),
])
def test_driver_equals_simpy_processes(kind, sizes, overrides, fidelity, monkeypatch):
    """The same op timed through the driver and through SimPy: same time, stats and
    timelines (SimPy runs the SMs' `steps` generators; the driver, their loops in one
    compiled call)."""
    config = models.load_preset("h800_sxm", overrides)
    runs = []
    for driver in (True, False):
        if not driver:
            monkeypatch.setattr(replay_session, "copyable", lambda session: False)
        stats, timelines = [], []
        result = simulate_op(build_op(kind, config, **sizes), config, fidelity, stats=stats,
                             timelines=timelines)
        runs.append((result, stats, timelines))
    (fast, fast_stats, fast_lines), (slow, slow_stats, slow_lines) = runs
    assert fast["time_us"] == slow["time_us"] and fast["cycles"] == slow["cycles"]
    for (_, _, a), (_, _, b) in zip(fast_stats, slow_stats, strict=True):
        assert a.equals(b)
    for (_, _, a), (_, _, b) in zip(fast_lines, slow_lines, strict=True):
        assert a.equals(b)


def test_driver_and_simpy_agree_closely_on_clusters(monkeypatch):
    """A 2-CTA cluster GEMM (multicast boxes, remote empty arrivals, parked SMs): the driver
    re-queues a woken SM in its heap, SimPy interrupts its process, so events that tie
    may run in another order; the times agree within 1.5 % (this one: 15030 cycles both;
    five 4-SM cluster GEMMs: -1.24 ... +0.23 %, the short ones furthest)."""
    config = models.load_preset("h800_sxm", {"sm.count": 4})
    sizes = {"m": 256, "n": 512, "k": 1024, "dtype": "fp8", "scaling": "deepseek",
             "rule": "last_wave_pairs"}
    fast = simulate_op(build_op("gemm", config, **sizes), config, "full")
    monkeypatch.setattr(replay_session, "copyable", lambda session: False)
    slow = simulate_op(build_op("gemm", config, **sizes), config, "full")
    assert "_mc" in build_op("gemm", config, **sizes).launches[0].entry
    assert abs(fast["cycles"] - slow["cycles"]) <= 0.015 * slow["cycles"]


def test_cta_log_batch_and_its_events_agree(monkeypatch):
    """The driver reports its CTA logs as `SM_CTA_LOG` batches (the built-in tracers sum
    them); a listener of the per-CTA positions still gets every CTA's launch, completion and
    issue counts, and an everywhere listener every stall row."""
    from models.sm import SM_CTA_DONE, SM_CTA_LAUNCH, SM_CTA_LOG, SM_ISSUE, SM_STALL

    seen = {"done": 0, "launch": 0, "issued": 0, "stalls": 0, "batches": 0, "batch_done": 0}

    def per_cta(owner, position, data):
        if position == SM_CTA_DONE:
            seen["done"] += 1
        elif position == SM_CTA_LAUNCH:
            seen["launch"] += 1
        elif position == SM_ISSUE:
            seen["issued"] += int(data["issued"].sum())

    def everywhere(owner, position, data):
        assert position != SM_CTA_LOG
        if position == SM_STALL:
            seen["stalls"] += int(data["stalls"].sum())

    def batches(owner, position, data):
        seen["batches"] += 1
        seen["batch_done"] += int((data["log"][:, 0] == 0).sum())

    wire = replay_session.ReplaySession.wire

    def wire_more(session):
        wire(session)
        for sm in session.sms:
            sm.hooks.attach(per_cta, (SM_CTA_DONE, SM_CTA_LAUNCH, SM_ISSUE))
            sm.hooks.attach(everywhere)
            sm.hooks.attach(batches, (SM_CTA_LOG,))

    monkeypatch.setattr(replay_session.ReplaySession, "wire", wire_more)
    config = models.load_preset("h800_sxm", {"sm.count": 4})
    stats = []
    simulate_op(build_op("residual-add", config, rows=256, cols=2048), config, "full",
                stats=stats)
    frame = stats[0][2]
    total = frame[(frame["stat"] == "issued")]["value"].sum()
    stalled = frame[(frame["stat"] == "stall_cycles")]["value"].sum()
    ctas = frame[(frame["component"] == "sm") & (frame["stat"] == "ctas")]["value"].sum()
    assert seen["batches"] > 0 and seen["batch_done"] == seen["done"]
    assert seen["done"] == seen["launch"] == ctas > 0
    assert seen["issued"] == total and seen["stalls"] == stalled > 0
