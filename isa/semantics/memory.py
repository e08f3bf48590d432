"""Loads, stores, address conversion, atomics and `cp.async`.

Addresses are checked by `Machine.locate` (bounds, alignment). Vector accesses
(`.v2/.v4`) move consecutive elements. `cp.async` copies at issue (a program may
not read the destination before its `wait_group`, so copying early is a legal
order); the commit/wait instructions only mark groups for the timing model.
A `.L2::cache_hint` policy operand (the last) changes no result
(`isa.semantics.cache_policy`).
Atomics apply lanes one after another in lane order (a legal serialisation), with
numba loops so colliding addresses (histograms) stay fast.
"""

from __future__ import annotations

import numba
import numpy as np

from isa.memory import LOCAL_WINDOW, SHARED_WINDOW, WINDOW_SIZE
from isa.operands import DVec
from isa.semantics.common import PRED, as_array, dst
from isa.semantics.registry import semantics
from isa.types import TYPES, UINT_OF_BITS


@semantics("ld", "ldu")
def ld(m, ins, lanes):
    ty = ins.types[0]
    addr = ins.ops[1].address(m, lanes)
    vals = m.load(ins.space, addr, lanes, ty, ins.vec, ins)
    d = ins.ops[0]
    if isinstance(d, DVec):
        for item, v in zip(d.items, vals, strict=False):
            item.write(m, v, ty, lanes)
    else:
        d.write(m, vals[0], ty, lanes)


@semantics("st")
def st(m, ins, lanes):
    ty = ins.types[0]
    addr = ins.ops[0].address(m, lanes)
    s = ins.ops[1]
    n = m.nlanes(lanes)
    items = s.items if isinstance(s, DVec) else (s,)
    vals = [as_array(it.read(m, ty, lanes), n) for it in items]
    m.store(ins.space, addr, lanes, ty, vals, ins)


@semantics("prefetch", "prefetchu")
def prefetch(m, ins, lanes):
    return None


_WINDOWS = {"shared": SHARED_WINDOW, "local": LOCAL_WINDOW}


@semantics("cvta")
def cvta(m, ins, lanes):
    ty = ins.types[0]
    a = np.asarray(ins.ops[1].read(m, TYPES[f"u{ty.bits}"], lanes)).astype(np.uint64)
    base = np.uint64(_WINDOWS.get(ins.space, 0))
    r = a - base if "to" in ins.flags else a + base
    dst(m, ins, r.astype(UINT_OF_BITS[ty.bits]), TYPES[f"u{ty.bits}"], lanes)


@semantics("isspacep")
def isspacep(m, ins, lanes):
    a = np.asarray(ins.ops[1].read(m, TYPES["u64"], lanes)).astype(np.int64)
    in_sh = (a >= SHARED_WINDOW) & (a < SHARED_WINDOW + WINDOW_SIZE)
    in_lo = (a >= LOCAL_WINDOW) & (a < LOCAL_WINDOW + WINDOW_SIZE)
    r = {"shared": in_sh, "local": in_lo}.get(ins.space, ~(in_sh | in_lo))
    dst(m, ins, as_array(r, m.nlanes(lanes)), PRED, lanes)


# -- atomics ------------------------------------------------------------------------
_INT_OPS = {"add": 0, "min": 1, "max": 2, "and": 3, "or": 4, "xor": 5, "exch": 6, "cas": 7,
            "inc": 8, "dec": 9}


@numba.njit(cache=True)
def _atomic_int(mem, idx, vals, cmps, op, old):  # pragma: no cover - compiled
    for i in range(idx.size):
        j = idx[i]
        o = mem[j]
        old[i] = o
        v = vals[i]
        if op == 0:
            mem[j] = o + v
        elif op == 1:
            mem[j] = min(o, v)
        elif op == 2:
            mem[j] = max(o, v)
        elif op == 3:
            mem[j] = o & v
        elif op == 4:
            mem[j] = o | v
        elif op == 5:
            mem[j] = o ^ v
        elif op == 6:
            mem[j] = v
        elif op == 7:
            if o == cmps[i]:
                mem[j] = v
        elif op == 8:
            mem[j] = 0 if o >= v else o + 1
        elif op == 9:
            mem[j] = v if (o == 0 or o > v) else o - 1


