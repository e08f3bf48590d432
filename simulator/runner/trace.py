"""Per-warp dynamic instruction traces recorded from the functional interpreter.

What it models
--------------
`TraceRecorder` is an `isa.run_kernel` observer. After every interpreter step it records, for
each warp that executed the step, one event: the pc, the number of active lanes and, for
memory instructions, what the timing model needs to know about the access:

* global and local accesses: the distinct 32-byte sectors the warp touches (sector index =
  byte address >> 5). Local memory is per thread; its addresses are laid out as the hardware
  interleaves them (the same offset of consecutive lanes is contiguous) in a window of their
  own, so a warp reading one local word touches one 128-byte line;
* shared accesses: the bank-conflict degree, the largest number of distinct 4-byte words
  that map to one of the 32 banks among the active lanes (1 = conflict free, broadcasts
  included); wide accesses count every word they touch, so a v4 load has degree >= 4;
* param/const loads: no address data (served by the constant cache);
* Hopper tile ops (`simulator.runner.trace_tiles`): bulk/TMA copies carry the global sectors of
  their box or range, and they and the `mbarrier.*` events carry the barrier phase slot
  (`phase_slot`) they contribute to or wait for; `slot_events[slot]` counts contributions;
* extension ops whose timing depends on data (`isa.event_detail`): that data as `detail`;
* cache policies (`isa.semantics.cache_policy.instruction_policy`): per pc, from the first
  execution of each memory instruction that has one (`WarpTrace.pc_policy`). Prefetches
  (`prefetch`, `cp.async.bulk.prefetch.L2`), `discard.global.L2` and
  `applypriority.global.L2` are global events too: a prefetch to L1 a load of its 128-byte
  line, the others L2-only loads (`KIND_LOAD_CG`) of their line (of their range for a bulk
  prefetch) whose policy row says what the L2 does with it.

A run of plain instructions the interpreter steps at once (`isa.interpreter`) is given to
`record_run`; with a `fuse_end` table (`models.units.fusable_run_ends`) each stretch of it
that the table allows is one event whose pc is the stretch's own, numbered after the
program's pcs in `WarpTrace.fused_runs` order ((first pc, end) pairs).

Global warp id = linear CTA index (x fastest) * warps_per_cta + warp within the CTA.
Everything is vectorised over all warps of a step; `finish()` turns the recorded chunks into
a `WarpTrace` whose events are grouped by warp, in each warp's execution order
(`simulator.runner.trace_grouping`).
The format itself (`KIND_*`, `SECTOR_KINDS`, `WarpTrace`, ...) is `isa.trace_format`'s,
re-exported here.

Left out: warps whose lanes are all predicated off by a guard (the interpreter skips them,
so they issue nothing here), per-lane byte masks inside a sector, texture/surface spaces.
Units: byte addresses, 32-byte sectors, lanes, counts.
"""

from __future__ import annotations

import numpy as np

from isa.event_detail import EVENT_DETAILS
from isa.memory import LOCAL_WINDOW, SHARED_WINDOW, WINDOW_SIZE
from isa.operands import DImm
from isa.semantics.cache_policy import LINE_OPS, POLICY_OPS, instruction_policy
from isa.trace_format import (  # noqa: F401  (the trace format, re-exported for importers here)
    KIND_ATOMIC,
    KIND_BULK_LOAD,
    KIND_BULK_STORE,
    KIND_CONST,
    KIND_LOAD,
    KIND_LOAD_CG,
    KIND_MBARRIER,
    KIND_MBARRIER_WAIT,
    KIND_NAMES,
    KIND_NONE,
    KIND_SHARED,
    KIND_STORE,
    LOCAL_TRACE_BASE,
    POLICY_FIELDS,
    SECTOR_KINDS,
    SECTOR_SHIFT,
    WarpTrace,
    sector_events,
)
from isa.types import TYPES
from simulator.runner.trace_grouping import grouped_fields, grown, join_grouped, warp_order
from simulator.runner.trace_lanes import distinct_per_group, lane_depth, warp_runs, with_successors
from simulator.runner.trace_tiles import TILE_OPS, TileRecorder

_L1_BYPASS_FLAGS = frozenset({"cg", "cv"})
"""Cache operators of a global load that caches in L2 only (`KIND_LOAD_CG`)."""

