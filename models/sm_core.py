"""The SM's issue core compiled with numba: warp scheduling, scoreboard, barriers, tile ops.

What it models
--------------
Exactly what `models.sm` describes; this module holds the loop, the SM class around it
holds what needs Python (the memory system, the CTA dispatcher, hooks, SimPy). It is long
because it is one compiled loop and the warp and CTA steps numba inlines into it; its one
job is deciding which warp issues when. The state is a struct of arrays
(`models.sm_state.SmState`): one row per warp slot, per scheduler, per CTA slot, plus a
register file of loop variables (`L_*`).

The loop, `run`, advances the SM from where it stopped until it needs Python and says why
(`RC_*`):

* `RC_MEMORY` / `RC_TMA`: warp `L_PEND_W` issued memory event `L_PEND_E` at `L_CYCLE` whose
  completion only the memory system knows (global loads/stores/atomics through the LSU, TMA
  messages); the caller writes the completion cycle to `L_DONE` and calls `run` again, which
  finishes the issue and goes on with the next scheduler of the same cycle.
  With `L_INLINE` set (cached memory) the loop serves them itself (`models.sm_memory`)
  and asks only when its request log is full.
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
(starting one past the last issuer); under greedy-then-oldest a warp's following plain
unit ops that are ready cycle after cycle issue in one go (`_burst`), at the cycles the
passes would give them. Stall cycles accumulate per reason in `SmState.stall`
(indices of `models.warp_scheduler.STALL_REASONS`), as stretches per scheduler.

Warp and CTA life, the steps that change a warp's or a CTA's state besides picking and
issuing: the scoreboard check of a warp's next instruction (`prepare`), the rest of an
issue once its result cycle is known (`post`: destinations, `bar.sync` arrival, the warp's
end, the next check with a hold), retiring a warp and its CTA (`finish`), releasing a
barrier (`release`), contributing to an mbarrier phase and waking its waiters
(`contribute`), making a CTA resident (`launch`), `cp.async` group commits and waits
(`copy_groups`) and issuing a fused run of plain ops pc by pc (`issue_run`).

Left out: what `models.sm` leaves out. Units: SM cycles.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from isa.trace_format import (
    KIND_ATOMIC,
    KIND_BULK_STORE,
    KIND_LOAD,
    KIND_LOAD_CG,
    KIND_SHARED,
    KIND_STORE,
)
from models.cached_memory_layout import inline_step, step
from models.sm_memory import serve_event, shared_access, source_read_cycle
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
    L_CONST_LAT,
    L_CTA_DONE,
    L_CYCLE,
    L_DONE,
    L_FINISH,
    L_GROW,
    L_INDEX,
    L_INLINE,
    L_K,
    L_LAST,
    L_LISTEN,
    L_NEXT,
    L_NEXT_SCHED,
    L_PARKED,
    L_PEND_E,
    L_PEND_W,
    L_POLICY,
    L_REMOTE,
    L_REMOTE_LOST,
    L_REMOTE_N,
    L_RESIDENT,
    L_SHARED_FREE,
    L_SHARED_LAT,
    L_STALL_N,
    L_STATE,
    L_TMA_FREE,
    L_WAKE,
    L_WINDOW,
    NEVER,
    P_ACTION,
    P_COUNT,
    P_DST_HI,
    P_DST_LO,
    P_FIELDS,
    P_FIRST,
    P_INTERVAL,
    P_LATENCY,
    P_POLICY,
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
    REMOTE_SLOTS,
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
    W_CG_DONE,
    W_CG_LO,
    W_CGROUPS,
    W_CTA,
    W_DONE,
    W_END,
    W_GID,
    W_MEM,
    W_MEM_DONE,
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
    ACTION_FENCE,
    ACTION_MBARRIER,
    ACTION_MBARRIER_WAIT,
    ACTION_MEMORY,
    ACTION_TMA,
    ACTION_UNIT,
    ACTION_WGMMA,
    ACTION_WGMMA_COMMIT,
    ACTION_WGMMA_WAIT,
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
    (`simulator.runner.trace_tiles`: a multicast box, a cluster barrier arrival), each of which
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
    """The rest of an issue once its result cycle `done` is known. A TMA store's second
    destination (`models.units`: its source read, for `wait_group.read`) gets the cycle
    the engine has read the source out of shared memory (`source_read_cycle`)."""
    p = ev_pc[e]
    if action != ACTION_COPY_COMMIT and action != ACTION_COPY_WAIT:   # those set their own
        lo = pcs[p, P_DST_LO]
        for i in range(lo, pcs[p, P_DST_HI]):
            d = regs[i]
            at = done
            if action == ACTION_TMA and i > lo:
                at = source_read_cycle(lp[L_TMA_FREE], lp[L_SHARED_LAT])
            if (action != ACTION_MEMORY and action != ACTION_TMA) or at >= wr[w, d]:
                # asynchronous copies in flight together: the register holds the latest
                wr[w, d] = at
                wm[w, d] = mem
    if done > wi[w, W_DONE]:
        wi[w, W_DONE] = done
    if action == ACTION_MEMORY and done > wi[w, W_MEM_DONE]:
        wi[w, W_MEM_DONE] = done          # what a fence waits for (not the async proxy's)
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
                or action == ACTION_FENCE else 0


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
def fence_end(w, cycle, cycles, wi, wg):
    """The cycle a MEMBAR of warp `w`, free to start at `cycle`, lets the warp go: after
    its wgmma groups in flight, then `cycles` more (`units`: the MEMBAR.ALL.GPU ptxas puts
    before a cluster-scope release, from its issue; a GPU-scope fence's, from the warp's
    memory operations' completion)."""
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
    within the loop's window: the issues `_burst` makes of the same pcs
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


@inline_step
def lane_ops(kind, e, ev_slot):
    """An atomic event's lane operations on one address (the trace keeps them in the event's
    slot, `isa.trace_format`); 1 for other accesses."""
    if kind == KIND_ATOMIC and ev_slot.size:
        return max(ev_slot[e], 1)
    return 1


@inline_step
def _answered(w, e, action, cycle, done, ev_pc, ev_kind, ev_slot, pcs, regs, slot_events, wi,
              wr, wm, si, sw, ci, ca, ph, lp):
    """The rest of issuing memory event `e` of warp `w` once its completion cycle `done` is
    known (from the memory system, here or through the caller): a TMA load's `complete_tx`
    on its mbarrier phase, then the scoreboard and warp state (`post`)."""
    if action == ACTION_TMA and ev_kind[e] != KIND_BULK_STORE:
        contribute(ev_slot[e], done, cycle, slot_events, ph, ev_pc, pcs, regs, wi, wr, wm, si,
                   lp)
    post(w, e, action, cycle, done, 1, 0, ev_pc, pcs, regs, wi, wr, wm, si, sw, ci, ca, lp)


@inline_step
def _issue(w, k, cycle, ev_pc, ev_kind, ev_detail, ev_slot, pcs, regs, slot_events, wi, wr,
           wm, wg, si, uf, sw, ci, ca, ph, lp, ev_sstart, sectors, memory, log):
    """Issue warp `w`'s next instruction on scheduler `k` at `cycle`: 0 when done, else the
    `RC_*` asking the caller for the memory system's completion cycle (global accesses and
    TMA messages are served here when `L_INLINE` is set and the request log has room,
    `models.sm_memory`)."""
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
            done, lp[L_SHARED_FREE] = shared_access(cycle, lp[L_SHARED_FREE], detail,
                                                    lp[L_SHARED_LAT])
        elif (kind == KIND_LOAD or kind == KIND_STORE or kind == KIND_ATOMIC
              or kind == KIND_LOAD_CG) and detail > 0:
            done = -1
            if lp[L_INLINE]:
                first = ev_sstart[e]
                done = serve_event(kind, False, cycle, sectors[first:first + detail], memory, lp,
                                   log, lane_ops(kind, e, ev_slot), pcs[p, P_POLICY:P_FIELDS])
            if done < 0:
                lp[L_PEND_W], lp[L_PEND_E] = w, e
                return RC_MEMORY
        else:
            done = cycle + lp[L_CONST_LAT]
    elif action == ACTION_TMA:
        done = -1
        if lp[L_INLINE]:
            first = ev_sstart[e]
            done = serve_event(ev_kind[e], True, cycle, sectors[first:first + ev_detail[e]],
                               memory, lp, log, np.int64(1), pcs[p, P_POLICY:P_FIELDS])
        if done < 0:
            lp[L_PEND_W], lp[L_PEND_E] = w, e
            return RC_TMA
        _answered(w, e, action, cycle, done, ev_pc, ev_kind, ev_slot, pcs, regs, slot_events,
                  wi, wr, wm, si, sw, ci, ca, ph, lp)
        return 0
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
        done, lp[L_SHARED_FREE] = shared_access(cycle, lp[L_SHARED_FREE], 1, lp[L_SHARED_LAT])
        if pcs[p, P_COUNT] > 0:       # a cluster-scope release (`units`): the warp
            hold = fence_end(w, cycle, pcs[p, P_COUNT], wi, wg)   # fences, then
            done = max(done, hold + lp[L_SHARED_LAT])                       # arrives
        contribute(ev_slot[e], done, cycle, slot_events, ph, ev_pc, pcs, regs, wi, wr, wm, si,
                    lp)
    elif action == ACTION_MBARRIER_WAIT:
        slot = ev_slot[e]
        done = cycle + latency
        if slot >= 0:
            at = ph[slot, H_DONE]
            if at < 0:
                wi[w, W_WAIT_SLOT] = slot
                ph[slot, H_SM] = lp[L_INDEX]
                hold = NEVER
            else:
                done = max(at, done)
                mem = 1
                hold = at
    elif action == ACTION_COPY_COMMIT or action == ACTION_COPY_WAIT:
        hold = copy_groups(w, p, action, pcs, regs, wi, wr)
        done = cycle + latency
    elif action == ACTION_FENCE:          # waits for the warp's operations in flight
        hold = fence_end(w, max(cycle, wi[w, W_MEM_DONE]), pcs[p, P_COUNT], wi, wg)
        done = hold
    elif action == ACTION_WGMMA_WAIT:                   # wgmma.wait_group N
        n, count = wi[w, W_NGROUPS], pcs[p, P_COUNT]
        if n > count:
            cut = n - count
            for i in range(cut):
                hold = max(hold, wg[w, i])
            for i in range(count):
                wg[w, i] = wg[w, cut + i]
            wi[w, W_NGROUPS] = count
        done = cycle + latency
    elif pcs[p, P_FIRST] >= 0:                          # a fused run of plain ops
        issue_run(w, k, e, p, cycle, latency, ev_pc, pcs, regs, wi, wr, wm, si, uf, sw, ci,
                  ca, lp)
        return 0
    else:                                               # plain units and bar.sync
        done = cycle + latency
    post(w, e, action, cycle, done, mem, hold, ev_pc, pcs, regs, wi, wr, wm, si, sw, ci, ca,
          lp)
    return 0


@inline_step
def _burst(w, k, at, window, ev_pc, ev_kind, ev_detail, ev_slot, pcs, regs, slot_events, wi,
           wr, wm, wg, si, uf, sw, ci, ca, ph, lp, ev_sstart, sectors, memory, log):
    """Greedy-then-oldest keeps picking warp `w`, which scheduler `k` just issued, while it
    can issue: its next instructions, if plain unit ops (no memory, barrier, tile op, not the
    warp's last) ready at cycles `at`, `at` + 1, ... up to the loop's `window`, are issued
    here at those cycles, as the passes over those cycles would. Nothing but the warp's own
    issues changes its scoreboard or scheduler `k`'s units, and a plain op changes nothing
    other warps or schedulers see, so the passes in between are skipped, not reordered."""
    while at <= window:
        e = wi[w, W_POS]
        if e + 1 >= wi[w, W_END]:
            return
        p = ev_pc[e]
        if pcs[p, P_ACTION] != ACTION_UNIT or wi[w, W_READY] > at or uf[k, pcs[p, P_UNIT]] > at:
            return
        si[k, S_WAKE] = at + 1
        si[k, S_SLOT_FREE] = at + 1
        _issue(w, k, at, ev_pc, ev_kind, ev_detail, ev_slot, pcs, regs, slot_events, wi, wr,
               wm, wg, si, uf, sw, ci, ca, ph, lp, ev_sstart, sectors, memory, log)
        at += 1


@step
def _after(k, last, sw):
    """Loose round robin's start: the position after `last` in scheduler `k`'s age order."""
    j = 0
    while sw[k, j] != last:
        j += 1
    return j + 1


@step
def _first_reason(k, cycle, policy, wi, si, sw):
    """Why the first warp in scheduler `k`'s policy order cannot issue at `cycle`."""
    n = si[k, S_N]
    if n == 0:
        return REASON_NO_WARP
    last = si[k, S_LAST]
    w = sw[k, 0]
    if last >= 0:
        w = last if policy == POLICY_GTO else sw[k, _after(k, last, sw) % n]
    ready = wi[w, W_READY]
    if ready >= NEVER:
        return REASON_BARRIER
    if ready > cycle:
        return REASON_MEMORY if wi[w, W_MEM] else REASON_DEPENDENCY
    return REASON_PIPE_BUSY


@inline_step
def _stretch(k, reason, cycle, si, stall):
    """End scheduler `k`'s open stall stretch at `cycle` and open one of `reason`."""
    open_reason = si[k, S_REASON]
    if reason != open_reason:
        if open_reason >= 0:
            stall[open_reason] += cycle - si[k, S_SINCE]
        si[k, S_REASON] = reason
        si[k, S_SINCE] = cycle


@inline_step
def _scheduler_done(k, reason, wake, next_cycle, cycle, listening, si, stall):
    """Scheduler `k` was asked at `cycle` (issued, or stalled for `reason`): its stall
    stretch when hooks listen (else it is marked for accounting), and the loop's next cycle
    lowered to its `wake`."""
    if listening:
        si[k, S_TOUCHED] = 0
        _stretch(k, reason, cycle, si, stall)
    else:
        si[k, S_TOUCHED] = 1
    return min(wake, next_cycle)


@inline_step
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
            start = _after(k, last, sw)
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
        sw, ci, ca, ph, lp, stall, stall_log, ev_sstart, sectors, memory, log):
    """Advance the SM until it needs the caller; the reason (`RC_*`)."""
    return _run(ev_pc, ev_kind, ev_detail, ev_slot, pcs, regs, slot_events, wi, wr, wm, wg, si,
                uf, sw, ci, ca, ph, lp, stall, stall_log, ev_sstart, sectors, memory, log)


