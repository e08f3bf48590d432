"""`simulate_workload(graph, config=cfg, fidelity=...)`: time every node of a kernel graph
and schedule the nodes on their streams.

Steps: each node becomes an op (`workloads.node_ops.node_op`); every op is checked to be
registered before anything runs (a `MissingOpError` names the node and what is missing);
identical ops (same kind and keywords) are simulated once through `workloads.ops`
(`build_op` + `simulate_op` at the given fidelity) and the result is reused. Communication
nodes (alltoall dispatch/combine, allreduce) take link_bytes / link bandwidth (+ the
preset's `links.latency_us` when it has one): NVLink's achieved bandwidth within
`NVLINK_DOMAIN_GPUS` ranks, the network's beyond; the table marks them "link bandwidth".

Schedule: nodes are taken in topological order (ties in issue order); a node starts when
all its dependencies have ended and its stream is free, so streams (compute, comm, wgrad)
run concurrently. Left out: contention between concurrent streams (a kernel runs as fast
beside a communication kernel as alone; the compute SMs are `sm.count - sm.comm_count`
for every compute kernel), launch overheads, and the communication model itself (it comes
with the communication issue).

`WorkloadResult`: `kernels` (one row per node, `KERNEL_COLUMNS`), `stats` (the long stats
table of the simulated launches, one run_id, kernel = node name; for ops timed through
reduced sample launches these are the samples' stats, while the kernels table carries the
extrapolated time and bytes), `timeline` (per interval between node boundaries: HBM and
link bandwidth summed over the nodes running, as rates averaged over each node),
`time_us` (makespan), `cycles`, `config`, `fidelity`, `kernel_timelines` (node name -> the
`KernelResult.timeline` tables of its simulated launches, concatenated, with `launch` (index)
and `weight` columns; times from each launch's own start; reused nodes share their op's table;
empty with `timeline=False` or for link-timed nodes). `reports.write_report` reads it.
Units: microseconds, bytes, FLOP, TFLOP/s, GB/s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from isa.errors import InputError

FIDELITIES = ("sampled", "full")
NVLINK_DOMAIN_GPUS = 8   # source: HGX H100/H800 8-GPU baseboard (one NVLink/NVSwitch domain)
LINK_MODEL = "link bandwidth"
SIMULATED = "simulated"
KERNEL_COLUMNS = ("name", "op", "kind", "stream", "role", "deps", "start_us", "end_us",
                  "time_us", "flops", "tflops", "bytes", "gbps", "hbm_bytes", "l2_bytes",
                  "link_bytes", "roofline_us", "bound", "gap", "model", "reused", "note")


@dataclass(frozen=True)
class WorkloadResult:
    """Per-node timing of one kernel graph on one config (see the module docstring)."""

    graph: str
    kernels: pd.DataFrame = field(repr=False)
    stats: pd.DataFrame = field(repr=False)
    timeline: pd.DataFrame = field(repr=False)
    time_us: float
    config: Any = field(repr=False)
    fidelity: str
    meta: dict = field(default_factory=dict, repr=False)
    kernel_timelines: dict = field(default_factory=dict, repr=False)

    @property
    def run_id(self) -> str:
        return self.graph

    @property
    def cycles(self) -> int:
        """Makespan in SM cycles at the config's clock."""
        return int(round(self.time_us * 1e3 * float(self.config.chip.clock_ghz)))

    def summary(self) -> pd.DataFrame:
        """name, op, stream, time_us, tflops, bound and share of the summed kernel time."""
        table = self.kernels[["name", "op", "stream", "start_us", "time_us", "tflops", "bound",
                              "model"]].copy()
        total = float(table["time_us"].sum())
        table["share"] = table["time_us"] / total if total else np.nan
        return table

    def by_op(self) -> pd.DataFrame:
        """Kernel time summed per node op, largest first, with its share."""
        grouped = self.kernels.groupby("op", sort=False)["time_us"].agg(["count", "sum"])
        grouped = grouped.rename(columns={"sum": "time_us"}).sort_values("time_us",
                                                                         ascending=False)
        grouped["share"] = grouped["time_us"] / grouped["time_us"].sum()
        return grouped