_L2_ONLY_OPS = frozenset({"discard", "applypriority", "cp.async.bulk.prefetch"})
"""Ops that reach the L2 without looking in the L1 (`KIND_LOAD_CG`), besides `.cg`/`.cv`
loads and prefetches to L2."""
_STORE_OPS = frozenset({"st", "red", "stmatrix", "wmma.store"})
_ATOMIC_OPS = frozenset({"atom", "red"})
_ADDRESS_AT_0 = frozenset({"st", "red", "stmatrix", "wmma.store", "prefetch", "prefetchu",
                           "discard", "applypriority", "cp.async.bulk.prefetch"})
_LINE_BYTES = 128
"""The line a prefetch, discard or applypriority acts on."""


def _access_bytes(ins) -> int:
    if ins.opname in LINE_OPS:
        return _LINE_BYTES
    if ins.opname == "cp.async" and isinstance(ins.ops[2], DImm):
        return int(ins.ops[2].value)
    bits = max((t.bits for t in ins.types), default=32) if ins.types else 32
    return max(bits // 8, 1) * max(int(ins.vec or 1), 1)


def _address_operand(ins):
    if ins.opname in _ADDRESS_AT_0:
        return ins.ops[0]
    return ins.ops[1]


def _memory_kind(ins, space: str) -> int:
    if space in ("param", "const"):
        return KIND_CONST
    if space == "shared":
        return KIND_SHARED
    if ins.opname in _ATOMIC_OPS:
        return KIND_ATOMIC
    if ins.opname in _STORE_OPS:
        return KIND_STORE
    if ins.opname in _L2_ONLY_OPS or (ins.opname == "prefetch" and "L1" not in ins.flags):
        return KIND_LOAD_CG
    return KIND_LOAD_CG if ins.flags & _L1_BYPASS_FLAGS and space == "global" else KIND_LOAD


def _space_of(ins, addr: np.ndarray) -> tuple[str, np.ndarray]:
    """Resolve a generic access to its space (the interpreter already checked it is one)."""
    space = ins.space
    if ins.opname == "cp.async":
        return "global", addr
    if space is not None:
        return space, addr
    if addr.size and addr[0] >= SHARED_WINDOW and addr[0] < SHARED_WINDOW + WINDOW_SIZE:
        return "shared", addr - SHARED_WINDOW
    if addr.size and addr[0] >= LOCAL_WINDOW and addr[0] < LOCAL_WINDOW + WINDOW_SIZE:
        return "local", addr - LOCAL_WINDOW
    return "global", addr


class TraceRecorder:
    """Observer for `isa.run_kernel` that builds a `WarpTrace` (call `finish()` after the run)."""

    def __init__(self, grid: tuple[int, int, int], block_threads: int, local_bytes: int = 0,
                 fuse_end: np.ndarray | None = None):
        self._made_with = (grid, block_threads, local_bytes, fuse_end)
        self.grid = grid
        self.fuse_end = fuse_end            # `models.units.fusable_run_ends`, or None
        self.fused_runs: dict[tuple[int, int], int] = {}
        self.warps_per_cta = -(-block_threads // 32)
        self.local_stride_bytes = max(int(local_bytes), 1)
        self._machine = None
        self._cta_linear = np.zeros(0, dtype=np.int64)
        self._chunks: list[tuple] = []
        self._sector_chunks: list[np.ndarray] = []     # recorded since `_all_sectors`
        self._sector_buf = np.zeros(0, np.int64)
        self._sector_used = 0
        self._n_sectors = 0
        self._tiles = TileRecorder()
        self._slot_chunks: dict[int, np.ndarray] = {}
        self._grouped: dict | None = None
        self._policy_seen: set[int] = set()
        self._policies: dict[int, np.ndarray] = {}      # pc -> `POLICY_FIELDS` row
        self._n_pcs = 0
        self._last: tuple = (None,)         # (exec_lanes, its lanes, warp runs, warps, zeros)
        self.silent_per_cta: np.ndarray | None = None
        self.record_silent = None

    def clear(self) -> None:
        """Drop everything recorded (and the silent counting): as freshly made."""
        self.__init__(*self._made_with)

    def count_silent(self) -> None:
        """From now on count, per CTA (`silent_per_cta`), the warp-instructions the
        interpreter counts for warps none of whose lanes executed (no event here)."""
        self.silent_per_cta = np.zeros(int(np.prod(self.grid)), np.int64)
        self.record_silent = self._record_silent

    def slot_barriers(self) -> tuple[np.ndarray, np.ndarray]:
        """(barrier key, phase) of each slot id recorded (`simulator.runner.trace_tiles`), -1 at
        the slot table's group entries."""
        n = len(self._tiles.slot_events)
        key, phase = np.full(n, -1, np.int64), np.full(n, -1, np.int64)
        for (k, p), slot in self._tiles.slots.items():
            key[slot], phase[slot] = k, p
        return key, phase

    def _record_silent(self, m, slots: np.ndarray) -> None:
        np.add.at(self.silent_per_cta, self._linear_ctas(m)[m.cta_of[slots]], 1)

    def _linear_ctas(self, m) -> np.ndarray:
        """The grid's linear index of each of batch `m`'s CTAs (cached per batch)."""
        if m is not self._machine:
            self._machine = m
            ids = m.cta_ids.astype(np.int64)
            gx, gy = self.grid[0], self.grid[1]
            self._cta_linear = ids[:, 0] + gx * (ids[:, 1] + gy * ids[:, 2])
            self._last = (None,)
        return self._cta_linear

    def _warps(self, m, exec_lanes) -> tuple:
        """(lanes, warp run starts, active lanes, global warps, zeros) of `exec_lanes`."""
        self._linear_ctas(m)
        last = self._last
        if last[0] is exec_lanes:          # a run of instructions stepped with these lanes
            return last[1:]
        lanes = m.lane_ids(exec_lanes)
        starts, warp_slots, active = warp_runs(lanes)
        wpc = self.warps_per_cta
        gwarp = self._cta_linear[warp_slots // wpc] * wpc + warp_slots % wpc
        zeros = np.zeros(gwarp.size, dtype=np.int32)
        self._last = (exec_lanes, lanes, starts, active, gwarp, zeros)
        return self._last[1:]

    def record_run(self, m, first: int, stop: int, lanes, n_warps: int) -> None:
        """Instructions `first` .. `stop` - 1 stepped at once with `lanes` (plain, skipped,
        unguarded: `isa.interpreter`): each stretch that `fuse_end` allows is one event whose
        pc is its fused run's (numbered after the program's pcs, in `fused_runs` order)."""
        instrs = m.program.instrs
        fuse_end = self.fuse_end
        pc = first
        while pc < stop:
            end = pc + 1 if fuse_end is None else min(int(fuse_end[pc]), stop)
            if end - pc < 2:
                self(m, instrs[pc], lanes, n_warps)
                pc += 1
                continue
            key = (pc, end)
            fid = self.fused_runs.get(key)
            if fid is None:
                fid = self.fused_runs[key] = len(instrs) + len(self.fused_runs)
            _, _, active, gwarp, zeros = self._warps(m, lanes)
            self._chunks.append((gwarp, fid, active, KIND_NONE, zeros, None))
            pc = end

    def __call__(self, m, ins, exec_lanes, n_warps: int) -> None:
        lanes, starts, active, gwarp, zeros = self._warps(m, exec_lanes)
        nw = gwarp.size
        kind, detail, sstart = KIND_NONE, zeros, None
        if ins.pc not in self._policy_seen and ins.opname in POLICY_OPS:
            self._policy(m, ins, exec_lanes)
        if ins.opname in TILE_OPS:
            kind, detail, sstart = self._tile(m, ins, lanes, starts, nw)
        elif ins.unit == "lsu" and ins.spec.latency == "mem":
            group = np.repeat(np.arange(nw, dtype=np.int64), active)
            kind, detail, sstart = self._memory(m, ins, exec_lanes, lanes, group, gwarp, nw)
        elif ins.opname in EVENT_DETAILS:
            detail = EVENT_DETAILS[ins.opname](m, ins, exec_lanes)
        self._chunks.append((gwarp, ins.pc, active, kind, detail, sstart))

    def _policy(self, m, ins, exec_lanes) -> None:
        """Keep the cache-policy row of `ins` (its first execution's, module docstring)."""
        self._policy_seen.add(ins.pc)
        self._n_pcs = len(m.program.instrs)
        row = instruction_policy(m, ins, exec_lanes)
        if row is not None:
            self._policies[ins.pc] = row

    def pc_policy(self) -> np.ndarray | None:
        """The cache-policy rows recorded so far, one per program pc (`WarpTrace.pc_policy`);
        None when no instruction applied one."""
        if not self._policies:
            return None
        table = np.zeros((self._n_pcs, POLICY_FIELDS), np.int64)
        for pc, row in self._policies.items():
            table[pc] = row
        return table

    def _tile(self, m, ins, lanes, starts, nw):
        kind, sectors, slots = self._tiles.record(m, ins, lanes, starts, self._cta_linear)
        self._slot_chunks[len(self._chunks)] = slots
        if kind == KIND_SHARED:
            return kind, np.ones(nw, dtype=np.int32), None
        if sectors is None:
            return kind, np.zeros(nw, dtype=np.int32), None
        if isinstance(sectors, np.ndarray):           # [warps, sectors]: one box pattern
            counts = np.full(nw, sectors.shape[1], dtype=np.int32)
            sec = sectors.reshape(-1)
        else:
            counts = np.array([s.size for s in sectors], dtype=np.int32)
            sec = np.concatenate(sectors).astype(np.int64, copy=False)
        sstart = self._n_sectors + np.concatenate(([0], np.cumsum(counts)[:-1]))
        self._sector_chunks.append(sec)
        self._n_sectors += sec.size
        return kind, counts, sstart

    def _memory(self, m, ins, exec_lanes, lanes, group, gwarp, nw):
        nbytes = _access_bytes(ins)
        space, addr = _space_of(ins, _address_operand(ins).address(m, exec_lanes))
        kind = _memory_kind(ins, space)
        if ins.opname in LINE_OPS:
            addr = addr & ~np.int64(_LINE_BYTES - 1)
        elif ins.opname == "cp.async.bulk.prefetch":     # the first lane's size for all
            size = ins.ops[1].read(m, TYPES["u32"], exec_lanes)
            nbytes = max(int(np.asarray(size).reshape(-1)[0]), 1)
        if kind == KIND_CONST:
            return kind, np.zeros(nw, dtype=np.int32), None
        if kind == KIND_SHARED:
            return kind, self._bank_degree(addr, group, nbytes, nw), None
        if space == "local":
            lane = lanes & 31
            addr = (LOCAL_TRACE_BASE + (gwarp[group] * self.local_stride_bytes + addr) * 32
                    + lane * nbytes)
        if kind == KIND_ATOMIC:             # the event's slot: lanes per address
            self._slot_chunks[len(self._chunks)] = lane_depth(addr, group, nw)
        first = addr >> SECTOR_SHIFT
        span = ((addr[0] + nbytes - 1) >> SECTOR_SHIFT) - first[0] + 1 if addr.size else 1
        sec, grp = with_successors(first, group, int(span))
        sec, grp = distinct_per_group(sec, grp)
        counts = np.bincount(grp, minlength=nw).astype(np.int32)
        sstart = self._n_sectors + np.concatenate(([0], np.cumsum(counts)[:-1]))
        self._sector_chunks.append(sec)
        self._n_sectors += sec.size
        return kind, counts, sstart

    @staticmethod
    def _bank_degree(addr, group, nbytes: int, nw: int) -> np.ndarray:
        words, grp = with_successors(addr >> 2, group, max(nbytes // 4, 1))
        words, grp = distinct_per_group(words, grp)
        per_bank = np.bincount(grp * 32 + (words & 31), minlength=nw * 32).reshape(nw, 32)
        return per_bank.max(axis=1).astype(np.int32)

    def finish(self) -> WarpTrace:
        """Group the recorded events by warp (stable: each warp keeps its order).

        A later call groups only the chunks recorded since and appends them when they are
        all of later warps (CTA ranges traced in order, as sampling does); the arrays of
        the result are shared with later results, so they must not be changed."""
        n_ctas = self.grid[0] * self.grid[1] * self.grid[2]
        n_warps = n_ctas * self.warps_per_cta
        if not self._chunks and self._grouped is None:
            empty = np.zeros(0, dtype=np.int64)
            return WarpTrace(self.warps_per_cta, n_ctas, np.zeros(n_warps + 1, np.int64),
                             empty.astype(np.int32), empty.astype(np.int16),
                             empty.astype(np.int8), empty.astype(np.int32), empty, empty)
        grouped = self._group_all(n_warps)
        sectors = self._all_sectors()
        offsets = np.zeros(n_warps + 1, dtype=np.int64)
        offsets[1:] = np.cumsum(grouped["per_warp"])
        slot_events = np.array(self._tiles.slot_events, dtype=np.int64)
        return WarpTrace(self.warps_per_cta, n_ctas, offsets, grouped["pc"], grouped["active"],
                         grouped["kind"], grouped["detail"], grouped["sstart"], sectors,
                         grouped["slot"], slot_events, tuple(self.fused_runs),
                         self.pc_policy())

    def _group_all(self, n_warps: int) -> dict:
        """Every chunk recorded so far grouped by warp (`_grouped`, brought up to date: the
        chunks since the last call appended when they are all of later warps, else all
        regrouped)."""
        done = self._grouped
        if done is None or done["chunks"] == len(self._chunks):
            grouped = done if done is not None else self._group(0, n_warps)
        else:
            grouped = self._group(done["chunks"], n_warps)
            if grouped["first_warp"] > done["last_warp"]:
                grouped = join_grouped(done, grouped)
            else:
                grouped = self._group(0, n_warps)
        self._grouped = grouped
        return grouped

    def _all_sectors(self) -> np.ndarray:
        """The sectors recorded so far, as one array: a view of a buffer with spare capacity
        that the chunks since the last call are appended to (copied again only when it
        grows; earlier results keep their views, which later appends never write)."""
        if not self._sector_chunks:
            return self._sector_buf[:self._sector_used]
        if not self._sector_used and len(self._sector_chunks) == 1:
            self._sector_buf = self._sector_chunks.pop()      # the first chunk as it is
            self._sector_used = self._sector_buf.size
            return self._sector_buf
        n = self._sector_used + sum(c.size for c in self._sector_chunks)
        self._sector_buf = grown(self._sector_buf, self._sector_used, n)
        at = self._sector_used
        for chunk in self._sector_chunks:
            self._sector_buf[at:at + chunk.size] = chunk
            at += chunk.size
        self._sector_chunks, self._sector_used = [], n
        return self._sector_buf[:n]

    def grouped(self) -> tuple[dict, np.ndarray]:
        """The events recorded so far grouped by warp, as `finish` groups them (field
        arrays, `per_warp`, `first_warp`, `last_warp`, `slot`), and the sector array their
        `sstart` indexes (shared with later results: not to be changed)."""
        return self._group_all(self.warps_per_cta * int(np.prod(self.grid))), \
            self._all_sectors()

    @property
    def empty(self) -> bool:
        """Whether nothing has been recorded or installed."""
        return not self._chunks and self._grouped is None

    @property
    def sector_count(self) -> int:
        """Sectors recorded so far (where the next event's sectors start)."""
        return self._n_sectors

    def append_grouped(self, grouped: dict, sectors: np.ndarray) -> None:
        """Append events already grouped by warp, of warps after every recorded one
        (`simulator.runner.trace_synthesis`), whose `sstart` count from the sectors recorded so
        far, and their `sectors`."""
        done = self._group_all(self.warps_per_cta * int(np.prod(self.grid)))
        self._grouped = join_grouped(done, dict(grouped, chunks=len(self._chunks)))
        self._sector_chunks.append(sectors)
        self._n_sectors += sectors.size

    def install(self, grouped: dict, sectors: np.ndarray, slot_events: np.ndarray) -> None:
        """Replace everything recorded by a whole launch's events already grouped by warp
        (`simulator.runner.work_synthesis`: fields, `per_warp`, `first_warp`, `last_warp`,
        `slot`), the `sectors` their `sstart` index and the slot table; the fused runs
        recorded so far keep their numbers."""
        self._chunks, self._slot_chunks = [], {}
        self._sector_chunks, self._sector_buf = [sectors], np.zeros(0, np.int64)
        self._sector_used, self._n_sectors = 0, int(sectors.size)
        self._tiles.slot_events = slot_events
        self._grouped = dict(grouped, chunks=0)

    def _group(self, first: int, n_warps: int) -> dict:
        """The events of chunks `first:` grouped by warp: field arrays, the events per warp,
        the chunk count covered and the lowest and highest warp."""
        chunks = self._chunks[first:]
        sizes = np.array([c[0].size for c in chunks], dtype=np.int64)
        warp = np.concatenate([c[0] for c in chunks]).astype(np.int64, copy=False)
        has_sstart = np.array([c[5] is not None for c in chunks], dtype=np.bool_)
        sstarts = [c[5] for c in chunks if c[5] is not None]
        dest, per_warp = warp_order(warp, n_warps)
        pc, kind, active, detail, sstart = grouped_fields(
            dest, sizes, np.array([c[1] for c in chunks], dtype=np.int32),
            np.array([c[3] for c in chunks], dtype=np.int8), has_sstart,
            np.concatenate([c[2] for c in chunks]), np.concatenate([c[4] for c in chunks]),
            np.concatenate(sstarts).astype(np.int64, copy=False) if sstarts
            else np.zeros(0, np.int64))
        slot = None
        if self._slot_chunks:
            slots = np.concatenate([self._slot_chunks.get(k, np.full(c[0].size, -1, np.int32))
                                    for k, c in enumerate(chunks, start=first)])
            slot = np.empty(slots.size, slots.dtype)
            slot[dest] = slots
        return {"chunks": len(self._chunks), "first_warp": int(warp.min()),
                "last_warp": int(warp.max()), "per_warp": per_warp, "pc": pc,
                "active": active, "kind": kind, "detail": detail, "sstart": sstart,
                "slot": slot}
