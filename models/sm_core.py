"""The SM issue loop compiled with numba: warps, schedulers, scoreboard, barriers, tile ops.

What it models
--------------
Exactly what `models.sm` describes; this module holds the loop, the SM class around
it holds what needs Python (the memory system, the CTA dispatcher, hooks, SimPy). The
state is a struct of arrays (`models.sm_state.SmState`): one row per warp slot, per
scheduler, per CTA slot, plus a register file of loop variables (`L_*`). `run` advances the
SM from where it stopped until it needs Python and says why (`RC_*`):

* `RC_MEMORY` / `RC_TMA`: warp `L_PEND_W` issued memory event `L_PEND_E` at `L_CYCLE` whose
  completion only the memory system knows (global loads/stores/atomics through the LSU, TMA
  messages); the caller writes the completion cycle to `L_DONE` and calls `run` again, which
  finishes the issue and goes on with the next scheduler of the same cycle.
* `RC_CTA_DONE`: CTA `L_CTA_DONE` finished during the issue just made; the caller fires its
  hooks and launches the next CTA (`launch`) before calling `run` again, which then reads
  the issuing scheduler's wake-up (the launch may have lowered it).
* `RC_YIELD`: the next cycle (`L_CYCLE`) lies past the SimPy window (`L_WINDOW`).
* `RC_GROW`: a warp's list of open wgmma groups is full; the caller widens it and calls
  again (nothing has changed since the last return).
* `RC_END`: nothing resident (or nothing can ever issue with nothing resident).
* `RC_STUCK`: CTAs are resident but no warp can ever issue.

Shared-memory and constant accesses, wgmma queues, group waits and mbarrier phases
(`models.sm_state.PhaseTable`, one per launch: phase slots belong to one CTA, so the SMs of
a launch share it) are timed here. Scheduling policies are integer codes (`POLICY_*`):
greedy-then-oldest (the last issuer first, then oldest first) and loose round robin
(starting one past the last issuer). Stall cycles accumulate per reason in `SmState.stall`
(indices of `models.warp_scheduler.STALL_REASONS`), as stretches per scheduler.

Left out: what `models.sm` leaves out. Units: SM cycles.
"""

from __future__ import annotations

import numba as nb

from models.sm_state import (
    C_INDEX,
    C_LIVE,
    C_NARR,
    C_USED,
    H_COUNT,
    H_DONE,
    H_MAX,
    L_CONST_LAT,
    L_CTA_DONE,
    L_CYCLE,
    L_DONE,
    L_FINISH,
    L_GROW,
    L_K,
    L_LISTEN,
    L_NEXT,
    L_NEXT_SCHED,
    L_PEND_E,
    L_PEND_W,
    L_POLICY,
    L_RESIDENT,
    L_SHARED_FREE,
    L_SHARED_LAT,
    L_STATE,
    L_WAKE,
    L_WINDOW,
    NEVER,
    P_ACTION,
    P_COUNT,
    P_DST_HI,
    P_DST_LO,
    P_INTERVAL,
    P_LATENCY,
    P_SB_HI,
    P_SB_LO,
    P_UNIT,
    POLICY_GTO,
    RC_CTA_DONE,
    RC_END,
    RC_GROW,
    RC_MEMORY,
    RC_STUCK,
    RC_TMA,
    RC_YIELD,
    REASON_BARRIER,
    REASON_DEPENDENCY,
    REASON_MEMORY,
    REASON_NO_WARP,
    REASON_NONE,
    REASON_PIPE_BUSY,
    S_LAST,
    S_N,
    S_REASON,
    S_SINCE,
    S_SLOT_FREE,
    S_TENSOR,
    S_TOUCHED,
    S_WAKE,
    ST_AFTER_ISSUE,
    ST_PASS,
    ST_PENDING,
    ST_TOP,
    W_CTA,
    W_DONE,
    W_END,
    W_GID,
    W_MEM,
    W_NGROUPS,
    W_POS,
    W_READY,
    W_SCHED,
    W_UNIT,
    W_USED,
    W_WAIT_SLOT,
    W_WG_OPEN,
)
from models.units import (
    ACTION_BARRIER,
    ACTION_MBARRIER,
    ACTION_MBARRIER_WAIT,
    ACTION_MEMORY,
    ACTION_TMA,
    ACTION_WGMMA,
    ACTION_WGMMA_COMMIT,
)
from simulator.trace import KIND_ATOMIC, KIND_BULK_STORE, KIND_LOAD, KIND_SHARED, KIND_STORE


