"""Warp and CTA life in the compiled SM loop: scoreboard checks, barriers, mbarrier phases.

What it models
--------------
The parts of `models.sm_core.run` that change a warp's or a CTA's state besides picking
and issuing: the scoreboard check of a warp's next instruction (`prepare`), the rest of an
issue once its result cycle is known (`post`: destinations, `bar.sync` arrival, the warp's
end, the next check with a hold), retiring a warp and its CTA (`finish`), releasing a
barrier (`release`), contributing to an mbarrier phase and waking its waiters
(`contribute`), making a CTA resident (`launch`), `cp.async` group commits and waits
(`copy_groups`) and issuing a fused run of plain ops pc by pc (`issue_run`). The semantics
are those of
`models.sm`'s docstring; the state layout is `models.sm_state`'s.

Left out: what `models.sm` leaves out. Units: SM cycles.
"""

from __future__ import annotations

import numba as nb

from models.cached_memory_layout import inline_step, step
from models.sm_state import (
    BARRIERS,
    C_BAR_N,
    C_BAR_X,
    C_INDEX,
    C_LIVE,
    C_NARR,
    C_USED,
    H_COUNT,
    H_DONE,
    H_MAX,
    H_SM,
    L_CTA_DONE,
    L_CYCLE,
    L_FINISH,
    L_INDEX,
    L_LAST,
    L_NEXT_SCHED,
    L_PARKED,
    L_REMOTE,
    L_REMOTE_LOST,
    L_REMOTE_N,
    L_RESIDENT,
    L_WAKE,
    L_WINDOW,
    NEVER,
    P_COUNT,
    P_DST_HI,
    P_DST_LO,
    P_FIRST,
    P_INTERVAL,
    P_SB_HI,
    P_SB_LO,
    P_UNIT,
    REMOTE_SLOTS,
    S_LAST,
    S_N,
    S_SLOT_FREE,
    S_TOUCHED,
    S_WAKE,
    W_CG_DONE,
    W_CG_LO,
    W_CGROUPS,
    W_CTA,
    W_DONE,
    W_END,
    W_GID,
    W_MEM,
    W_NGROUPS,
    W_POS,
    W_READY,
    W_SCHED,
    W_SUB,
    W_UNIT,
    W_USED,
    W_WAIT_SLOT,
    W_WG_OPEN,
)
from models.units import (
    ACTION_BARRIER,
    ACTION_COPY_COMMIT,
    ACTION_COPY_WAIT,
    ACTION_MBARRIER_WAIT,
    ACTION_MEMORY,
    ACTION_TMA,
    ACTION_UNIT,
    WAIT_ALL,
)


@inline_step
def touch(si, k, cycle):
    si[k, S_TOUCHED] = 1
    if cycle < si[k, S_WAKE]:
        si[k, S_WAKE] = cycle


@inline_step
def prepare(w, base, ev_pc, pcs, regs, wi, wr, wm):
    """Scoreboard check of the warp's next instruction (of a fused run, the pc of the run
    it issues next, `W_SUB`); ready no earlier than `base`."""
    p = ev_pc[wi[w, W_POS]]
    if pcs[p, P_FIRST] >= 0:
        p = pcs[p, P_FIRST] + wi[w, W_SUB]
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


@step
def finish(w, cycle, wi, si, sw, ci, lp):
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
    touch(si, k, cycle)
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
    for b in range(BARRIERS):
        if ci[c, C_BAR_X + b] == 0 and barrier_full(c, b, ci):
            return 1
    return 0


@step
def barrier_full(c, b, ci):
    """Barrier `b` of CTA slot `c` has warps and all it waits for: its expected count, or
    every live warp when it expects 0."""
    n = ci[c, C_BAR_N + b]
    want = ci[c, C_BAR_X + b]
    return n > 0 and n == (want if want else ci[c, C_LIVE])


