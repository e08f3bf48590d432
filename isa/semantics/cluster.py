"""Thread-block cluster instructions: `mapa`, `getctarank`, `barrier.cluster.arrive/wait`.

`mapa{.shared::cluster}.{u32,u64} d, a, rank` maps shared address `a` (a shared::cta or
shared::cluster one; without `.shared::cluster` a generic address in the shared window)
to the same offset in the shared memory of the cluster's CTA `rank`, in the encoding of
`isa.cluster` (generic in, generic out). `getctarank{.shared::cluster}.u32 d, a` is the
rank of the CTA whose shared memory `a` addresses. A rank outside the cluster faults.

`barrier.cluster.arrive{.release,.relaxed}{.aligned}` marks the thread arrived at the
cluster barrier's current phase; `barrier.cluster.wait{.acquire}{.aligned}` suspends it
until every non-exited thread of every CTA of its cluster has arrived at the phase it
arrived at (exited threads count as arrived). A wait without an arrive of its own faults,
as does a second arrive before the wait. The memory-ordering qualifiers need nothing in
a sequentially consistent model. Suspended lanes carry `bar_id = CLUSTER_BAR_ID` so that
`bar.sync` never releases them.
"""

from __future__ import annotations

import numpy as np

from isa.cluster import OFFSET_MASK, RANK_SHIFT
from isa.machine import BLOCKED, EXITED
from isa.memory import SHARED_WINDOW, WINDOW_SIZE
from isa.semantics.common import U32, as_array, dst
from isa.semantics.registry import semantics
from isa.types import TYPES

CLUSTER_BAR_ID = -3


def _shared_operand(m, ins, lanes) -> tuple[np.ndarray, bool]:
    """(CTA-window addresses of operand 1, whether they were generic)."""
    ty = TYPES[f"u{ins.types[0].bits}"]
    a = as_array(ins.ops[1].read(m, ty, lanes), m.nlanes(lanes)).astype(np.int64)
    if ins.space == "shared":
        return a, False
    inside = (a >= SHARED_WINDOW) & (a < SHARED_WINDOW + WINDOW_SIZE)
    if not inside.all():
        raise m.fault(ins, f"mapa of generic address {int(a[~inside][0]):#x}, which is not "
                      "in the shared window", lanes, inside,
                      expected="a generic shared address (cvta.shared) or mapa.shared::cluster")
    return a - SHARED_WINDOW, True


def _check_rank(m, ins, rank: np.ndarray, lanes) -> None:
    bad = rank >= m.cluster_size
    if bad.any():
        raise m.fault(ins, f"CTA rank {int(rank[bad][0])} outside a cluster of "
                      f"{m.cluster_size} CTAs", lanes, ~bad,
                      expected=f"a rank below %cluster_nctarank ({m.cluster_size})")


@semantics("mapa")
def mapa(m, ins, lanes):
    ty = TYPES[f"u{ins.types[0].bits}"]
    a, generic = _shared_operand(m, ins, lanes)
    rank = as_array(ins.ops[2].read(m, U32, lanes), m.nlanes(lanes)).astype(np.int64)
    _check_rank(m, ins, rank, lanes)
    r = ((rank + 1) << RANK_SHIFT) | (a & OFFSET_MASK)
    if generic:
        r = r + SHARED_WINDOW
    dst(m, ins, r.astype(ty.dtype), ty, lanes)


@semantics("getctarank")
def getctarank(m, ins, lanes):
    a, _ = _shared_operand(m, ins, lanes)
    field = a >> RANK_SHIFT
    own = m.cluster_rank[m.cta_of[m.lane_ids(lanes)]]
    rank = np.where(field > 0, field - 1, own)
    _check_rank(m, ins, rank, lanes)
    dst(m, ins, rank.astype(np.uint32), U32, lanes)


def _counts(m) -> tuple[np.ndarray, np.ndarray]:
    """Per thread: cluster-barrier arrivals, and waits completed."""
    c = getattr(m, "cluster_arrivals", None)
    if c is None:
        c = m.cluster_arrivals = (np.zeros(m.T, np.int64), np.zeros(m.T, np.int64))
    return c


@semantics("barrier.cluster.arrive")
def cluster_arrive(m, ins, lanes):
    arrived, waited = _counts(m)
    ids = m.lane_ids(lanes)
    again = arrived[ids] > waited[ids]
    if again.any():
        raise m.fault(ins, "barrier.cluster.arrive twice without a barrier.cluster.wait",
                      lanes, ~again, expected="arrive, wait, arrive, wait, ...")
    arrived[ids] += 1
    release_cluster_barriers(m, np.unique(m.cta_of[ids]))


@semantics("barrier.cluster.wait")
def cluster_wait(m, ins, lanes):
    arrived, waited = _counts(m)
    ids = m.lane_ids(lanes)
    missing = arrived[ids] <= waited[ids]
    if missing.any():
        raise m.fault(ins, "barrier.cluster.wait without a barrier.cluster.arrive before it",
                      lanes, ~missing, expected="barrier.cluster.arrive, then .wait")
    m.resume[ids] = ins.pc + 1
    m.bar_id[ids] = CLUSTER_BAR_ID
    m.bar_count[ids] = np.iinfo(np.int32).max
    m.pc[ids] = BLOCKED
    release_cluster_barriers(m, np.unique(m.cta_of[ids]))


def release_cluster_barriers(m, ctas: np.ndarray) -> None:
    """Resume the cluster-barrier waiters of the clusters of batch CTAs `ctas` whose phase
    every live thread of the cluster has arrived at."""
    counts = getattr(m, "cluster_arrivals", None)
    if counts is None:
        return
    arrived, waited = counts
    tpc, size = m.tpc, m.cluster_size
    for first in np.unique(m.cluster_first[ctas]).tolist():
        seg = slice(first * tpc, (first + size) * tpc)
        pc = m.pc[seg]
        waiting = (pc == BLOCKED) & (m.bar_id[seg] == CLUSTER_BAR_ID)
        if not waiting.any():
            continue
        live = pc != EXITED
        reached = int(arrived[seg][live].min()) if live.any() else 0
        go = waiting & (waited[seg] < reached)
        if go.any():
            idx = np.flatnonzero(go) + first * tpc
            m.pc[idx] = m.resume[idx]
            m.bar_id[idx] = -1
            waited[idx] += 1
