"""Bulk asynchronous copies: TMA tensor copies `cp.async.bulk.tensor` and plain
`cp.async.bulk`, with their bulk-group and mbarrier completion.

Forms (sm_90a):

    cp.async.bulk.tensor.{1d..5d}.shared::cluster.global.tile.mbarrier::complete_tx::bytes
        [dst], [tensorMap, {c0, ...}], [mbar] {, cachePolicy};            (load)
    cp.async.bulk.tensor.{1d..5d}.shared::cluster.global.tile.mbarrier::complete_tx::bytes
        .multicast::cluster [dst], [tensorMap, {c0, ...}], [mbar], ctaMask {, cachePolicy};
    cp.async.bulk.tensor.{1d..5d}.global.shared::cta.tile.bulk_group
        [tensorMap, {c0, ...}], [src] {, cachePolicy};                    (store)
    cp.async.bulk.shared::cluster.{global,shared::cta}.mbarrier::complete_tx::bytes
        [dst], [src], size, [mbar];
    cp.async.bulk.global.shared::cta.bulk_group [dst], [src], size;
    cp.async.bulk.commit_group;   cp.async.bulk.wait_group{.read} N;

(`.tile` may be omitted; `.L2::cache_hint` adds the policy operand, which changes no result:
the trace reads it, `isa.semantics.cache_policy`.)
`.shared::cluster` destinations and mbarriers may be another CTA's of the cluster
(`mapa`, `isa.cluster`). A multicast load writes the box at the same CTA-relative offset
into every CTA whose rank is set in the 16-bit ctaMask, and completes its bytes on the
mbarrier at the mbarrier operand's CTA-relative offset in each of them.
Each issuing lane copies on its own (usually one elected thread). A copy happens at
issue: the program may not touch the destination before the mbarrier phase completes
or `wait_group` returns, so copying early is a legal order; a load then performs
`complete_tx` of its byte count on the mbarrier (the whole box, OOB elements included).

Tensor copies read the map (`isa.tensor_map`) from the kernel parameter space or from
global memory. Box element (b0, ...) (innermost first) maps to tensor coordinate
c + b; coordinates outside [0, dim) read as zero and are not written by stores. The
shared-memory box is dense, innermost dimension contiguous, then swizzled by
`tensor_map.swizzle_offsets` on the CTA-relative address; the destination must be
128-byte aligned (16 without swizzle). In timing mode (`Machine.copies_bulk_data` False)
tensor copies are checked and complete their mbarrier transactions but move no bytes;
there the lanes of one step whose maps sit in the parameter space and whose boxes lie
inside their tensor are checked (and, each on a barrier of its own, complete) together,
the others lane by lane as above, which gives the same state and the same first fault.
Left out: `.im2col` forms, the multicast form of the plain `cp.async.bulk`,
`cp.reduce.async.bulk*`, prefetch, the NaN OOB fill and non-1 element strides.
"""

from __future__ import annotations

import numpy as np

from isa.cluster import OFFSET_MASK, RANK_SHIFT
from isa.errors import PtxError
from isa.memory import GLOBAL_BASE, KPARAM_BASE, SHARED_WINDOW, WINDOW_SIZE
from isa.operands import DVec
from isa.semantics.common import U32, as_array
from isa.semantics.hopper_mbarrier import barrier_words, update, update_distinct
from isa.semantics.registry import semantics
from isa.tensor_map import (
    ABSOLUTE,
    MAP_BYTES,
    TensorMap,
    box_offsets,
    read_tensor_map,
    swizzle_offsets,
)
from isa.types import TYPES

_S32 = TYPES["s32"]
_LOAD = "mbarrier::complete_tx::bytes"
_STORE = "bulk_group"
_MULTICAST = "multicast::cluster"
_DIMS = {"1d": 1, "2d": 2, "3d": 3, "4d": 4, "5d": 5}
ACCEPTED_TENSOR = ("cp.async.bulk.tensor.<N>d.shared::cluster.global{.tile}."
                   "mbarrier::complete_tx::bytes{.multicast::cluster}{.L2::cache_hint} or "
                   "cp.async.bulk.tensor.<N>d.global.shared::cta{.tile}.bulk_group"
                   "{.L2::cache_hint}, N = 1..5")
ACCEPTED_BULK = ("cp.async.bulk.shared::cluster.{global,shared::cta}."
                 "mbarrier::complete_tx::bytes or cp.async.bulk.global.shared::cta.bulk_group")


