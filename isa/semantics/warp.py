"""Warp-collective operations: shfl.sync, vote.sync, activemask, bar.warp.sync,
match.sync and redux.sync.

Collectives work on `[warps, 32]` views of the registers of the warps that have
executing lanes. Under min-PC scheduling the lanes of a warp that reach a `.sync`
collective together are the ones converged there; a lane named in `membermask` that
is not among them reads as undefined (PTX), which here means its current register
value.
"""

from __future__ import annotations

import numpy as np

from isa.operands import DPipe
from isa.semantics.common import PRED, U32, as_array
from isa.semantics.registry import semantics


def warp_frame(m, lanes):
    """(warp ids, [w, 32] active mask, flat slot ids [w*32]) for the executing lanes."""
    ids = m.lane_ids(lanes)
    warps = np.unique(ids >> 5)
    active = np.zeros((warps.size, 32), dtype=bool)
    pos = np.searchsorted(warps, ids >> 5)
    active[pos, ids & 31] = True
    slots = (warps[:, None] * 32 + np.arange(32)[None, :]).reshape(-1)
    return warps, active, slots, pos, ids & 31


@semantics("shfl")
def shfl(m, ins, lanes):
    ty = ins.types[0]
    dst_op = ins.ops[0]
    a_op = ins.ops[1]
    warps, active, slots, pos, lane = warp_frame(m, lanes)
    n = m.nlanes(lanes)
    b = as_array(ins.ops[2].read(m, U32, lanes), n).astype(np.int64)
    c = as_array(ins.ops[3].read(m, U32, lanes), n).astype(np.int64)
    cval = c & 0x1F
    segmask = (c >> 8) & 0x1F
    lane64 = lane.astype(np.int64)
    max_lane = (lane64 & segmask) | (cval & ~segmask)
    min_lane = lane64 & segmask
    if "up" in ins.flags:
        j = lane64 - b
        ok = j >= max_lane
    elif "down" in ins.flags:
        j = lane64 + b
        ok = j <= max_lane
    elif "bfly" in ins.flags:
        j = lane64 ^ b
        ok = j <= max_lane
    else:
        j = min_lane | (b & ~segmask)
        ok = j <= max_lane
    j = np.where(ok, j, lane64) & 31
    full = a_op.read_raw(m, slots).reshape(-1, 32) if hasattr(a_op, "read_raw") else None
    if full is None:
        vals = as_array(a_op.read(m, ty, lanes), n)
        out = vals
    else:
        out = full[pos, j].view(full.dtype)
    value_op, pred_op = (dst_op.value, dst_op.pred) if isinstance(dst_op, DPipe) else \
        (dst_op, None)
    value_op.write_raw(m, out, lanes) if hasattr(value_op, "write_raw") else None
    if pred_op is not None and hasattr(pred_op, "write"):
        pred_op.write(m, ok, PRED, lanes)


@semantics("vote")
def vote(m, ins, lanes):
    warps, active, slots, pos, lane = warp_frame(m, lanes)
    n = m.nlanes(lanes)
    pred_op = ins.ops[-2] if len(ins.ops) == 3 else ins.ops[1]
    p = np.zeros((warps.size, 32), dtype=bool)
    p[pos, lane] = as_array(pred_op.read(m, PRED, lanes), n)
    if "ballot" in ins.flags:
        weights = (np.uint64(1) << np.arange(32, dtype=np.uint64))
        ballot = (p.astype(np.uint64) * weights[None, :]).sum(axis=1).astype(np.uint32)
        ins.ops[0].write(m, ballot[pos], U32, lanes)
        return
    if "all" in ins.flags:
        r = (p | ~active).all(axis=1)
    elif "any" in ins.flags:
        r = p.any(axis=1)
    else:   # uni
        r = (p | ~active).all(axis=1) | ~(p & active).any(axis=1)
    ins.ops[0].write(m, r[pos], PRED, lanes)


@semantics("activemask")
def activemask(m, ins, lanes):
    warps, active, slots, pos, lane = warp_frame(m, lanes)
    weights = (np.uint64(1) << np.arange(32, dtype=np.uint64))
    mask = (active.astype(np.uint64) * weights[None, :]).sum(axis=1).astype(np.uint32)
    ins.ops[0].write(m, mask[pos], U32, lanes)


@semantics("bar.warp.sync")
def bar_warp_sync(m, ins, lanes):
    return None


@semantics("redux")
def redux(m, ins, lanes):
    ty = ins.types[0]
    warps, active, slots, pos, lane = warp_frame(m, lanes)
    n = m.nlanes(lanes)
    vals = np.zeros((warps.size, 32), dtype=np.int64)
    v = as_array(ins.ops[1].read(m, ty, lanes), n).astype(np.int64)
    op = next(f for f in ins.flags if f in ("add", "min", "max", "and", "or", "xor"))
    fill = {"add": 0, "or": 0, "xor": 0, "and": -1, "min": np.iinfo(np.int64).max,
            "max": np.iinfo(np.int64).min}[op]
    vals[:] = fill
    vals[pos, lane] = v
    red = {"add": np.sum, "min": np.min, "max": np.max, "and": np.bitwise_and.reduce,
           "or": np.bitwise_or.reduce, "xor": np.bitwise_xor.reduce}[op](vals, axis=1)
    ins.ops[0].write(m, (red[pos] & 0xFFFFFFFF).astype(np.uint32).view(ty.dtype), ty, lanes)


@semantics("match")
def match(m, ins, lanes):
    ty = ins.types[0]
    warps, active, slots, pos, lane = warp_frame(m, lanes)
    n = m.nlanes(lanes)
    vals = np.zeros((warps.size, 32), dtype=np.uint64)
    vals[pos, lane] = as_array(ins.ops[1].read(m, ty, lanes), n).astype(np.uint64)
    same = (vals[:, :, None] == vals[:, None, :]) & active[:, None, :] & active[:, :, None]
    weights = (np.uint64(1) << np.arange(32, dtype=np.uint64))
    masks = (same.astype(np.uint64) * weights[None, None, :]).sum(axis=2).astype(np.uint32)
    d = ins.ops[0]
    if "all" in ins.flags:
        act = (active.astype(np.uint64) * weights[None, :]).sum(axis=1).astype(np.uint32)
        allsame = masks == act[:, None]
        value = np.where(allsame, act[:, None], 0)[pos, lane]
        if isinstance(d, DPipe):
            d.value.write(m, value, U32, lanes)
            d.pred.write(m, allsame[pos, lane], PRED, lanes)
        else:
            d.write(m, value, U32, lanes)
    else:
        d.write(m, masks[pos, lane], U32, lanes)
