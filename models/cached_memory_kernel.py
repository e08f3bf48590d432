"""The compiled step of `models.cached_memory`: one warp request through L1, L2, L3 and HBM.

What it models
--------------
`serve_request` runs one warp instruction's sectors through every level in a single numba
call: the SM's L1 tag array, the crossbar port, the L2 slices' tag arrays, the optional L3,
HBM banks and channels. The policy and timing rules are written in `models.cached_memory`;
this module holds only the arithmetic, on arrays the caller owns:

* `meta[level]` int64 `[unit, set, 2 + sectors_per_line, way]`: the line number (tag, -1 =
  empty), the LRU stamp, then per sector the ps at which its data is (or will be) present;
  ways last, so a set's tags (and its stamps) lie side by side for the lookups' scans;
* `flags[level]` uint8 `[unit, set, way, 2]`: the valid-sector and dirty-sector masks;
* `free_fs` int64: the "next free" time of every bandwidth pipe in femtoseconds, laid out as
  the `PIPE_*` offsets in `params` say, then from `P_PIPE_ATOMIC` the slices' atomic tables
  (per entry a tag, line + 1, and the ps its last atomic is done: `_atomic_unit`), then from
  `P_PIPE_RETURN` the calendar of the crossbar's read return (per bin its number and the fs
  of transfer booked in it: `_book_return`); `lru` int64 `[1]`: the LRU stamp counter;
* `banks` int64 `[channel, bank + 1, 2]`: per bank the open row (-1 = closed) and the ps the
  bank is free; the extra last entry of each channel (`bank = banks_per_channel`) holds the
  channel's data bus: the direction of its last transfer (0 read, 1 write) and the bytes of
  write-back waiting in its buffer for the next batch;
* `counts` int64 `[N_COUNTS]`: what this request did, for the hook (index names `C_*`).

The tag arrays follow `models.tag_array` (set = line number modulo sets, tag = line number,
sector masks with bit i = sector i, LRU by stamp, an empty way before the oldest), except
for eviction classes and that an L2 slice picks the set by `l2_set_of_line` (an XOR-fold of
the line number). Eviction classes (`models.cached_memory` states the policy): a line's stamp
carries its class as a band (`CLASS_BAND`: evict-first below, evict-last above the normal
lines), so the least stamp is the LRU line of the lowest class; an access of class
`L2_UNCHANGED` (every access without a policy) keeps a held line's class and gives a new
line the normal one. Evict-last lines of a set are held to `P_PERSIST_WAYS` ways: a new one
beyond replaces the set's LRU evict-last line, a held line raised to evict-last lowers that
one to normal. The per-request `policy` row (`isa.trace_format`) gives each L2 line its
class (`_line_class`), the L1 its mode, misses their fetch size and maintenance ops their
action (`_maintain`). With the modulo set index
the modulo, the rows of a GEMM operand 16 KiB apart fell into 2 of a slice's 256 sets and
missed to HBM (a 4096x8192x8192 bf16 GEMM read 2.56 GB from HBM for 192 MB of operands). The
address hashes are `models.address_map`'s (`tests/test_cached_memory.py` checks they agree).

The HBM step is `models.hbm_kernel`'s; array indices, compile options (`step`: no reference
counting, so the helpers allocate nothing) and address hashes are
`models.cached_memory_layout`'s. `serve_request` allocates the request's scratch arrays and
hands them to `_serve`.

Units: ps, fs for pipe bookings, sector indices (byte address >> 5), bytes.
"""

from __future__ import annotations

import numba
import numpy as np