# -- helpers (all inlined into `run` by numba) ---------------------------------------------
@nb.njit(cache=True)
def _touch(si, k, cycle):
    si[k, S_TOUCHED] = 1
    if cycle < si[k, S_WAKE]:
        si[k, S_WAKE] = cycle


@nb.njit(cache=True)
def _prepare(w, base, ev_pc, pcs, regs, wi, wr, wm):
    """Scoreboard check of the warp's next instruction; ready no earlier than `base`."""
    p = ev_pc[wi[w, W_POS]]
    ready_cycle = base
    mem = 0
    for i in range(pcs[p, P_SB_LO], pcs[p, P_SB_HI]):
        r = regs[i]
        if wr[w, r] > ready_cycle:
            ready_cycle = wr[w, r]
            mem = wm[w, r]
    wi[w, W_READY] = ready_cycle
    wi[w, W_UNIT] = pcs[p, P_UNIT]
    wi[w, W_MEM] = mem


@nb.njit(cache=True)
def _finish(w, cycle, wi, si, sw, ci, lp):
    """Retire a warp: 0, 1 when its CTA's waiting warps are now all of it (release them),
    2 when its CTA is done (`L_CTA_DONE`)."""
    k = wi[w, W_SCHED]
    n = si[k, S_N]
    j = 0
    while sw[k, j] != w:
        j += 1
    for i in range(j, n - 1):
        sw[k, i] = sw[k, i + 1]
    si[k, S_N] = n - 1
    _touch(si, k, cycle)
    if si[k, S_LAST] == w:
        si[k, S_LAST] = -1
    if wi[w, W_DONE] > lp[L_FINISH]:
        lp[L_FINISH] = wi[w, W_DONE]
    wi[w, W_USED] = 0
    wi[w, W_WAIT_SLOT] = -1
    c = wi[w, W_CTA]
    ci[c, C_LIVE] -= 1
    if ci[c, C_LIVE] == 0:
        ci[c, C_USED] = 0
        lp[L_RESIDENT] -= 1
        lp[L_CTA_DONE] = ci[c, C_INDEX]
        return 2
    if ci[c, C_NARR] == ci[c, C_LIVE]:
        return 1
    return 0


@nb.njit(cache=True)
def _release(c, cycle, ev_pc, pcs, regs, wi, wr, wm, si, sw, ci, ca, lp):
    """Every live warp of CTA slot `c` arrived at its barrier: let them go on."""
    n = ci[c, C_NARR]
    ci[c, C_NARR] = 0
    for i in range(n):
        w = ca[c, i]
        if wi[w, W_POS] == wi[w, W_END]:
            _finish(w, cycle, wi, si, sw, ci, lp)
        else:
            _prepare(w, cycle + 1, ev_pc, pcs, regs, wi, wr, wm)
            _touch(si, wi[w, W_SCHED], cycle)
    if cycle + 1 < lp[L_WAKE]:
        lp[L_WAKE] = cycle + 1


@nb.njit(cache=True)
def _contribute(slot, at, cycle, slot_events, ph, ev_pc, pcs, regs, wi, wr, wm, si, lp):
    """One contribution to mbarrier phase `slot` at cycle `at`; its waiters go on when it
    was the last."""
    ph[slot, H_COUNT] += 1
    if at > ph[slot, H_MAX]:
        ph[slot, H_MAX] = at
    if ph[slot, H_COUNT] < slot_events[slot]:
        return
    done = ph[slot, H_MAX]
    ph[slot, H_COUNT] = 0
    ph[slot, H_MAX] = 0
    ph[slot, H_DONE] = done
    for w in range(wi.shape[0]):
        if wi[w, W_USED] == 0 or wi[w, W_WAIT_SLOT] != slot:
            continue
        wi[w, W_WAIT_SLOT] = -1
        _prepare(w, cycle + 1, ev_pc, pcs, regs, wi, wr, wm)
        if done > wi[w, W_READY]:
            wi[w, W_READY] = done
            wi[w, W_MEM] = 1
        _touch(si, wi[w, W_SCHED], cycle)
        if cycle + 1 < lp[L_WAKE]:
            lp[L_WAKE] = cycle + 1


