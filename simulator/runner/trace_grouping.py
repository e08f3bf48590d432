"""Grouping a trace's events by warp: the counting sort and field moves of
`simulator.runner.trace.TraceRecorder`, and the spare-capacity buffers later events are appended to.

What it models
--------------
Nothing of the chip: the recorder collects events step by step (all warps of a step
together); `warp_order` and `grouped_fields` put them in warp order, each warp's events in
execution order, and `join_grouped` appends the events of later warps (a later CTA range,
traced or synthesized by `simulator.runner.trace_synthesis`) without copying the earlier ones
again. Units: events, warps.
"""

from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True)
def warp_order(warp: np.ndarray, n_warps: int) -> tuple[np.ndarray, np.ndarray]:
    """(where each event goes when the events are grouped by warp, keeping their order
    within a warp; events per warp): a counting sort."""
    per_warp = np.zeros(max(n_warps, warp.max() + 1 if warp.size else 0), np.int64)
    for i in range(warp.size):
        per_warp[warp[i]] += 1
    start = np.empty(per_warp.size, np.int64)
    total = 0
    for w in range(per_warp.size):
        start[w] = total
        total += per_warp[w]
    dest = np.empty(warp.size, np.int64)
    for i in range(warp.size):
        dest[i] = start[warp[i]]
        start[warp[i]] += 1
    return dest, per_warp


@nb.njit(cache=True)
def grouped_fields(dest, sizes, chunk_pc, chunk_kind, has_sstart, active, detail, sstarts):
    """The events' pc, kind, active lanes, detail and first sector moved to their places
    `dest` in warp order, in one pass: pc and kind are per chunk (`sizes` events each),
    the others per event; `sstarts` holds those of the chunks with `has_sstart` only (0
    for the rest)."""
    n = dest.size
    pc = np.empty(n, np.int32)
    kind = np.empty(n, np.int8)
    active_out = np.empty_like(active)
    detail_out = np.empty_like(detail)
    sstart = np.zeros(n, np.int64)
    e = s = 0
    for c in range(sizes.size):
        for _ in range(sizes[c]):
            d = dest[e]
            pc[d] = chunk_pc[c]
            kind[d] = chunk_kind[c]
            active_out[d] = active[e]
            detail_out[d] = detail[e]
            if has_sstart[c]:
                sstart[d] = sstarts[s]
                s += 1
            e += 1
    return pc, kind, active_out, detail_out, sstart



_FIELDS = ("pc", "active", "kind", "detail", "sstart")


def join_grouped(old: dict, new: dict) -> dict:
    """Grouped events of two chunk ranges, the warps of `new` all after those of `old`.

    A field of `new` may be 2-D (a CTA's events per row, e.g. a broadcast template row):
    its rows are laid out one after the other. The fields grow in buffers of spare
    capacity (`_buffers`, `_used`: the length written, shared by every dict over the same
    buffers), so appending writes the new events once and copies the old ones only when
    a buffer is replaced; earlier results keep views of the part they cover, which later
    appends never write (an append to a dict that is not the last one over its buffers
    copies into new ones)."""
    n_old = old["pc"].size
    n = n_old + new["pc"].size
    buffers, used = dict(old.get("_buffers") or {}), old.get("_used") or [-1]
    if used[0] != n_old or any(key not in buffers or _address(buffers[key]) != _address(old[key])
                               for key in _FIELDS):
        buffers, used = {key: old[key] for key in _FIELDS}, [n_old]   # sized n_old: copied
    joined = {}
    for key in _FIELDS:
        buffers[key] = buf = grown(buffers[key], n_old, n)
        add = new[key]
        buf[n_old:n].reshape(add.shape)[...] = add
        joined[key] = buf[:n]
    used[0] = n
    slots = [old["slot"], new["slot"]]
    if slots[0] is None and slots[1] is None:
        joined["slot"] = None
    else:
        joined["slot"] = np.concatenate([
            slot if slot is not None else np.full(part["pc"].size, -1, np.int32)
            for slot, part in zip(slots, (old, new), strict=True)])
    joined.update(chunks=new["chunks"], first_warp=old["first_warp"],
                  last_warp=new["last_warp"], per_warp=old["per_warp"] + new["per_warp"],
                  _buffers=buffers, _used=used)
    return joined


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def grown(buf: np.ndarray, used: int, n: int) -> np.ndarray:
    """`buf` when it has room for `n` items, else a buffer of twice that with its first
    `used` items copied (the spare capacity of `join_grouped` and `TraceRecorder._all_sectors`)."""
    if buf.size >= n:
        return buf
    out = np.empty(2 * n, buf.dtype)
    out[:used] = buf[:used]
    return out
