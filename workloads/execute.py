"""`simulate_workload(graph, config=cfg, fidelity=...)`: time every node of a kernel graph
and schedule the nodes on their streams.

Steps: each node becomes an op (`workloads.node_ops.node_op`); every op is checked to be
registered before anything runs (a `MissingOpError` names the node and what is missing);
identical ops (same kind and keywords) are simulated once through `workloads.ops`
(`build_op` + `simulate_op` at the given fidelity) and the result is reused.
Communication nodes are collective kernels (`workloads.ops.comm`: all-to-all dispatch /
combine, all-reduce) simulated on the `sm.comm_count` reserved SMs (`comm_sms=` sets it;
`chunk_bytes=` their message size); compute kernels run on the other SMs. With no SM
reserved (`sm.comm_count` 0) a collective still runs as a kernel (on
`DEFAULT_COMM_SMS` SMs' worth of channels) but takes the compute SMs, so it is scheduled
on the compute stream. The cluster gets as many nodes as the collectives span
(`links.nodes` raised to ranks / `links.gpus_per_node` where the preset has fewer). What
no collective kernel models (an all-reduce across nodes) takes
link_bytes / link bandwidth (+ the preset's `links.latency_us` when it has one): NVLink's
achieved bandwidth within `NVLINK_DOMAIN_GPUS` ranks, the network's beyond; the table marks
those "link bandwidth".

Schedule: each stream (compute, comm, wgrad) runs its nodes one at a time in topological
order (ties in issue order); a node starts when all its dependencies have ended and its
stream is free, so the streams run concurrently. A graph of micro-batches
(`workloads.layers.dualpipe.dualpipe_pair`: names `mb0/...`, `mb1/...`) keeps each
micro-batch's order per stream, and a free stream takes whichever micro-batch's next node
can start first: DualPipe's overlap of one micro-batch's communication with the other's
computation. Contention (`contention=True`, the default, when SMs are reserved): where a
collective overlaps compute nodes, a reduced launch of each is run together on one chip
(`simulator.runner.contention`), both get stretched by the measured slowdown over their overlap,
and the graph is scheduled again; `meta["contention"]` lists the measured pairs (times
alone and beside, stretch factors, the compute launch's L2 misses alone and beside).
Left out: contention between the compute and wgrad streams (they share the compute SMs
without slowing each other), launch overheads.

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

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

import models
import workloads.ops as op_registry  # by attribute: tests swap simulate_op/build_op
from isa.errors import InputError
from simulator.framework.config import json_safe
from simulator.framework.stats import level_bytes, link_bytes
from simulator.runner.contention import (
    PairEffect,
    measure_pair,
    representative_launch,
    stretch_schedule,
)
from simulator.runner.fidelity import FidelityPlan
from workloads.codesign.codesign_ops import op_counts
from workloads.graph import KernelGraph
from workloads.layers.dualpipe import micro_batch
from workloads.node_ops import LINK, check_available, node_op
from workloads.op_result_cache import (
    PAIR,
    WORKLOAD_OP,
    OpResultCache,
    Uncacheable,
    workload_op_entry,
)

FIDELITIES = ("sampled", "full")
NVLINK_DOMAIN_GPUS = 8   # source: HGX H100/H800 8-GPU baseboard (one NVLink/NVSwitch domain)
LINK_MODEL = "link bandwidth"
LINK_KIND = "link"                        # workloads.node_ops.LINK
COLLECTIVES = ("alltoall", "allreduce")   # op kinds of collective kernels (comm SMs)
SIMULATED = "simulated"
PLAN_KEYS = ("fidelity_method", "fidelity_params", "simulated_cta_share",
             "extrapolated_time_share")
"""The fidelity-plan fields of an op result (`simulate_op`) the kernels table carries."""
UNKNOWN_PLAN = {"fidelity_method": "", "fidelity_params": {}, "simulated_cta_share": np.nan,
                "extrapolated_time_share": np.nan}
"""Those fields of an op result that carries none."""
KERNEL_COLUMNS = ("name", "op", "kind", "stream", "micro_batch", "role", "deps", "start_us",
                  "end_us",
                  "time_us", "flops", "issued_flops", "tflops", "bytes", "roofline_bytes",
                  "gbps", "hbm_bytes", "l2_bytes",
                  "link_bytes", "roofline_us", "bound", "gap", "model", "template", "reused",
                  "cached", "note",
                  "macs", "macs_skipped", "precision", "operand_bytes", "operand_bytes_stored",
                  "output_bytes", "output_bytes_stored", "compress_cycles", "sm_clock_ghz",
                  "fidelity_method", "fidelity_params", "simulated_cta_share",
                  "extrapolated_time_share")
"""`issued_flops` (the FLOPs the tensor cores issue: flops less 2 x the products the
co-design units skip in a GEMM) and `roofline_bytes` (bytes with a GEMM's operands as
stored): `workloads.ops.registry.issued_work`, as `simulate_op` gives them (= flops and
bytes otherwise); `tflops` = issued_flops / time_us, and the op's `roofline_us` counts them.
`macs` to `compress_cycles`: `workloads.codesign.codesign_ops.op_counts` (tensor-core
MACs, MACs the co-design units skip, MMA precision, GEMM operand bytes dense and as stored,
an output stored ZCE-compressed dense and as stored and the compressor's cycles; 0
otherwise). `sm_clock_ghz`: the SM clock the op's launches ran at (`simulate_op`: the
preset's, or the sustained clock under tensor load, `models.sustained_clock`; NaN for
nodes timed by link bandwidth). `fidelity_method` to `extrapolated_time_share`: the op's
fidelity plan as `simulate_op` carried it out (`simulator.runner.fidelity`: the method, its
parameters as JSON text, the share of CTAs simulated, the share of time extrapolated;
`link_model` with NaN shares for nodes timed by link bandwidth). `template`: what ran, per
distinct kernel of the op, `name (target)`: a generated template's name or a catalog kernel's
entry, and the `.target` of its PTX (`simulate_op`'s `template` and `ptx_target`; empty for
nodes timed by link bandwidth). `reused`: an earlier node
of the graph has the same op (timed once); `cached`: the op's result was read from the
on-disk op result cache (`workloads.op_result_cache`), not simulated by this process."""


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
        """name, op, stream, time_us, tflops, bound, MACs (done and skipped) and share of the
        summed kernel time."""
        table = self.kernels[["name", "op", "stream", "start_us", "time_us", "tflops", "bound",
                              "model", "macs", "macs_skipped"]].copy()
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
        return {"time_us": 0.0, "link_bytes": 0, "hbm_bytes": np.nan, **_link_plan({})}
    gbps, latency_us = _link_gbps(config, ranks)
    return {"time_us": link_bytes / (gbps * 1e3) + latency_us, "link_bytes": link_bytes,
            "hbm_bytes": np.nan,
            **_link_plan({"link_gbps": gbps, "latency_us": latency_us, "ranks": ranks})}


def _link_plan(params: dict) -> dict:
    """The fidelity fields of a node timed by link bandwidth: no kernel, no CTA simulated."""

    return FidelityPlan("link_model", params, np.nan, np.nan).fields()


def _plans(graph, ops, config, stored=()) -> dict[tuple, Any]:
    """Every distinct op's plan, built before anything runs; errors name the node. Ops in
    `stored` (read from the on-disk cache: built and timed before by this code on this
    config) are left out."""

    plans: dict[tuple, Any] = {}
    for node, op in zip(graph.nodes, ops, strict=True):
        if op.kind == LINK or op.key in plans or op.key in stored:
            continue
        try:
            plans[op.key] = op_registry.build_op(op.kind, config, **op.kwargs)
        except InputError as exc:
            raise InputError(f"node {node.name!r} ({node.op} -> op {op.kind}): {exc}") from None
    return plans


def _time_op(plan, config, fidelity: str, timeline: bool) -> tuple[dict, pd.DataFrame,
                                                                   pd.DataFrame | None]:

    runs: list = []
    series: list | None = [] if timeline else None
    res = op_registry.simulate_op(plan, config, fidelity, stats=runs, timelines=series)
    frames = [frame for _, _, frame in runs]
    weighted = [(weight, frame) for weight, _, frame in runs]
    stats = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    parts = [frame.assign(launch=k, weight=weight)
             for k, (weight, _, frame) in enumerate(series or []) if frame is not None]
    timelines = pd.concat(parts, ignore_index=True) if parts else None
    return {"time_us": float(res["time_us"]), "flops": float(plan.flops),
            "issued_flops": float(res.get("issued_flops", plan.flops)),
            "bytes": float(plan.bytes),
            "roofline_bytes": float(res.get("roofline_bytes", plan.bytes)),
            "hbm_bytes": float(res["hbm_bytes"]),
            "l2_bytes": level_bytes(weighted, "l2"), "roofline_us": float(res["roofline_us"]),
            "bound": res["bound"], "link_bytes": link_bytes(weighted),
            "sm_clock_ghz": float(res.get("sm_clock_ghz", np.nan)), **op_counts(plan),
            "template": _templates(res),
            **{key: res.get(key, UNKNOWN_PLAN[key]) for key in PLAN_KEYS}}, stats, timelines


def _templates(res: dict) -> str:
    """`name (target)` of each distinct kernel an op result says ran, joined by ' + '."""
    entries = res.get("kernel") or []
    entries = [entries] if isinstance(entries, dict) else entries
    names = [f"{k['template']} ({k.get('ptx_target') or 'no .target'})"
             for k in entries if k.get("template")]
    return " + ".join(dict.fromkeys(names))


class _DiskKeys:
    """The on-disk op result cache of one `simulate_workload` call: keys made with its
    config (resolved once), fidelity and timeline setting; with no cache, every key is None
    and every load a miss."""

    def __init__(self, cache: OpResultCache | None, config, fidelity: str,
                 timeline: bool) -> None:
        self.cache, self.fidelity, self.timeline = cache, fidelity, timeline
        self.config = config.to_dict() if cache is not None else None

    def key(self, entry: str, **parts) -> dict | None:
        if self.cache is None:
            return None
        try:
            return self.cache.key(entry, config=self.config, fidelity=self.fidelity,
                                  **({"timeline": self.timeline} if entry == WORKLOAD_OP
                                     else {}), **parts)
        except Uncacheable:
            return None

    def load(self, key: dict | None, check=None):
        return None if key is None else self.cache.load(key, check)

    def save(self, key: dict | None, value) -> None:
        if key is not None:
            self.cache.save(key, value)

    def summary(self) -> dict | None:
        return None if self.cache is None else self.cache.summary()


def _pair_entry(value) -> bool:
    """Whether a loaded value has a measured pair's fields."""
    return isinstance(value, dict) and set(value) == set(PairEffect.__dataclass_fields__)