@nb.njit(cache=True)
def _post(w, e, action, cycle, done, mem, hold, ev_pc, pcs, regs, wi, wr, wm, si, sw, ci,
          ca, lp):
    """The rest of an issue once its result cycle `done` is known."""
    p = ev_pc[e]
    for i in range(pcs[p, P_DST_LO], pcs[p, P_DST_HI]):
        d = regs[i]
        wr[w, d] = done
        wm[w, d] = mem
    if done > wi[w, W_DONE]:
        wi[w, W_DONE] = done
    e += 1
    wi[w, W_POS] = e
    if action == ACTION_BARRIER:
        wi[w, W_READY] = NEVER
        c = wi[w, W_CTA]
        ca[c, ci[c, C_NARR]] = w
        ci[c, C_NARR] += 1
        if ci[c, C_NARR] == ci[c, C_LIVE]:
            _release(c, cycle, ev_pc, pcs, regs, wi, wr, wm, si, sw, ci, ca, lp)
    elif e == wi[w, W_END]:
        c = wi[w, W_CTA]
        if _finish(w, cycle, wi, si, sw, ci, lp) == 1:
            _release(c, cycle, ev_pc, pcs, regs, wi, wr, wm, si, sw, ci, ca, lp)
    else:
        _prepare(w, cycle + 1, ev_pc, pcs, regs, wi, wr, wm)
        if hold > wi[w, W_READY]:
            wi[w, W_READY] = hold
            wi[w, W_MEM] = 1 if action == ACTION_MBARRIER_WAIT else 0


@nb.njit(cache=True)
def _issue(w, k, cycle, ev_pc, ev_kind, ev_detail, ev_slot, pcs, regs, slot_events, wi, wr,
           wm, wg, si, uf, sw, ci, ca, ph, lp):
    """Issue warp `w`'s next instruction on scheduler `k` at `cycle`: 0 when done, else the
    `RC_*` asking the caller for the memory system's completion cycle."""
    e = wi[w, W_POS]
    p = ev_pc[e]
    unit, interval, latency = pcs[p, P_UNIT], pcs[p, P_INTERVAL], pcs[p, P_LATENCY]
    action = pcs[p, P_ACTION]
    uf[k, unit] = cycle + interval
    mem = 0
    hold = 0
    if action == ACTION_MEMORY:
        kind, detail = ev_kind[e], ev_detail[e]
        mem = 1
        if kind == KIND_SHARED:
            start = max(cycle, lp[L_SHARED_FREE])
            degree = max(detail, 1)
            lp[L_SHARED_FREE] = start + degree
            done = start + lp[L_SHARED_LAT] + degree - 1
        elif (kind == KIND_LOAD or kind == KIND_STORE or kind == KIND_ATOMIC) and detail > 0:
            lp[L_PEND_W], lp[L_PEND_E] = w, e
            return RC_MEMORY
        else:
            done = cycle + lp[L_CONST_LAT]
    elif action == ACTION_TMA:
        lp[L_PEND_W], lp[L_PEND_E] = w, e
        return RC_TMA
    elif action == ACTION_WGMMA:
        uf[k, unit] = cycle + 1
        start = max(cycle, si[k, S_TENSOR])
        si[k, S_TENSOR] = start + interval
        done = start + latency
        if done > wi[w, W_WG_OPEN]:
            wi[w, W_WG_OPEN] = done
    elif action == ACTION_WGMMA_COMMIT:
        n = wi[w, W_NGROUPS]
        wg[w, n] = wi[w, W_WG_OPEN]
        wi[w, W_NGROUPS] = n + 1
        if n + 2 >= wg.shape[1]:
            lp[L_GROW] = 1
        wi[w, W_WG_OPEN] = 0
        done = cycle + latency
    elif action == ACTION_MBARRIER:
        start = max(cycle, lp[L_SHARED_FREE])
        lp[L_SHARED_FREE] = start + 1
        done = start + lp[L_SHARED_LAT]
        _contribute(ev_slot[e], done, cycle, slot_events, ph, ev_pc, pcs, regs, wi, wr, wm, si,
                    lp)
    elif action == ACTION_MBARRIER_WAIT:
        slot = ev_slot[e]
        done = cycle + latency
        if slot >= 0:
            at = ph[slot, H_DONE]
            if at < 0:
                wi[w, W_WAIT_SLOT] = slot
                hold = NEVER
            else:
                done = max(at, done)
                mem = 1
                hold = at
    elif action > ACTION_WGMMA_COMMIT:                  # wgmma.wait_group N
        n, count = wi[w, W_NGROUPS], pcs[p, P_COUNT]
        if n > count:
            cut = n - count
            for i in range(cut):
                hold = max(hold, wg[w, i])
            for i in range(count):
                wg[w, i] = wg[w, cut + i]
            wi[w, W_NGROUPS] = count
        done = cycle + latency
    else:                                               # plain units and bar.sync
        done = cycle + latency
    _post(w, e, action, cycle, done, mem, hold, ev_pc, pcs, regs, wi, wr, wm, si, sw, ci, ca,
          lp)
    return 0


