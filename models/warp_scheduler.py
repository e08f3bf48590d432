"""Warp schedulers of an SM sub-partition and the policy family that orders their warps.

What it models
--------------
Each sub-partition has one `WarpScheduler`. Every cycle it is asked for a warp to issue: it
walks the warps in the order its policy gives and picks the first whose next instruction's
operands are ready (scoreboard: `warp.ready_cycle <= cycle`) and whose unit can accept a new
instruction (`unit_free[unit] <= cycle`). When none can, it reports the earliest cycle one
might, and why the first warp in policy order waits (the stall reason).

Policies (one per file, registered by name, chosen by `sm.scheduler_policy`):

Contract (`SchedulingPolicy`):
    order(warps: list, last) -> Sequence
        `warps` are the scheduler's resident warps, oldest first; `last` is the warp that
        issued most recently (or None). Returns the warps in the order to try this cycle
        (it may repeat a warp; it must contain every warp). Pure: no state of its own is
        changed except what it documents, no randomness.

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
    """One sub-partition's scheduler: its warps, its units' next-free cycles, its policy."""

    __slots__ = ("index", "policy", "warps", "last", "unit_free")

    def __init__(self, index: int, policy: SchedulingPolicy, n_units: int) -> None:
        self.index = index
        self.policy = policy
        self.warps: list = []
        self.last = None
        self.unit_free = [0] * n_units

    def pick(self, cycle: int):
        """(warp to issue at `cycle` or None, earliest cycle another try may succeed)."""
        earliest = NEVER
        unit_free = self.unit_free
        for warp in self.policy.order(self.warps, self.last):
            ready = warp.ready_cycle
            if ready > cycle:
                if ready < earliest:
                    earliest = ready
                continue
            free = unit_free[warp.next_unit]
            if free > cycle:
                if free < earliest:
                    earliest = free
                continue
            return warp, cycle + 1
        return None, earliest

    def stall_reason(self, cycle: int) -> str:
        """Why the first warp in policy order cannot issue at `cycle`."""
        warps = self.policy.order(self.warps, self.last)
        if not warps:
            return STALL_NO_WARP
        warp = warps[0]
        if warp.ready_cycle >= NEVER:
            return STALL_BARRIER
        if warp.ready_cycle > cycle:
            return STALL_MEMORY if warp.waits_on_memory else STALL_DEPENDENCY
        return STALL_PIPE_BUSY
