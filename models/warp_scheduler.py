"""Warp schedulers of an SM sub-partition and the policy family that orders their warps.

What it models
--------------
Each sub-partition has one `WarpScheduler`. At each cycle where it might issue, the SM's
issue loop (`models.sm.StreamingMultiprocessor.process`, which holds the pick for speed)
walks the scheduler's warps in the order its policy gives and picks the first whose next
instruction's operands are ready (scoreboard: `warp.ready_cycle <= cycle`) and whose unit
can accept a new instruction (`unit_free[unit] <= cycle`), one per cycle (`slot_free`). When
none can, the scheduler remembers the earliest cycle one might (`wake`; the SM does not ask
before then unless it `touch`es the scheduler), and can say why the first warp in policy
order waits (the stall reason).

Policies (one per file, registered by name, chosen by `sm.scheduler_policy`):

Contract (`SchedulingPolicy`):
    order(warps: list, last) -> Sequence
        `warps` are the scheduler's resident warps, oldest first; `last` is the warp that
        issued most recently (or None). Returns the warps in the order to try this cycle
        (it may repeat a warp; it must contain every warp). Pure: no state of its own is
        changed except what it documents, no randomness; the result may depend only on
        `warps`, `last` and `last.finished`, because the scheduler reuses it until one of
        those changes.

Left out: dual issue, instruction buffers and fetch, register-file bank conflicts.
Units: SM cycles.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

NEVER = 1 << 62
"""A cycle that never comes: warps waiting at a barrier."""

STALL_NO_WARP = "no_warp"
STALL_DEPENDENCY = "dependency"
STALL_MEMORY = "memory"
STALL_PIPE_BUSY = "pipe_busy"
STALL_BARRIER = "barrier"
STALL_REASONS = (STALL_NO_WARP, STALL_DEPENDENCY, STALL_MEMORY, STALL_PIPE_BUSY, STALL_BARRIER)


class SchedulingPolicy(Protocol):
    """Orders a scheduler's warps each cycle (see the module Contract)."""

    def order(self, warps: list, last) -> Sequence: ...


POLICIES: dict[str, Callable[[], SchedulingPolicy]] = {}


def register_policy(name: str):
    """Class decorator: make a policy available under `name`."""
    def wrap(cls):
        POLICIES[name] = cls
        return cls
    return wrap


def make_policy(name: str) -> SchedulingPolicy:
    """A new policy object by name; KeyError naming the known ones otherwise."""
    import models.scheduling_gto  # noqa: F401  (registers "gto")
    import models.scheduling_lrr  # noqa: F401  (registers "lrr")
    if name not in POLICIES:
        raise KeyError(f"unknown scheduler policy {name!r}; known: {sorted(POLICIES)}")
    return POLICIES[name]()


class WarpScheduler:
    """One sub-partition's scheduler: its warps, its units' next-free cycles, its policy.

    Besides the warps it keeps `wake`, a cycle before which no warp can issue (the earliest
    cycle the SM's last failed pick found, or a lower one after `touch`), and the
    policy's order, recomputed only when the warps or the last issuer change. The SM calls
    `touch(cycle)` whenever something outside this scheduler changes one of its warps.
    """

    __slots__ = ("index", "policy", "warps", "last", "unit_free", "wake", "touched", "_order",
                 "slot_free", "stall_reason_open", "stall_since")

    def __init__(self, index: int, policy: SchedulingPolicy, n_units: int) -> None:
        self.index = index
        self.policy = policy
        self.warps: list = []
        self.last = None
        self.unit_free = [0] * n_units
        self.wake = NEVER
        self.touched = True
        self._order: Sequence | None = None
        self.slot_free = 0
        self.stall_reason_open: str | None = None
        self.stall_since = 0

    def add(self, warp, cycle: int) -> None:
        """Make `warp` (its next instruction prepared) one of this scheduler's warps."""
        self.warps.append(warp)
        self.touch(cycle)

    def remove(self, warp, cycle: int) -> None:
        """Drop a finished warp."""
        self.warps.remove(warp)
        self.touch(cycle)

    def touch(self, cycle: int) -> None:
        """A warp of this scheduler changed from outside: try again from `cycle` on."""
        self._order = None
        self.touched = True
        if cycle < self.wake:
            self.wake = cycle

    def order(self) -> Sequence:
        """The policy's order of the warps (cached until the warps or `last` change)."""
        order = self._order
        if order is None:
            order = self._order = self.policy.order(self.warps, self.last)
        return order

    def stall_reason(self, cycle: int) -> str:
        """Why the first warp in policy order cannot issue at `cycle`."""
        return first_warp_reason(self.order(), cycle)


def first_warp_reason(order: Sequence, cycle: int) -> str:
    """Why the first warp of `order` (a scheduler's policy order) cannot issue at `cycle`."""
    if not order:
        return STALL_NO_WARP
    warp = order[0]
    if warp.ready_cycle >= NEVER:
        return STALL_BARRIER
    if warp.ready_cycle > cycle:
        return STALL_MEMORY if warp.waits_on_memory else STALL_DEPENDENCY
    return STALL_PIPE_BUSY
