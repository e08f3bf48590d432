"""Tracers on the memory blocks count what the blocks did, in declared units."""

from __future__ import annotations

import numpy as np

import models
from models.cache import CacheTracer
from models.hbm import HbmTracer
from models.memory_system import build_memory_system
from simulator.engine import SimEnvironment
from simulator.ports import Port, ReadReq, WriteReq, line_addresses
from simulator.stats import STATS_COLUMNS, StatSheet


def test_cache_and_hbm_tracers_count_hits_misses_and_bytes():
    """Reading one line from SM0 twice and once from SM2: 1 L1 hit, 1 L2 hit, 1 HBM access."""
    env = SimEnvironment()
    mem = build_memory_system(env, models.load_preset("h100_sxm"), sm_count=4)
    sheet = StatSheet()
    caches, hbm = CacheTracer(sheet), HbmTracer(sheet)
    for hooks in mem.hooks():
        (hbm if hooks.owner.startswith("hbm") else caches).attach(hooks)
    inboxes = [Port(env, f"sm{i}.inbox", 8) for i in range(4)]
    for i, inbox in enumerate(inboxes):
        mem.connect_sm(i, inbox)

    def read(sm: int, address: int):
        yield mem.l1s[sm].core_side.put(
            ReadReq(address, 128, line_addresses(address, 128, 128), source=mem.sm_source(sm)))
        yield inboxes[sm].get()

    def script():
        for sm in (0, 0, 2):
            yield env.process(read(sm, 8192))

    env.process(script())
    env.run()
    slice_name = mem.l2.slices[int(mem.address_map.l2_slice(line_addresses(8192, 1, 128))[0])].name
    channel = int(mem.address_map.hbm_channel(line_addresses(8192, 1, 128))[0])
    assert sheet.value("sm0.l1", "read_requests") == 2
    assert sheet.value("sm0.l1", "read_hit_lines") == 1
    assert sheet.value("sm2.l1", "read_miss_sectors") == 4
    assert sheet.value(slice_name, "read_requests") == 2
    assert sheet.value(slice_name, "read_hit_lines") == 1
    assert sheet.value(f"hbm.ch{channel}", "bytes") == 128
    frame = sheet.to_frame("run0", "probe")
    assert tuple(frame.columns) == STATS_COLUMNS
    assert set(frame.loc[frame["stat"] == "bytes", "unit"]) == {"B"}


def test_evicted_dirty_sectors_are_written_back_to_hbm():
    """A written line pushed out of a one-set L2 slice reaches HBM as a write of its sectors."""
    env = SimEnvironment()
    cfg = models.load_preset("h100_sxm", {"l2.size_bytes": 80 * 128 * 20})  # one set per slice
    mem = build_memory_system(env, cfg, sm_count=1)
    sheet = StatSheet()
    tracer = CacheTracer(sheet)
    for cache_slice in mem.l2.slices:
        tracer.attach(cache_slice.hooks)
    inbox = Port(env, "sm0.inbox", 64)
    mem.connect_sm(0, inbox)
    target = mem.l2.slices[0]
    same_slice = [a for a in range(0, 128 * 200_000, 128)
                  if mem.address_map.l2_slice(line_addresses(a, 1, 128))[0] == 0][:21]
    lines = line_addresses(same_slice[0], 1, 128)

    def script():
        yield mem.l1s[0].core_side.put(WriteReq(same_slice[0], 32, lines,
                                                np.array([0b0001], np.uint8), source="sm0"))
        yield inbox.get()
        for address in same_slice[1:]:  # 20 more lines evict the written one
            yield mem.l1s[0].core_side.put(
                ReadReq(address, 128, line_addresses(address, 128, 128), source="sm0"))
            yield inbox.get()

    env.process(script())
    env.run()
    assert sheet.value(target.name, "writeback_sectors") == 1
