"""The state of one SM's issue loop (`models.sm_core`) as a struct of arrays, and its layout.

What it models
--------------
The layout every compiled part of the SM shares (the issue core `models.sm_core`, the
memory pipeline `models.sm_memory`, the driver `models.sm_driver`, the kernel image's pc
table, the CTA dispatcher's state), so it is a module of its own below all of them.
`SmState` holds one row per warp slot (`wi`, `W_*` columns; scoreboard cycles `wr` and
from-memory flags `wm` per register; open wgmma group completions `wg`), per scheduler
(`si`, `S_*`; unit next-free cycles `uf`; warp slots in age order `sw`), per CTA slot
(`ci`, `C_*`; warps waiting at its barrier `ca`), the loop's variables (`lp`, `L_*`) and
stall cycles per reason (`stall`). Slots are reused as warps and CTAs finish; `make_room`
and `widen_groups` grow the arrays (from Python, between calls of the loop).
`cta_log` (`T_*` columns) holds the CTAs the compiled driver finished and launched
(`models.sm_driver`) until Python fires their hooks; `D_*` index the dispatcher's state
array. `PhaseTable` holds the mbarrier phases of one launch (`H_*` columns per phase slot).
Per-pc timings (`P_*`) are built by `models.kernel_image.KernelImage`. The codes of the loop's
requests (`RC_*`), states (`ST_*`), policies (`POLICY_*`) and stall reasons (`REASON_*`)
live here too.

Left out: nothing of the loop's state. Units: SM cycles.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from isa.trace_format import POLICY_FIELDS

NEVER = 1 << 62
POLICY_GTO, POLICY_LRR = 0, 1
REASON_NONE = -1
(REASON_NO_WARP, REASON_DEPENDENCY, REASON_MEMORY, REASON_PIPE_BUSY,
 REASON_BARRIER) = range(5)
RC_END, RC_YIELD, RC_MEMORY, RC_TMA, RC_CTA_DONE, RC_GROW, RC_STUCK = range(7)
ST_TOP, ST_PASS, ST_AFTER_ISSUE, ST_PENDING = range(4)
(L_STATE, L_CYCLE, L_WAKE, L_NEXT, L_K, L_RESIDENT, L_FINISH, L_WINDOW, L_LISTEN, L_POLICY,
 L_SHARED_FREE, L_SHARED_LAT, L_CONST_LAT, L_PEND_W, L_PEND_E, L_DONE, L_CTA_DONE,
 L_NEXT_SCHED, L_GROW, L_INLINE, L_SM_ID, L_FREQ_KHZ, L_L1_FREE, L_L1_SECTORS, L_TMA_FREE,
 L_TMA_BYTES, L_LOG_N, L_MEM_LISTEN, L_STALL_N, L_INDEX, L_PARKED, L_REMOTE_N,
 L_REMOTE_LOST, L_LAST, L_REMOTE) = range(35)
REMOTE_SLOTS = 32
"""Phase slots completed here whose waiters are on another SM (`L_REMOTE` ..), for the
driver to wake (`models.sm_driver`); past that many, `L_REMOTE_LOST` asks for a scan."""
L_SIZE = L_REMOTE + REMOTE_SLOTS
(W_GID, W_CTA, W_SCHED, W_POS, W_END, W_READY, W_UNIT, W_MEM, W_DONE, W_WG_OPEN, W_NGROUPS,
 W_WAIT_SLOT, W_USED, W_SUB, W_CGROUPS, W_CG_LO, W_CG_DONE, W_MEM_DONE, W_FIELDS) = range(19)
(S_N, S_LAST, S_WAKE, S_TOUCHED, S_SLOT_FREE, S_REASON, S_SINCE, S_TENSOR,
 S_FIELDS) = range(9)
C_INDEX, C_LIVE, C_NARR, C_USED = range(4)
BARRIERS = 16                  # named barriers per CTA (bar.sync 0..15)
C_BAR_N = 4                    # C_BAR_N + b: warps waiting at barrier b
C_BAR_X = C_BAR_N + BARRIERS   # C_BAR_X + b: warps it expects (0: every live warp)
C_FIELDS = C_BAR_X + BARRIERS
(P_UNIT, P_INTERVAL, P_LATENCY, P_ACTION, P_COUNT, P_SB_LO, P_SB_HI, P_DST_LO, P_DST_HI,
 P_FIRST, P_POLICY) = range(11)
P_FIELDS = P_POLICY + POLICY_FIELDS
"""Per-pc columns; from `P_POLICY` on the pc's cache-policy row (`isa.trace_format`)."""
H_COUNT, H_MAX, H_DONE, H_SM, H_FIELDS = range(5)
GROUPS_START = 16
STALL_ROWS = 256               # rows of an SM's stall log (cycle, then stalls per reason)
CTA_LOG_ROWS = 256             # rows of an SM's CTA log (row 0 holds the count)
T_KIND, T_CTA, T_CYCLE, T_STALLS, T_FIELDS = range(5)   # CTA log columns
T_DONE, T_LAUNCH = range(2)                              # CTA log kinds
D_NEXT, D_N, D_STOP = range(3)  # `models.cta_dispatch.CtaDispatcher.state`
NO_STOP = 1 << 62



