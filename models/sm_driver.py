"""Every SM of a replay stepped from one compiled call, in SimPy's event order.

What it models
--------------
Nothing new: the same SM loop (`models.sm_core`) and the same order of events as
`simulator.runner.replay_session`'s Python queue, whose entries are the SMs' wake-ups ordered by
(time, priority, scheduling order), start-ups (`URGENT`) before wake-ups (`NORMAL`). An SM
resumed at time t sets its window to t + quantum and runs its loop; when the loop stops
past the window (`RC_YIELD`) the SM is scheduled again at the edge of its next cycle.

`SmQueue` holds that queue as a binary heap in an int64 array (a row per entry: time in
ps, priority, scheduling order, SM index; each SM is queued at most once) with its counters
(`ctl`: entries, next scheduling order, the time of the last entry taken, a stop request,
a stop key).
`drive` pops entries and runs their SMs' loops on per-SM typed lists of the state arrays
(`models.sm_state.SmState`), re-queueing yielding SMs itself, until an SM needs Python:
a request of its loop (memory the loop cannot serve, wider wgmma groups, no warp can
issue), its end, a full stall log at a yield, or a stop requested by the caller at the
next yield, or the stop key (time, priority, order): `drive` takes no entry that comes after
it (the first event of a SimPy queue the SMs share, `SmDriver.share`).
A finished CTA is answered inside (`_turnover`): the dispatcher's next CTA
(`models.cta_dispatch.CtaDispatcher.state`) is launched at once and the hooks of both are
logged per SM (`SmState.cta_log`, with the stall-log rows before each) for Python to fire
in order when the SM next returns (`StreamingMultiprocessor.replay_cta_log`); only a full
log, an SM without room for the next CTA or a CTA that finishes as it launches goes to
Python. `SmDriver` is the Python side: it answers the requests through
the SM (`StreamingMultiprocessor.answer` / `end` / `yielding`, as `steps` does) and keeps
the typed lists in step with arrays the answers replace (`SmState.generation`). The
result is that of the SMs' `steps` generators under the Python queue, bit for bit, without
a Python round trip and a numba dispatch per yield.

Across SMs (thread-block clusters): an mbarrier phase slot records the SM whose warps wait
for it (`PhaseTable` `H_SM`); an SM that completes a phase another SM waits for leaves the
slot in its `L_REMOTE` list, and `drive` wakes that SM's waiters after the loop returns
(`_remote_wakes`): from the latest of the completion, the queue's time and the waiting
SM's cycle (parked) or the cycle after its last busy one (`L_LAST`: it did nothing from
there to its next cycle), queueing the SM then (moved earlier if it was queued later). An
SM whose warps all wait for phases parks (`L_PARKED`) instead of asking Python; one still
parked when the queue runs empty is stuck (`RC_STUCK`, an error). Only this
driver does it this way: the SMs' SimPy processes (memories other than the cached one,
concurrent launches) wake the waiting SM's process instead
(`StreamingMultiprocessor.wake_phase`), at the same cycle, but events that tie may then run
in another order, so for cluster launches the two agree closely (within 1 % in
`tests/test_sm_driver.py`), not bit for bit as for plain CTAs.

Beside other SimPy processes (`SmDriver.share`), the SMs' entries take their scheduling order
from the environment's counter, and the queue's first entry stands in SimPy's queue under its
own key: when SimPy reaches it, `drive` steps the SMs' entries up to SimPy's next event, as
SimPy would have stepped their processes in between.

Left out: cluster launches beside other processes (their wake-ups across SMs). Units: ps
(queue), SM cycles (loops).
"""

from __future__ import annotations

from heapq import heappush
from itertools import count

import numba as nb
import numpy as np
from numba.typed import List
from simpy.core import NORMAL
from simpy.events import Event

from models import jit_cache
from models import sm_core as core
from models import sm_state as st
from models.cached_memory_layout import step
from models.sm_core import launch as launch_cta
from models.sm_core import waits_on_phase, wake_remote
from models.sm_memory import edge_ps
from simulator.framework.engine import KHZ_PS_PRODUCT

Q_N, Q_ORDER, Q_NOW, Q_STOP, Q_UNTIL = range(5)
Q_FIELDS = Q_UNTIL + 3      # the stop key: time, priority, scheduling order
E_TIME, E_PRIORITY, E_ORDER, E_SM = range(4)
NO_LIMIT = np.iinfo(np.int64).max
"""A stop key's field that no entry comes after."""
NO_SM = -1
"""`drive`'s SM when the queue ran empty."""