def tensor_problem(ins) -> tuple[str, str] | None:
    """Why this `cp.async.bulk.tensor` cannot run; None when it is supported."""
    dims = [f for f in ins.flags if f in _DIMS]
    text = ins.text + "."
    load = ".shared::cluster.global." in text and _LOAD in ins.flags
    store = ".global.shared::cta." in text and _STORE in ins.flags
    multicast = _MULTICAST in ins.flags
    if len(dims) != 1 or not (load or store) or "im2col" in ins.flags or \
            (multicast and not load):
        return f"unsupported tensor copy '{ins.text}'", ACCEPTED_TENSOR
    if multicast and len(ins.ops) < 5:
        return (f"multicast tensor copy without a ctaMask operand: '{ins.text}'",
                "[dst], [tensorMap, {c0, ...}], [mbar], ctaMask {, cachePolicy}")
    coords = ins.ops[2 if load else 1]
    n = len(coords.items) if isinstance(coords, DVec) else 0
    if n != _DIMS[dims[0]]:
        return (f"{dims[0]} tensor copy with {n} coordinates",
                f"{{c0, ...}} with {_DIMS[dims[0]]} coordinates")
    return None


def _map(m, ins, op, lane: np.ndarray) -> TensorMap:
    """The tensor map addressed by `op` for one lane (param space or global)."""
    addr = int(op.address(m, lane)[0])
    if KPARAM_BASE <= addr < KPARAM_BASE + WINDOW_SIZE:
        rel = addr - KPARAM_BASE
        raw = m.mem.kparam[rel:rel + MAP_BYTES]
    else:
        buf, off = m.locate("global", np.array([addr]), lane, 1, ins)
        if not m.gmem.check(np.array([addr]), MAP_BYTES)[0]:
            raise m.fault(ins, f"tensor map at {addr:#x} runs past its buffer")
        raw = buf[int(off[0]):int(off[0]) + MAP_BYTES]
    if raw.size != MAP_BYTES:
        raise m.fault(ins, f"tensor map at {addr:#x} is cut short", expected="128 bytes")
    tm = read_tensor_map(raw)
    if isinstance(tm, str):
        raise m.fault(ins, tm, expected="a map made by isa.tensor_map.make_tensor_map")
    return tm


def param_map(m, addr: int) -> TensorMap | None:
    """The valid tensor map at `addr` in the kernel parameter space; None when there is
    none there (`_map` then says why, or reads it from global memory)."""
    if not KPARAM_BASE <= addr < KPARAM_BASE + WINDOW_SIZE:
        return None
    rel = addr - KPARAM_BASE
    raw = m.mem.kparam[rel:rel + MAP_BYTES]
    tm = read_tensor_map(raw) if raw.size == MAP_BYTES else None
    return None if isinstance(tm, str) else tm


def base_address(m, tm: TensorMap) -> int | None:
    """The tensor's global base address; None when its base argument is no pointer."""
    if tm.base_arg == ABSOLUTE:
        return tm.address
    params = m.program.kparams
    if tm.base_arg >= len(params) or params[tm.base_arg][0].size_bytes != 8:
        return None
    off = params[tm.base_arg][1]
    return int(m.mem.kparam[off:off + 8].view(np.uint64)[0]) + tm.address


def _base(m, ins, tm: TensorMap) -> int:
    base = base_address(m, tm)
    if base is None:
        raise m.fault(ins, f"tensor map names kernel argument {tm.base_arg} as its base, "
                      "which is no 64-bit pointer parameter",
                      expected="make_tensor_map(..., arg=<index of a .u64 pointer argument>)")
    return base


def _shared(m, ins, addr: int, lane: np.ndarray, nbytes: int, align: int) -> tuple[int, int]:
    """(flat offset of the shared memory of the CTA the address names, CTA-relative
    address) of the range [addr, addr + nbytes), checked; generic shared-window addresses
    and shared::cluster ones of other CTAs of the cluster (`isa.cluster`) are accepted."""
    if SHARED_WINDOW <= addr < SHARED_WINDOW + WINDOW_SIZE:
        addr -= SHARED_WINDOW
    owner, rel = m.shared_owner(np.array([addr], np.int64), lane, ins)
    addr = int(rel[0])
    size = m.mem.shared_bytes
    if addr % align or addr < 0 or addr + nbytes > size:
        raise m.fault(ins, f"shared range [{addr:#x}, {addr + nbytes:#x}) is out of bounds "
                      f"or not {align}-byte aligned",
                      expected=f"a {align}-byte aligned range inside {size} bytes of shared "
                      "memory")
    return int(owner[0]) * size, addr


