"""Trace records of the Hopper tile ops: TMA/bulk copies and mbarrier phases.

What it models
--------------
`TileRecorder` is the part of `simulator.runner.trace.TraceRecorder` that looks at
`cp.async.bulk.tensor`, `cp.async.bulk` and `mbarrier.*` warp-instructions. For each warp
that executed one it returns one event:

* a bulk/TMA copy: the distinct global 32-byte sectors it moves (for a tensor copy, the
  box's rows from the tensor map: box origin, strides and box dims, out-of-bounds elements
  clipped; every issuing lane's box is merged into the warp's one message) and, for a load,
  the mbarrier phase its `complete_tx` belongs to;
* `mbarrier.arrive*` / `expect_tx` / `complete_tx`: the phase it contributes to;
* `mbarrier.try_wait` / `test_wait`: the phase it waits for (-1: already complete before
  the barrier's first phase, no wait).

Phases: the functional run performs copies at issue, so its barrier states say nothing about
simulated time. The recorder counts, per barrier (CTA linear index, CTA-relative shared
address), the phases completed so far (watching the parity bit after every step that may
change it); an event that changes a barrier belongs to the phase that was current before
its step, and a wait for parity P when c phases are complete waits for phase
`c - 1 + (c % 2 == P)`. Each (barrier, phase) gets a dense slot id; `slot_events[slot]` is
the number of events that contribute to it. The replay completes a phase in simulated time
when all of them have happened there (copies at their completion, arrivals at issue).
`mbarrier.init` starts a barrier at the next even phase count, so re-initialised barriers
get fresh slots.

Clusters (`isa.cluster`): a barrier addressed through `mapa` is the owning CTA's (a remote
arrive contributes to that CTA's phase). A `.multicast::cluster` box is one event whose
sectors are read once and which contributes to the phase of the mbarrier at the same
CTA-relative offset in every CTA of its ctaMask; `barrier.cluster.arrive` is an event
contributing to the current cluster-barrier phase of every CTA of the cluster (a key per
CTA, `CLUSTER_BARRIER_KEY`; a thread's phase is its count of earlier arrivals) and
`barrier.cluster.wait` waits for its own CTA's. An event that contributes to several
slots carries a group code -2 - base instead of a slot: `slot_events[base]` is the number
of slots, which follow it; the ids base .. base + n are reserved in the slot space, so the
slots of later waves never move a group (`models.sm_core.contribute`).

Left out: lanes of one warp instruction addressing different barriers (the first lane's
barrier gets the event), `.im2col` copies (the interpreter rejects them), shared-to-shared
bulk copies move no global sectors. Units: 32-byte sectors, byte addresses.
"""

from __future__ import annotations

import numpy as np

from isa.memory import SHARED_WINDOW, WINDOW_SIZE
from isa.semantics.hopper_mbarrier import barrier_words
from isa.semantics.hopper_tma import (
    _base,
    _map,
    lanes_by_param_map,
    multicast_barriers,
    multicast_ranks,
)
from isa.trace_format import (
    KIND_BULK_LOAD,
    KIND_BULK_STORE,
    KIND_MBARRIER,
    KIND_MBARRIER_WAIT,
    KIND_SHARED,
    SECTOR_SHIFT,
)
from isa.types import TYPES

BULK_COPIES = frozenset({"cp.async.bulk.tensor", "cp.async.bulk"})
ARRIVALS = frozenset({"mbarrier.arrive", "mbarrier.arrive_drop", "mbarrier.expect_tx",
                      "mbarrier.complete_tx"})
WAITS = frozenset({"mbarrier.try_wait", "mbarrier.test_wait"})
INITS = frozenset({"mbarrier.init", "mbarrier.inval"})
CLUSTER_BARRIER = frozenset({"barrier.cluster.arrive", "barrier.cluster.wait"})
TILE_OPS = BULK_COPIES | ARRIVALS | WAITS | INITS | CLUSTER_BARRIER
MULTICAST = "multicast::cluster"
CLUSTER_BARRIER_KEY = 0xFFFF_FFFF
_LOAD_FLAG = "mbarrier::complete_tx::bytes"
_S32, _U32, _U64 = TYPES["s32"], TYPES["u32"], TYPES["u64"]


