"""Cached memory: L1 per SM, L2 slices, optional L3 and HBM channels, one compiled call per request.

What it models
--------------
The memory hierarchy behind the SMs' load/store units, implementing the `MemoryInterface`
contract of `models.flat_memory` (`access(sm_id, kind, sectors, now_ps) -> done_ps`) with
address-level tag arrays and bandwidth pipes but no SimPy events: each warp request runs
through every level in one numba call (`models.cached_memory_kernel`).

1. L1 of the SM: sectored, set-associative, LRU, `sm.l1_bytes(carveout)` bytes (the carve-out
   the CTA dispatcher chose for the kernel). Loads look up and allocate the sectors they miss
   (`ld.global.nc` and default loads alike); stores write through and only update lines the L1
   holds; atomics, bulk loads (TMA, "bulk_load") and loads that skip the L1 (`ld.global.cg`,
   `.cv`, `cp.async.cg`: "load_cg") bypass it. A hit is usable after
   `l1.hit_latency_cycles`.
2. Misses cross the SM's crossbar port (one pipe per direction per SM at
   `noc.port_bandwidth_bytes_per_clk`: write data up, read data down) to the L2 slice chosen by
   the `models.address_map` hash. The slice's pipe moves `l2.slice_bandwidth_bytes_per_clk`.
   Read data of all SMs together crosses the crossbar at `noc.read_return_gbps` at most
   (0: no such limit), booked with the port at the request's issue.
   The L2 is write-back and write-allocate at sector granularity (LRU per slice). SM i sits
   next to partition `i % l2.partitions`; slices are numbered partition by partition and
   the hashed slice is a line's home; a slice of another partition adds `far - near` cycles.
2a. Near copies of far-homed lines: a load of a line homed in another partition first looks
   in the SM partition's copy slice (the slice of the same index within the partition,
   `home % slices_per_partition`). Sectors held there are near hits; the others are served
   by the home (far latency, fetched from below if the home misses) and installed in the
   copy slice, clean, when they arrive. Copies and home lines share each slice's sets and
   LRU, so one SM's data can keep about half the L2 near (its partition). Coherence,
   simplified: stores and atomics are performed at the home; a store updates the writer's
   partition's copy if it holds the line (no allocation), and every other copy of the
   stored sectors is dropped at that moment, with no invalidation traffic or delay; atomics
   drop all copies. Copies are never dirty, so evicting one writes nothing back.
3. L2 misses go to the L3 (if `l3.enabled`; its slice follows the HBM channel, write-back,
   allocate on read and on L2 write-backs) and then to the HBM channel of the hash: the bank
   opens the row (hit: nothing, closed: tRCD, other row: tRP + tRCD; banks work in parallel),
   then the bytes cross the channel's data bus (`hbm.channel_bandwidth_gbps`). Dirty L2 (and
   L3) evictions are written back: each enters its channel's write-back buffer
   (`hbm.writeback_buffer_lines_per_channel` lines) and the buffer crosses the bus as one batch
   when full. When a batch's transfer ends more than that many line transfers after now, the
   request whose store or fill evicted the dirty line completes only once the channel's booked
   work has drained to the bound (then plus its own return path), so stores cannot outrun HBM.
4. What costs HBM efficiency: every channel does an all-bank refresh for `hbm.refresh_ns`
   every `hbm.refresh_interval_ns` (no data moves, no row opens, all rows closed after), and
   the bus idles `hbm.write_to_read_gap_ns` / `hbm.read_to_write_gap_ns` when it turns
   between a write batch and reads (preset fields, each with its source). A copy stream then
   moves ~88 % of the peak (h100_sxm). Bank groups (tCCD_L vs tCCD_S) are left out: the bus
   moves whole lines first-come-first-served, so the interleaving of bursts across bank
   groups that hides tCCD_L cannot be expressed.

5. Cache policies (`isa.semantics.cache_policy`; each request carries its instruction's policy
   row, `isa.trace_format`). The L2 keeps an eviction class per line, as the CUDA C++
   Programming Guide's "L2 cache access management" and the PTX ISA's eviction priorities
   describe it: evict-first ("streaming") lines are the preferred victims, then normal lines,
   in LRU order within a class; evict-last ("persisting") lines are victims only when a set
   holds nothing else, and they may fill at most `l2.persisting_max_fraction` of each set's
   ways (the guide's set-aside, `cudaLimitPersistingL2CacheSize`, taken per set: addresses
   hash evenly over sets); a new evict-last line beyond that replaces the set's LRU
   evict-last line (persisting lines thrash among themselves), a held line raised to
   evict-last turns the LRU one normal. An access without a policy, or with
   `evict_unchanged`, keeps a held line's class (the guide resets persisting lines only on
   request) and gives a new line the normal one; `evict_normal` makes it normal. Near copies
   take the class of the access that made them. A fractional policy gives its primary class
   to a hash-chosen share of the lines (in sixteenths), the secondary to the rest; a range
   policy by where each line starts. `.L1::no_allocate` loads look up the L1 but change
   nothing there (no fill, no LRU update); `.L1::evict_first` ones fill as the L1's LRU
   victim; other `.L1::` priorities are the default (no persisting L1). `.L2::64B/128B/256B`
   widen a load's miss to aligned 64-byte sector pairs or the whole line, and a 256-byte miss
   also brings the pair line into its home slice (nobody waits for it). `discard.global.L2`
   drops its line at the home and every copy without writing dirty sectors back;
   `applypriority.global.L2::evict_normal` makes a held line normal; both take the home
   slice's pipe and a round trip, and count no hit or miss. A program without policies runs
   exactly as before.

Latency split of the cited load-to-use totals, so that an unloaded access reproduces them:
L1 `l1.hit_latency_cycles`; crossbar `noc.latency_cycles` each way; a slice's own share is
`l2.near_hit_latency_cycles - l1 - 2 * noc` (`models.l2`); the far penalty is `far - near`;
the HBM channel's fixed part is `hbm_fixed_latency_ps` (`models.hbm`)
(the cited HBM figure minus the average of near and far minus tRP + tRCD), so a row-missing
read averaged over near and far SMs costs `hbm.latency_cycles`; an L3 hit adds
`l3.hit_latency_cycles` minus that average over the L2 path. Unloaded: L1 hit 33, L2 near 265,
far 420, HBM 578 (near) / 734 (far) to a bank holding another row, 656 on average (h100_sxm,
outside refresh);
a far-homed line already copied into the SM's partition costs the near 265.

Timing rules (approximations):
* Requests reach the slice `noc` after issue, plus whatever wait the port pipe adds; the far
  penalty is charged on the way back so every SM books slice pipes at the same offset.
* Bandwidth is a "next free" time per pipe, booked first-come-first-served in call order:
  a booking starts at max(arrival, free) and holds the pipe size / bandwidth. A request pays
  the waits only (its own transfer overlaps the cited latency), except that a load completes
  no earlier than its last byte has crossed its port. The SM replay calls in nearly time
  order (SMs run ahead of each other by at most one quantum), so a request may queue behind
  one issued up to a quantum later in simulated time. The crossbar's shared read return is
  not such a pipe but a calendar of `RETURN_BIN_CYCLES`-cycle bins, each holding that many
  cycles of transfer at `noc.read_return_gbps`: a request takes room in the bin of its issue
  and the following ones, so when a request starts does not depend on the order of calls
  within a bin, and a request waits only when the bins are full (the limit holds over a bin,
  not within it). It starts at issue, or at the first bin with room when the bins from its
  issue on are full, and completes no earlier than the room it took ends.
* Tag state changes when the request is served; data carries a ready time per sector, so a
  request hitting a sector whose fill is still on its way completes when the fill arrives
  (miss merging without MSHR limits).
* Completion = max over the request's sectors. Stores complete when the home slice has the
  data (an L2 hit's round trip) unless a full write-back buffer holds them longer; atomics
  are performed at the home slice like a load that dirties it, then by the slice's atomic
  unit: a request's `ops` lane operations on one address (the most lanes of the warp that
  share an address, `simulator.runner.trace`) hold that line `l2.same_address_atomic_ns` each, one
  after another and after the line's earlier atomics from any SM (a table of
  `ATOMIC_ENTRIES` lines per slice); atomics to distinct addresses of a warp take one
  operation's time. Measured on our H100 (ncu): every thread of a grid adding to one float
  costs 1.755 ns per thread.

Hook: `CACHED_MEMORY_ACCESS` per request (sm_id, kind, issue_ps, done_ps, counts = int64 array
indexed by `COUNT_NAMES`). `CachedMemoryTracer` turns it into stats. The component keeps no
counters. Left out: MSHR and request queue limits (only write-backs are bounded), copy
traffic between the partitions beyond the far latency (a copy fill books no pipe of its
copy slice), per-bank refresh, bank groups, write-to-read turnaround inside a bank,
command-bus limits (tRRD, tFAW), L1 bank conflicts, L1 coherence across SMs, a global
(rather than per-set) persisting set-aside and its reset, policies at the L3
(stores do not invalidate other SMs' L1s), TLBs, the atomic units' throughput on distinct
addresses (pipelined at the slice's bandwidth), flushing
dirty lines or half-full write-back buffers at kernel end, L3 lines of a size other than the
L2's. Units: ps (int), fs for pipe bookings, bytes, 32-byte sectors.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numba
import numpy as np

from isa.trace_format import POLICY_FIELDS
from models import cached_memory_layout as k
from models import jit_cache
from models.cached_memory_kernel import serve_request
from models.cached_memory_layout import l2_set_of_line, l2_slice_of_line
from models.hbm import hbm_fixed_latency_ps
from models.l2 import l2_slice_latency_cycles
from models.link_memory_kernel import no_links
from models.sm_memory import LOG_COUNTS, LOG_DONE, LOG_ISSUE, LOG_KIND
from simulator.framework.engine import Clock
from simulator.framework.hooks import Hooks
from simulator.framework.stats import Stat, Tracer

CACHED_MEMORY_ACCESS = "CACHED_MEMORY_ACCESS"
"""One warp request was served. data: sm_id, kind, issue_ps, done_ps, counts."""
CACHED_MEMORY_BATCH = "CACHED_MEMORY_BATCH"
"""Requests an SM served inside its compiled loop (`models.sm_memory`). data: sm_id,
kinds (int64 array of `KIND_CODES`), issue_ps, done_ps (arrays), counts (2-D, one row per
request, columns `COUNT_NAMES`)."""

COUNT_NAMES = ("sectors", "l1_hit_sectors", "l1_miss_sectors", "l2_hit_sectors",
               "l2_miss_sectors", "l3_hit_sectors", "l3_miss_sectors", "hbm_read_sectors",
               "hbm_write_sectors", "hbm_row_hits", "hbm_row_misses", "l2_lines",
               "l2_far_lines", "l2_writeback_sectors", "l3_writeback_sectors", "l2_requests",
               "l3_requests", "hbm_requests", "l2_copy_hit_sectors")
_KINDS = {"load": k.KIND_LOAD, "store": k.KIND_STORE, "atomic": k.KIND_ATOMIC,
          "bulk_load": k.KIND_BULK_LOAD, "load_cg": k.KIND_LOAD_CG}
KIND_CODES = tuple(sorted(_KINDS, key=_KINDS.get))
"""Access kind names by the compiled code's kind number."""
_L1_BYPASS = frozenset({"bulk_load", "load_cg"})
"""Access kinds that skip the L1 (their sectors are not looked up there)."""
_SCRATCH_SECTORS = 1024
"""Scratch room of `inline_state` at least (a TMA chunk is 128 sectors)."""
_NO_POLICY = np.zeros(POLICY_FIELDS, np.int64)
"""The policy row of an access without a cache policy."""
_PENDING_CHUNK = 4096
"""Requests whose counts `CachedMemoryTracer` keeps before summing them (one numpy sum
per chunk instead of one addition per request)."""