def _link_gbps(config, ranks: int) -> tuple[float, float]:
    links = config.to_dict().get("links", {})
    if ranks <= NVLINK_DOMAIN_GPUS:
        gbps = links.get("nvlink_achieved_gbps")
    else:
        gbps = links.get("network_achieved_gbps", links.get("network_bandwidth_per_gpu_gbps"))
    if not gbps:
        raise InputError("config: links.nvlink_achieved_gbps / links.network_achieved_gbps "
                         "needed to time communication nodes")
    return float(gbps), float(links.get("latency_us", 0.0) or 0.0)


def _time_link(node, op, config) -> dict:
    link_bytes = op.kwargs["link_bytes"]
    ranks = int(node.args.get("ep", node.args.get("ranks", 1)))
    if link_bytes == 0:
        return {"time_us": 0.0, "link_bytes": 0, "hbm_bytes": np.nan}
    gbps, latency_us = _link_gbps(config, ranks)
    return {"time_us": link_bytes / (gbps * 1e3) + latency_us, "link_bytes": link_bytes,
            "hbm_bytes": np.nan}


def _level_bytes(runs: list, level: str) -> float:
    total = 0.0
    for weight, _launch, frame in runs:
        rows = frame[frame["component"].str.match(rf"memory\.{level}(\.|$)")
                     & (frame["stat"] == "bytes")]
        total += weight * float(rows["value"].sum())
    return total


def _plans(graph, ops, config) -> dict[tuple, Any]:
    """Every distinct op's plan, built before anything runs; errors name the node."""
    from workloads.node_ops import LINK
    from workloads.ops import build_op

    plans: dict[tuple, Any] = {}
    for node, op in zip(graph.nodes, ops, strict=True):
        if op.kind == LINK or op.key in plans:
            continue
        try:
            plans[op.key] = build_op(op.kind, config, **op.kwargs)
        except InputError as exc:
            raise InputError(f"node {node.name!r} ({node.op} -> op {op.kind}): {exc}") from None
    return plans


def _time_op(plan, config, fidelity: str, timeline: bool) -> tuple[dict, pd.DataFrame,
                                                                   pd.DataFrame | None]:
    from workloads.ops import simulate_op

    runs: list = []
    series: list | None = [] if timeline else None
    res = simulate_op(plan, config, fidelity, stats=runs, timelines=series)
    frames = [frame for _, _, frame in runs]
    stats = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    parts = [frame.assign(launch=k, weight=weight)
             for k, (weight, _, frame) in enumerate(series or []) if frame is not None]
    timelines = pd.concat(parts, ignore_index=True) if parts else None
    return {"time_us": float(res["time_us"]), "flops": float(plan.flops),
            "bytes": float(plan.bytes), "hbm_bytes": float(res["hbm_bytes"]),
            "l2_bytes": _level_bytes(runs, "l2"), "roofline_us": float(res["roofline_us"]),
            "bound": res["bound"], "link_bytes": 0}, stats, timelines


def _schedule(order, durations: dict[str, float]) -> dict[str, tuple[float, float]]:
    """(start, end) per node: after its dependencies, once its stream is free."""
    stream_free: dict[str, float] = {}
    span: dict[str, tuple[float, float]] = {}
    for node in order:
        ready = max((span[d][1] for d in node.deps), default=0.0)
        start = max(ready, stream_free.get(node.stream, 0.0))
        end = start + durations[node.name]
        span[node.name] = (start, end)
        stream_free[node.stream] = end
    return span


def _timeline(table: pd.DataFrame, run_id: str) -> pd.DataFrame:
    """Piecewise bandwidth: per interval between node boundaries, the summed average rates."""
    edges = np.unique(np.concatenate([table["start_us"], table["end_us"]]))
    rows = []
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        running = table[(table["start_us"] <= lo) & (table["end_us"] >= hi)
                        & (table["time_us"] > 0)]
        for level, column in (("hbm", "hbm_bytes"), ("link", "link_bytes")):
            rate = float((running[column] / running["time_us"]).sum()) / 1e3
            rows.append({"run_id": run_id, "start_us": float(lo), "time_us": float(hi),
                         "component": f"memory.{level}", "stat": "bandwidth_gbps",
                         "value": rate, "kernels": ",".join(running["name"])})
    return pd.DataFrame(rows, columns=["run_id", "start_us", "time_us", "component", "stat",
                                       "value", "kernels"])