@nb.njit(cache=True)
def _first_reason(k, cycle, policy, wi, si, sw):
    """Why the first warp in scheduler `k`'s policy order cannot issue at `cycle`."""
    n = si[k, S_N]
    if n == 0:
        return REASON_NO_WARP
    last = si[k, S_LAST]
    w = sw[k, 0]
    if last >= 0:
        if policy == POLICY_GTO:
            w = last
        else:
            j = 0
            while sw[k, j] != last:
                j += 1
            w = sw[k, (j + 1) % n]
    ready = wi[w, W_READY]
    if ready >= NEVER:
        return REASON_BARRIER
    if ready > cycle:
        return REASON_MEMORY if wi[w, W_MEM] else REASON_DEPENDENCY
    return REASON_PIPE_BUSY


@nb.njit(cache=True)
def _stretch(k, reason, cycle, si, stall):
    """End scheduler `k`'s open stall stretch at `cycle` and open one of `reason`."""
    open_reason = si[k, S_REASON]
    if reason != open_reason:
        if open_reason >= 0:
            stall[open_reason] += cycle - si[k, S_SINCE]
        si[k, S_REASON] = reason
        si[k, S_SINCE] = cycle


@nb.njit(cache=True)
def _pick(k, cycle, policy, wi, si, uf, sw):
    """(warp, -1) for the first warp in policy order that can issue at `cycle`, else
    (-1, the earliest cycle one might)."""
    n = si[k, S_N]
    last = si[k, S_LAST]
    earliest = NEVER
    start = 0
    if last >= 0:
        if policy == POLICY_GTO:
            ready = wi[last, W_READY]
            if ready > cycle:
                earliest = ready
            else:
                free = uf[k, wi[last, W_UNIT]]
                if free > cycle:
                    earliest = free
                else:
                    return last, earliest
        else:
            while sw[k, start] != last:
                start += 1
            start += 1
    for i in range(n):
        j = start + i
        if j >= n:
            j -= n
        w = sw[k, j]
        ready = wi[w, W_READY]
        if ready > cycle:
            if ready < earliest:
                earliest = ready
            continue
        free = uf[k, wi[w, W_UNIT]]
        if free > cycle:
            if free < earliest:
                earliest = free
            continue
        return w, earliest
    return -1, earliest