def _scalar(op, m, lane: np.ndarray, ty) -> int:
    return int(np.asarray(op.read(m, ty, lane)).reshape(-1)[0])


def span_items(first: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """first[i], first[i] + 1, ..., first[i] + counts[i] - 1 for each i, concatenated
    (int64)."""
    counts = np.asarray(counts, np.int64)
    total = int(counts.sum())
    offset = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
    return np.repeat(np.asarray(first, np.int64), counts) + offset


def _row_sectors(start: np.ndarray, stop: np.ndarray) -> np.ndarray:
    """Distinct sectors of the byte ranges [start, stop) (stop > start)."""
    first, last = start >> SECTOR_SHIFT, (stop - 1) >> SECTOR_SHIFT
    return np.unique(span_items(first, last - first + 1))


def box_sectors(m, ins, lane: np.ndarray, map_op, coords_op,
                patterns: dict | None = None) -> np.ndarray:
    """Global sectors of one lane's TMA box: inner rows clipped to the tensor, one numpy pass.

    `patterns` (a dict the caller keeps) caches the sectors of unclipped boxes relative to
    the box's first sector, per (box, strides, element size, inner bytes, start % 32): boxes
    of one map differ only by that offset, so each shape is computed once and shifted."""
    tm = _map(m, ins, map_op, lane)
    coords = [_scalar(it, m, lane, _S32) for it in coords_op.items]
    dims = tm.dims
    lo, hi = max(coords[0], 0), min(coords[0] + tm.box[0], dims[0])
    if hi <= lo:
        return np.zeros(0, np.int64)
    box = tm.box
    if patterns is not None and all(0 <= c and c + b <= d for c, b, d in
                                    zip(coords[1:], box[1:], dims[1:], strict=True)):
        strides = tm.strides_bytes
        start = (_base(m, ins, tm) + lo * tm.elem_bytes
                 + sum(c * st for c, st in zip(coords[1:], strides[1:], strict=True)))
        return _pattern(patterns, tm, hi - lo, start) + (start >> SECTOR_SHIFT)
    dims_a = np.array(dims, np.int64)
    strides_a = np.array(tm.strides_bytes, np.int64)
    outer = [np.arange(b, dtype=np.int64) + c for b, c in zip(box[1:], coords[1:],
                                                                strict=True)]
    rows = np.meshgrid(*outer, indexing="ij") if outer else []
    base = np.full(rows[0].size if rows else 1, _base(m, ins, tm), np.int64)
    inside = np.ones(base.size, bool)
    for k, pos in enumerate(rows, start=1):
        pos = pos.reshape(-1)
        inside &= (pos >= 0) & (pos < dims_a[k])
        base += pos * strides_a[k]
    base = base[inside]
    return _row_sectors(base + lo * tm.elem_bytes, base + hi * tm.elem_bytes)


def lanes_box_sectors(m, ins, ids: np.ndarray, map_op, coords_op, patterns: dict) -> list:
    """`box_sectors` of each lane of `ids`, the unclipped boxes (and the empty ones) of maps
    in the parameter space found for all lanes at once; the other lanes one by one."""
    found = [None] * ids.size
    for tm, base, lanes, c in lanes_by_param_map(m, ids, map_op, coords_op):
        inner, unclipped, start = _lane_boxes(tm, base, c)
        for k, fits, row, first in zip(lanes.tolist(), unclipped.tolist(), inner.tolist(),
                                       start.tolist(), strict=True):
            if row <= 0:
                found[k] = np.zeros(0, np.int64)
            elif fits:
                found[k] = _pattern(patterns, tm, row, first) + (first >> SECTOR_SHIFT)
    for k, lane in enumerate(ids.tolist()):
        if found[k] is None:
            found[k] = box_sectors(m, ins, np.array([lane]), map_op, coords_op, patterns)
    return found


def uniform_box_sectors(m, ids: np.ndarray, map_op, coords_op, patterns: dict):
    """`lanes_box_sectors` as one array [lanes, sectors] when every lane of `ids` names the
    same tensor map in the parameter space and its box is unclipped and shares one pattern
    (the same key of `patterns`) with the others; None otherwise."""
    groups = list(lanes_by_param_map(m, ids, map_op, coords_op))
    if len(groups) != 1 or groups[0][2].size != ids.size:
        return None
    tm, base, _, c = groups[0]
    inner, unclipped, start = _lane_boxes(tm, base, c)
    offset = start & ((1 << SECTOR_SHIFT) - 1)
    if not (unclipped & (inner > 0)).all() or (inner != inner[0]).any() or \
            (offset != offset[0]).any():
        return None
    pattern = _pattern(patterns, tm, int(inner[0]), int(start[0]))
    return pattern[None, :] + (start >> SECTOR_SHIFT)[:, None]


def _lane_boxes(tm, base: int, c: np.ndarray):
    """Per lane of one tensor map at `base` with box coordinates `c` [rank, lanes]: the
    elements of its inner rows inside the tensor (<= 0: none), whether its outer
    coordinates keep the box inside the tensor, and its first row's first byte."""
    box = np.array(tm.box, np.int64)[:, None]
    dims = np.array(tm.dims, np.int64)[:, None]
    strides = np.array(tm.strides_bytes, np.int64)[:, None]
    lo, hi = np.maximum(c[0], 0), np.minimum(c[0] + box[0], dims[0])
    unclipped = ((c[1:] >= 0) & (c[1:] + box[1:] <= dims[1:])).all(axis=0)
    return hi - lo, unclipped, base + lo * tm.elem_bytes + (c[1:] * strides[1:]).sum(axis=0)


def _pattern(patterns: dict, tm, inner: int, start: int) -> np.ndarray:
    """The cached sectors of an unclipped box of `tm` with `inner` elements per row whose
    first byte is at `start`, relative to its first sector (`_box_rows`), keyed by (box,
    strides, element size, inner elements, start % 32)."""
    key = (tm.box[1:], tm.strides_bytes[1:], tm.elem_bytes, inner,
           start & ((1 << SECTOR_SHIFT) - 1))
    pattern = patterns.get(key)
    if pattern is None:
        pattern = patterns[key] = _box_rows(tm.box, tm.strides_bytes, tm.elem_bytes, key[4],
                                            inner)
    return pattern


def _box_rows(box, strides, elem_bytes: int, start: int, inner: int) -> np.ndarray:
    """Sectors of an unclipped box whose first byte is at `start` (< 32), `inner` elements
    per row; the sectors of a box at byte address A + start are these + A / 32."""
    outer = [np.arange(b, dtype=np.int64) for b in box[1:]]
    rows = np.meshgrid(*outer, indexing="ij") if outer else []
    base = np.full(rows[0].size if rows else 1, start, np.int64)
    for k, pos in enumerate(rows, start=1):
        base += pos.reshape(-1) * strides[k]
    pattern = _row_sectors(base, base + inner * elem_bytes)
    pattern.flags.writeable = False
    return pattern


class TileRecorder:
    """Phase bookkeeping and per-warp events of the tile ops (see the module docstring)."""

    def __init__(self) -> None:
        self.completed: dict[int, int] = {}
        self.slots: dict[tuple[int, int], int] = {}
        self.slot_events: list[int] = []
        self.groups: dict[tuple[int, ...], int] = {}
        self.box_patterns: dict = {}

    def _key(self, m, ins, op, lane: np.ndarray, cta_linear: np.ndarray) -> int:
        return int(self._keys(m, ins, op, lane, cta_linear)[0])

    @staticmethod
    def _keys(m, ins, op, lanes: np.ndarray, cta_linear: np.ndarray) -> np.ndarray:
        """Barrier key (linear index of the CTA owning it << 32 | CTA-relative shared
        address) per lane; a shared::cluster address names another CTA's (`isa.cluster`)."""
        addr = op.address(m, lanes).astype(np.int64)
        inside = (addr >= SHARED_WINDOW) & (addr < SHARED_WINDOW + WINDOW_SIZE)
        addr = np.where(inside, addr - SHARED_WINDOW, addr)
        owner, addr = m.shared_owner(addr, lanes, ins)
        return (cta_linear[owner].astype(np.int64) << 32) | addr

    def _slot(self, key: int, phase: int) -> int:
        slot = self.slots.get((key, phase))
        if slot is None:
            slot = self.slots[(key, phase)] = len(self.slot_events)
            self.slot_events.append(0)
        return slot

    def _contribute(self, m, ins, op, firsts: np.ndarray, cta_linear: np.ndarray) -> np.ndarray:
        """Slots of the phases that the events of one step (one per warp, `firsts` = each
        warp's first lane) belong to: all events of a step on one barrier belong to the
        phase that was current before the step (the interpreter applies a step's arrivals
        together), which then completed if the barrier's parity changed."""
        keys = self._keys(m, ins, op, firsts, cta_linear)
        words, idx = barrier_words(m, ins, op, firsts)
        return self._assign(keys, (words[idx] >> np.uint64(63)).astype(np.int64))

    def _assign(self, keys: np.ndarray, parity: np.ndarray) -> np.ndarray:
        """`_contribute`'s slots of barrier `keys` whose parity bits after the step are
        `parity`."""
        unique, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
        counts = np.bincount(inverse, minlength=unique.size)
        slot_of = np.empty(unique.size, np.int32)
        for u, key in enumerate(unique.tolist()):
            done = self.completed.get(key, 0)
            if int(parity[first[u]]) != done & 1:
                self.completed[key] = done + 1
            slot_of[u] = slot = self._slot(key, done)
            self.slot_events[slot] += int(counts[u])
        return slot_of[inverse]

    def record(self, m, ins, lanes: np.ndarray, starts: np.ndarray, cta_linear: np.ndarray):
        """(kind, per-warp sectors or None, per-warp slot) for one step of the thread slots
        `lanes` (sorted; warp w's are `lanes[starts[w]:starts[w + 1]]`); kind as in trace.
        Per-warp sectors are a list of arrays, or one array [warps, sectors] when every warp
        has one lane and their boxes share one pattern (TMA issued by an elected lane)."""
        name = ins.opname
        n = starts.size
        slots = np.full(n, -1, np.int32)
        if name in INITS:
            for lane in lanes.tolist():
                key = self._key(m, ins, ins.ops[0], np.array([lane]), cta_linear)
                done = self.completed.get(key, -2)
                self.completed[key] = done + 2 - (done & 1)
            return KIND_SHARED, None, slots
        firsts = lanes[starts].astype(np.int64, copy=False)
        if name in ARRIVALS:
            op = ins.ops[1] if name.startswith("mbarrier.arrive") else ins.ops[0]
            return KIND_MBARRIER, None, self._contribute(m, ins, op, firsts, cta_linear)
        if name in CLUSTER_BARRIER:
            return self._cluster_barrier(m, ins, firsts, cta_linear)
        if name in WAITS:
            keys = self._keys(m, ins, ins.ops[1], firsts, cta_linear)
            want = np.broadcast_to(np.asarray(ins.ops[2].read(
                m, _U32 if "parity" in ins.flags else _U64, firsts)).astype(np.uint64),
                firsts.shape)
            want = (want if "parity" in ins.flags else want >> np.uint64(63)) & np.uint64(1)
            for w, key in enumerate(keys.tolist()):
                done = self.completed.get(key, 0)
                phase = done - 1 + int((done & 1) == int(want[w]))
                slots[w] = self._slot(key, phase) if phase >= 0 else -1
            return KIND_MBARRIER_WAIT, None, slots
        load = _LOAD_FLAG in ins.flags
        if ins.opname == "cp.async.bulk.tensor":
            map_op, coords_op = ins.ops[1:3] if load else ins.ops[:2]
            sectors = (uniform_box_sectors(m, lanes, map_op, coords_op, self.box_patterns)
                       if n == lanes.size else None)
            if sectors is None:
                per_lane = iter(lanes_box_sectors(m, ins, lanes, map_op, coords_op,
                                                  self.box_patterns))
        else:
            sectors = None
            per_lane = (self._copy_sectors(m, ins, np.array([lane]), load)
                        for lane in lanes.tolist())
        if sectors is None:
            sectors = []
            for size in np.diff(np.append(starts, lanes.size)).tolist():
                parts = [next(per_lane) for _ in range(size)]
                sectors.append(np.unique(np.concatenate(parts)) if len(parts) > 1
                               else parts[0])
        if load and MULTICAST in ins.flags:
            slots = self._multicast(m, ins, firsts, cta_linear)
        elif load:
            slots = self._contribute(m, ins, ins.ops[3], firsts, cta_linear)
        return (KIND_BULK_LOAD if load else KIND_BULK_STORE), sectors, slots

    def _group(self, slots: list[int]) -> int:
        """The slot code of an event contributing to each of `slots`: -2 - base, where
        `slot_events[base]` holds their count and the slots follow (ids reserved in the
        slot space, so later slots never move them; `models.sm_core.contribute`)."""
        key = tuple(slots)
        code = self.groups.get(key)
        if code is None:
            base = len(self.slot_events)
            self.slot_events += [len(slots), *slots]
            code = self.groups[key] = -2 - base
        return code

    def _multicast(self, m, ins, firsts: np.ndarray, cta_linear: np.ndarray) -> np.ndarray:
        """Per warp, the group of the phases its multicast box completes bytes on: the
        mbarrier at the operand's CTA-relative offset in each CTA of its ctaMask."""
        owner, target, rel = multicast_barriers(m, ins, firsts,
                                                multicast_ranks(m, ins, firsts))
        words = m.mem.shared.view(np.uint64)
        parity = (words[(target * m.mem.shared_bytes + rel) // 8] >> np.uint64(63))
        slots = self._assign((cta_linear[target].astype(np.int64) << 32) | rel,
                             parity.astype(np.int64))
        out = np.full(firsts.size, -1, np.int32)
        for w in range(firsts.size):
            out[w] = self._group(slots[owner == w].tolist())
        return out

    def _cluster_barrier(self, m, ins, firsts: np.ndarray, cta_linear: np.ndarray):
        """`barrier.cluster.arrive` (each warp's event contributes to the phase of every CTA
        of its cluster) or `.wait` (for its own CTA's phase). A thread's phase is the
        number of its arrivals before (`isa.semantics.cluster`); each CTA's barrier is a
        key of its own (shared address `CLUSTER_BARRIER_KEY`, no real shared offset)."""
        arrived, _ = m.cluster_arrivals
        phase = arrived[firsts] - 1
        cta = m.cta_of[firsts]
        out = np.full(firsts.size, -1, np.int32)
        if ins.opname == "barrier.cluster.wait":
            for w in range(firsts.size):
                key = (int(cta_linear[cta[w]]) << 32) | CLUSTER_BARRIER_KEY
                out[w] = self._slot(key, int(phase[w]))
            return KIND_MBARRIER_WAIT, None, out
        for w in range(firsts.size):
            first = int(m.cluster_first[cta[w]])
            slots = []
            for r in range(m.cluster_size):
                key = (int(cta_linear[first + r]) << 32) | CLUSTER_BARRIER_KEY
                slot = self._slot(key, int(phase[w]))
                self.slot_events[slot] += 1
                slots.append(slot)
            out[w] = self._group(slots) if len(slots) > 1 else slots[0]
        return KIND_MBARRIER, None, out

    @staticmethod
    def _copy_sectors(m, ins, one: np.ndarray, load: bool) -> np.ndarray:
        """Sectors of one lane's plain bulk copy."""
        if ".shared::cta." in ins.text + "." and load:
            return np.zeros(0, np.int64)
        size = _scalar(ins.ops[2], m, one, _U32)
        addr = int((ins.ops[1] if load else ins.ops[0]).address(m, one)[0])
        return _row_sectors(np.array([addr], np.int64), np.array([addr + size], np.int64))