def _op_data(op) -> dict:
    """An op's parameters as a cache key part: its kind and builder keywords."""
    return {"kind": op.kind, "kwargs": dict(op.kwargs)}


def _stored(ops, shared: dict, disk: _DiskKeys) -> dict[tuple, tuple]:
    """Op key -> (timing dict, stats, series) of every distinct op the on-disk cache holds
    (and the caller's `op_cache` does not); its timing dict says `cached`."""
    found: dict[tuple, tuple] = {}
    tried: set[tuple] = set()
    for op in ops:
        if op.kind == LINK or op.key in shared or op.key in tried:
            continue
        tried.add(op.key)
        entry = disk.load(disk.key(WORKLOAD_OP, op=_op_data(op)), workload_op_entry)
        if entry is not None:
            found[op.key] = ({**entry["timed"], "cached": True}, entry["stats"],
                             entry["series"])
    return found


def _time_and_save(disk: _DiskKeys, op, plan, config, fidelity: str,
                   timeline: bool) -> tuple[dict, pd.DataFrame, pd.DataFrame | None]:
    """`_time_op` of `op`, saved to the on-disk cache."""
    timed, stats, series = _time_op(plan, config, fidelity, timeline)
    disk.save(disk.key(WORKLOAD_OP, op=_op_data(op)),
              {"timed": timed, "stats": stats, "series": series})
    return timed, stats, series