def _global(m, ins, addr: np.ndarray, nbytes: int) -> np.ndarray:
    ok = m.gmem.check(addr, nbytes)
    if not ok.all():
        bad = int(addr[np.flatnonzero(~ok)[0]])
        raise m.fault(ins, f"out-of-bounds global access of {nbytes} bytes at {bad:#x}",
                      expected=f"addresses inside a buffer: {m.gmem.describe()}")
    return addr - GLOBAL_BASE


def _coords(m, lane, coords_op) -> np.ndarray:
    return np.array([int(np.asarray(it.read(m, _S32, lane)).reshape(-1)[0])
                     for it in coords_op.items], dtype=np.int64)


def _tensor_in_buffer(m, tm: TensorMap, base: int) -> bool:
    """Whether the whole tensor at `base` lies inside one buffer."""
    span = tm.dims[0] * tm.elem_bytes + sum((d - 1) * s for d, s in
                                             zip(tm.dims[1:], tm.strides_bytes[1:], strict=True))
    return bool(m.gmem.check(np.array([base], np.int64), span)[0])


def _box_in_buffer(m, tm: TensorMap, coords: np.ndarray, base: int) -> bool:
    """True when the whole box lies inside the tensor and each of its rows (innermost
    dimension, contiguous) inside one buffer: then every element is inside one, too."""
    box = np.array(tm.box, dtype=np.int64)
    if (coords < 0).any() or (coords + box > np.array(tm.dims, dtype=np.int64)).any():
        return False
    if _tensor_in_buffer(m, tm, base):
        return True  # the whole tensor lies inside one buffer, so every row of the box does
    rows = np.array([base + int((coords * np.array(tm.strides_bytes)).sum())], np.int64)
    if tm.rank > 1:
        outer = np.indices(tm.box[:0:-1]).reshape(tm.rank - 1, -1)[::-1]
        strides = np.array(tm.strides_bytes[1:], dtype=np.int64)[:, None]
        rows = rows + (outer * strides).sum(axis=0)
    return bool(m.gmem.check(rows, tm.box[0] * tm.elem_bytes).all())


def lane_coords(m, ids: np.ndarray, coords_op) -> np.ndarray:
    """Box coordinates `[rank, lanes]` (int64) of the lanes `ids`."""
    return np.stack([np.broadcast_to(np.asarray(it.read(m, _S32, ids)), ids.shape)
                     .astype(np.int64) for it in coords_op.items])


def lanes_by_param_map(m, ids: np.ndarray, map_op, coords_op):
    """For each distinct tensor map the lanes `ids` name that is valid, sits in the kernel
    parameter space, matches the coordinates' rank and has a pointer base: (map, base
    address, positions in `ids` of its lanes, their coordinates `[rank, lanes]`). Lanes of
    other maps are left out (their callers take them one by one)."""
    maps = map_op.address(m, ids)
    coords = lane_coords(m, ids, coords_op)
    for addr in np.unique(maps).tolist():
        tm = param_map(m, addr)
        base = None if tm is None or tm.rank != coords.shape[0] else base_address(m, tm)
        if base is None:
            continue
        lanes = np.flatnonzero(maps == addr)
        yield tm, base, lanes, coords[:, lanes]


def _checked_maps(m, ids: np.ndarray, map_op, coords_op, smem_op) -> list:
    """Per lane, its tensor map when its copy passes every check of `_box_checked` (map in
    the parameter space, box inside the tensor, tensor inside one buffer, shared range
    aligned and in bounds), for all lanes at once and faulting on none; None for a lane
    that takes the checked path (which faults if it must)."""
    found = [None] * ids.size
    smem = smem_op.address(m, ids)
    smem = np.where((smem >= SHARED_WINDOW) & (smem < SHARED_WINDOW + WINDOW_SIZE),
                    smem - SHARED_WINDOW, smem)
    for tm, base, lanes, c in lanes_by_param_map(m, ids, map_op, coords_op):
        if not _tensor_in_buffer(m, tm, base):
            continue
        s = smem[lanes]
        align = 128 if tm.swizzle_bytes else 16
        ok = ((c >= 0).all(axis=0)
              & (c + np.array(tm.box, np.int64)[:, None]
                 <= np.array(tm.dims, np.int64)[:, None]).all(axis=0)
              & (s % align == 0) & (s >= 0) & (s + tm.box_bytes <= m.mem.shared_bytes))
        for k in lanes[ok].tolist():
            found[k] = tm
    return found


