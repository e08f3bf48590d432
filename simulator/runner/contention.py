"""Contention between a workload's overlapping compute and communication kernels.

What it models
--------------
`workloads.execute` times every node alone, then schedules them on their streams; a
collective on the communication SMs then overlaps compute kernels on the other SMs. Both
share the L2 and HBM, so both run slower while they overlap. `measure_pair` runs one
compute launch and one collective launch together on one chip
(`simulator.runner.concurrent.simulate_concurrent`) until the first of them ends, or until
`fidelity.contention_window_us` has passed (0: no limit), and each alone: a launch that
ended in the window is timed alone to its end; one that did not is run alone for the same
time and compared at the same progress (the share of its warp instructions issued), its
alone time for the progress it made beside taken as the alone run's time x progress beside /
progress alone (a constant rate within the window). The difference gives stretch factors:
while the two overlap, the compute kernel needs `compute_stretch` times its alone time per
unit of progress (1 + extra time / overlap), the collective `comm_stretch`; the overlap is
the measured window (`PairEffect.overlap_us`). A launch measured beside several partners is
traced and timed alone once (`measure_pair(memo=...)`). `stretch_schedule` applies the
factors (the documented approximation):

1. For every communication node, the compute-SM nodes (streams compute and wgrad) that
   overlap it in the alone schedule; the one of them with the most FLOPs (else the
   longest) is its partner, whose op's reduced launch (`representative_launch`: the last
   op-level sample, else the first launch) runs beside the collective's.
2. Every overlapping compute node gets (compute_stretch - 1) x its overlap with the
   collective added; the collective gets (comm_stretch - 1) x its overlap with compute
   nodes (their union).
3. The caller schedules again with the stretched times (one correction pass: the new
   overlaps are not measured again).

Left out: contention between two compute streams (compute and wgrad share the compute
SMs without slowing each other), partner choice per compute node (one measured partner
stands for all nodes beside a collective), and a second fixed-point pass. The L2 miss
sectors of the compute launch alone (for the same progress) and beside the collective are
kept with each pair.
Times are the SMs' spans (`KernelResult.kernel_time_us` less `launch.kernel_front_end_us`:
the launch's fixed costs, paid once whatever runs beside it, are not stretched). Units:
microseconds, sectors.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import pandas as pd

from simulator.runner.concurrent import (
    config_key,
    prepare_launch,
    shared_config,
    simulate_concurrent,
)
from simulator.runner.concurrent import (
    grow as grow_prepared,
)
from simulator.runner.launch_time import front_end_us
from simulator.runner.simulate import resolve_config

COMPUTE_LANES = ("compute", "wgrad")


@dataclass(frozen=True)
class PairEffect:
    """A compute launch and a collective launch, alone and together."""

    compute_op: str
    comm_op: str
    compute_alone_us: float
    compute_beside_us: float
    comm_alone_us: float
    comm_beside_us: float
    compute_l2_miss_alone: float
    compute_l2_miss_beside: float

    @property
    def overlap_us(self) -> float:
        """How long the two ran together in the measurement."""
        return min(self.compute_beside_us, self.comm_beside_us)

    @property
    def compute_stretch(self) -> float:
        return 1.0 + (self.compute_beside_us - self.compute_alone_us) / self.overlap_us

    @property
    def comm_stretch(self) -> float:
        return 1.0 + (self.comm_beside_us - self.comm_alone_us) / self.overlap_us

    def row(self) -> dict:
        return {**asdict(self), "measured_overlap_us": self.overlap_us,
                "compute_stretch": self.compute_stretch, "comm_stretch": self.comm_stretch}


def representative_launch(plan):
    """The launch that stands for an op in a measurement: its last (largest) op-level
    sample, else its first launch."""
    return plan.samples[-1][1] if plan.samples else plan.launches[0]


def _l2_misses(result) -> float:
    s = result.stats
    return float(s[(s.stat == "miss_sectors") & s.component.str.startswith("memory.l2")]
                 .value.sum())


def measure_pair(compute_launch, comm_launch, config, compute_op: str = "",
                 comm_op: str = "", *, window_us: float | None = None,
                 memo: dict | None = None,
                 alone_us: tuple[float | None, float | None] = (None, None)) -> PairEffect:
    """Both launches together on `config`, until the first ends or `window_us` passes, and
    each alone for the same progress (see the module docstring). `memo` (a dict the caller
    keeps across pairs) holds each launch's traced image and its whole run alone, so a
    launch measured beside several partners is traced and timed alone once.

    `alone_us` (per launch, its time alone when known, e.g. from its op's result) bounds
    what is traced under a window: the first CTAs the launch alone would reach in
    `WINDOW_TRACE_MARGIN` x `window_us`, and `WINDOW_TRACE_WAVES` waves more
    (`window_share`); a run whose launch hands out all of them is run again with twice as
    many (`simulator.runner.concurrent.grow`), so the figures are those of the whole grid
    traced."""
    memo = {} if memo is None else memo
    config = shared_config([compute_launch, comm_launch], resolve_config(config))
    launches = (compute_launch, comm_launch)
    for i, launch in enumerate(launches):
        _prepared(memo, launch, i, config, window_share(window_us, alone_us[i]))
    both, preps = _run_traced(memo, config, launches, (0, 1), stop_at="first",
                              until_us=window_us or None)
    stop_us = both.time_us
    front = front_end_us(config)
    spans = []
    for i, (prep, launch) in enumerate(zip(preps, launches, strict=True)):
        beside = both.kernels[prep.name]
        if both.progress[prep.name] >= 1.0:
            alone = _alone(memo, launch, i, config)
            spans.append((alone.kernel_time_us - front, beside.kernel_time_us - front,
                          _l2_misses(alone), _l2_misses(beside)))
            continue
        part, (solo,) = _run_traced(memo, config, (launch,), (i,), until_us=stop_us)
        alone_done = part.issued[solo.name]
        share = both.issued[prep.name] / alone_done if alone_done > 0 else 1.0
        spans.append((part.time_us * share, stop_us,
                      _l2_misses(part.kernels[solo.name]) * share, _l2_misses(beside)))
    (c_alone, c_beside, c_miss_alone, c_miss_beside), (m_alone, m_beside, _, _) = spans
    return PairEffect(compute_op or compute_launch.name, comm_op or comm_launch.name,
                      c_alone, c_beside, m_alone, m_beside, c_miss_alone, c_miss_beside)


WINDOW_TRACE_MARGIN = 1.25
"""How much further than the window, at its alone rate, a launch's traced CTAs reach."""
WINDOW_TRACE_WAVES = 2
"""Waves of CTAs traced beyond that."""


def window_share(window_us: float | None, alone_us: float | None) -> float | None:
    """The share of a launch's grid to trace for a run of at most `window_us` (None: all):
    what it reaches alone in `WINDOW_TRACE_MARGIN` x the window at its mean rate alone
    (`alone_us` for the whole grid); `WINDOW_TRACE_WAVES` waves are traced beyond it."""
    if not window_us or not alone_us or alone_us <= WINDOW_TRACE_MARGIN * window_us:
        return None
    return WINDOW_TRACE_MARGIN * window_us / alone_us


def _run_traced(memo: dict, config, launches, indices, **until):
    """`simulate_concurrent` of the launches' prepared images (`memo`), a launch that ran
    out of traced CTAs grown to twice as many and the run repeated; (the result, the
    images it ran)."""
    while True:
        preps = [_prepared(memo, launch, i, config) for launch, i in zip(launches, indices,
                                                                          strict=True)]
        result = simulate_concurrent(preps, config, **until)
        if not result.ran_out:
            return result, preps
        for launch, i, prep in zip(launches, indices, preps, strict=True):
            if prep.name in result.ran_out:
                _prepared(memo, launch, i, config, grow=2 * prep.ctas)


def _prepared(memo: dict, launch, index: int, config, share: float | None = None,
              grow: int | None = None):
    """The launch's traced image in `memo`: traced first with `share` of its grid and
    `WINDOW_TRACE_WAVES` waves (None: all), then grown to `grow` CTAs when asked."""
    key = ("prepared", id(launch), index, config_key(config))
    if key not in memo:
        memo[key] = (launch, prepare_launch(launch, index, config, share=share,
                                            waves=WINDOW_TRACE_WAVES))
    elif grow is not None:
        memo[key] = (launch, grow_prepared(memo[key][1], grow))
    return memo[key][1]


def _alone(memo: dict, launch, index: int, config):
    """The launch alone to its end, its whole grid traced."""
    key = ("alone", id(launch), config_key(config))
    if key not in memo:
        prepared = _prepared(memo, launch, index, config)
        if prepared.partial:
            prepared = _prepared(memo, launch, index, config, grow=prepared.grid_ctas)
        memo[key] = (launch, simulate_concurrent([prepared], config).kernels[prepared.name])
    return memo[key][1]


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> float:
    return max(0.0, min(a[1], b[1]) - max(a[0], b[0]))


def _union_overlap(span: tuple[float, float], others: list[tuple[float, float]]) -> float:
    pieces = sorted((max(lo, span[0]), min(hi, span[1])) for lo, hi in others
                    if min(hi, span[1]) > max(lo, span[0]))
    total, reach = 0.0, span[0]
    for lo, hi in pieces:
        if hi > reach:
            total += hi - max(lo, reach)
            reach = hi
    return total


def stretch_schedule(nodes, span: dict, lane_of: dict, comm_names: set[str], measure) \
        -> tuple[dict[str, float], pd.DataFrame]:
    """Extra microseconds per node from contention, and one row per measured pair.

    `nodes` in any order (with `name` and `flops`), `span` their alone (start, end),
    `lane_of` the stream each ran on, `comm_names` the collective nodes, `measure(compute
    node, comm node) -> PairEffect` (cached by the caller).
    """
    extra: dict[str, float] = {}
    rows = []
    by_name = {n.name: n for n in nodes}
    compute = [n for n in nodes if lane_of[n.name] in COMPUTE_LANES and n.name not in comm_names]
    for name in sorted(comm_names, key=lambda n: span[n][0]):
        beside = [(c, _overlap(span[c.name], span[name])) for c in compute]
        beside = [(c, o) for c, o in beside if o > 0]
        if not beside:
            continue
        partner = max(beside, key=lambda co: (co[0].flops, span[co[0].name][1]
                                              - span[co[0].name][0]))[0]
        effect = measure(partner, by_name[name])
        for c, o in beside:
            extra[c.name] = extra.get(c.name, 0.0) + (effect.compute_stretch - 1.0) * o
        covered = _union_overlap(span[name], [span[c.name] for c, _ in beside])
        extra[name] = extra.get(name, 0.0) + (effect.comm_stretch - 1.0) * covered
        rows.append({"comm_node": name, "partner": partner.name, "beside": len(beside),
                     "overlap_us": covered, **effect.row()})   # overlap in the schedule
    return extra, pd.DataFrame(rows)
