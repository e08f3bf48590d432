"""Bulk asynchronous copies: TMA tensor copies `cp.async.bulk.tensor` and plain
`cp.async.bulk`, with their bulk-group and mbarrier completion.

Forms (sm_90a; one CTA per cluster, so `.shared::cluster` addresses are this CTA's):

    cp.async.bulk.tensor.{1d..5d}.shared::cluster.global.tile.mbarrier::complete_tx::bytes
        [dst], [tensorMap, {c0, ...}], [mbar] {, cachePolicy};            (load)
    cp.async.bulk.tensor.{1d..5d}.global.shared::cta.tile.bulk_group
        [tensorMap, {c0, ...}], [src] {, cachePolicy};                    (store)
    cp.async.bulk.shared::cluster.{global,shared::cta}.mbarrier::complete_tx::bytes
        [dst], [src], size, [mbar];
    cp.async.bulk.global.shared::cta.bulk_group [dst], [src], size;
    cp.async.bulk.commit_group;   cp.async.bulk.wait_group{.read} N;

(`.tile` may be omitted; `.L2::cache_hint` adds the policy operand, which is ignored.)
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
tensor copies are checked and complete their mbarrier transactions but move no bytes.
Left out: `.im2col` and `.multicast::cluster` forms, `cp.reduce.async.bulk*`, prefetch,
the NaN OOB fill and non-1 element strides.
"""

from __future__ import annotations

import numpy as np

from isa.memory import GLOBAL_BASE, KPARAM_BASE, SHARED_WINDOW, WINDOW_SIZE
from isa.operands import DVec
from isa.semantics.common import U32, as_array
from isa.semantics.hopper_mbarrier import barrier_words, update
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
_DIMS = {"1d": 1, "2d": 2, "3d": 3, "4d": 4, "5d": 5}
ACCEPTED_TENSOR = ("cp.async.bulk.tensor.<N>d.shared::cluster.global{.tile}."
                   "mbarrier::complete_tx::bytes{.L2::cache_hint} or "
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
    if len(dims) != 1 or not (load or store) or ins.flags & {"im2col", "multicast::cluster"}:
        return f"unsupported tensor copy '{ins.text}'", ACCEPTED_TENSOR
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


def _base(m, ins, tm: TensorMap) -> int:
    if tm.base_arg == ABSOLUTE:
        return tm.address
    params = m.program.kparams
    if tm.base_arg >= len(params) or params[tm.base_arg][0].size_bytes != 8:
        raise m.fault(ins, f"tensor map names kernel argument {tm.base_arg} as its base, "
                      "which is no 64-bit pointer parameter",
                      expected="make_tensor_map(..., arg=<index of a .u64 pointer argument>)")
    off = params[tm.base_arg][1]
    return int(m.mem.kparam[off:off + 8].view(np.uint64)[0]) + tm.address


def _shared(m, ins, addr: int, lane: np.ndarray, nbytes: int, align: int) -> tuple[int, int]:
    """(flat offset of the lane's CTA shared memory, CTA-relative address) of the range
    [addr, addr + nbytes), checked; generic shared-window addresses are accepted."""
    if SHARED_WINDOW <= addr < SHARED_WINDOW + WINDOW_SIZE:
        addr -= SHARED_WINDOW
    size = m.mem.shared_bytes
    if addr % align or addr < 0 or addr + nbytes > size:
        raise m.fault(ins, f"shared range [{addr:#x}, {addr + nbytes:#x}) is out of bounds "
                      f"or not {align}-byte aligned",
                      expected=f"a {align}-byte aligned range inside {size} bytes of shared "
                      "memory")
    return int(m.cta_of[lane[0]]) * size, addr


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


def _box_in_buffer(m, tm: TensorMap, coords: np.ndarray, base: int) -> bool:
    """True when the whole box lies inside the tensor and each of its rows (innermost
    dimension, contiguous) inside one buffer: then every element is inside one, too."""
    box = np.array(tm.box, dtype=np.int64)
    if (coords < 0).any() or (coords + box > np.array(tm.dims, dtype=np.int64)).any():
        return False
    span = tm.dims[0] * tm.elem_bytes + sum((d - 1) * s for d, s in
                                             zip(tm.dims[1:], tm.strides_bytes[1:], strict=True))
    if m.gmem.check(np.array([base], np.int64), span)[0]:
        return True  # the whole tensor lies inside one buffer, so every row of the box does
    rows = np.array([base + int((coords * np.array(tm.strides_bytes)).sum())], np.int64)
    if tm.rank > 1:
        outer = np.indices(tm.box[:0:-1]).reshape(tm.rank - 1, -1)[::-1]
        strides = np.array(tm.strides_bytes[1:], dtype=np.int64)[:, None]
        rows = rows + (outer * strides).sum(axis=0)
    return bool(m.gmem.check(rows, tm.box[0] * tm.elem_bytes).all())


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
    load = _LOAD in ins.flags
    sh, gm = m.mem.shared, m.gmem.data
    for lane in m.lane_ids(lanes).tolist():
        one = np.array([lane], dtype=np.int64)
        if load:
            tm = _map(m, ins, ins.ops[1], one)
            dst = int(ins.ops[0].address(m, one)[0])
            if m.copies_bulk_data:
                goff, soff = _box(m, ins, one, tm, ins.ops[2], dst)
                inside = goff >= 0
                sh[_element_bytes(soff, tm.elem_bytes)] = 0
                sh[_element_bytes(soff[inside], tm.elem_bytes)] = \
                    gm[_element_bytes(goff[inside], tm.elem_bytes)]
            else:
                _box_checked(m, ins, one, tm, ins.ops[2], dst)
            words, idx = barrier_words(m, ins, ins.ops[3], one)
            update(m, ins, words, idx, np.zeros(1, np.int64),
                   np.array([-tm.box_bytes], np.int64))
        else:
            tm = _map(m, ins, ins.ops[0], one)
            src = int(ins.ops[2].address(m, one)[0])
            if not m.copies_bulk_data:
                _box_checked(m, ins, one, tm, ins.ops[1], src)
                continue
            goff, soff = _box(m, ins, one, tm, ins.ops[1], src)
            inside = goff >= 0
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