def _plan(plans: dict, op, config):
    """The plan of `op`, built now if `_plans` left it out (an op read from the cache
    whose launch a contention measurement needs)."""
    if op.key not in plans:
        plans[op.key] = op_registry.build_op(op.kind, config, **op.kwargs)
    return plans[op.key]


def _schedule(order, durations: dict[str, float],
              lane_of: dict[str, str]) -> dict[str, tuple[float, float]]:
    """(start, end) per node: after its dependencies, once its stream is free; each
    micro-batch keeps `order` per stream, a free stream takes the micro-batch whose next
    node can start first (ties: earlier in `order`)."""
    from collections import deque


    rank = {node.name: i for i, node in enumerate(order)}
    queues: dict[tuple[str, str], deque] = {}
    for node in order:
        queues.setdefault((micro_batch(node.name), lane_of[node.name]), deque()).append(node)
    lane_free: dict[str, float] = {}
    span: dict[str, tuple[float, float]] = {}
    for _ in order:
        best = None
        for (_mb, lane), queue in queues.items():
            if not queue or any(d not in span for d in queue[0].deps):
                continue
            node = queue[0]
            ready = max((span[d][1] for d in node.deps), default=0.0)
            key = (max(ready, lane_free.get(lane, 0.0)), rank[node.name])
            if best is None or key < best[0]:
                best = (key, queue, lane)
        (start, _), queue, lane = best
        node = queue.popleft()
        span[node.name] = (start, start + durations[node.name])
        lane_free[lane] = span[node.name][1]
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
            rows.append({"run_id": run_id, "start_us": float(lo), "end_us": float(hi),
                         "component": f"memory.{level}", "stat": "bandwidth_gbps",
                         "value": rate, "kernels": ",".join(running["name"])})
    return pd.DataFrame(rows, columns=["run_id", "start_us", "end_us", "component", "stat",
                                       "value", "kernels"])