@step
def _before(q, i, j):
    """Entry i of the heap comes before entry j (time, then priority, then order)."""
    for c in range(E_SM):
        if q[i, c] != q[j, c]:
            return q[i, c] < q[j, c]
    return False


@step
def _past(q, ctl):
    """The heap's first entry comes after the stop key (`ctl[Q_UNTIL:]`)."""
    for c in range(E_SM):
        if q[0, c] != ctl[Q_UNTIL + c]:
            return q[0, c] > ctl[Q_UNTIL + c]
    return False


@step
def _swap(q, i, j):
    for c in range(E_SM + 1):
        q[i, c], q[j, c] = q[j, c], q[i, c]


@step
def _push(q, ctl, at_ps, priority, sm):
    """Queue SM `sm` at `at_ps` with `priority`, after the entries scheduled before it."""
    i = ctl[Q_N]
    ctl[Q_N] = i + 1
    q[i, E_TIME], q[i, E_PRIORITY], q[i, E_ORDER], q[i, E_SM] = at_ps, priority, ctl[Q_ORDER], sm
    ctl[Q_ORDER] += 1
    _sift_up(q, i)


@step
def _sift_up(q, i):
    """Move heap entry i up past the parents it comes before."""
    while i > 0:
        parent = (i - 1) // 2
        if not _before(q, i, parent):
            break
        _swap(q, i, parent)
        i = parent


@step
def _pop(q, ctl):
    """Take the first entry; its SM (its time goes to `ctl[Q_NOW]`)."""
    ctl[Q_NOW] = q[0, E_TIME]
    sm = q[0, E_SM]
    n = ctl[Q_N] - 1
    ctl[Q_N] = n
    if n > 0:
        _swap(q, 0, n)
        i = 0
        while True:
            first, left, right = i, 2 * i + 1, 2 * i + 2
            if left < n and _before(q, left, first):
                first = left
            if right < n and _before(q, right, first):
                first = right
            if first == i:
                break
            _swap(q, i, first)
            i = first
    return sm


@nb.njit(cache=True)
def push(q, ctl, at_ps, priority, sm):
    """`_push` from Python."""
    _push(q, ctl, at_ps, priority, sm)


@nb.njit(cache=True)
def pop(q, ctl):
    """`_pop` from Python (tests)."""
    return _pop(q, ctl)


@step
def _turnover(disp, ctl, offsets, ev_pc, pcs, regs, wi, wr, wm, si, sw, ci, ca, lp, cta_log):
    """The loop's `RC_CTA_DONE` answered here as `StreamingMultiprocessor._cta_done` and
    `launch` would (the next CTA of the dispatcher launched at the SM's cycle, a stop
    requested once the dispatcher passes `D_STOP`), their hooks logged for Python
    (`replay_cta_log`); False, nothing changed, when Python must answer: the CTA log is
    full, the SM has no room for another CTA, or the CTA launched finished at once."""
    listening = lp[st.L_LISTEN]
    if listening and cta_log[0, 0] + 2 > cta_log.shape[0] - 1:   # a done and a launch row
        return False
    more = disp[st.D_NEXT] < disp[st.D_N]
    if more:
        free_ctas, free_warps = st.free_slots(wi, ci)
        if free_ctas < 1 or free_warps < ca.shape[1]:
            return False
    cycle = lp[st.L_CYCLE]
    cta = lp[st.L_CTA_DONE]
    lp[st.L_CTA_DONE] = -1
    if listening:
        _log_cta(cta_log, st.T_DONE, cta, cycle, lp[st.L_STALL_N])
    if not more:
        return True
    nxt = disp[st.D_NEXT]
    disp[st.D_NEXT] = nxt + 1
    if disp[st.D_STOP] <= nxt + 1 and nxt + 1 < disp[st.D_N]:
        ctl[Q_STOP] = 1
    finished = launch_cta(nxt, cycle, offsets, ev_pc, pcs, regs, wi, wr, wm, si, sw, ci, ca,
                          lp)
    if listening:
        _log_cta(cta_log, st.T_LAUNCH, nxt, cycle, lp[st.L_STALL_N])
    return not finished


@step
def _log_cta(cta_log, kind, cta, cycle, stalls):
    """Append a row (`T_*` columns) to an SM's CTA log; its count is in [0, 0]."""
    n = cta_log[0, 0] + 1
    cta_log[n, st.T_KIND], cta_log[n, st.T_CTA] = kind, cta
    cta_log[n, st.T_CYCLE], cta_log[n, st.T_STALLS] = cycle, stalls
    cta_log[0, 0] = n