@nb.njit(cache=True)
def free_slots(wi, ci):
    """(free CTA slots, free warp slots) of an SM's state arrays (`SmState.make_room`, and
    `models.sm_driver` before it launches a CTA itself)."""
    free_ctas = 0
    for c in range(ci.shape[0]):
        if ci[c, C_USED] == 0:
            free_ctas += 1
    free_warps = 0
    for w in range(wi.shape[0]):
        if wi[w, W_USED] == 0:
            free_warps += 1
    return free_ctas, free_warps


class PhaseTable:
    """Per mbarrier phase slot of a launch: contributions so far, their latest cycle, the
    completion cycle (-1 until complete) and the driver index of the SM whose warps wait
    for it (-1 while none does; set by the wait, `models.sm_core`)."""

    def __init__(self, n_slots: int = 0) -> None:
        self.table = np.zeros((0, H_FIELDS), np.int64)
        self.members: list = []     # the SMs sharing it; `H_SM` is an index into this list
        self.ensure(n_slots)

    def ensure(self, n_slots: int) -> None:
        """Room for `n_slots` slots (the slots so far keep their state)."""
        have = self.table.shape[0]
        if n_slots > have:
            grown = np.zeros((n_slots, H_FIELDS), np.int64)
            grown[:, H_DONE] = -1
            grown[:, H_SM] = -1
            grown[:have] = self.table
            self.table = grown


class SmState:
    """The arrays `run` works on (see the module docstring)."""

    def __init__(self, n_schedulers: int, n_units: int, n_regs: int, warps_per_cta: int,
                 policy: int, shared_latency: int, const_latency: int) -> None:
        self.wpc = warps_per_cta
        self.wi = np.zeros((0, W_FIELDS), np.int64)
        self.wr = np.zeros((0, max(n_regs, 1)), np.int64)
        self.wm = np.zeros((0, max(n_regs, 1)), np.int8)    # flags: a byte keeps the state small
        self.wg = np.zeros((0, GROUPS_START), np.int64)
        self.si = np.zeros((n_schedulers, S_FIELDS), np.int64)
        self.si[:, S_LAST] = -1
        self.si[:, S_WAKE] = NEVER
        self.si[:, S_TOUCHED] = 1
        self.si[:, S_REASON] = REASON_NONE
        self.uf = np.zeros((n_schedulers, n_units), np.int64)
        self.sw = np.zeros((n_schedulers, 0), np.int64)
        self.ci = np.zeros((0, C_FIELDS), np.int64)
        self.ca = np.zeros((0, max(warps_per_cta, 1)), np.int64)
        self.lp = np.zeros(L_SIZE, np.int64)
        self.lp[L_WAKE] = NEVER
        self.lp[L_CTA_DONE] = -1
        self.lp[L_POLICY] = policy
        self.lp[L_SHARED_LAT] = shared_latency
        self.lp[L_CONST_LAT] = const_latency
        self.stall = np.zeros(5, np.int64)
        self.stall_log = np.zeros((STALL_ROWS, 1 + self.stall.size), np.int64)
        # CTAs finished and launched inside `models.sm_driver.drive` (kind, CTA, cycle,
        # stall-log rows before it), for their hooks; the count in [0, 0]
        self.cta_log = np.zeros((CTA_LOG_ROWS + 1, T_FIELDS), np.int64)
        self.generation = 0    # counts replacements of the arrays (`make_room`, `widen_groups`)

    def make_room(self) -> None:
        """Room for one more CTA: a free CTA slot and `wpc` free warp slots. The arrays
        grow by as many slots as they hold (at least what is missing), so an SM filled
        with n CTAs grows them log2(n) times, not n (CTAs and warps take the first free
        slots, so the slots they take are the same)."""
        free_ctas, free_warps = free_slots(self.wi, self.ci)
        if free_ctas < 1 or self.wpc > free_warps:
            self.generation += 1
        if free_ctas < 1:
            grow = max(1, self.ci.shape[0])
            self.ci = np.concatenate([self.ci, np.zeros((grow, C_FIELDS), np.int64)])
            self.ca = np.concatenate([self.ca, np.zeros((grow, self.ca.shape[1]), np.int64)])
        more = self.wpc - free_warps
        if more > 0:
            more = max(more, self.wi.shape[0])
            self.wi = np.concatenate([self.wi, np.zeros((more, W_FIELDS), np.int64)])
            self.wr = np.concatenate([self.wr, np.zeros((more, self.wr.shape[1]), np.int64)])
            self.wm = np.concatenate([self.wm, np.zeros((more, self.wm.shape[1]), np.int8)])
            self.wg = np.concatenate([self.wg, np.zeros((more, self.wg.shape[1]), np.int64)])
            self.sw = np.concatenate([self.sw, np.zeros((self.sw.shape[0], more), np.int64)],
                                     axis=1)

    def widen_groups(self) -> None:
        """Twice the room for open wgmma groups per warp."""
        self.wg = np.concatenate([self.wg, np.zeros_like(self.wg)], axis=1)
        self.generation += 1
        self.lp[L_GROW] = 0
