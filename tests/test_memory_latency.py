"""Closed-form checks of the memory blocks: unloaded latency = sum of the level latencies,
streams are bandwidth-bound at bytes / bandwidth. Each check prints expected, measured and
the deviation. A cold read through a near slice to a closed HBM bank costs L1 + 2 NoC + L2
slice + HBM channel + activate, plus each level's transfer."""

from __future__ import annotations

import numpy as np
import pytest

import models
from models.hbm import hbm_fixed_latency_ps
from models.ideal_memory import IdealMemory, PerfectCache
from models.l2 import l2_slice_latency_cycles
from models.memory_system import MemorySystem, build_memory_system
from simulator.engine import Clock, SimEnvironment
from simulator.ports import Port, ReadReq, line_addresses, transfer_ps

LINE = 128


def _report(what: str, expected: float, measured: float) -> float:
    deviation = measured / expected - 1
    print(f"{what}: expected {expected:.0f} ps, measured {measured:.0f} ps, "
          f"deviation {deviation:+.2%}")
    return deviation


def _system(overrides: dict | None = None, sm_count: int = 4):
    env = SimEnvironment()
    mem = build_memory_system(env, models.load_preset("h100_sxm", overrides), sm_count=sm_count)
    inboxes = []
    for i in range(sm_count):
        inbox = Port(env, f"sm{i}.inbox", 1024)
        mem.connect_sm(i, inbox)
        inboxes.append(inbox)
    return env, mem, inboxes


def _read_latency(env: SimEnvironment, mem: MemorySystem, inboxes, sm: int, address: int) -> int:
    """Issue one 128-B read from `sm` on an idle system and return its load-to-use time."""
    req = ReadReq(address, LINE, line_addresses(address, LINE, LINE), source=mem.sm_source(sm))
    start = env.now
    mem.l1s[sm].core_side.put(req)
    got = inboxes[sm].get()
    env.run(until=got)
    assert got.value.req is req
    return env.now - start


def _serialisation_ps(mem: MemorySystem, size: int, levels: tuple[str, ...]) -> int:
    cfg, ghz = mem.config, mem.clock.clock_ghz
    gbps = {"l1": cfg.l1.bandwidth_bytes_per_clk * ghz,
            "noc": cfg.noc.port_bandwidth_bytes_per_clk * ghz,
            "l2": cfg.l2.slice_bandwidth_bytes_per_clk * ghz,
            "hbm": cfg.hbm.channel_bandwidth_gbps}
    return sum(transfer_ps(size, gbps[level]) for level in levels)


def _addresses_where(mem: MemorySystem, want, count: int = 1) -> list[int]:
    candidates = np.arange(1, 200_000, dtype=np.int64) * LINE
    return [int(a) for a in candidates[want(candidates)][:count]]


def _slice_partition(mem: MemorySystem, addresses: np.ndarray) -> np.ndarray:
    slices = mem.address_map.l2_slice(addresses)
    return slices * mem.config.l2.partitions // mem.config.l2.slices


def test_ideal_memory_answers_after_exactly_its_latency():
    """An unloaded ideal memory of 100 cycles answers 100 cycles after the request."""
    env, clock = SimEnvironment(), Clock(1.83)
    mem = IdealMemory(env, "mem", clock=clock, latency_cycles=100)
    inbox = Port(env, "inbox", 4)
    mem.connect_upstream("cpu", inbox)
    mem.core_side.put(ReadReq(0, LINE, line_addresses(0, LINE, LINE), source="cpu"))
    env.run(until=inbox.get())
    assert env.now == clock.cycles_to_ps(100)


def test_perfect_cache_stream_takes_latency_plus_bytes_over_bandwidth():
    """200 back-to-back 128-B reads at 64 B/clk finish at latency + 200*128 B / bandwidth."""
    env, clock = SimEnvironment(), Clock(1.83)
    cache = PerfectCache(env, "l2", clock=clock, latency_cycles=200, bandwidth_bytes_per_clk=64)
    inbox = Port(env, "inbox", 1000)
    cache.connect_upstream("cpu", inbox)

    def requester():
        for n in range(200):
            yield cache.core_side.put(ReadReq(n * LINE, LINE, line_addresses(n * LINE, LINE, LINE),
                                              source="cpu", req_id=n))

    env.process(requester())
    env.run()
    expected = clock.cycles_to_ps(200) + transfer_ps(200 * LINE, 64 * 1.83)
    assert len(inbox) == 200
    assert _report("perfect cache stream", expected, env.now) == 0


def test_l1_hit_costs_the_l1_latency():
    """A second read of a line from the same SM takes l1.hit_latency_cycles (+ its transfer)."""
    env, mem, inboxes = _system()
    _read_latency(env, mem, inboxes, 0, 4096)
    measured = _read_latency(env, mem, inboxes, 0, 4096)
    expected = mem.clock.cycles_to_ps(33) + _serialisation_ps(mem, LINE, ("l1",))
    assert _report("L1 hit", expected, measured) == 0


