"""The memory protocol, checked against every memory implementation under random stalls.

Contract (see `models.cache`): each ReadReq/WriteReq put into `core_side` is answered exactly
once, with a response of the matching kind carrying that same request, delivered to the inbox
connected for its source, whatever the timing of the requesters and the consumers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

import models
from models.cache import SingleTarget
from models.ideal_memory import IdealMemory, PerfectCache
from models.l1 import build_l1
from models.memory_system import build_memory_system
from simulator.engine import Clock, SimEnvironment, make_rng
from simulator.ports import Link, Port, ReadReq, ReadRsp, WriteReq, WriteRsp

CLOCK = Clock(1.83)


@dataclass
class Target:
    """What a harness needs: per source, where to put requests and how to get answers back."""

    core_sides: list[Port]
    sources: list[str]
    connect: Callable[[int, Port], None]
    caches: tuple = ()


def _ideal(env: SimEnvironment) -> Target:
    mem = IdealMemory(env, "mem", clock=CLOCK, latency_cycles=100)
    return Target([mem.core_side] * 2, ["cpu0", "cpu1"],
                  lambda i, inbox: mem.connect_upstream(f"cpu{i}", inbox))


def _perfect(env: SimEnvironment) -> Target:
    mem = PerfectCache(env, "l2", clock=CLOCK, latency_cycles=50, bandwidth_bytes_per_clk=32)
    return Target([mem.core_side] * 2, ["cpu0", "cpu1"],
                  lambda i, inbox: mem.connect_upstream(f"cpu{i}", inbox))


def _l1_over_ideal(env: SimEnvironment) -> Target:
    cfg = models.load_preset("h100_sxm")
    l1 = build_l1(env, "sm0.l1", cfg, CLOCK, cfg.sm.max_shared_memory_bytes)  # 28 KB L1
    mem = IdealMemory(env, "mem", clock=CLOCK, latency_cycles=300)
    l1.connect_downstream(SingleTarget(Link(env, "l1_to_mem", mem.core_side, 0, None)))
    mem.connect_upstream(l1.name, l1.mem_side)
    return Target([l1.core_side], ["sm0"], lambda i, inbox: l1.connect_upstream("sm0", inbox),
                  (l1,))


def _hierarchy(overrides: dict) -> Callable[[SimEnvironment], Target]:
    def build(env: SimEnvironment) -> Target:
        cfg = models.load_preset("h100_sxm", {"l2.size_bytes": 80 * 128 * 20 * 2, **overrides})
        mem = build_memory_system(env, cfg, sm_count=2,
                                  shared_carveout_bytes=cfg.sm.max_shared_memory_bytes)
        return Target([l1.core_side for l1 in mem.l1s], [mem.sm_source(i) for i in range(2)],
                      mem.connect_sm, (*mem.l1s, *mem.l2.slices, *mem.l3_slices))
    return build


IMPLEMENTATIONS = {
    "ideal_memory": _ideal,
    "perfect_cache": _perfect,
    "l1_over_ideal": _l1_over_ideal,
    "hierarchy": _hierarchy({}),
    "hierarchy_with_l3": _hierarchy({"l3.enabled": True, "l3.slices": 5,
                                     "l3.size_bytes": 5 * 128 * 16 * 4,
                                     "l3.hit_latency_cycles": 560}),
}
STALLS = [(0.0, 0.0), (0.5, 0.0), (0.0, 0.6), (0.3, 0.8)]  # (requester, consumer) probability


def _request(rng: np.random.Generator, source: str, req_id: int) -> ReadReq | WriteReq:
    ids = np.sort(rng.choice(600, size=int(rng.integers(1, 5)), replace=False))
    lines = ids.astype(np.int64) * 128
    masks = rng.integers(1, 16, size=ids.size).astype(np.uint8)
    lines.flags.writeable = masks.flags.writeable = False
    size = int(np.unpackbits(masks[:, None], axis=1).sum()) * 32
    kind = WriteReq if rng.random() < 0.3 else ReadReq
    return kind(int(lines[0]), size, lines, masks, source=source, req_id=req_id)


def _run(build: Callable[[SimEnvironment], Target], stall: tuple[float, float], seed: int,
         count: int = 120):
    env = SimEnvironment()
    target = build(env)
    rng = make_rng(seed)
    sent: dict[tuple[str, int], object] = {}
    answers: list = []

    def requester(i: int):
        for n in range(count):
            req = _request(rng, target.sources[i], n)
            sent[(req.source, n)] = req
            if rng.random() < stall[0]:
                yield env.timeout(CLOCK.cycles_to_ps(int(rng.integers(1, 200))))
            yield target.core_sides[i].put(req)

    def consumer(inbox: Port):
        while True:
            answers.append((yield inbox.get()))
            if rng.random() < stall[1]:
                yield env.timeout(CLOCK.cycles_to_ps(int(rng.integers(1, 300))))

    for i in range(len(target.sources)):
        inbox = Port(env, f"{target.sources[i]}.inbox", 4)
        target.connect(i, inbox)
        env.process(requester(i))
        env.process(consumer(inbox))
    env.run()
    return target, sent, answers


@pytest.mark.parametrize("stall", STALLS, ids=str)
@pytest.mark.parametrize("name", list(IMPLEMENTATIONS))
def test_every_request_is_answered_once_with_its_own_request(name, stall):
    """Each request gets exactly one response of the right kind, whatever the stalls."""
    target, sent, answers = _run(IMPLEMENTATIONS[name], stall, seed=11)
    answered = [(rsp.req.source, rsp.req.req_id) for rsp in answers]
    assert sorted(answered) == sorted(sent)
    for rsp in answers:
        assert rsp.req is sent[(rsp.req.source, rsp.req.req_id)]
        assert isinstance(rsp, ReadRsp if isinstance(rsp.req, ReadReq) else WriteRsp)
    assert all(cache.outstanding_fetches == 0 for cache in target.caches)


@pytest.mark.parametrize("name", list(IMPLEMENTATIONS))
def test_same_inputs_give_the_same_response_order(name):
    """Two runs with the same seed deliver the same responses in the same order."""
    orders = [[(r.req.source, r.req.req_id) for r in _run(IMPLEMENTATIONS[name], STALLS[3],
                                                          seed=5)[2]] for _ in range(2)]
    assert orders[0] == orders[1]