@nb.njit(cache=True)
def run(ev_pc, ev_kind, ev_detail, ev_slot, pcs, regs, slot_events, wi, wr, wm, wg, si, uf,
        sw, ci, ca, ph, lp, stall):
    """Advance the SM until it needs the caller; the reason (`RC_*`)."""
    n_sched = si.shape[0]
    listening = lp[L_LISTEN]
    policy = lp[L_POLICY]
    state = lp[L_STATE]
    cycle = lp[L_CYCLE]
    next_cycle = lp[L_NEXT]
    k = lp[L_K]
    if state == ST_PENDING:
        w, e, done = lp[L_PEND_W], lp[L_PEND_E], lp[L_DONE]
        action = pcs[ev_pc[e], P_ACTION]
        if action == ACTION_TMA and ev_kind[e] != KIND_BULK_STORE:
            _contribute(ev_slot[e], done, cycle, slot_events, ph, ev_pc, pcs, regs, wi, wr, wm,
                        si, lp)
        _post(w, e, action, cycle, done, 1, 0, ev_pc, pcs, regs, wi, wr, wm, si, sw, ci, ca, lp)
        state = ST_AFTER_ISSUE
        if lp[L_CTA_DONE] >= 0:
            lp[L_STATE] = state
            return RC_CTA_DONE
    while True:
        if state == ST_TOP:
            if lp[L_RESIDENT] == 0:
                return RC_END
            if lp[L_GROW]:
                return RC_GROW
            cycle = lp[L_CYCLE]
            lp[L_WAKE] = NEVER
            next_cycle = NEVER
            k = 0
            state = ST_PASS
        elif state == ST_AFTER_ISSUE:
            wake = si[k, S_WAKE]
            if listening:
                si[k, S_TOUCHED] = 0
                _stretch(k, REASON_NONE, cycle, si, stall)
            else:
                si[k, S_TOUCHED] = 1
            if wake < next_cycle:
                next_cycle = wake
            k += 1
            state = ST_PASS
        while k < n_sched:
            wake = si[k, S_WAKE]
            if wake <= cycle:
                reason = REASON_NONE
                if cycle < si[k, S_SLOT_FREE]:
                    wake = si[k, S_SLOT_FREE]
                    si[k, S_WAKE] = wake
                else:
                    w, earliest = _pick(k, cycle, policy, wi, si, uf, sw)
                    if w >= 0:
                        si[k, S_WAKE] = cycle + 1
                        si[k, S_SLOT_FREE] = cycle + 1
                        si[k, S_LAST] = w
                        rc = _issue(w, k, cycle, ev_pc, ev_kind, ev_detail, ev_slot, pcs, regs,
                                    slot_events, wi, wr, wm, wg, si, uf, sw, ci, ca, ph, lp)
                        if rc != 0 or lp[L_CTA_DONE] >= 0:
                            lp[L_STATE] = ST_PENDING if rc != 0 else ST_AFTER_ISSUE
                            lp[L_K], lp[L_NEXT] = k, next_cycle
                            return rc if rc != 0 else RC_CTA_DONE
                        wake = si[k, S_WAKE]
                    else:
                        wake = earliest
                        si[k, S_WAKE] = wake
                        if listening:
                            reason = _first_reason(k, cycle, policy, wi, si, sw)
                if listening:
                    si[k, S_TOUCHED] = 0
                    _stretch(k, reason, cycle, si, stall)
                else:
                    si[k, S_TOUCHED] = 1
            if wake < next_cycle:
                next_cycle = wake
            k += 1
        if lp[L_WAKE] < next_cycle:
            next_cycle = lp[L_WAKE]
        if next_cycle <= cycle:
            next_cycle = cycle + 1
        if next_cycle >= NEVER:
            lp[L_STATE] = ST_TOP
            return RC_STUCK if lp[L_RESIDENT] else RC_END
        if listening:
            for j in range(n_sched):
                if si[j, S_TOUCHED]:
                    si[j, S_TOUCHED] = 0
                    reason = REASON_NONE
                    if cycle >= si[j, S_SLOT_FREE]:
                        reason = _first_reason(j, cycle, policy, wi, si, sw)
                    _stretch(j, reason, cycle, si, stall)
        lp[L_CYCLE] = next_cycle
        state = ST_TOP
        if next_cycle > lp[L_WINDOW]:
            lp[L_STATE] = ST_TOP
            return RC_YIELD


@nb.njit(cache=True)
def launch(cta, cycle, offsets, ev_pc, pcs, regs, wi, wr, wm, si, sw, ci, ca, lp):
    """Make CTA `cta` resident at `cycle` (`SmState.make_room` first); True when it finished
    at once (all its warps empty; `L_CTA_DONE`)."""
    wpc = ca.shape[1]
    c = 0
    while ci[c, C_USED]:
        c += 1
    ci[c, C_INDEX], ci[c, C_LIVE], ci[c, C_NARR], ci[c, C_USED] = cta, wpc, 0, 1
    lp[L_RESIDENT] += 1
    n_sched = si.shape[0]
    finished = False
    w = 0
    for j in range(wpc):
        gid = cta * wpc + j
        k = lp[L_NEXT_SCHED]
        lp[L_NEXT_SCHED] = (k + 1) % n_sched
        while wi[w, W_USED]:
            w += 1
        wi[w, :] = 0
        wi[w, W_GID], wi[w, W_CTA], wi[w, W_SCHED] = gid, c, k
        wi[w, W_POS], wi[w, W_END] = offsets[gid], offsets[gid + 1]
        wi[w, W_READY], wi[w, W_DONE] = cycle, cycle
        wi[w, W_WAIT_SLOT], wi[w, W_USED] = -1, 1
        wr[w, :] = 0
        wm[w, :] = 0
        sw[k, si[k, S_N]] = w
        si[k, S_N] += 1
        _touch(si, k, cycle)
        if offsets[gid] == offsets[gid + 1]:
            state = _finish(w, cycle, wi, si, sw, ci, lp)
            if state == 1:
                _release(c, cycle, ev_pc, pcs, regs, wi, wr, wm, si, sw, ci, ca, lp)
            finished = finished or state == 2
        else:
            _prepare(w, cycle, ev_pc, pcs, regs, wi, wr, wm)
    if cycle < lp[L_WAKE]:
        lp[L_WAKE] = cycle
    return finished


@nb.njit(cache=True)
def close_stretches(cycle, si, stall):
    """Count every open stall stretch up to `cycle` (they stay open from there)."""
    for k in range(si.shape[0]):
        if si[k, S_REASON] >= 0:
            stall[si[k, S_REASON]] += cycle - si[k, S_SINCE]
            si[k, S_SINCE] = cycle