@nb.njit(cache=True)
def _parked(lps):
    """An SM parked waiting for phases no SM completed (-1: none)."""
    for i in range(len(lps)):
        if lps[i][st.L_PARKED]:
            return i
    return -1


@step
def _requeue(q, ctl, sm, at_ps):
    """SM `sm` queued at `at_ps` at the latest: moved earlier if queued later (its entry
    keeps its scheduling order), queued if not queued."""
    for i in range(ctl[Q_N]):
        if q[i, E_SM] == sm:
            if at_ps < q[i, E_TIME]:
                q[i, E_TIME] = at_ps
                _sift_up(q, i)
            return
    _push(q, ctl, at_ps, NORMAL, sm)


@nb.njit(cache=True)
def _wake_remote(q, ctl, b, slot, freq_khz, ev_pc, pcs, regs, ph, wis, wrs, wms, sis, lps):
    """`wake_remote` on SM `b` at the queue's time; `b` queued at the cycle it goes on at
    (moved earlier, or unparked) when that moved."""
    now = ctl[Q_NOW] * freq_khz // KHZ_PS_PRODUCT
    at = wake_remote(slot, now, ph, ev_pc, pcs, regs, wis[b], wrs[b], wms[b], sis[b], lps[b])
    if at >= 0:
        _requeue(q, ctl, b, edge_ps(at, freq_khz))


@nb.njit(cache=True)
def _remote_wakes(q, ctl, sm, freq_khz, ev_pc, pcs, regs, ph, wis, wrs, wms, sis, lps):
    """Serve SM `sm`'s requests to wake other SMs' waiters of phases it completed
    (`L_REMOTE`); after an overflow (`L_REMOTE_LOST`), every SM's waiters of every
    completed phase."""
    lp = lps[sm]
    for i in range(lp[st.L_REMOTE_N]):
        slot = lp[st.L_REMOTE + i]
        _wake_remote(q, ctl, ph[slot, st.H_SM], slot, freq_khz, ev_pc, pcs, regs, ph, wis,
                     wrs, wms, sis, lps)
    lp[st.L_REMOTE_N] = 0
    if lp[st.L_REMOTE_LOST]:
        lp[st.L_REMOTE_LOST] = 0
        for b in range(len(wis)):
            wi = wis[b]
            for w in range(wi.shape[0]):
                slot = wi[w, st.W_WAIT_SLOT]
                if wi[w, st.W_USED] and slot >= 0 and ph[slot, st.H_DONE] >= 0:
                    _wake_remote(q, ctl, b, slot, freq_khz, ev_pc, pcs, regs, ph, wis, wrs,
                                 wms, sis, lps)


@nb.njit(cache=True)
def drive(q, ctl, sm, quantum_ps, freq_khz, ev_pc, ev_kind, ev_detail, ev_slot, pcs, regs,
          slot_events, ph, ev_sstart, sectors, memory, disp, offsets, wis, wrs, wms, wgs, sis,
          ufs, sws, cis, cas, lps, stalls, stall_logs, cta_logs, logs):
    """Run SM `sm`'s loop on (or, with `NO_SM`, the queue's first entry's), then the
    queue's, until one needs Python: (`RC_*`, SM), (`RC_END`, `NO_SM`) when the queue
    is empty, or (`RC_YIELD`, `NO_SM`) when its first entry comes after the stop key
    `ctl[Q_UNTIL:]` (module docstring). An SM whose warps all wait for mbarrier phases parks
    (`L_PARKED`, not queued) until another SM completes one (`_remote_wakes`); parked SMs
    left when the queue runs empty are stuck (`RC_STUCK`)."""
    while True:
        if sm == NO_SM:
            if ctl[Q_N] == 0:
                parked = _parked(lps)
                if parked >= 0:
                    return st.RC_STUCK, parked
                return st.RC_END, NO_SM
            if _past(q, ctl):
                return st.RC_YIELD, NO_SM
            sm = _pop(q, ctl)
            lps[sm][st.L_WINDOW] = (ctl[Q_NOW] + quantum_ps) * freq_khz // KHZ_PS_PRODUCT
        lp = lps[sm]
        while True:
            rc = core._run(ev_pc, ev_kind, ev_detail, ev_slot, pcs, regs, slot_events, wis[sm],
                           wrs[sm], wms[sm], wgs[sm], sis[sm], ufs[sm], sws[sm], cis[sm],
                           cas[sm], ph, lp, stalls[sm], stall_logs[sm], ev_sstart, sectors,
                           memory, logs[sm])
            if lp[st.L_REMOTE_N] or lp[st.L_REMOTE_LOST]:
                _remote_wakes(q, ctl, sm, freq_khz, ev_pc, pcs, regs, ph, wis, wrs, wms, sis,
                              lps)
            if rc != st.RC_CTA_DONE or not _turnover(
                    disp, ctl, offsets, ev_pc, pcs, regs, wis[sm], wrs[sm], wms[sm], sis[sm],
                    sws[sm], cis[sm], cas[sm], lp, cta_logs[sm]):
                break
        if rc == st.RC_STUCK and waits_on_phase(wis[sm]):
            lp[st.L_PARKED] = 1
            sm = NO_SM
            continue
        if rc != st.RC_YIELD:
            return rc, sm
        _push(q, ctl, edge_ps(lp[st.L_CYCLE], freq_khz), NORMAL, sm)
        if lp[st.L_STALL_N] == st.STALL_ROWS or ctl[Q_STOP]:
            return rc, sm
        sm = NO_SM