@step
def release(c, b, cycle, ev_pc, pcs, regs, wi, wr, wm, si, sw, ci, ca, lp):
    """Every warp barrier `b` of CTA slot `c` waits for arrived: let them go on (`ca` holds
    the waiting warps of all barriers as w * BARRIERS + b)."""
    n = ci[c, C_NARR]
    ci[c, C_BAR_N + b] = 0
    ci[c, C_BAR_X + b] = 0
    kept = 0
    for i in range(n):           # (finish touches neither `ca` nor the barrier counts)
        e = ca[c, i]
        if e % BARRIERS != b:
            ca[c, kept] = e
            kept += 1
            continue
        w = e // BARRIERS
        if wi[w, W_POS] == wi[w, W_END]:
            finish(w, cycle, wi, si, sw, ci, lp)
        else:
            prepare(w, cycle + 1, ev_pc, pcs, regs, wi, wr, wm)
            touch(si, wi[w, W_SCHED], cycle)
    ci[c, C_NARR] = kept
    if cycle + 1 < lp[L_WAKE]:
        lp[L_WAKE] = cycle + 1


@step
def release_full(c, cycle, ev_pc, pcs, regs, wi, wr, wm, si, sw, ci, ca, lp):
    """After a warp of CTA slot `c` retired: release each barrier that waits for every live
    warp and now has them all."""
    for b in range(BARRIERS):
        if ci[c, C_BAR_X + b] == 0 and barrier_full(c, b, ci):
            release(c, b, cycle, ev_pc, pcs, regs, wi, wr, wm, si, sw, ci, ca, lp)


@step
def contribute(slot, at, cycle, slot_events, ph, ev_pc, pcs, regs, wi, wr, wm, si, lp):
    """One contribution to mbarrier phase `slot` at cycle `at`; its waiters go on when it
    was the last: here, or, when they wait on another SM (`H_SM`), through the driver
    (`L_REMOTE`, `models.sm_driver`). A `slot` below -1 names a group of slots
    (`simulator.trace_tiles`: a multicast box, a cluster barrier arrival), each of which
    gets the contribution."""
    if slot >= 0:
        _contribute_one(slot, at, cycle, slot_events, ph, ev_pc, pcs, regs, wi, wr, wm, si,
                        lp)
        return
    if slot == -1:
        return
    base = -2 - slot
    for i in range(slot_events[base]):
        _contribute_one(slot_events[base + 1 + i], at, cycle, slot_events, ph, ev_pc, pcs,
                        regs, wi, wr, wm, si, lp)


@step
def _contribute_one(slot, at, cycle, slot_events, ph, ev_pc, pcs, regs, wi, wr, wm, si, lp):
    """`contribute` to one phase slot."""
    ph[slot, H_COUNT] += 1
    if at > ph[slot, H_MAX]:
        ph[slot, H_MAX] = at
    if ph[slot, H_COUNT] < slot_events[slot]:
        return
    done = ph[slot, H_MAX]
    ph[slot, H_COUNT] = 0
    ph[slot, H_MAX] = 0
    ph[slot, H_DONE] = done
    owner = ph[slot, H_SM]
    if owner >= 0 and owner != lp[L_INDEX]:
        n = lp[L_REMOTE_N]
        if n < REMOTE_SLOTS:
            lp[L_REMOTE + n] = slot
            lp[L_REMOTE_N] = n + 1
        else:
            lp[L_REMOTE_LOST] = 1
        return
    wake_waiters(slot, done, cycle, ev_pc, pcs, regs, wi, wr, wm, si, lp)


@nb.njit(cache=True)
def wake_remote(slot, now, ph, ev_pc, pcs, regs, wi, wr, wm, si, lp):
    """Phase `slot`, completed on another SM at or after cycle `now`, wakes this SM's warps
    waiting for it: from the latest of its completion, `now` and this SM's cycle (parked:
    it did nothing since) or the cycle after its last busy one (`L_LAST`: nothing happened
    from there to its next cycle). Returns the cycle the SM goes on at when that moved (it
    was parked, or due later), else -1; the caller queues it then (`models.sm_driver`,
    `models.sm.StreamingMultiprocessor.wake_phase`)."""
    done = ph[slot, H_DONE]
    after = lp[L_CYCLE] if lp[L_PARKED] else lp[L_LAST] + 1
    cycle = max(done, now, after) - 1
    wake_waiters(slot, done, cycle, ev_pc, pcs, regs, wi, wr, wm, si, lp)
    if lp[L_PARKED] or cycle + 1 < lp[L_CYCLE]:
        lp[L_PARKED] = 0
        lp[L_CYCLE] = cycle + 1
        return cycle + 1
    return -1


@nb.njit(cache=True)
def waits_on_phase(wi):
    """Some resident warp waits for an mbarrier phase (which another SM may complete)."""
    for w in range(wi.shape[0]):
        if wi[w, W_USED] and wi[w, W_WAIT_SLOT] >= 0:
            return True
    return False