def _ops(graph) -> list:
    from workloads.node_ops import check_available, node_op

    meta = dict(graph.meta)
    ops = []
    for node in graph.nodes:
        op = node_op(node, meta)
        check_available(node, op)
        ops.append(op)
    return ops


def simulate_workload(graph, config=None, fidelity: str = "sampled",
                      timeline: bool = True) -> WorkloadResult:
    """Time every node of `graph` (a `workloads.KernelGraph`) on `config` (a loaded preset;
    None: `h800_sxm`) and schedule them on their streams; see the module docstring.
    `timeline=False` keeps no per-launch time series (`kernel_timelines` stays empty)."""
    import models
    from workloads.graph import KernelGraph
    from workloads.node_ops import LINK

    if not isinstance(graph, KernelGraph):
        raise InputError(f"simulate_workload: graph must be a workloads.KernelGraph (from "
                         f"workloads.layer(...)), got {type(graph).__name__}")
    if fidelity not in FIDELITIES:
        raise InputError(f"fidelity={fidelity!r}: accepted {', '.join(FIDELITIES)}")
    config = models.load_preset("h800_sxm") if config is None else config
    ops = _ops(graph)
    plans = _plans(graph, ops, config)
    cache: dict[tuple, tuple[dict, pd.DataFrame, pd.DataFrame | None]] = {}
    timed, reused, frames, series = {}, {}, [], {}
    for node, op in zip(graph.nodes, ops, strict=True):
        reused[node.name] = op.key in cache
        if op.key not in cache:
            cache[op.key] = ((_time_link(node, op, config), pd.DataFrame(), None)
                             if op.kind == LINK
                             else _time_op(plans[op.key], config, fidelity, timeline))
        timed[node.name], stats, node_series = cache[op.key]
        if len(stats):
            frames.append(stats.assign(run_id=graph.name, kernel=node.name))
        if node_series is not None:
            series[node.name] = node_series
    span = _schedule(graph.topological_order(), {n: t["time_us"] for n, t in timed.items()})
    table = _table(graph, ops, timed, span, reused)
    stats = (pd.concat(frames, ignore_index=True) if frames else
             pd.DataFrame(columns=["run_id", "kernel", "component", "stat", "value", "unit"]))
    makespan = float(table["end_us"].max()) if len(table) else 0.0
    return WorkloadResult(graph.name, table, stats, _timeline(table, graph.name), makespan,
                          config, fidelity, dict(graph.meta), series)


def _table(graph, ops, timed, span, reused) -> pd.DataFrame:
    from workloads.node_ops import LINK

    rows = []
    for node, op in zip(graph.nodes, ops, strict=True):
        t = timed[node.name]
        time_us = t["time_us"]
        flops = t.get("flops", float(node.flops))
        nbytes = t.get("bytes", float(node.bytes_min))
        roof = t.get("roofline_us", np.nan)
        rows.append({
            "name": node.name, "op": node.op, "kind": op.kind, "stream": node.stream,
            "role": node.role, "deps": ",".join(node.deps),
            "start_us": span[node.name][0], "end_us": span[node.name][1], "time_us": time_us,
            "flops": flops, "tflops": flops / (time_us * 1e6) if time_us else np.nan,
            "bytes": nbytes, "gbps": nbytes / (time_us * 1e3) if time_us else np.nan,
            "hbm_bytes": t["hbm_bytes"], "l2_bytes": t.get("l2_bytes", np.nan),
            "link_bytes": t["link_bytes"], "roofline_us": roof,
            "bound": t.get("bound", "link" if op.kind == LINK else ""),
            "gap": time_us / roof if roof and np.isfinite(roof) else np.nan,
            "model": LINK_MODEL if op.kind == LINK else SIMULATED,
            "reused": reused[node.name], "note": op.note or node.note,
        })
    return pd.DataFrame(rows, columns=list(KERNEL_COLUMNS))