def _drive(*args):
    """`drive(*args)`; its first call in the process through `jit_cache.reserved_call`, where
    numba compiles it (or loads it from the cache)."""
    return drive(*args) if drive.overloads else jit_cache.reserved_call(drive, *args)


class SmQueue:
    """The event queue of a replay whose only processes are its SMs (module docstring)."""

    def __init__(self, n_sms: int, order: int = 0) -> None:
        self.q = np.zeros((max(n_sms, 1), E_SM + 1), np.int64)
        self.ctl = np.zeros(Q_FIELDS, np.int64)
        self.ctl[Q_ORDER] = order
        self.ctl[Q_UNTIL:] = NO_LIMIT

    def __len__(self) -> int:
        return int(self.ctl[Q_N])

    def push(self, at_ps: int, priority: int, sm: int) -> None:
        """Queue SM index `sm` at `at_ps` (an SM already queued is an error: `drive` relies on
        at most one entry per SM for the heap's room)."""
        if sm in self.q[:len(self), E_SM]:
            raise ValueError(f"SM index {sm} is already queued")
        push(self.q, self.ctl, at_ps, priority, sm)

    def entries(self) -> list[tuple[int, int, int, int]]:
        """(time, priority, order, SM index) of every entry, in queue order."""
        rows = self.q[:len(self)].tolist()
        return sorted((int(r[0]), int(r[1]), int(r[2]), int(r[3])) for r in rows)


@nb.njit(cache=True)
def _list_of(first):
    out = List()
    out.append(first)
    return out


@nb.njit(cache=True)
def _append(items, value) -> None:
    items.append(value)


@nb.njit(cache=True)
def _put(items, i, value) -> None:
    items[i] = value


def typed_list(arrays: list) -> List:
    """A numba typed list of `arrays` (at least one, all of one type), built by cached
    compiled helpers: `List(arrays)` compiles its constructor in every process, 2.3 s of
    each run's first replay for the driver's three array types."""
    out = _list_of(arrays[0])
    for a in arrays[1:]:
        _append(out, a)
    return out


_FIELDS = ("wi", "wr", "wm", "wg", "si", "uf", "sw", "ci", "ca", "lp", "stall", "stall_log",
           "cta_log")