def _fs_per_byte(bytes_per_second: float) -> int:
    return max(int(round(1e15 / bytes_per_second)), 1)


def _tags(units: int, size_bytes: int, line_bytes: int, sector_bytes: int, ways: int):
    """Empty tag state of `units` caches of `size_bytes` each (whole sets only)."""
    sets = max(size_bytes // (line_bytes * ways), 0)
    meta = np.zeros((units, sets, 2 + line_bytes // sector_bytes, ways), np.int64)
    meta[:, :, 0, :] = -1
    return meta, np.zeros((units, sets, ways, 2), np.uint8)


NO_INLINE_MEMORY = (np.zeros(k.N_PARAMS, np.int64), *(tuple(level) for level in zip(
    *(_tags(1, 0, 32, 32, 1) for _ in range(3)), strict=True)), np.zeros(1, np.int64),
    np.zeros((1, 1, 2), np.int64), np.zeros(1, np.int64), np.zeros(k.N_COUNTS, np.int64),
    *no_links(), np.ones(1, np.bool_), np.zeros(1, np.int64))
"""What SMs in front of another memory pass for `CachedMemory.inline_state` (same types,
never used: their `L_INLINE` is off)."""


FOREIGN_LINE = 1 << 44
"""Line numbers of `CachedMemory.precondition_l2`'s lines: byte addresses from 2^51 on, above
every buffer and the traced local window (`isa.trace_format.LOCAL_TRACE_BASE` = 2^56 bytes
is line 2^49, so they stay below it)."""


class CachedMemory:
    """L1/L2/L3/HBM behind `MemoryInterface` (see the module docstring)."""

    def __init__(self, config, n_sms: int, shared_carveout_bytes: int = 0) -> None:
        jit_cache.ensure_fresh()          # before its compiled steps first load
        self.hooks = Hooks("memory")
        l1, l2, l3, hbm = config.l1, config.l2, config.l3, config.hbm
        l1_bytes = config.sm.l1_bytes(shared_carveout_bytes)
        if l1_bytes < 0:
            raise ValueError(f"shared_carveout_bytes {shared_carveout_bytes} exceeds "
                             f"sm.unified_l1_shared_bytes ({config.sm.unified_l1_shared_bytes})")
        if l1.sector_bytes != l2.sector_bytes or l1.sector_bytes != k.SECTOR_BYTES_ASSUMED:
            raise ValueError(f"l1.sector_bytes ({l1.sector_bytes}) and l2.sector_bytes "
                             f"({l2.sector_bytes}) must both be {k.SECTOR_BYTES_ASSUMED}, the "
                             "sector of the memory interface")
        if l2.slices % l2.partitions:
            raise ValueError(f"l2.slices ({l2.slices}) must be a multiple of l2.partitions "
                             f"({l2.partitions}) for the cached memory (copy slices)")
        if l3.enabled and l3.line_bytes != l2.line_bytes:
            raise ValueError(f"l3.line_bytes ({l3.line_bytes}) must equal l2.line_bytes "
                             f"({l2.line_bytes}) for the cached memory")
        self.l1_bytes = l1_bytes
        self.params = self._params(config, n_sms)
        self.meta, self.flags = zip(
            _tags(n_sms, l1_bytes, l1.line_bytes, l1.sector_bytes, l1.associativity),
            _tags(l2.slices, l2.size_bytes // l2.slices, l2.line_bytes, l2.sector_bytes,
                  l2.associativity),
            _tags(l3.slices if l3.enabled else 1, l3.size_bytes // l3.slices if l3.enabled else 0,
                  l2.line_bytes, l2.sector_bytes, l3.associativity),
            strict=True)
        self.free_fs = np.zeros(int(self.params[k.P_PIPE_RETURN]) + 2 * k.RETURN_BINS,
                                np.int64)
        self.free_fs[int(self.params[k.P_PIPE_RETURN])::2] = -1      # no bin booked yet
        self.banks = np.zeros((hbm.channels, hbm.banks_per_channel + 1, 2), np.int64)
        self.banks[:, :-1, 0] = -1
        self.banks[:, -1] = 0  # data bus: last direction read, no write-back waiting
        self.lru = np.zeros(1, np.int64)
        self.counts = np.zeros(k.N_COUNTS, np.int64)
        self.inline: tuple | None = None

    @staticmethod
    def _params(config, n_sms: int) -> np.ndarray:
        clock = Clock(config.chip.clock_ghz)
        hz = config.chip.clock_ghz * 1e9
        l2, l3, hbm = config.l2, config.l3, config.hbm
        l2_average = (l2.near_hit_latency_cycles + l2.far_hit_latency_cycles) // 2
        p = np.zeros(k.N_PARAMS, np.int64)
        l3_slices = l3.slices if l3.enabled else 1
        values = {
            k.P_L1_PS: clock.cycles_to_ps(config.l1.hit_latency_cycles),
            k.P_NOC_PS: clock.cycles_to_ps(config.noc.latency_cycles),
            k.P_FAR_PS: clock.cycles_to_ps(l2.far_hit_latency_cycles
                                           - l2.near_hit_latency_cycles),
            k.P_SLICE_PS: clock.cycles_to_ps(l2_slice_latency_cycles(config)),
            k.P_L3_PS: clock.cycles_to_ps(max(l3.hit_latency_cycles - l2_average, 1)),
            k.P_HBM_PS: hbm_fixed_latency_ps(config, clock),
            k.P_ACTIVATE_PS: round(hbm.row_activate_ns * 1000),
            k.P_PRECHARGE_PS: round(hbm.row_precharge_ns * 1000),
            k.P_SECTOR_BYTES: l2.sector_bytes,
            k.P_L1_SPL: config.l1.line_bytes // config.l1.sector_bytes,
            k.P_L2_SPL: l2.line_bytes // l2.sector_bytes,
            k.P_LINE_BYTES: l2.line_bytes,
            k.P_PARTITIONS: l2.partitions,
            k.P_SLICES: l2.slices,
            k.P_CHANNELS: hbm.channels,
            k.P_BANKS: hbm.banks_per_channel,
            k.P_ROW_BYTES: hbm.row_bytes,
            k.P_ROW_CHANNELS: hbm.row_channels,
            k.P_L3_ENABLED: int(l3.enabled),
            k.P_L3_SLICES: l3_slices,
            k.P_PORT_FS: _fs_per_byte(config.noc.port_bandwidth_bytes_per_clk * hz),
            k.P_SLICE_FS: _fs_per_byte(l2.slice_bandwidth_bytes_per_clk * hz),
            k.P_L3_FS: _fs_per_byte(l3.slice_bandwidth_bytes_per_clk * hz),
            k.P_CHANNEL_FS: _fs_per_byte(hbm.channel_bandwidth_gbps * 1e9),
            k.P_WRITEBACK_BOUND_FS: hbm.writeback_buffer_lines_per_channel * l2.line_bytes
            * _fs_per_byte(hbm.channel_bandwidth_gbps * 1e9),
            k.P_PIPE_UP: 0,
            k.P_PIPE_DOWN: n_sms,
            k.P_PIPE_SLICE: 2 * n_sms,
            k.P_PIPE_L3: 2 * n_sms + l2.slices,
            k.P_PIPE_CHANNEL: 2 * n_sms + l2.slices + l3_slices,
            k.P_REFRESH_INTERVAL_FS: round(hbm.refresh_interval_ns * 1e6),
            k.P_REFRESH_FS: round(hbm.refresh_ns * 1e6),
            k.P_WRITE_TO_READ_FS: round(hbm.write_to_read_gap_ns * 1e6),
            k.P_READ_TO_WRITE_FS: round(hbm.read_to_write_gap_ns * 1e6),
            k.P_ATOMIC_PS: round(l2.same_address_atomic_ns * 1000),
            k.P_PIPE_ATOMIC: 2 * n_sms + l2.slices + l3_slices + hbm.channels,
            k.P_PERSIST_WAYS: int(l2.associativity * l2.persisting_max_fraction),
            k.P_RETURN_FS: (_fs_per_byte(config.noc.read_return_gbps * 1e9 / 1024)
                            if config.noc.read_return_gbps > 0 else 0),
            k.P_RETURN_BIN_FS: clock.cycles_to_ps(k.RETURN_BIN_CYCLES) * 1000,
            k.P_SLICE_MIN_BYTES: (round(l2.slice_bandwidth_bytes_per_clk
                                        / l2.slice_requests_per_clk)
                                  if l2.slice_requests_per_clk > 0 else 0),
            k.P_PIPE_RETURN: 2 * n_sms + l2.slices + l3_slices + hbm.channels
            + 2 * l2.slices * k.ATOMIC_ENTRIES,
        }
        for index, value in values.items():
            p[index] = value
        return p

    def precondition_l2(self, dirty_fraction: float) -> None:
        """Fill every L2 way with a line of no kernel (line numbers from `FOREIGN_LINE`,
        all sectors present, the oldest LRU stamp, so they go before any line the kernel
        brings), every sector dirty in `dirty_fraction` of the ways (spread evenly over
        each set's ways): the L2 of a kernel that has been streaming for a while, whose
        new lines evict older ones and write the dirty ones back (`simulator.runner.sampling`)."""
        meta, flags = self.meta[k.LEVEL_L2], self.flags[k.LEVEL_L2]
        units, sets, _, ways = meta.shape
        meta[:, :, 0, :] = FOREIGN_LINE + np.arange(units * sets * ways,
                                                    dtype=np.int64).reshape(units, sets, ways)
        meta[:, :, 1:, :] = 0
        full = (1 << (meta.shape[2] - 2)) - 1
        way = np.arange(ways)
        dirty = np.floor((way + 1) * dirty_fraction) > np.floor(way * dirty_fraction)
        flags[:, :, :, 0] = full
        flags[:, :, :, 1] = np.where(dirty, full, 0).astype(np.uint8)

    def preload_l2(self, sectors: np.ndarray, dirty: bool = True) -> int:
        """Start with `sectors` (sector indices, byte address >> 5) resident in their home L2
        slices, as a kernel that wrote them in ascending address order just before leaves
        them (write-back, write-allocate: dirty when `dirty`), data present at time 0, in
        the normal eviction class, newer than every line already held; where more of their
        lines map to one set than it has ways, the later lines stay. For an L2 that holds
        no line of the kernel yet (empty, or `precondition_l2`'s lines, all equally old):
        the lines take clean ways before dirty ones, and whatever they replace is dropped
        without a write-back. Near copies, the L1s and the L3 stay as they are. Returns
        the sectors installed."""
        sectors = np.unique(np.asarray(sectors, np.int64))
        if sectors.size == 0:
            return 0
        meta, flags = self.meta[k.LEVEL_L2], self.flags[k.LEVEL_L2]
        units, sets, _, ways = meta.shape
        per_line = int(self.params[k.P_L2_SPL])
        lines, first = np.unique(sectors // per_line, return_index=True)
        bits = np.left_shift(1, sectors % per_line).astype(np.int64)
        masks = np.bitwise_or.reduceat(bits, first)
        where = _l2_places(lines, units, sets)
        order = np.lexsort((-np.arange(lines.size), where))     # by set, latest line first
        where, lines, masks = where[order], lines[order], masks[order]
        starts = np.flatnonzero(np.r_[True, where[1:] != where[:-1]])
        rank = np.arange(where.size) - np.repeat(starts, np.diff(np.r_[starts, where.size]))
        kept = rank < ways
        where, lines, masks, rank = where[kept], lines[kept], masks[kept], rank[kept]
        unit, s = where // sets, where % sets
        by_dirt = np.argsort(flags[:, :, :, 1] != 0, axis=2, kind="stable")
        way = by_dirt[unit, s, rank]
        age = np.argsort(np.argsort(lines))                     # address order: write order
        meta[unit, s, 0, way] = lines
        meta[unit, s, 1, way] = self.lru[0] + 1 + age
        meta[unit, s, 2:, way] = 0
        flags[unit, s, way, 0] = masks
        flags[unit, s, way, 1] = masks if dirty else 0
        self.lru[0] += lines.size
        return int(np.unpackbits(masks.astype(np.uint8)).sum())

    def inline_state(self, max_sectors: int = 0) -> tuple:
        """The arrays `serve_scratch` works on (with scratch room for requests of up to
        `max_sectors`), for SMs that serve their requests inside the compiled loop
        (`models.sm_memory`), with empty link tables (`models.link_memory_kernel.no_links`;
        `LinkMemory.inline_state` fills them). SMs read it again before each call of the
        loop, as a larger request elsewhere may have replaced the scratch arrays."""
        if self.inline is None or self.inline[-1].size < max_sectors:
            size = max(max_sectors, _SCRATCH_SECTORS)
            self.inline = (self.params, self.meta, self.flags, self.free_fs, self.banks,
                           self.lru, self.counts, *no_links(size), np.ones(size, np.bool_),
                           np.zeros(size, np.int64))
        return self.inline

    def fire_batch(self, sm_id: int, log: np.ndarray) -> None:
        """Hand requests served inside SM `sm_id`'s loop (`models.sm_memory` log rows) to the
        listeners as one `CACHED_MEMORY_BATCH`."""
        if self.hooks.listening:
            self.hooks.fire(CACHED_MEMORY_BATCH, sm_id=sm_id, kinds=log[:, LOG_KIND],
                            issue_ps=log[:, LOG_ISSUE], done_ps=log[:, LOG_DONE],
                            counts=log[:, LOG_COUNTS:])

    def access(self, sm_id: int, kind: str, sectors: np.ndarray, now_ps: int,
               ops: int = 1, policy: np.ndarray | None = None) -> int:
        """Completion time in ps of one warp's access (see `models.flat_memory` Contract);
        `ops`: an atomic's lane operations on one address; `policy`: its instruction's
        cache-policy row (`isa.trace_format`; None: no policy) (module docstring)."""
        if policy is None:
            policy = _NO_POLICY
        done = serve_request(_KINDS[kind], sm_id, sectors, now_ps, self.params, self.meta,
                             self.flags, self.free_fs, self.banks, self.lru, self.counts, ops,
                             np.ascontiguousarray(policy, np.int64))
        if self.hooks.listening:
            self.hooks.fire(CACHED_MEMORY_ACCESS, sm_id=sm_id, kind=kind, issue_ps=now_ps,
                            done_ps=done, counts=self.counts.copy())
        return done


@numba.njit(cache=True)
def _l2_places(lines, slices, sets):
    """home slice x sets + set of each line (`models.cached_memory_layout`'s hashes)."""
    out = np.empty(lines.size, np.int64)
    for i in range(lines.size):
        out[i] = l2_slice_of_line(lines[i], slices) * sets + l2_set_of_line(lines[i], sets)
    return out


@numba.njit(cache=True)
def _add_batch(kinds, counts, totals, requests):
    """Add a batch's request counts (row i: a request of kind code `kinds[i]`) to `totals`
    [kind code, count] and its requests to `requests` [kind code]."""
    for i in range(kinds.size):
        code = kinds[i]
        requests[code] += 1
        for c in range(counts.shape[1]):
            totals[code, c] += counts[i, c]


class CachedMemoryTracer(Tracer):
    """Sectors, bytes and hit rates per level and access kind, HBM row hits and write-backs.

    Components: `memory.l1.<kind>`, `memory.l2.<kind>`, `memory.l3.<kind>`,
    `memory.hbm.<kind>` (reads caused by that kind), `memory.hbm.writeback`; call `flush`
    after the run.
    """

    STATS = (
        Stat("requests", "count", "warp-level memory requests reaching the level"),
        Stat("sectors", "count", "32-byte sectors looked up at the level"),
        Stat("hit_sectors", "count", "sectors present at the level"),
        Stat("miss_sectors", "count", "sectors fetched from the level below"),
        Stat("hit_rate", "fraction", "hit_sectors / sectors"),
        Stat("bytes", "B", "bytes moved at this level"),
        Stat("far_lines", "count", "L2 lines served by the far partition"),
        Stat("copy_hit_sectors", "count",
             "L2 sectors served by a copy in the requester's partition"),
        Stat("row_hits", "count", "HBM accesses that found their row open"),
        Stat("row_misses", "count", "HBM accesses that opened a row"),
        Stat("row_hit_rate", "fraction", "row_hits / (row_hits + row_misses)"),
    )
    POSITIONS = (CACHED_MEMORY_ACCESS, CACHED_MEMORY_BATCH)

    def __init__(self, sheet) -> None:
        super().__init__(sheet)
        self.totals = np.zeros((len(KIND_CODES), k.N_COUNTS), np.int64)   # [kind code, count]
        self.requests = np.zeros(len(KIND_CODES), np.int64)
        self.pending: dict[str, list[np.ndarray]] = {}

    def on_event(self, owner: str, position: str, data: Mapping[str, Any]) -> None:
        """Keep one request's counts; they are summed per `_PENDING_CHUNK` requests (and by
        `flush`, which writes the sums to the sheet). A batch is summed at once."""
        if position == CACHED_MEMORY_BATCH:
            _add_batch(data["kinds"], data["counts"], self.totals, self.requests)
            return
        kind = data["kind"]
        pending = self.pending.get(kind)
        if pending is None:
            pending = self.pending[kind] = []
        pending.append(data["counts"])
        if len(pending) >= _PENDING_CHUNK:
            self._sum(kind)

    def _sum(self, kind: str) -> None:
        """Add the kept counts of `kind` to its totals."""
        pending = self.pending.pop(kind, [])
        if pending:
            self.totals[_KINDS[kind]] += np.stack(pending).sum(axis=0)
            self.requests[_KINDS[kind]] += len(pending)

    def flush(self) -> None:
        """Write the accumulated values to the sheet."""
        for kind in list(self.pending):
            self._sum(kind)
        sector = k.SECTOR_BYTES_ASSUMED
        rows = 0, 0
        seen = sorted(KIND_CODES[code] for code in np.flatnonzero(self.requests))
        for kind in seen:
            c = self.totals[_KINDS[kind]]
            l1_looked = 0 if kind in _L1_BYPASS else c[k.C_SECTORS]
            levels = (("l1", l1_looked, c[k.C_L1_HIT], c[k.C_L1_MISS],
                       self.requests[_KINDS[kind]]),
                      ("l2", c[k.C_L1_MISS], c[k.C_L2_HIT], c[k.C_L2_MISS], c[k.C_L2_REQUESTS]),
                      ("l3", c[k.C_L3_HIT] + c[k.C_L3_MISS], c[k.C_L3_HIT], c[k.C_L3_MISS],
                       c[k.C_L3_REQUESTS]))
            for level, looked, hit, miss, requests in levels:
                if looked == 0:
                    continue
                name = f"memory.{level}.{kind}"
                self.sheet.set(name, "requests", int(requests))
                self.sheet.set(name, "sectors", int(looked))
                self.sheet.set(name, "bytes", int(looked) * sector)
                if kind != "store":  # stores write through L1 and allocate in L2: no hit or miss
                    self.sheet.set(name, "hit_sectors", int(hit))
                    self.sheet.set(name, "miss_sectors", int(miss))
                    self.sheet.set(name, "hit_rate", float(hit / looked))
            if c[k.C_L2_LINES]:
                self.sheet.set(f"memory.l2.{kind}", "far_lines", int(c[k.C_FAR_LINES]))
                if kind != "store":
                    self.sheet.set(f"memory.l2.{kind}", "copy_hit_sectors",
                                   int(c[k.C_L2_COPY_HIT]))
            if c[k.C_HBM_READ]:
                self.sheet.set(f"memory.hbm.{kind}", "requests", int(c[k.C_HBM_REQUESTS]))
                self.sheet.set(f"memory.hbm.{kind}", "bytes", int(c[k.C_HBM_READ]) * sector)
            rows = rows[0] + int(c[k.C_ROW_HIT]), rows[1] + int(c[k.C_ROW_MISS])
        written = int(self.totals[:, k.C_HBM_WRITE].sum())
        if written:
            self.sheet.set("memory.hbm.writeback", "bytes", written * sector)
        if sum(rows):
            self.sheet.set("memory.hbm", "row_hits", rows[0])
            self.sheet.set("memory.hbm", "row_misses", rows[1])
            self.sheet.set("memory.hbm", "row_hit_rate", rows[0] / sum(rows))