@numba.njit(cache=True)
def _atomic_float(mem, idx, vals, cmps, op, old):  # pragma: no cover - compiled
    for i in range(idx.size):
        j = idx[i]
        o = mem[j]
        old[i] = o
        v = vals[i]
        if op == 0:
            mem[j] = o + v
        elif op == 1:
            mem[j] = v if (o != o or v < o) else o
        elif op == 2:
            mem[j] = v if (o != o or v > o) else o
        elif op == 6:
            mem[j] = v


def _atomic(m, ins, lanes, addr_op, val_ops, ret_op):
    ty = ins.types[0]
    aop = next((f for f in ins.flags if f in _INT_OPS), None)
    if aop is None:
        raise m.fault(ins, "atomic without an operation", expected=".add, .min, .cas ...")
    n = m.nlanes(lanes)
    addr = addr_op.address(m, lanes)
    size = max(ty.bits // 8, 1)
    buf, off = m.locate(ins.space, addr, lanes, size, ins)
    work_ty = ty
    if ty.kind == "b":
        work_ty = TYPES[f"u{ty.bits}"]
    if ty.kind == "f" and ty.bits in (16,) or ty.kind == "pk":
        raise m.fault(ins, f"atomic on .{ty.name} is not supported", expected=".f32/.f64/ints")
    if ty.kind == "f" and aop not in ("add", "min", "max", "exch"):
        raise m.fault(ins, f"atom.{aop} on floats is undefined", expected="add/min/max/exch")
    mem = buf.view(work_ty.dtype)
    idx = (off // size).astype(np.int64)
    vals = np.ascontiguousarray(as_array(val_ops[0].read(m, work_ty, lanes), n), work_ty.dtype)
    cmps = vals
    if aop == "cas":
        cmps = vals
        vals = np.ascontiguousarray(as_array(val_ops[1].read(m, work_ty, lanes), n),
                                    work_ty.dtype)
    old = np.empty(n, dtype=work_ty.dtype)
    fn = _atomic_float if ty.kind == "f" else _atomic_int
    fn(mem, idx, vals, cmps, _INT_OPS[aop], old)
    if ret_op is not None:
        ret_op.write(m, old, work_ty, lanes)


@semantics("atom")
def atom(m, ins, lanes):
    _atomic(m, ins, lanes, ins.ops[1], ins.ops[2:], ins.ops[0])


@semantics("red")
def red(m, ins, lanes):
    _atomic(m, ins, lanes, ins.ops[0], ins.ops[1:], None)


# -- cp.async ------------------------------------------------------------------------
@semantics("cp.async")
def cp_async(m, ins, lanes):
    n = m.nlanes(lanes)
    u32 = TYPES["u32"]
    size = int(np.asarray(ins.ops[2].read(m, u32, lanes)).reshape(-1)[0])
    if size not in (4, 8, 16):
        raise m.fault(ins, f"cp.async copy size {size}", expected="4, 8 or 16 bytes")
    has_src_size = len(ins.ops) > 3 + ("L2::cache_hint" in ins.flags)   # a policy goes last
    src_size = as_array(ins.ops[3].read(m, u32, lanes), n).astype(np.int64) \
        if has_src_size else np.full(n, size, dtype=np.int64)
    daddr = ins.ops[0].address(m, lanes)
    saddr = ins.ops[1].address(m, lanes)
    dbuf, doff = m.locate("shared", daddr, lanes, size, ins)
    full = src_size >= size
    if full.all():
        sbuf, soff = m.locate("global", saddr, lanes, size, ins)
        for k in range(size):
            dbuf[doff + k] = sbuf[soff + k]
        return
    for k in range(size):
        dbuf[doff + k] = 0
    ids = m.lane_ids(lanes)
    for i in range(n):   # partial copies (bounds guards): rare, per lane
        ss = int(min(src_size[i], size))
        if ss <= 0:
            continue
        sbuf, soff = m.locate("global", saddr[i:i + 1], ids[i:i + 1], ss if ss in (1, 2, 4, 8, 16)
                              else 1, ins)
        dbuf[doff[i]:doff[i] + ss] = sbuf[soff[0]:soff[0] + ss]


@semantics("cp.async.commit_group", "cp.async.wait_group", "cp.async.wait_all")
def cp_async_group(m, ins, lanes):
    return None