@step
def _run(ev_pc, ev_kind, ev_detail, ev_slot, pcs, regs, slot_events, wi, wr, wm, wg, si, uf,
         sw, ci, ca, ph, lp, stall, stall_log, ev_sstart, sectors, memory, log):
    """`run` compiled without reference counting (no array is created in the loop)."""
    n_sched = si.shape[0]
    listening = lp[L_LISTEN]
    policy = lp[L_POLICY]
    state = lp[L_STATE]
    cycle = lp[L_CYCLE]
    next_cycle = lp[L_NEXT]
    k = lp[L_K]
    if state == ST_PENDING:
        w, e, done = lp[L_PEND_W], lp[L_PEND_E], lp[L_DONE]
        _answered(w, e, pcs[ev_pc[e], P_ACTION], cycle, done, ev_pc, ev_kind, ev_slot, pcs,
                  regs, slot_events, wi, wr, wm, si, sw, ci, ca, ph, lp)
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
            next_cycle = _scheduler_done(k, REASON_NONE, si[k, S_WAKE], next_cycle, cycle,
                                         listening, si, stall)
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
                                    slot_events, wi, wr, wm, wg, si, uf, sw, ci, ca, ph, lp,
                                    ev_sstart, sectors, memory, log)
                        if rc != 0 or lp[L_CTA_DONE] >= 0:
                            lp[L_STATE] = ST_PENDING if rc != 0 else ST_AFTER_ISSUE
                            lp[L_K], lp[L_NEXT] = k, next_cycle
                            return rc if rc != 0 else RC_CTA_DONE
                        if policy == POLICY_GTO:
                            _burst(w, k, cycle + 1, lp[L_WINDOW], ev_pc, ev_kind, ev_detail,
                                   ev_slot, pcs, regs, slot_events, wi, wr, wm, wg, si, uf, sw,
                                   ci, ca, ph, lp, ev_sstart, sectors, memory, log)
                        wake = si[k, S_WAKE]
                    else:
                        wake = earliest
                        si[k, S_WAKE] = wake
                        if listening:
                            reason = _first_reason(k, cycle, policy, wi, si, sw)
                next_cycle = _scheduler_done(k, reason, wake, next_cycle, cycle, listening, si,
                                             stall)
            elif wake < next_cycle:
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
        lp[L_LAST] = cycle                  # the last cycle it did something
        lp[L_CYCLE] = next_cycle
        state = ST_TOP
        if next_cycle > lp[L_WINDOW]:
            lp[L_STATE] = ST_TOP
            if listening:
                log_stalls(next_cycle, si, stall, lp, stall_log)
            return RC_YIELD


@nb.njit(cache=True)
def log_stalls(cycle, si, stall, lp, stall_log):
    """Close the open stall stretches at `cycle` and move the stall cycles summed so far to a
    row (cycle, then cycles per reason) of `stall_log` (none when all are zero; the caller
    drains a full log before the next call, `L_STALL_N`)."""
    close_stretches(cycle, si, stall)
    total = 0
    for r in range(stall.size):
        total += stall[r]
    if total == 0:
        return
    row = lp[L_STALL_N]
    stall_log[row, 0] = cycle
    for r in range(stall.size):
        stall_log[row, 1 + r] = stall[r]
        stall[r] = 0
    lp[L_STALL_N] = row + 1


@nb.njit(cache=True)
def close_stretches(cycle, si, stall):
    """Count every open stall stretch up to `cycle` (they stay open from there)."""
    for k in range(si.shape[0]):
        if si[k, S_REASON] >= 0:
            stall[si[k, S_REASON]] += cycle - si[k, S_SINCE]
            si[k, S_SINCE] = cycle
