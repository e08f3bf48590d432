"""Closed-form checks of the cached memory: unloaded latencies equal the cited load-to-use
totals, reuse hits the right level, streams run at HBM bandwidth, dirty lines are written
back, results are deterministic, and `simulate_kernel` uses it by default."""

from __future__ import annotations

import numpy as np
import pytest

import models
import simulator
from models import cached_memory_layout as kern
from models.address_map import build_address_map
from models.cached_memory import (
    CACHED_MEMORY_ACCESS,
    COUNT_NAMES,
    CachedMemory,
)
from models.hbm import hbm_fixed_latency_ps
from simulator.framework.engine import Clock
from workloads.kernels.case import load_ptx
from workloads.kernels.catalog import KERNELS
from workloads.ops.registry import build_op, simulate_op

SECTOR = 32
LINE = 128
IDLE_PS = 10**9  # far beyond any earlier completion: the system is idle again


def _config(overrides=None):
    return models.load_preset("h100_sxm", overrides)


_HBM = _config().hbm
REFRESH_SHARE = 1 - _HBM.refresh_ns / _HBM.refresh_interval_ns
"""Share of each HBM channel's time left by all-bank refresh."""


def _line_sectors(address: int) -> np.ndarray:
    return np.arange(address // SECTOR, (address + LINE) // SECTOR, dtype=np.int64)


def _report(what: str, expected: float, measured: float) -> float:
    deviation = measured / expected - 1
    print(f"{what}: expected {expected:.1f}, measured {measured:.1f}, "
          f"deviation {deviation:+.2%}")
    return deviation


class _Probe:
    """Issues loads on an idle memory and returns their latency in SM cycles."""

    def __init__(self, config, refresh: bool = True) -> None:
        self.config = config
        self.clock = Clock(config.chip.clock_ghz)
        self.mem = CachedMemory(config, config.sm.count)
        if not refresh:  # one window per 2**62 fs, of no length: rows stay open while idle
            self.mem.params[kern.P_REFRESH_INTERVAL_FS] = 1 << 62
            self.mem.params[kern.P_REFRESH_FS] = 0
        self.address_map = build_address_map(config)
        self.now = 0
        self.counts = []
        self.mem.hooks.attach(lambda owner, pos, data: self.counts.append(data["counts"]),
                              (CACHED_MEMORY_ACCESS,))

    def cycles(self, sm: int, address: int, kind: str = "load") -> float:
        self.now += IDLE_PS
        done = self.mem.access(sm, kind, _line_sectors(address), self.now)
        return (done - self.now) / self.clock.period_ps

    def last(self, name: str) -> int:
        return int(self.counts[-1][COUNT_NAMES.index(name)])

    def partition(self, address: int) -> int:
        cfg = self.config.l2
        return int(self.address_map.l2_slice(np.array([address]))[0]) * cfg.partitions \
            // cfg.slices

    def sm_in(self, partition: int, other_than: int = -1) -> int:
        return next(sm for sm in range(self.config.sm.count)
                    if sm % self.config.l2.partitions == partition and sm != other_than)


def test_unloaded_l1_hit_costs_the_cited_l1_latency():
    """A second load of a line from the same SM costs l1.hit_latency_cycles (within 1)."""
    probe = _Probe(_config())
    probe.cycles(0, 1 << 20)
    measured = probe.cycles(0, 1 << 20)
    assert probe.last("l1_hit_sectors") == LINE // SECTOR
    assert abs(measured - probe.config.l1.hit_latency_cycles) <= 1
    _report("L1 hit", probe.config.l1.hit_latency_cycles, measured)


@pytest.mark.parametrize("where", ["near", "far"])
def test_unloaded_l2_hit_costs_the_cited_near_or_far_latency(where):
    """An L2 hit costs l2.near_hit_latency_cycles from a near SM and far from a far SM."""
    probe = _Probe(_config())
    address = 1 << 20
    home = probe.partition(address)
    probe.cycles(probe.sm_in(home), address)  # brings the line into L2
    other = home if where == "near" else 1 - home
    measured = probe.cycles(probe.sm_in(other, other_than=probe.sm_in(home)), address)
    assert probe.last("l2_hit_sectors") == LINE // SECTOR
    cited = getattr(probe.config.l2, f"{where}_hit_latency_cycles")
    assert abs(measured - cited) <= 1
    _report(f"L2 {where} hit", cited, measured)


def _lines_in_one_bank(probe: _Probe, count: int) -> list[int]:
    """Addresses of `count` lines in one HBM bank, each in a different row."""
    addresses = np.arange(1, 400_000, dtype=np.int64) * LINE
    channel = probe.address_map.hbm_channel(addresses)
    bank, row = probe.address_map.hbm_bank_row(addresses)
    pick = addresses[(channel == channel[0]) & (bank == bank[0])]
    _, first_of_row = np.unique(row[(channel == channel[0]) & (bank == bank[0])],
                                return_index=True)
    return [int(a) for a in pick[np.sort(first_of_row)][:count]]


def test_unloaded_hbm_read_averages_the_cited_hbm_latency():
    """A read to a bank holding another row costs hbm.latency_cycles averaged over near and
    far SMs (the cited pointer-chase figure), within 1 cycle (refresh off: it would close
    the row while the probe idles)."""
    probe = _Probe(_config(), refresh=False)
    opener, near_line, far_line = _lines_in_one_bank(probe, 3)
    probe.cycles(0, opener)
    near = probe.cycles(probe.sm_in(probe.partition(near_line)), near_line)
    assert probe.last("hbm_row_misses") == 1 and probe.last("hbm_read_sectors") == 4
    far = probe.cycles(probe.sm_in(1 - probe.partition(far_line)), far_line)
    cited = probe.config.hbm.latency_cycles
    assert abs((near + far) / 2 - cited) <= 1
    _report("HBM, near/far average", cited, (near + far) / 2)


def test_cold_hbm_read_to_a_closed_bank_is_the_sum_of_level_latencies():
    """A first read from a near SM costs L2 near + HBM channel share + tRCD (outside refresh)."""
    probe = _Probe(_config(), refresh=False)
    cfg, clock = probe.config, probe.clock
    address = 1 << 24
    measured = probe.cycles(probe.sm_in(probe.partition(address)), address)
    expected_ps = (clock.cycles_to_ps(cfg.l2.near_hit_latency_cycles)
                   + hbm_fixed_latency_ps(cfg, clock) + round(cfg.hbm.row_activate_ns * 1000))
    assert abs(measured - expected_ps / clock.period_ps) <= 1
    assert probe.last("hbm_row_misses") == 1


def test_second_access_to_the_same_sector_hits_l1():
    """The second load of one sector from one SM is an L1 hit, from another SM an L2 hit."""
    probe = _Probe(_config())
    sector = np.array([12345], np.int64)
    probe.mem.access(3, "load", sector, 0)
    assert probe.counts[-1][COUNT_NAMES.index("l1_miss_sectors")] == 1
    probe.mem.access(3, "load", sector, IDLE_PS)
    assert probe.counts[-1][COUNT_NAMES.index("l1_hit_sectors")] == 1
    probe.mem.access(4, "load", sector, 2 * IDLE_PS)
    assert probe.counts[-1][COUNT_NAMES.index("l2_hit_sectors")] == 1


def test_bulk_loads_bypass_l1():
    """A TMA ("bulk_load") read neither looks up nor fills the SM's L1: after one, a plain
    load of the same sector misses L1 and hits L2; a second bulk load of a sector the L1
    holds still goes to L2 (L2 hit) and leaves the L1's copy alone."""
    probe = _Probe(_config())
    sector = np.array([12345], np.int64)
    l1_hit, l1_miss, l2_hit = (COUNT_NAMES.index(n) for n in
                               ("l1_hit_sectors", "l1_miss_sectors", "l2_hit_sectors"))
    probe.mem.access(3, "bulk_load", sector, 0)
    assert probe.counts[-1][l1_hit] == 0 and probe.counts[-1][l2_hit] == 0
    probe.mem.access(3, "load", sector, IDLE_PS)
    assert probe.counts[-1][l1_miss] == 1 and probe.counts[-1][l2_hit] == 1
    bulk = probe.mem.access(3, "bulk_load", sector, 2 * IDLE_PS) - 2 * IDLE_PS
    assert probe.counts[-1][l1_hit] == 0 and probe.counts[-1][l2_hit] == 1
    plain = probe.mem.access(3, "load", sector, 3 * IDLE_PS) - 3 * IDLE_PS
    assert probe.counts[-1][l1_hit] == 1
    assert plain < bulk


def test_tma_kernel_reports_bulk_loads_apart():
    """A TMA kernel's box reads are `memory.*.bulk_load` stats with no L1 level; its plain
    loads stay `memory.*.load`."""
    cfg = models.load_preset("h800_sxm", {"sm.count": 2})
    stats = []
    simulate_op(build_op("gemm", cfg, m=128, n=128, k=256, groups=2, shape_only=True), cfg,
                "full", stats=stats)
    frame = stats[-1][2]
    components = set(frame.component)
    assert {"memory.l2.bulk_load", "memory.hbm.bulk_load"} <= components
    assert "memory.l1.bulk_load" not in components
    bulk = frame[(frame.component == "memory.l2.bulk_load") & (frame.stat == "bytes")]
    assert float(bulk.value.sum()) == 2 * (128 * 256 + 256 * 128) * 2   # A and B, bf16


def test_footprint_between_l1_and_l2_sizes_hits_l2_on_the_second_pass():
    """Reading 4 MiB twice from one SM: the second pass misses L1 (LRU thrash) and hits L2."""
    probe = _Probe(_config())
    footprint = 4 << 20
    assert probe.mem.l1_bytes < footprint < probe.config.l2.size_bytes
    for _ in range(2):
        before = len(probe.counts)
        for address in range(0, footprint, LINE):
            probe.mem.access(0, "load", _line_sectors(address), probe.now)
            probe.now += 1000
        totals = np.sum(probe.counts[before:], axis=0)
    sectors = footprint // SECTOR
    assert totals[COUNT_NAMES.index("l1_hit_sectors")] == 0
    assert totals[COUNT_NAMES.index("l2_hit_sectors")] == sectors
    assert totals[COUNT_NAMES.index("hbm_read_sectors")] == 0


def test_a_merged_hit_waits_for_the_fill_in_flight():
    """A load that hits a sector whose fill is still on its way completes with the fill."""
    probe = _Probe(_config())
    sectors = _line_sectors(1 << 22)
    first = probe.mem.access(0, "load", sectors, 0)
    second = probe.mem.access(0, "load", sectors, 1000)
    assert probe.counts[-1][COUNT_NAMES.index("l1_hit_sectors")] == 4
    assert second == first


def _stream_read_done_ps(cfg, size):
    mem = CachedMemory(cfg, cfg.sm.count)
    size = 32 << 20
    chunk = 32  # sectors per request: 8 lines of 4 sectors
    base = (1 << 30) // SECTOR
    done = max(mem.access(r % cfg.sm.count, "load",
                          np.arange(base + r * chunk, base + (r + 1) * chunk, dtype=np.int64), 0)
               for r in range(size // (chunk * SECTOR)))
    return done


def test_streaming_read_takes_bytes_over_hbm_bandwidth():
    """32 MiB read at once from every SM completes in size over the HBM peak scaled by the
    time refresh leaves (1 - tRFC / tREFI), within 10 %."""
    cfg = _config()
    size = 32 << 20
    done = _stream_read_done_ps(cfg, size)
    expected_ps = size / (cfg.hbm.peak_bandwidth_gbps * 1e9 * REFRESH_SHARE) * 1e12
    assert abs(_report("HBM stream", expected_ps, done)) <= 0.10


def test_dirty_evictions_write_back_to_hbm():
    """Storing more than the L2 holds writes back every evicted dirty sector to HBM."""
    cfg = _config({"l2.size_bytes": 80 * LINE * 20 * 4})  # 4 sets per slice: 800 KiB
    mem = CachedMemory(cfg, cfg.sm.count)
    written = []
    mem.hooks.attach(lambda o, p, d: written.append(d["counts"][kern.C_HBM_WRITE]),
                     (CACHED_MEMORY_ACCESS,))
    stored_sectors = (4 << 20) // SECTOR
    for r in range(stored_sectors // 4):
        mem.access(r % 8, "store", np.arange(4 * r, 4 * r + 4, dtype=np.int64), r * 100)
    resident_dirty = int(np.unpackbits(mem.flags[kern.LEVEL_L2][..., 1]).sum())
    assert sum(written) == stored_sectors - resident_dirty
    assert sum(written) > 0


def test_same_calls_give_identical_results():
    """Two memories fed the same calls return the same times and counts."""
    rng = np.random.default_rng(7)
    calls = [(int(rng.integers(0, 132)), ("load", "store", "atomic")[int(rng.integers(0, 3))],
              np.unique(rng.integers(0, 1 << 18, 8)), int(t) * 700) for t in range(3000)]
    runs = []
    for _ in range(2):
        mem = CachedMemory(_config(), 132)
        runs.append([(mem.access(*call), mem.counts.copy().tolist()) for call in calls])
    assert runs[0] == runs[1]


def test_compiled_hashes_equal_the_address_map():
    """The compiled slice and channel hashes equal `models.address_map`'s."""
    cfg = _config()
    amap = build_address_map(cfg)
    lines = np.random.default_rng(3).integers(0, 1 << 34, 2000)
    slices = [kern.l2_slice_of_line(int(x), cfg.l2.slices) for x in lines]
    channels = [kern.hbm_channel_of_line(int(x), cfg.hbm.channels) for x in lines]
    assert slices == amap.l2_slice(lines * LINE).tolist()
    assert channels == amap.hbm_channel(lines * LINE).tolist()


def test_l3_hit_averages_its_cited_latency():
    """With an L3, a line evicted from L2 but kept in L3 costs l3.hit_latency_cycles
    averaged over near and far SMs."""
    probe = _Probe(_config({"l2.size_bytes": 80 * LINE * 20, "l3.enabled": True,
                            "l3.size_bytes": 64 << 20, "l3.slices": 5,
                            "l3.hit_latency_cycles": 560}))
    candidates = (1 << 26) + np.arange(200_000, dtype=np.int64) * LINE
    slices = probe.address_map.l2_slice(candidates)
    address, *rivals = candidates[slices == slices[0]][:1 + probe.config.l2.associativity]
    address = int(address)
    measured = []
    for evicter, partition in enumerate((probe.partition(address),
                                         1 - probe.partition(address)), start=100):
        probe.cycles(evicter, address)
        for rival in rivals:  # evict it from its slice's only set
            probe.cycles(evicter, int(rival))
        measured.append(probe.cycles(probe.sm_in(partition), address))
        assert probe.last("l3_hit_sectors") == 4
    assert abs(sum(measured) / 2 - 560) <= 1


def test_simulate_kernel_defaults_to_the_cached_memory_and_reports_hit_rates():
    """SGEMM (C = A B + beta C) through simulate_kernel reads each matrix from HBM once."""
    spec = KERNELS["sgemm_tiled"]
    case = spec.build(np.random.default_rng(0), m=64, n=64, k=64)
    res = simulator.simulate_kernel(load_ptx(case.file), case.entry, case.grid, case.block,
                                    case.args, shared_bytes=case.shared_bytes)
    case.check()
    stats = {(c, s): v for c, s, v in zip(res.stats.component, res.stats.stat,
                                          res.stats.value, strict=True)}
    assert 0 < stats[("memory.l2.load", "hit_rate")] < 1
    assert ("memory.l1.load", "hit_rate") in stats
    assert stats[("memory.hbm.load", "bytes")] == 3 * 64 * 64 * 4  # A, B, C read once


def test_saxpy_reads_hbm_once_and_keeps_its_dirty_output_in_l2():
    """saxpy moves its two inputs from HBM once; the output stays dirty in L2; the time is at
    least the read bytes over the HBM peak."""
    n = 1 << 18
    cfg = _config()
    x, y = np.ones(n, np.float32), np.ones(n, np.float32)
    res = simulator.simulate_kernel(load_ptx("saxpy.cu"), "saxpy", n // 256, 256,
                                    [n, np.float32(2.0), x, y], config=cfg, memory="cached")
    assert np.all(y == 3.0)
    frame = res.stats
    hbm = frame[frame.component.str.startswith("memory.hbm")]
    read = hbm[(hbm.component == "memory.hbm.load") & (hbm.stat == "bytes")].value.sum()
    assert read == 2 * 4 * n
    assert "memory.hbm.writeback" not in set(hbm.component)
    assert res.time_us >= read / (cfg.hbm.peak_bandwidth_gbps * 1e3)


def test_unknown_memory_name_is_rejected_with_the_known_names():
    """memory='perfect' is not a model: the error lists cached and flat."""
    with pytest.raises(ValueError, match="cached"):
        simulator.build_system(_config(), "perfect")


def test_far_homed_line_read_again_from_the_same_partition_hits_the_near_copy():
    """After one SM read a far-homed line, a second SM of its partition finds the copy in its
    own partition: an L2 hit at l2.near_hit_latency_cycles, with no far line."""
    probe = _Probe(_config())
    address = 1 << 21
    near = 1 - probe.partition(address)
    first = probe.sm_in(near)
    probe.cycles(first, address)
    assert probe.last("l2_far_lines") == 1
    measured = probe.cycles(probe.sm_in(near, other_than=first), address)
    assert probe.last("l2_copy_hit_sectors") == LINE // SECTOR
    assert probe.last("l2_far_lines") == 0
    assert abs(measured - probe.config.l2.near_hit_latency_cycles) <= 1


def test_a_store_drops_the_other_partitions_copy():
    """A store from the home partition invalidates the far SMs' copy: their next load goes
    to the home slice again (far latency)."""
    probe = _Probe(_config())
    address = 1 << 21
    home = probe.partition(address)
    reader = probe.sm_in(1 - home)
    probe.cycles(reader, address)
    probe.cycles(probe.sm_in(home), address, "store")
    measured = probe.cycles(probe.sm_in(1 - home, other_than=reader), address)
    assert probe.last("l2_copy_hit_sectors") == 0 and probe.last("l2_hit_sectors") == 4
    assert abs(measured - probe.config.l2.far_hit_latency_cycles) <= 1


SMALL_L2 = {"l2.size_bytes": 80 * LINE * 20 * 8}  # 8 sets of 20 ways per slice: 1.56 MiB


@pytest.mark.parametrize(("fraction", "level"), [(0.375, "near"), (0.75, "far")])
def test_second_pass_over_a_footprint_costs_near_below_half_the_l2_and_far_above(fraction,
                                                                                  level):
    """One SM reads a footprint twice. Below half the L2 every far-homed line of the second
    pass hits the SM partition's copy (near latency); above half the L2, copies and near-homed
    lines share the partition's half and thrash (LRU), so most far-homed lines (the median)
    cost the far latency; sets the hash fills less keep theirs."""
    probe = _Probe(_config(SMALL_L2))
    footprint = int(probe.config.l2.size_bytes * fraction) // LINE * LINE
    addresses = range(1 << 26, (1 << 26) + footprint, LINE)
    sm = 0
    far_homed = [a for a in addresses if probe.partition(a) != sm % 2]
    for a in addresses:
        probe.cycles(sm, a)
    latency = np.array([probe.cycles(sm, a) for a in far_homed])
    cited = getattr(probe.config.l2, f"{level}_hit_latency_cycles")
    assert np.median(latency) == pytest.approx(cited, abs=1)
    _report(f"second pass, far-homed lines, {fraction:.3f} x L2", cited, latency.mean())


def test_pure_write_stream_takes_at_least_bytes_over_hbm_bandwidth():
    """32 MiB stored at once from every SM through a 1.56 MiB L2 completes no earlier than the
    bytes that left the L2 and the write-back buffers over the HBM peak, and within 10 % of
    all bytes over the peak scaled by the time refresh leaves (1 - tRFC / tREFI)."""
    cfg = _config(SMALL_L2)
    mem = CachedMemory(cfg, cfg.sm.count)
    size = 32 << 20
    chunk = 32
    base = (1 << 30) // SECTOR
    done = max(mem.access(r % cfg.sm.count, "store",
                          np.arange(base + r * chunk, base + (r + 1) * chunk, dtype=np.int64), 0)
               for r in range(size // (chunk * SECTOR)))
    buffered = cfg.hbm.channels * cfg.hbm.writeback_buffer_lines_per_channel * LINE
    peak_bps = cfg.hbm.peak_bandwidth_gbps * 1e9
    assert done >= (size - cfg.l2.size_bytes - buffered) / peak_bps * 1e12
    expected_ps = size / (peak_bps * REFRESH_SHARE) * 1e12
    assert abs(_report("HBM write stream", expected_ps, done)) <= 0.10


def test_refresh_closes_the_open_row_of_an_idle_bank():
    """A read to a bank idle for longer than tREFI finds it closed (tRCD only), not holding
    the other row it last opened (tRP + tRCD)."""
    closed, held = (_Probe(_config(), refresh=r) for r in (True, False))
    opener, line = _lines_in_one_bank(closed, 2)
    costs = []
    for probe in (closed, held):
        probe.cycles(0, opener)
        costs.append(probe.cycles(0, line))
    precharge = closed.config.hbm.row_precharge_ns * 1000 / closed.clock.period_ps
    assert costs[1] - costs[0] == pytest.approx(precharge, abs=1)



def test_refresh_parameters_come_from_the_preset():
    """The refresh cost follows the preset fields: with tRFC 0 the same read stream is faster
    by about the tRFC / tREFI share (within 3 points); tRFC >= tREFI is a config error."""
    size = 32 << 20
    with_refresh = _stream_read_done_ps(_config(), size)
    without = _stream_read_done_ps(_config({"hbm.refresh_ns": 0.0}), size)
    assert abs(without / with_refresh - REFRESH_SHARE) <= 0.03
    with pytest.raises(simulator.ConfigError, match="hbm.refresh_ns"):
        _config({"hbm.refresh_ns": 5000.0})


def _warm_read_done_ps(cfg, size: int, sms: int) -> int:
    """Last completion of `sms` SMs each loading its own share of `size` bytes, L2 resident
    (preloaded, clean), every request issued at time 0 (`load_cg`: no L1)."""
    mem = CachedMemory(cfg, cfg.sm.count)
    sectors = np.arange(size // SECTOR, dtype=np.int64)
    mem.preload_l2(sectors, dirty=False)
    done = 0
    share = size // SECTOR // sms
    for first in range(0, share, 4):            # one line per request, SMs in turn
        for sm in range(sms):
            at = sm * share + first
            done = max(done, mem.access(sm, "load_cg", sectors[at:at + 4], 0))
    return done


def test_read_return_limit_bounds_all_sms_together():
    """With `noc.read_return_gbps` set below the slices' and ports' sums, 4 MiB read from
    L2 by every SM at once completes in size over that limit plus a far hit, within 2 %."""
    cfg = _config({"noc.read_return_gbps": 1000.0})
    size = 4 << 20
    done = _warm_read_done_ps(cfg, size, cfg.sm.count)
    expected_ps = (size / (cfg.noc.read_return_gbps * 1e9) * 1e12
                   + cfg.l2.far_hit_latency_cycles * 1e3 / cfg.chip.clock_ghz)
    assert abs(_report("read return", expected_ps, done)) <= 0.02


def test_no_read_return_limit_leaves_the_slices_and_ports_to_bound_it():
    """`noc.read_return_gbps = 0` sets no limit: the same read takes less than a third of
    its time at 1000 GB/s (the slices' 13 TB/s and the ports bound it)."""
    cfg = _config({"noc.read_return_gbps": 0.0})
    size = 4 << 20
    done = _warm_read_done_ps(cfg, size, cfg.sm.count)
    assert done < size / 1000e9 * 1e12 / 3


def test_read_return_does_not_queue_an_earlier_request_behind_a_later_one():
    """A load issued at 0 but served after another SM's load issued 20 cycles later (to a
    line of other slices) finds the limit's bins with room: it costs what it costs alone."""
    cfg = _config({"noc.read_return_gbps": 1000.0})
    period_ps = 1e3 / cfg.chip.clock_ghz
    per = cfg.l2.slices // cfg.l2.partitions
    other = next(line for line in range(1, 64)
                 if kern.l2_slice_of_line(line, cfg.l2.slices) % per
                 != kern.l2_slice_of_line(0, cfg.l2.slices) % per)
    first, second = _line_sectors(0), _line_sectors(other * LINE)
    alone, late = CachedMemory(cfg, cfg.sm.count), CachedMemory(cfg, cfg.sm.count)
    for mem in (alone, late):
        mem.preload_l2(np.concatenate([first, second]), dirty=False)
    late.access(1, "load_cg", second, round(20 * period_ps))
    assert late.access(0, "load_cg", first, 0) == alone.access(0, "load_cg", first, 0)


def test_slice_request_rate_holds_a_slice_a_clock_per_line_request():
    """`l2.slice_requests_per_clk`: a line request holds its slice at least 1 / rate clocks,
    so many one-sector requests to L2-resident lines finish later than by their bytes alone;
    whole-line requests (4 sectors, 128 B: 1.44 clocks of an 89 B/clk slice) and the default
    (0, no limit) are unchanged."""

    def run(rate: float, sectors_per_line: int) -> int:
        memory = CachedMemory(_config({"l2.slice_requests_per_clk": rate}), 132)
        lines = np.arange(8192, dtype=np.int64) * (LINE // SECTOR)
        for first in range(0, lines.size, 32):             # make them resident in the L2
            memory.access(0, "load_cg", np.sort(np.concatenate(
                [lines[first:first + 32] + s for s in range(4)])), 0)
        done = 0
        for i, line in enumerate(lines.tolist()):          # one request per line, 132 SMs
            done = max(done, memory.access(i % 132, "load_cg",
                                           np.arange(line, line + sectors_per_line,
                                                     dtype=np.int64), IDLE_PS))
        return done - IDLE_PS

    assert run(1.0, 1) > 1.2 * run(0.0, 1)
    assert run(1.0, 4) == run(0.0, 4)
    assert run(0.5, 4) > run(0.0, 4)
