"""Control flow and CTA synchronisation: bra, call, ret, exit, trap, bar/barrier.

The interpreter has already set every executing lane's pc to the next instruction;
these semantics overwrite it. Calls copy `.param` arguments into the callee's
parameter slots and push the return pc; `ret` from a `.func` pops it and copies the
return values back to the caller's `retval` variables. `ret`/`exit` in the entry
retire the thread. `bar.sync a{, b}` blocks lanes until all non-exited threads of the
CTA (or `b` threads) have arrived at barrier `a`; exited threads never count.
"""

from __future__ import annotations

import numpy as np

from isa.machine import BLOCKED, CALL_DEPTH, EXITED
from isa.memory import TPARAM_BASE
from isa.semantics.cluster import release_cluster_barriers
from isa.semantics.common import U32
from isa.semantics.registry import semantics


@semantics("bra")
def bra(m, ins, lanes):
    m.pc[lanes] = ins.target


@semantics("call")
def call(m, ins, lanes):
    start, rets, params, name = ins.call
    ids = m.lane_ids(lanes)
    depth = m.depth[ids].astype(np.int64)
    if (depth >= CALL_DEPTH).any():
        raise m.fault(ins, f"call depth exceeds {CALL_DEPTH}")
    callee = m.program.funcs_params[name]
    tp = m.mem.tparam
    row = ids * m.mem.tparam_bytes
    for (src_addr, size), (dst_addr, _) in zip(params, callee, strict=False):
        s, d = src_addr - TPARAM_BASE, dst_addr - TPARAM_BASE
        for k in range(size):
            tp[row + d + k] = tp[row + s + k]
    m.ret_pc[ids, depth] = ins.pc + 1
    m.ret_site[ids, depth] = ins.pc
    m.depth[ids] += 1
    m.pc[lanes] = start


@semantics("ret")
def ret(m, ins, lanes):
    if ins.in_entry:
        return retire(m, lanes)
    ids = m.lane_ids(lanes)
    m.depth[ids] -= 1
    depth = m.depth[ids].astype(np.int64)
    sites = m.ret_site[ids, depth]
    tp = m.mem.tparam
    for site in np.unique(sites):
        call_ins = m.program.instrs[int(site)]
        _, rets, _, name = call_ins.call
        callee_rets = m.program.funcs_returns[name]
        sel = ids[sites == site]
        row = sel * m.mem.tparam_bytes
        for (dst_addr, size), (src_addr, _) in zip(rets, callee_rets, strict=False):
            s, d = src_addr - TPARAM_BASE, dst_addr - TPARAM_BASE
            for k in range(size):
                tp[row + d + k] = tp[row + s + k]
    m.pc[ids] = m.ret_pc[ids, depth]


@semantics("exit")
def exit_(m, ins, lanes):
    retire(m, lanes)


@semantics("trap")
def trap(m, ins, lanes):
    raise m.fault(ins, "trap executed", lanes)


def retire(m, lanes) -> None:
    m.pc[lanes] = EXITED
    ctas = np.unique(m.cta_of[lanes])
    release_barriers(m, ctas)
    release_cluster_barriers(m, ctas)


@semantics("bar", "barrier")
def bar(m, ins, lanes):
    if "arrive" in ins.flags:
        raise m.fault(ins, "bar.arrive is not supported", expected="bar.sync")
    n = m.nlanes(lanes)
    bid = np.asarray(ins.ops[0].read(m, U32, lanes)).reshape(-1)
    count = np.asarray(ins.ops[1].read(m, U32, lanes)).reshape(-1) if len(ins.ops) > 1 \
        else np.zeros(1, dtype=np.uint32)
    if (bid > 15).any():
        raise m.fault(ins, f"barrier id {int(bid.max())} out of range", expected="0..15")
    m.resume[lanes] = ins.pc + 1
    m.bar_id[lanes] = np.broadcast_to(bid, (n,)).astype(np.int16)
    m.bar_count[lanes] = np.broadcast_to(count, (n,)).astype(np.int32)
    m.pc[lanes] = BLOCKED
    release_barriers(m, np.unique(m.cta_of[lanes]))


def release_barriers(m, ctas: np.ndarray) -> None:
    """Release every barrier of these CTAs whose arrival count is complete."""
    tpc = m.tpc
    for c in ctas.tolist():
        seg = slice(c * tpc, (c + 1) * tpc)
        pc = m.pc[seg]
        waiting = pc == BLOCKED
        if not waiting.any():
            continue
        live = int(np.count_nonzero(pc != EXITED))
        ids = m.bar_id[seg]
        for b in np.unique(ids[waiting]).tolist():
            at = waiting & (ids == b)
            arrived = int(np.count_nonzero(at))
            want = int(m.bar_count[seg][at].max())
            need = want if want > 0 else live
            if arrived >= need:
                m.pc[seg][at] = m.resume[seg][at]
                m.bar_id[seg][at] = -1


@semantics("membar", "fence", "nanosleep", "pmevent")
def no_effect(m, ins, lanes):
    return None