@inline_step
def wake_waiters(slot, done, cycle, ev_pc, pcs, regs, wi, wr, wm, si, lp):
    """The warps (of the SM whose arrays these are) that wait for phase `slot`, complete at
    `done`, go on: checked from `cycle` + 1, ready no earlier than `done`."""
    for w in range(wi.shape[0]):
        if wi[w, W_USED] == 0 or wi[w, W_WAIT_SLOT] != slot:
            continue
        wi[w, W_WAIT_SLOT] = -1
        prepare(w, cycle + 1, ev_pc, pcs, regs, wi, wr, wm)
        if done > wi[w, W_READY]:
            wi[w, W_READY] = done
            wi[w, W_MEM] = 1
        touch(si, wi[w, W_SCHED], cycle)
        if cycle + 1 < lp[L_WAKE]:
            lp[L_WAKE] = cycle + 1


@inline_step
def post(w, e, action, cycle, done, mem, hold, ev_pc, pcs, regs, wi, wr, wm, si, sw, ci,
          ca, lp):
    """The rest of an issue once its result cycle `done` is known."""
    p = ev_pc[e]
    if action != ACTION_COPY_COMMIT and action != ACTION_COPY_WAIT:   # those set their own
        for i in range(pcs[p, P_DST_LO], pcs[p, P_DST_HI]):
            d = regs[i]
            if (action != ACTION_MEMORY and action != ACTION_TMA) or done >= wr[w, d]:
                # asynchronous copies in flight together: the register holds the latest
                wr[w, d] = done
                wm[w, d] = mem
    if done > wi[w, W_DONE]:
        wi[w, W_DONE] = done
    e += 1
    wi[w, W_POS] = e
    if action == ACTION_BARRIER:
        wi[w, W_READY] = NEVER
        c = wi[w, W_CTA]
        b = pcs[p, P_COUNT] % BARRIERS
        want = pcs[p, P_COUNT] // BARRIERS
        if want >= ca.shape[1]:
            want = 0                       # the whole CTA: every live warp
        ca[c, ci[c, C_NARR]] = w * BARRIERS + b
        ci[c, C_NARR] += 1
        ci[c, C_BAR_N + b] += 1
        ci[c, C_BAR_X + b] = want
        if barrier_full(c, b, ci):
            release(c, b, cycle, ev_pc, pcs, regs, wi, wr, wm, si, sw, ci, ca, lp)
    elif e == wi[w, W_END]:
        c = wi[w, W_CTA]
        if finish(w, cycle, wi, si, sw, ci, lp) == 1:
            release_full(c, cycle, ev_pc, pcs, regs, wi, wr, wm, si, sw, ci, ca, lp)
    else:
        prepare(w, cycle + 1, ev_pc, pcs, regs, wi, wr, wm)
        if hold > wi[w, W_READY]:
            wi[w, W_READY] = hold
            wi[w, W_MEM] = 1 if action == ACTION_MBARRIER_WAIT or action == ACTION_COPY_WAIT \
                else 0




@nb.njit(cache=True)
def launch(cta, cycle, offsets, ev_pc, pcs, regs, wi, wr, wm, si, sw, ci, ca, lp):
    """Make CTA `cta` resident at `cycle` (`SmState.make_room` first); True when it finished
    at once (all its warps empty; `L_CTA_DONE`)."""
    wpc = ca.shape[1]
    c = 0
    while ci[c, C_USED]:
        c += 1
    ci[c, :] = 0
    ci[c, C_INDEX], ci[c, C_LIVE], ci[c, C_USED] = cta, wpc, 1
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
        touch(si, k, cycle)
        if offsets[gid] == offsets[gid + 1]:
            state = finish(w, cycle, wi, si, sw, ci, lp)
            if state == 1:
                release_full(c, cycle, ev_pc, pcs, regs, wi, wr, wm, si, sw, ci, ca, lp)
            finished = finished or state == 2
        else:
            prepare(w, cycle, ev_pc, pcs, regs, wi, wr, wm)
    if cycle < lp[L_WAKE]:
        lp[L_WAKE] = cycle
    return finished


@inline_step
def cluster_release_end(w, cycle, cycles, wi, wg):
    """The cycle a cluster-scope release of warp `w` issued at `cycle` lets the warp go
    (`units`: ptxas puts MEMBAR.ALL.GPU before the arrival; it waits for the warp's
    operations in flight, its wgmma groups, then fences for `cycles`)."""
    start = max(cycle, wi[w, W_WG_OPEN])
    for i in range(wi[w, W_NGROUPS]):
        start = max(start, wg[w, i])
    return start + cycles