from isa.trace_format import (
    FETCH_64B,
    FETCH_256B,
    FETCH_SECTOR,
    FETCH_SHIFT,
    L1_EVICT_FIRST,
    L1_NO_ALLOCATE,
    L1_SHIFT,
    L2_FIRST,
    L2_LAST,
    L2_NORMAL,
    L2_UNCHANGED,
    OP_ACCESS,
    OP_DISCARD,
    OP_SHIFT,
    POLICY_CODE,
    POLICY_HI,
    POLICY_LO,
    POLICY_MID,
    RANGE_SHIFT,
    SECONDARY_SHIFT,
    SHARE_SHIFT,
    SHARE_WHOLE,
)
from models.cached_memory_layout import (
    ATOMIC_ENTRIES,
    C_FAR_LINES,
    C_HBM_READ,
    C_HBM_REQUESTS,
    C_L1_HIT,
    C_L1_MISS,
    C_L2_COPY_HIT,
    C_L2_HIT,
    C_L2_LINES,
    C_L2_MISS,
    C_L2_REQUESTS,
    C_L2_WRITEBACK,
    C_L3_HIT,
    C_L3_MISS,
    C_L3_REQUESTS,
    C_L3_WRITEBACK,
    C_SECTORS,
    CLASS_BAND,
    KIND_ATOMIC,
    KIND_BULK_LOAD,
    KIND_LOAD,
    KIND_LOAD_CG,
    KIND_STORE,
    LEVEL_L1,
    LEVEL_L2,
    LEVEL_L3,
    P_ATOMIC_PS,
    P_CHANNELS,
    P_FAR_PS,
    P_L1_PS,
    P_L1_SPL,
    P_L2_SPL,
    P_L3_ENABLED,
    P_L3_FS,
    P_L3_PS,
    P_L3_SLICES,
    P_NOC_PS,
    P_PARTITIONS,
    P_PERSIST_WAYS,
    P_PIPE_ATOMIC,
    P_PIPE_DOWN,
    P_PIPE_L3,
    P_PIPE_RETURN,
    P_PIPE_SLICE,
    P_PIPE_UP,
    P_PORT_FS,
    P_RETURN_BIN_FS,
    P_RETURN_FS,
    P_SECTOR_BYTES,
    P_SLICE_FS,
    P_SLICE_MIN_BYTES,
    P_SLICE_PS,
    P_SLICES,
    RETURN_BINS,
    ceil_ps,
    hbm_channel_of_line,
    l2_set_of_line,
    l2_slice_of_line,
    popcount,
    step,
)
from models.hbm_kernel import hbm_access, hbm_write

_TAG, _STAMP, _READY = 0, 1, 2
_VALID, _DIRTY = 0, 1


@step
def _book(free_fs, pipe, at_ps, size_bytes, fs_per_byte):
    """Reserve `size_bytes` on a FCFS pipe from `at_ps` on; returns the start in ps."""
    start = max(at_ps * 1000, free_fs[pipe])
    free_fs[pipe] = start + size_bytes * fs_per_byte
    return ceil_ps(start)


@step
def _slice_bytes(p, mask):
    """Bytes a line request of sectors `mask` holds its slice for: its sectors, at least
    `P_SLICE_MIN_BYTES` (one tag lookup, `l2.slice_requests_per_clk`)."""
    return max(popcount(mask) * p[P_SECTOR_BYTES], p[P_SLICE_MIN_BYTES])


@step
def _book_return(p, free_fs, at_ps, size_bytes):
    """Reserve `size_bytes` of the crossbar's shared read return from `at_ps` on, in the bins
    of its calendar (`models.cached_memory`, timing rules); returns (start, end) in ps: the
    start of the first bin with room (`at_ps` when that is its own bin) and the end of the
    room taken (bins filled in call order, not before `start` plus its own transfer)."""
    bin_fs = p[P_RETURN_BIN_FS]
    total = size_bytes * p[P_RETURN_FS] // 1024
    need = total
    b = at_ps * 1000 // bin_fs
    start = -1
    while True:
        slot = p[P_PIPE_RETURN] + 2 * (b % RETURN_BINS)
        if free_fs[slot] != b:              # a bin not booked yet (or one beyond the horizon)
            free_fs[slot] = b
            free_fs[slot + 1] = 0
        used = free_fs[slot + 1]
        if used < bin_fs:
            if start < 0:
                start = max(at_ps * 1000, b * bin_fs)
            take = min(bin_fs - used, need)
            free_fs[slot + 1] = used + take
            need -= take
            if need <= 0:
                return ceil_ps(start), ceil_ps(max(start + total, b * bin_fs + used + take))
        b += 1


@step
def _find(meta, unit, s, line):
    for w in range(meta.shape[3]):
        if meta[unit, s, _TAG, w] == line:
            return w
    return -1