def _box_checked(m, ins, lane, tm: TensorMap, coords_op, smem_addr: int) -> None:
    """The checks of `_box` alone (timing mode: the copy moves no data)."""
    coords = _coords(m, lane, coords_op)
    if not _box_in_buffer(m, tm, coords, _base(m, ins, tm)):
        _box(m, ins, lane, tm, coords_op, smem_addr)
        return
    _shared(m, ins, smem_addr, lane, tm.box_bytes, 128 if tm.swizzle_bytes else 16)


def _box(m, ins, lane, tm: TensorMap, coords_op, smem_addr: int):
    """(global byte offsets or -1 when OOB [n], flat shared byte offsets [n]) per element."""
    coords = _coords(m, lane, coords_op)
    grid, dense = box_offsets(tm)
    pos = coords[:, None] + grid
    dims = np.array(tm.dims, dtype=np.int64)[:, None]
    inside = ((pos >= 0) & (pos < dims)).all(axis=0)
    strides = np.array(tm.strides_bytes, dtype=np.int64)[:, None]
    base = _base(m, ins, tm)
    gaddr = base + (pos * strides).sum(axis=0)
    goff = np.full(gaddr.size, -1, dtype=np.int64)
    if inside.all() and _box_in_buffer(m, tm, coords, base):
        goff = gaddr - GLOBAL_BASE
    else:
        goff[inside] = _global(m, ins, gaddr[inside], tm.elem_bytes)
    align = 128 if tm.swizzle_bytes else 16
    cta_base, rel = _shared(m, ins, smem_addr, lane, tm.box_bytes, align)
    soff = cta_base + swizzle_offsets(rel + dense, tm.swizzle_bytes)
    return goff, soff


def _element_bytes(offsets: np.ndarray, esize: int) -> np.ndarray:
    return (offsets[:, None] + np.arange(esize)[None, :]).reshape(-1)


@semantics("cp.async.bulk.tensor")
def bulk_tensor(m, ins, lanes):
    problem = tensor_problem(ins)
    if problem:
        raise m.fault(ins, problem[0], expected=problem[1])
    if _MULTICAST in ins.flags:
        return _multicast_tensor(m, ins, lanes)
    load = _LOAD in ins.flags
    map_op, coords_op, smem_op = ins.ops[1:3] + ins.ops[:1] if load else ins.ops[:3]
    ids = m.lane_ids(lanes)
    checked = [None] * ids.size if m.copies_bulk_data else \
        _checked_maps(m, ids, map_op, coords_op, smem_op)
    bars = _barrier_words_or_none(m, ins, ids) if load else None
    rest = range(ids.size)
    if bars is not None:
        rest = _complete_checked(m, bars, checked)
    elif not load:
        rest = [k for k, tm in enumerate(checked) if tm is None]
    for k in rest:
        lane = int(ids[k])
        one = np.array([lane], dtype=np.int64)
        tm = checked[k]
        if tm is None:
            tm = _map(m, ins, map_op, one)
            smem = int(smem_op.address(m, one)[0])
            if m.copies_bulk_data:
                _copy_box(m, ins, one, tm, coords_op, smem, load)
            else:
                _box_checked(m, ins, one, tm, coords_op, smem)
        if load:
            words, idx = bars if bars is not None else barrier_words(m, ins, ins.ops[3], one)
            update(m, ins, words, idx[k:k + 1] if bars is not None else idx,
                   np.zeros(1, np.int64), np.array([-tm.box_bytes], np.int64))


def multicast_ranks(m, ins, lanes) -> list[list[int]]:
    """Per lane, the cluster ranks its `ctaMask` operand (the 16-bit operand after the
    mbarrier) names, checked against the cluster's size."""
    n = m.nlanes(lanes)
    masks = as_array(ins.ops[4].read(m, TYPES["u16"], lanes), n).astype(np.int64)
    out = []
    for mask in masks.tolist():
        ranks = [r for r in range(16) if mask >> r & 1]
        if not ranks or ranks[-1] >= m.cluster_size:
            raise m.fault(ins, f"multicast ctaMask {mask:#06x} names no CTA or one outside a "
                          f"cluster of {m.cluster_size}",
                          expected=f"a mask of ranks below {m.cluster_size}, at least one")
        out.append(ranks)
    return out


