"""Warp scheduling policies of an SM sub-partition and the stall reasons they report.

What it models
--------------
Each sub-partition has one warp scheduler. At each cycle where it might issue, the SM's
issue loop (`models.sm_core.run`) walks the scheduler's warps in the order its policy gives
and picks the first whose next instruction's operands are ready (scoreboard) and whose
unit can accept a new instruction, one per cycle. When none can, the scheduler remembers
the earliest cycle one might (`wake`) and says why the first warp in policy order waits
(the stall reason). A scheduler's warps are kept in age order (CTA launch order, then warp
index).

Policies (chosen by `sm.scheduler_policy`, compiled into the loop by code):

* `gto` (greedy-then-oldest, GPGPU-Sim/Accel-Sim): the warp that issued last is tried
  first, then all warps oldest first.
* `lrr` (loose round robin, Accel-Sim's default): warps in age order starting one past the
  warp that issued last, wrapping around, so every ready warp gets its turn.

A finished warp is no longer "the last issuer": the order is then plain age order.

Stall reasons (`STALL_REASONS`, in the loop's index order): `no_warp` (the scheduler holds
no warp), `dependency` / `memory` (the first warp's operands are not ready; `memory` when the
register it waits for comes from a load, TMA or mbarrier phase), `pipe_busy` (operands
ready, unit busy), `barrier` (waiting at `bar.sync` or for an mbarrier phase not yet fully
issued).

Left out: dual issue, instruction buffers and fetch, register-file bank conflicts.
Units: SM cycles.
"""

from __future__ import annotations

from models.sm_state import POLICY_GTO, POLICY_LRR

STALL_NO_WARP = "no_warp"
STALL_DEPENDENCY = "dependency"
STALL_MEMORY = "memory"
STALL_PIPE_BUSY = "pipe_busy"
STALL_BARRIER = "barrier"
STALL_REASONS = (STALL_NO_WARP, STALL_DEPENDENCY, STALL_MEMORY, STALL_PIPE_BUSY, STALL_BARRIER)
POLICIES = {"gto": POLICY_GTO, "lrr": POLICY_LRR}


def policy_code(name: str) -> int:
    """The loop's code of policy `name`; KeyError naming the known ones otherwise."""
    if name not in POLICIES:
        raise KeyError(f"unknown scheduler policy {name!r}; known: {sorted(POLICIES)}")
    return POLICIES[name]