def test_unloaded_hbm_read_is_the_sum_of_level_latencies():
    """A cold near-slice read to a closed bank costs the sum of the level latencies."""
    env, mem, inboxes = _system()
    cfg, clock = mem.config, mem.clock
    (address,) = _addresses_where(mem, lambda a: _slice_partition(mem, a) == 0)
    measured = _read_latency(env, mem, inboxes, 0, address)
    expected = (clock.cycles_to_ps(cfg.l1.hit_latency_cycles)
                + 2 * clock.cycles_to_ps(cfg.noc.latency_cycles)
                + clock.cycles_to_ps(l2_slice_latency_cycles(cfg))
                + hbm_fixed_latency_ps(cfg, clock) + round(cfg.hbm.row_activate_ns * 1000)
                + _serialisation_ps(mem, LINE, ("l1", "noc", "l2", "hbm")))
    assert _report("cold HBM read, near slice", expected, measured) == 0
    cited = clock.cycles_to_ps(cfg.hbm.latency_cycles)
    assert abs(_report("against the cited HBM latency", cited, measured)) < 0.25


@pytest.mark.parametrize(("sm", "cited_key"), [(2, "near_hit_latency_cycles"),
                                                (1, "far_hit_latency_cycles")])
def test_l2_hit_matches_the_cited_latency(sm, cited_key):
    """An L2 hit from a near SM costs the near figure, from a far SM the far figure."""
    env, mem, inboxes = _system()
    (address,) = _addresses_where(mem, lambda a: _slice_partition(mem, a) == 0)
    _read_latency(env, mem, inboxes, 0, address)  # brings the line into L2
    measured = _read_latency(env, mem, inboxes, sm, address)
    cycles = getattr(mem.config.l2, cited_key)
    expected = (mem.clock.cycles_to_ps(cycles)
                + _serialisation_ps(mem, LINE, ("l1", "noc", "l2")))
    assert abs(measured - expected) <= 3  # per-level rounding to whole ps
    _report(f"L2 {cited_key}", expected, measured)


def test_l2_far_partition_adds_latency():
    """The same L2 hit costs (far - near) cycles more from an SM in the other partition."""
    env, mem, inboxes = _system()
    (address,) = _addresses_where(mem, lambda a: _slice_partition(mem, a) == 1)
    _read_latency(env, mem, inboxes, 0, address)
    near = _read_latency(env, mem, inboxes, 1, address)
    far = _read_latency(env, mem, inboxes, 2, address)
    penalty = mem.config.l2.far_hit_latency_cycles - mem.config.l2.near_hit_latency_cycles
    assert abs((far - near) - mem.clock.cycles_to_ps(penalty)) <= 2


def test_hbm_row_hit_saves_activate_and_row_conflict_adds_precharge():
    """After opening a row: same row costs tRCD less; another row of that bank tRP more."""
    env, mem, inboxes = _system()
    amap = mem.address_map

    def same_bank(a):
        bank, _ = amap.hbm_bank_row(a)
        return (_slice_partition(mem, a) == 0) & (amap.hbm_channel(a) == 3) & (bank == 2)

    candidates = _addresses_where(mem, same_bank, 200)
    rows = amap.hbm_bank_row(np.array(candidates))[1]
    first = candidates[0]
    same_row = next(a for a, r in zip(candidates[1:], rows[1:], strict=True) if r == rows[0])
    other_row = next(a for a, r in zip(candidates[1:], rows[1:], strict=True) if r != rows[0])
    opened = _read_latency(env, mem, inboxes, 0, first)
    hit = _read_latency(env, mem, inboxes, 0, same_row)
    conflict = _read_latency(env, mem, inboxes, 0, other_row)
    hbm = mem.config.hbm
    assert opened - hit == round(hbm.row_activate_ns * 1000)
    assert conflict - opened == round(hbm.row_precharge_ns * 1000)


def test_hbm_stream_is_bandwidth_bound():
    """8 SMs streaming 1 MiB of distinct lines through 4 HBM channels take bytes / bandwidth."""
    env, mem, inboxes = _system({"hbm.stacks": 1, "hbm.channels_per_stack": 4}, sm_count=8)
    total_bytes, request_bytes = 1 << 20, 4 * LINE
    per_sm = total_bytes // request_bytes // 8

    def stream(sm: int):
        for n in range(per_sm):
            address = (n * 8 + sm) * request_bytes
            yield mem.l1s[sm].core_side.put(
                ReadReq(address, request_bytes, line_addresses(address, request_bytes, LINE),
                        source=mem.sm_source(sm), req_id=n))

    for sm in range(8):
        env.process(stream(sm))
    env.run()
    assert sum(len(inbox) for inbox in inboxes) == per_sm * 8
    expected = total_bytes / (mem.config.hbm.peak_bandwidth_gbps * 1e9) * 1e12
    deviation = _report("HBM-bound stream", expected, env.now)
    assert 0 <= deviation < 0.10