def in_rank(addr: int, rank: int) -> int:
    """Shared address `addr` (generic or not) moved to CTA `rank` of the cluster: the same
    CTA-relative offset (`isa.cluster`)."""
    if SHARED_WINDOW <= addr < SHARED_WINDOW + WINDOW_SIZE:
        addr -= SHARED_WINDOW
    return ((rank + 1) << RANK_SHIFT) | (addr & OFFSET_MASK)


def _multicast_tensor(m, ins, lanes):
    """`.multicast::cluster` load: each lane's box lands at the same CTA-relative offset in
    every CTA its ctaMask names, each completing the transaction bytes on its own mbarrier
    at the mbarrier operand's CTA-relative offset (PTX ISA, cp.async.bulk.tensor)."""
    map_op, coords_op, smem_op, bar_op = ins.ops[1], ins.ops[2], ins.ops[0], ins.ops[3]
    ids = m.lane_ids(lanes)
    per_lane = multicast_ranks(m, ins, ids)
    rest = range(ids.size) if m.copies_bulk_data else \
        _multicast_checked(m, ins, ids, per_lane)
    for k in rest:
        ranks = per_lane[k]
        one = ids[k:k + 1].astype(np.int64)
        tm = _map(m, ins, map_op, one)
        smem = int(smem_op.address(m, one)[0])
        bar = int(bar_op.address(m, one)[0])
        for rank in ranks:
            dst = in_rank(smem, rank)
            if m.copies_bulk_data:
                _copy_box(m, ins, one, tm, coords_op, dst, True)
            else:
                _box_checked(m, ins, one, tm, coords_op, dst)
            words, idx = barrier_word_at(m, ins, in_rank(bar, rank), one)
            update(m, ins, words, idx, np.zeros(1, np.int64), np.array([-tm.box_bytes],
                                                                        np.int64))


def _complete_checked(m, bars, checked: list) -> list[int]:
    """Timing mode: complete the bytes of the lanes whose copy passed `_checked_maps`'s
    checks at once when their mbarrier words (`bars`: words, index per lane) are distinct
    and none would fault (`update_distinct`); the positions of the lanes left for the
    lane-by-lane path, in lane order (all of them when that fails)."""
    ok = np.array([tm is not None for tm in checked], np.bool_)
    rest = np.flatnonzero(~ok).tolist()
    if not ok.any():
        return rest
    words, idx = bars
    sel = np.flatnonzero(ok)
    tx = -np.array([checked[k].box_bytes for k in sel.tolist()], np.int64)
    if update_distinct(m, words, idx[sel], np.zeros(sel.size, np.int64), tx):
        return rest
    return list(range(len(checked)))


def _multicast_checked(m, ins, ids: np.ndarray, ranks: list[list[int]]) -> list[int]:
    """Timing mode: the lanes whose copy passes `_checked_maps`'s checks (the same in each
    destination CTA: the offset is CTA-relative) and whose mbarrier offset is a word in
    bounds complete their bytes together (`update`: per mbarrier word, in lane order);
    the positions of the other lanes, in lane order, which the caller takes one by one."""
    checked = _checked_maps(m, ids, ins.ops[1], ins.ops[2], ins.ops[0])
    ok = np.array([tm is not None for tm in checked], np.bool_)
    if not ok.any():
        return list(range(ids.size))
    owner, target, rel = multicast_barriers(m, ins, ids, ranks)
    size = m.mem.shared_bytes
    bad = ((rel % 8) | (rel < 0) | (rel + 8 > size)).astype(np.bool_)
    ok &= np.bincount(owner[bad], minlength=ids.size) == 0
    take = ok[owner]
    if take.any():
        idx = (target[take] * size + rel[take]) // 8
        tx = -np.array([checked[k].box_bytes for k in owner[take].tolist()], np.int64)
        update(m, ins, m.mem.shared.view(np.uint64), idx, np.zeros(idx.size, np.int64), tx)
    return np.flatnonzero(~ok).tolist()