@inline_step
def copy_groups(w, p, action, pcs, regs, wi, wr):
    """`cp.async.commit_group` / `wait_group N` / `wait_all` (pc `p`) of warp `w`; the cycle
    a wait holds the warp to (0 for a commit). The pc's destinations are the open group's
    pseudo register (the latest completion of the copies issued since the last commit) and
    a ring of `COPY_GROUPS` committed groups' (`W_CGROUPS` committed so far; slots from
    `W_CG_LO` on outstanding; every group before `W_CG_DONE` waited for). A commit moves the
    open group into the ring; with the ring full the oldest group merges into the next one
    (a wait for it then waits for both). Wait N holds until every group but the N newest
    completed; wait_all (count `WAIT_ALL`) until every copy did."""
    base = pcs[p, P_DST_LO]
    n_ring = pcs[p, P_DST_HI] - base - 1
    open_r = regs[base]
    count = pcs[p, P_COUNT]
    if action == ACTION_COPY_COMMIT or count == WAIT_ALL:
        lo, g = wi[w, W_CG_LO], wi[w, W_CGROUPS]
        if g - lo == n_ring:
            older, newer = regs[base + 1 + lo % n_ring], regs[base + 1 + (lo + 1) % n_ring]
            if wr[w, older] > wr[w, newer]:
                wr[w, newer] = wr[w, older]
            wi[w, W_CG_LO] = lo + 1
        wr[w, regs[base + 1 + g % n_ring]] = wr[w, open_r]
        wr[w, open_r] = 0
        wi[w, W_CGROUPS] = g + 1
        if action == ACTION_COPY_COMMIT:
            return 0
        count = 0
    keep = wi[w, W_CGROUPS] - count
    if keep <= wi[w, W_CG_DONE]:
        return 0
    lo = wi[w, W_CG_LO]
    end = max(keep, lo + 1)          # a group merged forward lives in slot lo
    hold = 0
    for i in range(lo, end):
        r = regs[base + 1 + i % n_ring]
        if wr[w, r] > hold:
            hold = wr[w, r]
    wi[w, W_CG_LO] = end
    wi[w, W_CG_DONE] = end
    return hold


@inline_step
def issue_run(w, k, e, p, cycle, latency, ev_pc, pcs, regs, wi, wr, wm, si, uf, sw, ci, ca,
               lp):
    """Issue fused event `e` (pcs P_FIRST .. + P_COUNT - 1, one-cycle plain ops of one unit
    traced as one event, `models.units.fusable_run_ends`) from its next pc (`W_SUB`) at
    `cycle`, and its following pcs at the next cycles while each is ready and the cycle
    within the loop's window: the issues `models.sm_core._burst` makes of the same pcs
    traced one by one.
    Where one stops short the event stays the warp's next, at that pc."""
    first, n = pcs[p, P_FIRST], pcs[p, P_COUNT]
    j = wi[w, W_SUB]
    window = lp[L_WINDOW]
    t = cycle
    while True:
        q = first + j
        done = t + latency
        for i in range(pcs[q, P_DST_LO], pcs[q, P_DST_HI]):
            d = regs[i]
            wr[w, d] = done
            wm[w, d] = 0
        if done > wi[w, W_DONE]:
            wi[w, W_DONE] = done
        j += 1
        if j == n or t + 1 > window:
            break
        ready = t + 1
        for i in range(pcs[q + 1, P_SB_LO], pcs[q + 1, P_SB_HI]):
            if wr[w, regs[i]] > ready:
                ready = wr[w, regs[i]]
        if ready > t + 1:
            break
        t += 1
    uf[k, pcs[p, P_UNIT]] = t + pcs[p, P_INTERVAL]
    si[k, S_WAKE] = t + 1
    si[k, S_SLOT_FREE] = t + 1
    if j == n:
        wi[w, W_SUB] = 0
        post(w, e, ACTION_UNIT, t, t + latency, 0, 0, ev_pc, pcs, regs, wi, wr, wm, si, sw,
             ci, ca, lp)
    else:
        wi[w, W_SUB] = j
        prepare(w, t + 1, ev_pc, pcs, regs, wi, wr, wm)