def _ops(graph, meta: dict) -> list:

    ops = []
    for node in graph.nodes:
        op = node_op(node, meta)
        check_available(node, op)
        ops.append(op)
    return ops


def _comm_setup(config, graph, comm_sms, chunk_bytes) -> tuple[Any, dict]:
    """The config with `comm_sms` reserved (when given) and as many nodes as the graph's
    collectives span (`links.nodes` raised to ceil(ranks / gpus_per_node)), and the meta
    the node ops read."""
    if comm_sms is not None:
        if isinstance(comm_sms, bool) or not isinstance(comm_sms, int) or not \
                0 <= comm_sms < config.sm.count:
            raise InputError(f"comm_sms={comm_sms!r}: accepted 0 .. {config.sm.count - 1}")
        config = config.with_overrides({"sm.comm_count": comm_sms})
    nodes = max((-(-int(n.args.get("ep", n.args.get("ranks", 1))) // config.links.gpus_per_node)
                 for n in graph.nodes if n.stream == "comm"), default=1)
    if nodes > config.links.nodes:
        config = config.with_overrides({"links.nodes": nodes})
    meta = {**graph.meta, "gpus_per_node": config.links.gpus_per_node,
            "comm_sms": config.sm.comm_count or None, "chunk_bytes": chunk_bytes}
    return config, meta


def _lanes(graph, ops, config) -> dict[str, str]:
    """The stream each node runs on: collectives without reserved SMs take the compute
    stream (they run on the compute SMs)."""
    shared = config.sm.comm_count == 0
    return {node.name: "compute" if shared and op.kind in COLLECTIVES else node.stream
            for node, op in zip(graph.nodes, ops, strict=True)}


def _shared_cache(op_cache: dict | None, config, fidelity: str, timeline: bool) -> dict:
    """The part of the caller's cache for this config, fidelity and timeline setting."""
    if op_cache is None:
        return {}
    import json

    key = (json.dumps(config.to_dict(), sort_keys=True, default=str), fidelity, timeline)
    return op_cache.setdefault(key, {})


def _contention(graph, ops, plans, config, span, lanes, measured: dict,
                disk: _DiskKeys) -> tuple[dict, pd.DataFrame]:
    """Extra time per node from running beside a collective (`simulator.runner.contention`);
    each pair measured once, or read from the on-disk cache (`disk`)."""

    op_of = {node.name: op for node, op in zip(graph.nodes, ops, strict=True)}
    launches: dict = {}        # traced images and alone runs shared between the pairs
    comm = {name for name, op in op_of.items() if op.kind in COLLECTIVES
            and lanes[name] == "comm" and span[name][1] > span[name][0]}
    def measure(compute_node, comm_node):
        c, m = op_of[compute_node.name], op_of[comm_node.name]
        if (c.key, m.key) not in measured:
            key = disk.key(PAIR, compute_op=_op_data(c), comm_op=_op_data(m))
            found = disk.load(key, _pair_entry)
            if found is None:
                c_plan, m_plan = _plan(plans, c, config), _plan(plans, m, config)
                found = measure_pair(representative_launch(c_plan),
                                     representative_launch(m_plan), config,
                                     c.kind, m.kind,
                                     window_us=config.fidelity.contention_window_us,
                                     memo=launches,
                                     alone_us=(_launch_us(c_plan, span[compute_node.name]),
                                               _launch_us(m_plan, span[comm_node.name])))
                disk.save(key, asdict(found))
            else:
                found = PairEffect(**found)
            measured[c.key, m.key] = found
        return measured[c.key, m.key]

    timed_nodes = [n for n in graph.nodes if op_of[n.name].kind != LINK_KIND]
    return stretch_schedule(timed_nodes, span, lanes, comm, measure)


def _launch_us(plan, span: tuple[float, float]) -> float | None:
    """The time alone of an op's representative launch where the op is that one launch
    (its node's span in the alone schedule), else None (unknown)."""
    if plan.samples or len(plan.launches) != 1:
        return None
    return span[1] - span[0]


def simulate_workload(graph, config=None, fidelity: str = "sampled",
                      timeline: bool = True, *, comm_sms: int | None = None,
                      chunk_bytes: int | None = None, contention: bool = True,
                      op_cache: dict | None = None, result_cache: OpResultCache | None = None,
                      progress: Callable[[int, int, str], None] | None = None) -> WorkloadResult:
    """Time every node of `graph` (a `workloads.KernelGraph`) on `config` (a loaded preset;
    None: `h800_sxm`) and schedule them on their streams; see the module docstring.
    `timeline=False` keeps no per-launch time series (`kernel_timelines` stays empty).
    `comm_sms` overrides `sm.comm_count`, `chunk_bytes` the collectives' message size;
    `contention=False` leaves overlapping kernels at their alone times. `op_cache` (a dict
    the caller keeps) shares op results and pair measurements between calls (a sweep),
    keyed by the resolved config, fidelity, timeline and op. `result_cache` (a
    `workloads.op_result_cache.OpResultCache`; None: none) reads op results and measured
    pairs from disk and saves those it simulates: the kernels table's `cached` says which
    nodes were read, `meta["op_cache"]` the folder and the entries read and written (None
    without a cache); an op read from it is not built again (the same code built and timed
    it on the same config), unless a contention measurement needs its launch. `progress`,
    when given, is
    called before each node is timed as `progress(index, total, node name)` (index 0-based,
    total the graph's node count; `simulator.app.progress.progress_bar` draws it); it does not
    change the results."""

    if not isinstance(graph, KernelGraph):
        raise InputError(f"simulate_workload: graph must be a workloads.KernelGraph (from "
                         f"workloads.layer(...)), got {type(graph).__name__}")
    if fidelity not in FIDELITIES:
        raise InputError(f"fidelity={fidelity!r}: accepted {', '.join(FIDELITIES)}")
    config = models.load_preset("h800_sxm") if config is None else config
    config, meta = _comm_setup(config, graph, comm_sms, chunk_bytes)
    ops = _ops(graph, meta)
    shared = _shared_cache(op_cache, config, fidelity, timeline)
    disk = _DiskKeys(result_cache, config, fidelity, timeline)
    stored = _stored(ops, shared, disk)
    plans = _plans(graph, ops, config, stored)
    cache: dict[tuple, tuple[dict, pd.DataFrame, pd.DataFrame | None]] = {}
    timed, reused, frames, series = {}, {}, [], {}
    for index, (node, op) in enumerate(zip(graph.nodes, ops, strict=True)):
        if progress is not None:
            progress(index, len(graph.nodes), node.name)
        reused[node.name] = op.key in cache
        if op.key not in cache:
            if op.kind == LINK:
                cache[op.key] = (_time_link(node, op, config), pd.DataFrame(), None)
            elif op.key in shared:
                cache[op.key] = shared[op.key]
            else:
                cache[op.key] = stored.get(op.key) or _time_and_save(
                    disk, op, plans[op.key], config, fidelity, timeline)
                shared[op.key] = cache[op.key]
        timed[node.name], stats, node_series = cache[op.key]
        if len(stats):
            frames.append(stats.assign(run_id=graph.name, kernel=node.name))
        if node_series is not None:
            series[node.name] = node_series
    order, lanes = graph.topological_order(), _lanes(graph, ops, config)
    durations = {n: t["time_us"] for n, t in timed.items()}
    span = _schedule(order, durations, lanes)
    pairs = pd.DataFrame()
    if contention and config.sm.comm_count > 0:
        extra, pairs = _contention(graph, ops, plans, config, span, lanes,
                                   shared.setdefault("pairs", {}), disk)
        if extra:
            timed = {n: _stretched(t, extra.get(n, 0.0)) for n, t in timed.items()}
            span = _schedule(order, {n: t["time_us"] for n, t in timed.items()}, lanes)
    table = _table(graph, ops, timed, span, reused, lanes)
    stats = (pd.concat(frames, ignore_index=True) if frames else
             pd.DataFrame(columns=["run_id", "kernel", "component", "stat", "value", "unit"]))
    makespan = float(table["end_us"].max()) if len(table) else 0.0
    return WorkloadResult(graph.name, table, stats, _timeline(table, graph.name), makespan,
                          config, fidelity, {**meta, "contention": pairs,
                                             "op_cache": disk.summary()}, series)


def _stretched(t: dict, extra_us: float) -> dict:
    if not extra_us:
        return t
    return {**t, "time_us": t["time_us"] + extra_us, "alone_us": t["time_us"],
            "contention_us": extra_us}


def _table(graph, ops, timed, span, reused, lanes) -> pd.DataFrame:

    rows = []
    for node, op in zip(graph.nodes, ops, strict=True):
        t = timed[node.name]
        time_us = t["time_us"]
        flops = t.get("flops", float(node.flops))
        nbytes = t.get("bytes", float(node.bytes_min))
        roof = t.get("roofline_us", np.nan)
        issued = t.get("issued_flops", flops)
        rows.append({
            "name": node.name, "op": node.op, "kind": op.kind, "stream": lanes[node.name],
            "micro_batch": micro_batch(node.name), "role": node.role, "deps": ",".join(node.deps),
            "start_us": span[node.name][0], "end_us": span[node.name][1], "time_us": time_us,
            "flops": flops, "issued_flops": issued,
            "tflops": issued / (time_us * 1e6) if time_us else np.nan,
            "bytes": nbytes, "roofline_bytes": t.get("roofline_bytes", nbytes),
            "gbps": nbytes / (time_us * 1e3) if time_us else np.nan,
            "hbm_bytes": t["hbm_bytes"], "l2_bytes": t.get("l2_bytes", np.nan),
            "link_bytes": t["link_bytes"], "roofline_us": roof,
            "bound": t.get("bound", "link" if op.kind == LINK else ""),
            "gap": time_us / roof if roof and np.isfinite(roof) else np.nan,
            "model": LINK_MODEL if op.kind == LINK else SIMULATED,
            "template": t.get("template", ""),
            "reused": reused[node.name], "cached": bool(t.get("cached", False)),
            "note": _note(node, op, t, lanes[node.name]),
            "macs": t.get("macs", 0.0), "macs_skipped": t.get("macs_skipped", 0.0),
            "precision": t.get("precision", ""), "operand_bytes": t.get("operand_bytes", 0.0),
            "operand_bytes_stored": t.get("operand_bytes_stored", 0.0),
            **{c: t.get(c, 0.0) for c in ("output_bytes", "output_bytes_stored",
                                          "compress_cycles")},
            "sm_clock_ghz": t.get("sm_clock_ghz", np.nan),
            "fidelity_method": t.get("fidelity_method", ""),
            "fidelity_params": json.dumps(json_safe(t.get("fidelity_params", {})),
                                          sort_keys=True),
            "simulated_cta_share": t.get("simulated_cta_share", np.nan),
            "extrapolated_time_share": t.get("extrapolated_time_share", np.nan),
        })
    return pd.DataFrame(rows, columns=list(KERNEL_COLUMNS))


def _note(node, op, t: dict, lane: str) -> str:
    parts = [op.note or ("" if op.kind in COLLECTIVES else node.note)]
    if op.kind in COLLECTIVES:
        parts.append("collective kernel on the comm SMs" if lane == "comm" else
                     "collective kernel on the compute SMs (sm.comm_count = 0)")
    if t.get("contention_us"):
        parts.append(f"contention +{t['contention_us']:.2f} us beside a collective"
                     if op.kind not in COLLECTIVES else
                     f"contention +{t['contention_us']:.2f} us beside compute kernels")
    return "; ".join(p for p in parts if p)