def multicast_barriers(m, ins, ids: np.ndarray, ranks: list[list[int]]):
    """Per (lane, rank of its ctaMask `ranks`), in lane order: the lane's position in
    `ids`, the batch CTA of that rank and the CTA-relative offset of the mbarrier there
    (the mbarrier operand's offset, `in_rank`)."""
    owner = np.repeat(np.arange(ids.size), [len(r) for r in ranks])
    bar = ins.ops[3].address(m, ids).astype(np.int64)
    rel = np.where((bar >= SHARED_WINDOW) & (bar < SHARED_WINDOW + WINDOW_SIZE),
                   bar - SHARED_WINDOW, bar) & OFFSET_MASK
    target = (m.cluster_first[m.cta_of[ids[owner]]]
              + np.array([r for rs in ranks for r in rs], np.int64))
    return owner, target, rel[owner]


def barrier_word_at(m, ins, addr: int, one: np.ndarray):
    """(shared memory as u64 words, word index) of the mbarrier at shared::cluster
    address `addr`."""
    buf, off = m.locate("shared", np.array([addr], np.int64), one, 8, ins)
    return buf.view(np.uint64), off // 8


def _barrier_words_or_none(m, ins, ids: np.ndarray):
    """`barrier_words` of the mbarrier operand for all lanes at once; None when some lane's
    address faults (each lane then finds its own, faulting in its turn)."""
    try:
        return barrier_words(m, ins, ins.ops[3], ids)
    except PtxError:
        return None


def _copy_box(m, ins, one: np.ndarray, tm: TensorMap, coords_op, smem: int, load: bool):
    """Move one lane's box: global to shared (zeros where out of bounds) or back."""
    sh, gm = m.mem.shared, m.gmem.data
    goff, soff = _box(m, ins, one, tm, coords_op, smem)
    inside = goff >= 0
    if load:
        sh[_element_bytes(soff, tm.elem_bytes)] = 0
        sh[_element_bytes(soff[inside], tm.elem_bytes)] = \
            gm[_element_bytes(goff[inside], tm.elem_bytes)]
    else:
        gm[_element_bytes(goff[inside], tm.elem_bytes)] = \
            sh[_element_bytes(soff[inside], tm.elem_bytes)]


def bulk_problem(ins) -> tuple[str, str] | None:
    text = ins.text + "."
    to_shared = (".shared::cluster.global." in text or ".shared::cluster.shared::cta." in text) \
        and _LOAD in ins.flags
    to_global = ".global.shared::cta." in text and _STORE in ins.flags
    if not (to_shared or to_global) or ins.flags & {"multicast::cluster"}:
        return f"unsupported bulk copy '{ins.text}'", ACCEPTED_BULK
    return None


@semantics("cp.async.bulk")
def bulk_copy(m, ins, lanes):
    problem = bulk_problem(ins)
    if problem:
        raise m.fault(ins, problem[0], expected=problem[1])
    to_shared = _LOAD in ins.flags
    from_shared = ".shared::cta." in ins.text + "."
    n = m.nlanes(lanes)
    size = as_array(ins.ops[2].read(m, U32, lanes), n).astype(np.int64)
    if (size % 16).any() or (size <= 0).any():
        raise m.fault(ins, f"bulk copy of {int(size[(size % 16 != 0) | (size <= 0)][0])} "
                      "bytes", expected="a positive multiple of 16 bytes")
    for k, lane in enumerate(m.lane_ids(lanes).tolist()):
        one = np.array([lane], dtype=np.int64)
        nb = int(size[k])
        dst = int(ins.ops[0].address(m, one)[0])
        src = int(ins.ops[1].address(m, one)[0])
        if from_shared:
            s_buf, s0 = m.mem.shared, sum(_shared(m, ins, src, one, nb, 16))
        else:
            s_buf, s0 = m.gmem.data, int(_global(m, ins, np.array([src]), nb)[0])
        if to_shared:
            d_buf, d0 = m.mem.shared, sum(_shared(m, ins, dst, one, nb, 16))
        else:
            d_buf, d0 = m.gmem.data, int(_global(m, ins, np.array([dst]), nb)[0])
        d_buf[d0:d0 + nb] = s_buf[s0:s0 + nb]
        if to_shared:
            words, idx = barrier_words(m, ins, ins.ops[3], one)
            update(m, ins, words, idx, np.zeros(1, np.int64), np.array([-nb], np.int64))


@semantics("cp.async.bulk.commit_group", "cp.async.bulk.wait_group")
def bulk_group(m, ins, lanes):
    return None
