"""How much of each micro-batch's communication hides behind computation.

`micro_batch_overlap(kernels)` reads a kernels table (`simulate_workload`'s: `name`, `op`,
`start_us`, `end_us`, `time_us`) and gives, per micro-batch (the node-name prefix `mb0/`,
`mb1/`, ...; `""` for a graph without micro-batches):

    compute_us   its kernels other than collectives, summed
    comm_us      its collectives (dispatch, combine, all-reduce), summed
    hidden_us    the part of its collectives' time during which some computation (of any
                 micro-batch) runs: the union of non-collective kernels' intervals
                 intersected with its collectives' intervals (at most comm_us: the
                 intervals' rounding kept out)
    exposed_us   comm_us - hidden_us
    hidden_share hidden_us / comm_us (NaN without communication)

A collective that runs on the compute SMs (no SM reserved for communication) is serialised
with the computation on the same stream, so none of it is hidden.
Left out: partial hiding inside one kernel (a kernel counts as computing for its whole span).
Units: microseconds, fractions.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import pandas as pd

from workloads.graph import COMM_OPS
from workloads.layers.dualpipe import micro_batch
from workloads.traces.overlap import merged_intervals


@dataclass(frozen=True, slots=True)
class MicroBatchOverlap:
    """Compute, communication and hidden communication of one micro-batch."""

    micro_batch: str
    compute_us: float
    comm_us: float
    hidden_us: float

    @property
    def exposed_us(self) -> float:
        return self.comm_us - self.hidden_us

    @property
    def hidden_share(self) -> float:
        return self.hidden_us / self.comm_us if self.comm_us > 0 else float("nan")

    def to_dict(self) -> dict:
        return {**asdict(self), "exposed_us": self.exposed_us,
                "hidden_share": self.hidden_share}


def _covered(intervals: list[tuple[float, float]], cover: list[tuple[float, float]]) -> float:
    """Length of the intervals' parts inside the (disjoint, sorted) `cover`."""
    total = 0.0
    for a, b in intervals:
        for c, d in cover:
            if d <= a:
                continue
            if c >= b:
                break
            total += min(b, d) - max(a, c)
    return total


def micro_batch_overlap(kernels: pd.DataFrame) -> list[MicroBatchOverlap]:
    """Per micro-batch, in name order (see the module docstring)."""
    comm = kernels["op"].isin(COMM_OPS)
    computing = merged_intervals(kernels.loc[~comm, "start_us"], kernels.loc[~comm, "end_us"])
    groups = kernels["name"].map(micro_batch)
    out = []
    for mb in sorted(groups.unique()):
        own = groups == mb
        mine = kernels[own & comm]
        spans = merged_intervals(mine["start_us"], mine["end_us"])
        comm_us = float(mine["time_us"].sum())
        out.append(MicroBatchOverlap(
            micro_batch=mb, compute_us=float(kernels.loc[own & ~comm, "time_us"].sum()),
            comm_us=comm_us, hidden_us=min(_covered(spans, computing), comm_us)))
    return out