@step
def _class_of(stamp):
    """The eviction class a stamp carries (its band, `CLASS_BAND`)."""
    if stamp >= CLASS_BAND // 2:
        return L2_LAST
    if stamp < -(CLASS_BAND // 2):
        return L2_FIRST
    return L2_NORMAL


@step
def _band(cls):
    """What class `cls` adds to a stamp."""
    if cls == L2_LAST:
        return CLASS_BAND
    if cls == L2_FIRST:
        return -CLASS_BAND
    return 0


@step
def _victim(meta, unit, s, cls, quota):
    """The way a new line of class `cls` takes: an empty one, else the least stamp (the LRU
    line of the lowest class); an evict-last line when the set holds `quota` of them
    already takes the LRU evict-last way."""
    way = 0
    held_last, last_way = 0, -1
    for w in range(meta.shape[3]):
        if meta[unit, s, _TAG, w] == -1:
            return w
        stamp = meta[unit, s, _STAMP, w]
        if stamp < meta[unit, s, _STAMP, way]:
            way = w
        if cls == L2_LAST and stamp >= CLASS_BAND // 2:
            held_last += 1
            if last_way < 0 or stamp < meta[unit, s, _STAMP, last_way]:
                last_way = w
    if cls == L2_LAST and last_way >= 0 and held_last >= quota:
        return last_way
    return way


@step
def _lower_lru_last(meta, unit, s, way, quota):
    """Before the line in `way` turns evict-last: if the set's other evict-last lines fill
    `quota` ways, the LRU of them becomes normal (its stamp order kept)."""
    held_last, last_way = 0, -1
    for w in range(meta.shape[3]):
        if w == way or meta[unit, s, _TAG, w] == -1:
            continue
        stamp = meta[unit, s, _STAMP, w]
        if stamp >= CLASS_BAND // 2:
            held_last += 1
            if last_way < 0 or stamp < meta[unit, s, _STAMP, last_way]:
                last_way = w
    if last_way >= 0 and held_last >= quota:
        meta[unit, s, _STAMP, last_way] -= CLASS_BAND


@step
def _touch(meta, lru, unit, s, way, cls, quota, fresh):
    """Refresh the LRU stamp of `way` in class `cls` (`L2_UNCHANGED`: the line's own, or
    normal for a line just allocated, `fresh`)."""
    old = L2_NORMAL if fresh else _class_of(meta[unit, s, _STAMP, way])
    new = old if cls == L2_UNCHANGED else cls
    if new == L2_LAST and old != L2_LAST:
        _lower_lru_last(meta, unit, s, way, quota)
    lru[0] += 1
    meta[unit, s, _STAMP, way] = lru[0] + _band(new)


@step
def _fill_way(meta, flags, lru, unit, s, way, mask, ready_ps, cls, quota, fresh):
    """`_install` (clean) of `mask` into a line known to sit in `way`."""
    for k in range(meta.shape[2] - _READY):
        if mask & (1 << k):
            if flags[unit, s, way, _VALID] & (1 << k):
                meta[unit, s, _READY + k, way] = max(meta[unit, s, _READY + k, way], ready_ps)
            else:
                meta[unit, s, _READY + k, way] = ready_ps
    flags[unit, s, way, _VALID] |= mask
    _touch(meta, lru, unit, s, way, cls, quota, fresh)


@step
def _install(meta, flags, lru, unit, s, line, mask, ready_ps, dirty, cls, quota):
    """Allocate (if absent) and mark `mask` valid with data at `ready_ps`, the line in
    eviction class `cls` (at most `quota` evict-last ways); returns the evicted line and its
    dirty mask (line -1 when nothing dirty was evicted)."""
    evicted, evicted_mask, _ = _install_at(meta, flags, lru, unit, s, line,
                                           _find(meta, unit, s, line), mask, ready_ps, dirty,
                                           cls, quota)
    return evicted, evicted_mask


@step
def _install_at(meta, flags, lru, unit, s, line, way, mask, ready_ps, dirty, cls, quota):
    """`_install` of a line whose way a `_find` of the unchanged set just gave (-1: absent),
    without scanning the tags again; returns the evicted line, its dirty mask and the way."""
    evicted, evicted_mask = -1, 0
    fresh = way < 0
    if fresh:
        way = _victim(meta, unit, s, cls, quota)
        if meta[unit, s, _TAG, way] != -1 and flags[unit, s, way, _DIRTY] != 0:
            evicted, evicted_mask = meta[unit, s, _TAG, way], flags[unit, s, way, _DIRTY]
        meta[unit, s, _TAG, way] = line
        flags[unit, s, way, _VALID] = 0
        flags[unit, s, way, _DIRTY] = 0
    _fill_way(meta, flags, lru, unit, s, way, mask, ready_ps, cls, quota, fresh)
    if dirty:
        flags[unit, s, way, _DIRTY] |= mask
    return evicted, evicted_mask, way


@step
def _line_hash16(line):
    """0..15 from a multiplicative hash of a line number: which sixteenth of the lines of a
    fractional policy it falls in."""
    return ((line & 0xFFFFFF) * 0x9E3779B1 >> 28) & 15


@step
def _line_class(policy, line, sectors_per_line):
    """The eviction class request policy row `policy` gives L2 line `line` (`isa.trace_format`):
    a range policy's by where the line's first sector lies, a fractional one's primary class
    for `share` sixteenths of the lines (by `_line_hash16`), else its secondary."""
    code = policy[POLICY_CODE]
    if code == 0:
        return L2_UNCHANGED
    primary, secondary = code & 3, (code >> SECONDARY_SHIFT) & 3
    if (code >> RANGE_SHIFT) & 1:
        first = line * sectors_per_line
        if policy[POLICY_LO] <= first < policy[POLICY_MID]:
            return primary
        if policy[POLICY_MID] <= first < policy[POLICY_HI]:
            return secondary
        return L2_UNCHANGED
    share = (code >> SHARE_SHIFT) & 31
    if share >= SHARE_WHOLE or _line_hash16(line) < share:
        return primary
    return secondary


@step
def _widened(missing, fetch, sectors_per_line):
    """The sectors a miss of `missing` fetches at L2 fetch size `fetch`: aligned 64-byte pairs
    of sectors, or the whole line (128 and 256 bytes)."""
    if fetch == FETCH_SECTOR:
        return missing
    if fetch == FETCH_64B:
        pairs = (missing | (missing >> 1)) & 0x55
        return (pairs | (pairs << 1)) & ((1 << sectors_per_line) - 1)
    return (1 << sectors_per_line) - 1


@step
def _write_below_l2(p, meta, flags, free_fs, banks, lru, counts, line, mask, at_ps):
    """A dirty L2 line's sectors leave for the L3 (write-allocate) or HBM; returns the ps from
    which the request that evicted it may complete (see `hbm_write`)."""
    if p[P_L3_ENABLED]:
        size = popcount(mask) * p[P_SECTOR_BYTES]
        unit = hbm_channel_of_line(line, p[P_CHANNELS]) * p[P_L3_SLICES] // p[P_CHANNELS]
        start = _book(free_fs, p[P_PIPE_L3] + unit, at_ps, size, p[P_L3_FS])
        s = line % meta[LEVEL_L3].shape[1]
        evicted, evicted_mask = _install(meta[LEVEL_L3], flags[LEVEL_L3], lru, unit, s, line,
                                         mask, start, True, L2_UNCHANGED, 0)
        if evicted < 0:
            return at_ps
        counts[C_L3_WRITEBACK] += popcount(evicted_mask)
        line, mask, at_ps = evicted, evicted_mask, start
    return hbm_write(p, free_fs, banks, counts, line, mask, at_ps)


@step
def _read_below_l2(p, meta, flags, free_fs, banks, lru, counts, line, mask, at_ps):
    """Missing L2 sectors come from the L3 (if any) or HBM; the ps they are at the slice."""
    if not p[P_L3_ENABLED]:
        counts[C_HBM_READ] += popcount(mask)
        counts[C_HBM_REQUESTS] = 1
        return hbm_access(p, free_fs, banks, counts, line, popcount(mask) * p[P_SECTOR_BYTES],
                          at_ps, 0)
    l3m, l3f = meta[LEVEL_L3], flags[LEVEL_L3]
    unit = hbm_channel_of_line(line, p[P_CHANNELS]) * p[P_L3_SLICES] // p[P_CHANNELS]
    start = _book(free_fs, p[P_PIPE_L3] + unit, at_ps, popcount(mask) * p[P_SECTOR_BYTES],
                  p[P_L3_FS])
    s = line % l3m.shape[1]
    way = _find(l3m, unit, s, line)
    present = l3f[unit, s, way, _VALID] & mask if way >= 0 else 0
    missing = mask & ~present
    data = start
    for k in range(l3m.shape[2] - _READY):
        if present & (1 << k):
            data = max(data, l3m[unit, s, _READY + k, way])
    if way >= 0:
        _touch(l3m, lru, unit, s, way, L2_UNCHANGED, 0, False)
    counts[C_L3_HIT] += popcount(present)
    counts[C_L3_MISS] += popcount(missing)
    counts[C_L3_REQUESTS] = 1
    if missing:
        counts[C_HBM_READ] += popcount(missing)
        counts[C_HBM_REQUESTS] = 1
        fetched = hbm_access(p, free_fs, banks, counts, line,
                             popcount(missing) * p[P_SECTOR_BYTES], start, 0)
        data = max(data, fetched)
        evicted, evicted_mask, _ = _install_at(l3m, l3f, lru, unit, s, line, way, missing,
                                               fetched, False, L2_UNCHANGED, 0)
        if evicted >= 0:
            counts[C_L3_WRITEBACK] += popcount(evicted_mask)
            data = max(data, hbm_write(p, free_fs, banks, counts, evicted, evicted_mask,
                                       start))
    return data + p[P_L3_PS]


@step
def _present(meta, flags, unit, s, line, mask):
    """The sectors of `mask` the slice holds, their latest ready ps (0 if none) and the way."""
    way = _find(meta, unit, s, line)
    if way < 0:
        return 0, 0, way
    present = flags[unit, s, way, _VALID] & mask
    ready = 0
    for k in range(meta.shape[2] - _READY):
        if present & (1 << k):
            ready = max(ready, meta[unit, s, _READY + k, way])
    return present, ready, way


@step
def _evict_to(p, meta, flags, free_fs, banks, lru, counts, evicted, evicted_mask, at_ps):
    """Write back a dirty victim (line -1: none); the ps from which the requester may complete."""
    if evicted < 0:
        return at_ps
    counts[C_L2_WRITEBACK] += popcount(evicted_mask)
    return _write_below_l2(p, meta, flags, free_fs, banks, lru, counts, evicted, evicted_mask,
                           at_ps)


@step
def _atomic_unit(p, free_fs, home, line, at_ps, ops):
    """Slice `home` performs `ops` serialized lane operations on one address of `line`,
    its data there at `at_ps`, after the line's earlier atomics (`ATOMIC_ENTRIES`); the ps
    the last is done."""
    e = p[P_PIPE_ATOMIC] + 2 * (home * ATOMIC_ENTRIES + line % ATOMIC_ENTRIES)
    start = at_ps
    if free_fs[e] == line + 1:
        start = max(start, free_fs[e + 1])
    end = start + max(ops, 1) * p[P_ATOMIC_PS]
    free_fs[e] = line + 1
    free_fs[e + 1] = end
    return end


@step
def _home_access(p, meta, flags, free_fs, banks, lru, counts, kind, home, line, mask, at_ps,
                 ops, cls, fetch):
    """The line's home slice serves `mask` from `at_ps` on (stores write it, loads and atomics
    read it, fetching what is missing, widened to fetch size `fetch` for loads; atomics then
    take `ops` serialized operations, `_atomic_unit`), the line in eviction class `cls`; the
    ps its answer leaves the slice."""
    l2m, l2f = meta[LEVEL_L2], flags[LEVEL_L2]
    s = l2_set_of_line(line, l2m.shape[1])
    quota = p[P_PERSIST_WAYS]
    t = _book(free_fs, p[P_PIPE_SLICE] + home, at_ps, _slice_bytes(p, mask), p[P_SLICE_FS])
    if kind == KIND_STORE:
        evicted, evicted_mask = _install(l2m, l2f, lru, home, s, line, mask, t, True, cls,
                                         quota)
        return max(t, _evict_to(p, meta, flags, free_fs, banks, lru, counts, evicted,
                                evicted_mask, t))
    present, ready, way = _present(l2m, l2f, home, s, line, mask)
    missing = mask & ~present
    data = max(t, ready)
    counts[C_L2_HIT] += popcount(present)
    counts[C_L2_MISS] += popcount(missing)
    fetched = t
    filled = mask
    if missing:      # the levels below touch no L2 set: `way` stays the line's
        wanted = missing
        if kind == KIND_LOAD and fetch != FETCH_SECTOR:
            held = l2f[home, s, way, _VALID] if way >= 0 else 0
            wanted = _widened(missing, fetch, p[P_L2_SPL]) & ~held & 0xFF
            filled = mask | wanted
        fetched = _read_below_l2(p, meta, flags, free_fs, banks, lru, counts, line, wanted, t)
        data = max(data, fetched)
    evicted, evicted_mask, _ = _install_at(l2m, l2f, lru, home, s, line, way, filled, fetched,
                                           kind == KIND_ATOMIC, cls, quota)
    if kind == KIND_ATOMIC and p[P_ATOMIC_PS] > 0:
        data = _atomic_unit(p, free_fs, home, line, data, ops)
    return max(data, _evict_to(p, meta, flags, free_fs, banks, lru, counts, evicted,
                               evicted_mask, t))


@step
def _prefetch_line(p, meta, flags, free_fs, banks, lru, counts, line, at_ps, cls):
    """Bring the sectors of `line` its home slice lacks from below, from `at_ps` on, in
    eviction class `cls` (the pair line of a 256-byte fetch); nobody waits for it."""
    l2m, l2f = meta[LEVEL_L2], flags[LEVEL_L2]
    home = l2_slice_of_line(line, p[P_SLICES])
    s = l2_set_of_line(line, l2m.shape[1])
    full = (1 << p[P_L2_SPL]) - 1
    present, _, way = _present(l2m, l2f, home, s, line, full)
    missing = full & ~present
    if missing == 0:
        return
    fetched = _read_below_l2(p, meta, flags, free_fs, banks, lru, counts, line, missing, at_ps)
    evicted, evicted_mask, _ = _install_at(l2m, l2f, lru, home, s, line, way, missing, fetched,
                                           False, cls, p[P_PERSIST_WAYS])
    _evict_to(p, meta, flags, free_fs, banks, lru, counts, evicted, evicted_mask, at_ps)


@step
def _maintain(p, meta, flags, free_fs, home, line, mask, at_ps, op, cls):
    """`discard` (drop the line, dirty sectors unwritten) or `applypriority` (give a held
    line class `cls`) at the line's home slice and its copies, from `at_ps` on; the ps the
    home slice is done."""
    l2m, l2f = meta[LEVEL_L2], flags[LEVEL_L2]
    s = l2_set_of_line(line, l2m.shape[1])
    t = _book(free_fs, p[P_PIPE_SLICE] + home, at_ps, _slice_bytes(p, mask), p[P_SLICE_FS])
    per = p[P_SLICES] // p[P_PARTITIONS]
    for q in range(p[P_PARTITIONS]):
        c = home if q == home // per else _copy_slice(p, home, q)
        way = _find(l2m, c, s, line)
        if way < 0:
            continue
        if op == OP_DISCARD:
            l2m[c, s, _TAG, way] = -1
            l2f[c, s, way, _VALID] = 0
            l2f[c, s, way, _DIRTY] = 0
        elif cls != L2_UNCHANGED:
            stamp = l2m[c, s, _STAMP, way]
            l2m[c, s, _STAMP, way] = stamp - _band(_class_of(stamp)) + _band(cls)
    return t


@step
def _copy_slice(p, home, partition):
    """The slice of `partition` that keeps copies of lines homed at slice `home`."""
    per = p[P_SLICES] // p[P_PARTITIONS]
    return partition * per + home % per


@step
def _write_copies(p, l2m, l2f, home, line, mask, at_ps, writer):
    """A write of `mask` reached the home: the writer partition's copy (if held) takes the
    new data, every other partition's copy drops those sectors (at once, no messages)."""
    per = p[P_SLICES] // p[P_PARTITIONS]
    s = l2_set_of_line(line, l2m.shape[1])
    for q in range(p[P_PARTITIONS]):
        if q == home // per:
            continue
        c = _copy_slice(p, home, q)
        way = _find(l2m, c, s, line)
        if way < 0:
            continue
        if q == writer:
            for k in range(l2m.shape[2] - _READY):
                if mask & (1 << k) and l2f[c, s, way, _VALID] & (1 << k):
                    l2m[c, s, _READY + k, way] = at_ps
            continue
        l2f[c, s, way, _VALID] = l2f[c, s, way, _VALID] & ~mask & 0xFF
        if l2f[c, s, way, _VALID] == 0:
            l2m[c, s, _TAG, way] = -1


@step
def _l2_line(p, meta, flags, free_fs, banks, lru, counts, kind, sm, line, mask, at_ps, ops,
             policy):
    """One L2 line of a request reaching the SM's partition at `at_ps`, under the request's
    `policy` row; the ps its answer is at the SM. Loads of a far-homed line look in the SM
    partition's copy first; a load that misses with a 256-byte fetch size brings the pair
    line too."""
    home = l2_slice_of_line(line, p[P_SLICES])
    near = sm % p[P_PARTITIONS]
    far = home // (p[P_SLICES] // p[P_PARTITIONS]) != near
    back = p[P_SLICE_PS] + p[P_NOC_PS] + p[P_L1_PS]
    counts[C_L2_LINES] += 1
    cls = _line_class(policy, line, p[P_L2_SPL])
    if cls == L2_LAST and p[P_PERSIST_WAYS] <= 0:
        cls = L2_NORMAL                    # no set-aside: evict-last lines are normal ones
    code = policy[POLICY_CODE]
    op = (code >> OP_SHIFT) & 3
    fetch = (code >> FETCH_SHIFT) & 7
    if op != OP_ACCESS:
        counts[C_FAR_LINES] += far
        done = _maintain(p, meta, flags, free_fs, home, line, mask, at_ps, op, cls)
        return done + back + (p[P_FAR_PS] if far else 0)
    missed = counts[C_L2_MISS]
    done = _l2_access(p, meta, flags, free_fs, banks, lru, counts, kind, sm, line, mask, at_ps,
                      ops, cls, fetch, home, near, far)
    if fetch == FETCH_256B and kind == KIND_LOAD and counts[C_L2_MISS] > missed:
        _prefetch_line(p, meta, flags, free_fs, banks, lru, counts, line ^ 1, at_ps, cls)
    return done + back


@step
def _l2_access(p, meta, flags, free_fs, banks, lru, counts, kind, sm, line, mask, at_ps, ops,
               cls, fetch, home, near, far):
    """`_l2_line`'s access of `line` in class `cls`: the ps its answer leaves the L2 (near
    partition's side, without the way back to the SM)."""
    l2m, l2f = meta[LEVEL_L2], flags[LEVEL_L2]
    if not far:
        done = _home_access(p, meta, flags, free_fs, banks, lru, counts, kind, home, line,
                            mask, at_ps, ops, cls, fetch)
        if kind != KIND_LOAD:
            _write_copies(p, l2m, l2f, home, line, mask, done, -1)
        return done
    if kind != KIND_LOAD:
        counts[C_FAR_LINES] += 1
        done = _home_access(p, meta, flags, free_fs, banks, lru, counts, kind, home, line,
                            mask, at_ps, ops, cls, fetch)
        _write_copies(p, l2m, l2f, home, line, mask, done,
                      near if kind == KIND_STORE else -1)
        return done + p[P_FAR_PS]
    # A load of a far-homed line: the copy slice in the SM's own partition first.
    c = _copy_slice(p, home, near)
    s = l2_set_of_line(line, l2m.shape[1])
    t = _book(free_fs, p[P_PIPE_SLICE] + c, at_ps, _slice_bytes(p, mask), p[P_SLICE_FS])
    present, ready, way = _present(l2m, l2f, c, s, line, mask)
    missing = mask & ~present
    counts[C_L2_HIT] += popcount(present)
    counts[C_L2_COPY_HIT] += popcount(present)
    done = max(t, ready)
    if not missing:
        _touch(l2m, lru, c, s, way, cls, p[P_PERSIST_WAYS], False)
        return done
    counts[C_FAR_LINES] += 1
    copied = _home_access(p, meta, flags, free_fs, banks, lru, counts, kind, home, line,
                          missing, t, 1, cls, fetch) + p[P_FAR_PS]
    # the home slice is in the other partition: the copy slice's set, and `way`, unchanged
    evicted, evicted_mask, _ = _install_at(l2m, l2f, lru, c, s, line, way, missing, copied,
                                           False, cls, p[P_PERSIST_WAYS])
    return max(done, copied, _evict_to(p, meta, flags, free_fs, banks, lru, counts, evicted,
                                       evicted_mask, t))


@numba.njit(cache=True)
def serve_request(kind, sm, sectors, now_ps, p, meta, flags, free_fs, banks, lru, counts,
                  ops, policy):
    """Run one warp request through the hierarchy (`ops`: an atomic's lane operations on one
    address; `policy`: its instruction's cache-policy row, `isa.trace_format`, all 0 for
    none); returns its completion time in ps."""
    n = sectors.size
    return _serve(kind, sm, sectors, now_ps, p, meta, flags, free_fs, banks, lru, counts,
                  np.ones(n, np.bool_), np.empty(n, np.int64), ops, policy)


@step
def serve_scratch(kind, sm, sectors, now_ps, p, meta, flags, free_fs, banks, lru, counts,
                  need, line_done, ops, policy):
    """`serve_request` on scratch arrays of at least the request's size (callers that must
    not allocate: the compiled SM loop, `models.sm_memory`)."""
    n = sectors.size
    need[:n] = True
    return _serve(kind, sm, sectors, now_ps, p, meta, flags, free_fs, banks, lru, counts,
                  need[:n], line_done[:n], ops, policy)


@step
def _serve(kind, sm, sectors, now_ps, p, meta, flags, free_fs, banks, lru, counts, need,
           line_done, ops, policy):
    """`serve_request` on scratch arrays `need` (all True) and `line_done` of the request's
    size: no allocation, so it runs without reference counting."""
    counts[:] = 0
    n = sectors.size
    counts[C_SECTORS] = n
    done = now_ps
    l1m, l1f = meta[LEVEL_L1], flags[LEVEL_L1]
    l1_sets = l1m.shape[1]
    spl1, spl2 = p[P_L1_SPL], p[P_L2_SPL]
    skip_l1 = kind == KIND_BULK_LOAD or kind == KIND_LOAD_CG
    l1 = l1_sets > 0 and kind != KIND_ATOMIC and not skip_l1
    l1_mode = (policy[POLICY_CODE] >> L1_SHIFT) & 3
    l1_class = L2_FIRST if l1_mode == L1_EVICT_FIRST else L2_UNCHANGED
    if skip_l1:
        kind = KIND_LOAD                   # from here on a load that neither looks up nor fills L1
    # 1. L1: loads look up (hits refresh LRU, except `.L1::no_allocate` ones, which change
    # nothing), stores update lines held, atomics, bulk loads and loads that skip the L1
    # (`.cg`, `.cv`) bypass. Lookups change no tag, so a run of sectors of one line reuses
    # its way.
    if l1:
        last_line, way = -1, -1
        for i in range(n):
            line = sectors[i] // spl1
            bit = 1 << (sectors[i] % spl1)
            s = line % l1_sets
            if line != last_line:
                last_line, way = line, _find(l1m, sm, s, line)
            if way < 0:
                continue
            if kind == KIND_STORE:
                l1f[sm, s, way, _VALID] |= bit
                l1m[sm, s, _READY + sectors[i] % spl1, way] = now_ps
            elif l1f[sm, s, way, _VALID] & bit:
                need[i] = False
                ready = l1m[sm, s, _READY + sectors[i] % spl1, way]
                done = max(done, max(now_ps + p[P_L1_PS], ready))
                if l1_mode != L1_NO_ALLOCATE:
                    _touch(l1m, lru, sm, s, way, l1_class, 0, False)
    missed = 0
    for i in range(n):
        missed += need[i]
    counts[C_L1_HIT] = n - missed
    counts[C_L1_MISS] = missed
    if missed == 0:
        return done
    counts[C_L2_REQUESTS] = 1
    # 2. The SM's crossbar port: write data goes up, read data comes down.
    size = missed * p[P_SECTOR_BYTES]
    start = now_ps
    if kind != KIND_LOAD:
        start = max(start, _book(free_fs, p[P_PIPE_UP] + sm, now_ps, size, p[P_PORT_FS]))
    if kind != KIND_STORE:
        start = max(start, _book(free_fs, p[P_PIPE_DOWN] + sm, now_ps, size, p[P_PORT_FS]))
        done = max(done, ceil_ps(free_fs[p[P_PIPE_DOWN] + sm]))
        if p[P_RETURN_FS] > 0:
            begin, end = _book_return(p, free_fs, now_ps, size)
            start = max(start, begin)
            done = max(done, end)
    at_slice = start + p[P_NOC_PS]
    # 3. L2 slices, one line at a time (sectors of a line are adjacent in a sorted request).
    i = 0
    while i < n:
        if not need[i]:
            i += 1
            continue
        line = sectors[i] // spl2
        mask = 0
        j = i
        while j < n and sectors[j] // spl2 == line:
            if need[j]:
                mask |= 1 << (sectors[j] % spl2)
            j += 1
        t = _l2_line(p, meta, flags, free_fs, banks, lru, counts, kind, sm, line, mask,
                     at_slice, ops, policy)
        for k in range(i, j):
            line_done[k] = t
        done = max(done, t)
        i = j
    # 4. L1 fills: loads allocate the sectors they fetched, data present when it arrives
    # (a sector of the line installed just before finds it in the way it went to);
    # `.L1::no_allocate` loads allocate nothing, `.L1::evict_first` ones as the LRU victim.
    if kind == KIND_LOAD and l1 and l1_mode != L1_NO_ALLOCATE:
        last_line, way = -1, -1
        for i in range(n):
            if need[i]:
                line = sectors[i] // spl1
                s = line % l1_sets
                if line == last_line:
                    _fill_way(l1m, l1f, lru, sm, s, way, 1 << (sectors[i] % spl1), line_done[i],
                              l1_class, 0, False)
                else:
                    _, _, way = _install_at(l1m, l1f, lru, sm, s, line, _find(l1m, sm, s, line),
                                            1 << (sectors[i] % spl1), line_done[i], False,
                                            l1_class, 0)
                    last_line = line
    return done