class SmDriver:
    """Steps the SMs of a session through `drive` (module docstring)."""

    def __init__(self, sms: list, queue: SmQueue) -> None:
        self.sms, self.queue = sms, queue
        for i, sm in enumerate(sms):
            sm.listen()
            if sm.state.lp[st.L_INDEX] != i:     # phase slots name waiting SMs by it (H_SM)
                raise ValueError(f"SM {sm.sm_id} is member {sm.state.lp[st.L_INDEX]} of its "
                                 f"phase table but entry {i} of the driver's list")
        self.lists = {name: typed_list([getattr(sm.state, name) for sm in sms])
                      for name in _FIELDS}
        self.lists["log"] = typed_list([sm.log for sm in sms])
        self.generations = [sm.state.generation for sm in sms]

    def _refresh(self, i: int) -> None:
        """SM `i`'s arrays into the lists, if an answer replaced some."""
        state = self.sms[i].state
        if state.generation != self.generations[i]:
            for name in _FIELDS:
                _put(self.lists[name], i, getattr(state, name))
            self.generations[i] = state.generation

    def replay_logs(self) -> None:
        """Fire the hooks every SM's CTA log holds (`replay_cta_log`)."""
        for sm in self.sms:
            sm.replay_cta_log()

    def _drive_args(self):
        """What every `drive` call of this replay passes: the kernel, its event tables, the
        SMs' state lists, the quantum, the clock and the dispatcher's state."""
        first = self.sms[0]
        kernel = first.kernel
        kernel_args = (kernel.ev_pc, kernel.ev_kind, kernel.ev_detail, kernel.ev_slot,
                       kernel.pcs, kernel.regs, kernel.slot_events, first.phases.table,
                       kernel.ev_sstart, kernel.ev_sectors)
        state_args = tuple(self.lists[name] for name in (*_FIELDS, "log"))
        return (kernel, kernel_args, state_args, first.quantum_ps, first.clock.freq_khz,
                first.dispatcher.state)

    def _returned(self, rc: int, sm: int) -> bool:
        """`drive` returned `rc` for SM index `sm`: fire its CTA log, then end its step (a
        yield or its end: True) or answer its request and refresh its arrays (False)."""
        unit = self.sms[sm]
        unit.replay_cta_log()
        if rc == st.RC_YIELD or rc == st.RC_END:
            if rc == st.RC_YIELD:
                unit.yielding()
            else:
                unit.end()
            return True
        unit.answer(rc)
        unit.listen()
        self._refresh(sm)
        return False

    def run(self, env, stop=None) -> bool:
        """Step until the queue is empty (False) or, with `stop` (a callable), until the
        first event boundary with entries left at which `stop()` holds (True). Only an
        answer can change what `stop` reads, so it is asked at the end of the steps that
        had one."""
        sms, q, ctl = self.sms, self.queue.q, self.queue.ctl
        first = sms[0]
        kernel, kernel_args, state_args, quantum_ps, freq_khz, disp = self._drive_args()
        memory = first._memory_state()
        sm = NO_SM
        while True:
            rc, sm = _drive(q, ctl, sm, quantum_ps, freq_khz, *kernel_args, memory, disp,
                            kernel.offsets, *state_args)
            env._now = int(ctl[Q_NOW])
            if sm == NO_SM:
                self.replay_logs()
                return False
            if self._returned(rc, sm):                 # the SM's step ended
                sm = NO_SM
                if ctl[Q_STOP]:
                    ctl[Q_STOP] = 0
                    if ctl[Q_N] and stop():
                        self.replay_logs()
                        return True
                continue
            memory = first._memory_state()       # the scratch arrays may have grown
            if stop is not None and stop():
                ctl[Q_STOP] = 1

    def share(self, env, ends: list) -> None:
        """Step the SMs among the other processes of SimPy environment `env` (module
        docstring): their entries, queued already with orders from `env`'s counter
        (`next_order`), are stepped when SimPy reaches them; `ends[i]`, an event, succeeds
        when SM i ends, as its process would."""
        self.env, self.ends = env, ends
        self._stand_in()

    def _stand_in(self) -> None:
        """The queue's first entry into SimPy's queue under its key, if there is one."""
        q = self.queue.q
        if len(self.queue):
            event = Event(self.env)
            event._ok, event._value, event.callbacks = True, None, [self._step_shared]
            heappush(self.env._queue, (int(q[0, E_TIME]), int(q[0, E_PRIORITY]),
                                       int(q[0, E_ORDER]), event))

    def _step_shared(self, _event) -> None:
        """SimPy reached the queue's first entry: step every entry before SimPy's next
        event, then stand in again."""
        env, sms, q, ctl = self.env, self.sms, self.queue.q, self.queue.ctl
        first = sms[0]
        kernel, kernel_args, state_args, quantum_ps, freq_khz, disp = self._drive_args()
        memory = first._memory_state()
        sm = NO_SM
        while True:
            ctl[Q_UNTIL:] = env._queue[0][:3] if env._queue else (NO_LIMIT,) * 3
            ctl[Q_ORDER] = next_order(env)
            rc, sm = _drive(q, ctl, sm, quantum_ps, freq_khz, *kernel_args, memory, disp,
                            kernel.offsets, *state_args)
            env._eid = count(int(ctl[Q_ORDER]))
            env._now = int(ctl[Q_NOW])
            if sm == NO_SM:
                self.replay_logs()
                break
            if self._returned(rc, sm):                 # the SM's step ended
                if rc == st.RC_END:
                    self.ends[sm].succeed()
                sm = NO_SM
                continue
            memory = first._memory_state()       # the scratch arrays may have grown
        self._stand_in()


def next_order(env) -> int:
    """The scheduling order (`eid`) SimPy environment `env` gives its next event."""
    order = next(env._eid)
    env._eid = count(order)
    return order
