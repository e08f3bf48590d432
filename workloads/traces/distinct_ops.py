"""Simulate each distinct op of a kernel graph once, resumably, into `simulate_workload`'s
op cache.

`fill_op_cache(graph, config, fidelity, path)` walks the graph's nodes in issue order; the
first node of every distinct op (`workloads.node_ops.NodeOp.key`, the key on which
`simulator.simulate_workload` reuses results) is timed alone, through `simulate_workload`
on a one-node graph (its deps dropped) with a shared `op_cache`, and the cache is saved to
`path` after every op (written beside it, then renamed), so a killed run keeps every op it
finished and a rerun skips them. The file is JSON (`ptxsim-op-cache/1`: op keys as nested
lists, each op's timing dict, its stats table as columns with their dtypes, the measured
contention pairs; non-finite floats tagged), read back with its structure checked, so a
file that is not such a cache is an InputError and never runs code. A node the simulator
cannot time (an op not registered yet, sizes a builder rejects) is recorded in
`unsimulated` (node name -> the error, for every node of that op) and the walk goes on. A
later
`simulate_workload(graph, config, op_cache=cache.op_cache)` of a graph made of these ops
then simulates nothing again (only contention pairs, if asked for).

The config must already hold what `simulate_workload` would add for the whole graph
(`sm.comm_count`, and `links.nodes` >= the ranks of its collectives / GPUs per node), or the
one-node graphs and the whole graph key their results under different configs:
`check_config` says so.

An op counts as done only under the key `simulate_workload` reads for this config and
fidelity (`part`): results kept under another config (a preset value changed since they
were simulated) are stale. They stay in the file but are neither skipped by the fill nor
taken by `missing` as done; counting them as done made the scheduling step of a report
re-simulate every such op silently, one after another, inside `simulate_workload`.
`cached_only` checks that a graph about to be scheduled has every op under that key.

Units: microseconds, seconds of CPU time.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import pandas as pd

from isa.errors import InputError
from models.roofline import chip_peaks
from simulator.runner.contention import PairEffect
from workloads.execute import _shared_cache, simulate_workload
from workloads.graph import KernelGraph
from workloads.node_ops import LINK, node_op

CACHE_FORMAT = "ptxsim-op-cache/1"
NONFINITE_TAG = "nonfinite"


@dataclass
class OpCache:
    """`simulate_workload`'s op cache plus what could not be simulated and CPU seconds."""

    op_cache: dict = field(default_factory=dict)
    unsimulated: dict[str, str] = field(default_factory=dict)
    failed: dict = field(default_factory=dict)       # op key -> the error
    cpu_s: dict[str, float] = field(default_factory=dict)


def check_config(graph, config) -> None:
    """InputError unless `config` spans the graph's collectives (see the module docstring)."""
    ranks = max((int(n.args.get("ep", n.args.get("ranks", 1))) for n in graph.nodes
                 if n.stream == "comm"), default=1)
    nodes = -(-ranks // config.links.gpus_per_node)
    if nodes > config.links.nodes:
        raise InputError(f"config: links.nodes = {config.links.nodes} but the graph's "
                         f"collectives span {ranks} ranks = {nodes} nodes of "
                         f"{config.links.gpus_per_node} GPUs; set links.nodes={nodes}")


def _tuples(value):
    """JSON lists back to the tuples op keys are made of."""
    return tuple(_tuples(v) for v in value) if isinstance(value, list) else value


def _number(value):
    if isinstance(value, float) and not math.isfinite(value):
        return {NONFINITE_TAG: repr(value)}
    return value


def _from_number(value):
    if isinstance(value, dict) and set(value) == {NONFINITE_TAG}:
        return float(value[NONFINITE_TAG])
    return value


def _frame_doc(frame: pd.DataFrame | None) -> dict | None:
    if frame is None:
        return None
    return {"columns": [str(c) for c in frame.columns],
            "dtypes": [str(t) for t in frame.dtypes],
            "data": [[_number(v.item() if hasattr(v, "item") else v) for v in frame[c]]
                     for c in frame.columns]}


def _frame(doc: dict | None) -> pd.DataFrame | None:
    if doc is None:
        return None
    columns = {c: pd.Series([_from_number(v) for v in values], dtype=object)
               for c, values in zip(doc["columns"], doc["data"], strict=True)}
    frame = pd.DataFrame(columns)
    for column, dtype in zip(doc["columns"], doc["dtypes"], strict=True):
        frame[column] = frame[column].astype(dtype)
    return frame


def _cache_doc(cache: OpCache) -> dict:
    parts = []
    for part_key, entries in cache.op_cache.items():
        ops, pairs = [], []
        for op_key, value in entries.items():
            if op_key == "pairs":
                pairs = [{"key": list(k), "effect": {f: _number(v) for f, v in
                                                     asdict(effect).items()}}
                         for k, effect in value.items()]
                continue
            timed, stats, series = value
            ops.append({"key": op_key, "timed": {k: _number(v) for k, v in timed.items()},
                        "stats": _frame_doc(stats), "series": _frame_doc(series)})
        parts.append({"key": list(part_key), "ops": ops, "pairs": pairs})
    return {"format": CACHE_FORMAT, "parts": parts, "unsimulated": cache.unsimulated,
            "failed": [[k, v] for k, v in cache.failed.items()],
            "cpu_s": cache.cpu_s}


def _cache(doc) -> OpCache:

    if not isinstance(doc, dict) or doc.get("format") != CACHE_FORMAT:
        raise ValueError(f"no {CACHE_FORMAT!r} format marker")
    op_cache: dict = {}
    for part in doc["parts"]:
        entries = op_cache.setdefault(_tuples(part["key"]), {})
        for op in part["ops"]:
            timed = {str(k): _from_number(v) for k, v in op["timed"].items()}
            entries[_tuples(op["key"])] = (timed, _frame(op["stats"]), _frame(op["series"]))
        if part["pairs"]:
            entries["pairs"] = {_tuples(pair["key"]): PairEffect(
                **{k: _from_number(v) for k, v in pair["effect"].items()})
                for pair in part["pairs"]}
    return OpCache(op_cache, {str(k): str(v) for k, v in doc["unsimulated"].items()},
                   {_tuples(k): str(v) for k, v in doc["failed"]},
                   {str(k): float(v) for k, v in doc["cpu_s"].items()})


def load(path: str | Path) -> OpCache:
    """The cache saved at `path` (JSON, checked as it is read), or an empty one when there
    is none. Anything else is an InputError naming the file."""
    path = Path(path)
    if not path.exists():
        return OpCache()
    try:
        return _cache(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        raise InputError(f"{path}: not an op cache written by fill_op_cache ({exc}); give "
                         "another --cache path or move this file away") from None


def save(cache: OpCache, path: str | Path) -> None:
    """Write `cache` to `path` as JSON (written beside it, then renamed)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = path.with_name(f"{path.name}.{os.getpid()}.part")
    staging.write_text(json.dumps(_cache_doc(cache), allow_nan=False), encoding="utf-8")
    os.replace(staging, path)


def _time_alone(node, graph_name: str, meta: dict, config, fidelity: str) -> tuple:
    """(this op's entries of a fresh op cache, error or None, CPU seconds); runs in a
    worker process when `fill_op_cache` has several."""

    alone = KernelGraph(f"{graph_name}.{node.name}", (replace(node, deps=()),), meta)
    local: dict = {}
    start = time.process_time()
    error = None
    try:
        simulate_workload(alone, config=config, fidelity=fidelity, timeline=False,
                                    contention=False, op_cache=local)
    except InputError as exc:
        error = str(exc)
    return local, error, time.process_time() - start


def node_ops(graph, config) -> dict:
    """Node name -> its `workloads.node_ops.NodeOp` under `config`, as `simulate_workload`
    makes it (its `key` is what op results are kept under)."""

    meta = {**graph.meta, "gpus_per_node": config.links.gpus_per_node,
            "comm_sms": config.sm.comm_count or None, "chunk_bytes": None}
    return {node.name: node_op(node, meta) for node in graph.nodes}


def part(cache: OpCache, config, fidelity: str) -> dict:
    """The op results `simulate_workload(..., timeline=False, op_cache=cache.op_cache)`
    reads for `config` and `fidelity` (created empty when there are none)."""

    return _shared_cache(cache.op_cache, config, fidelity, False)


def _merge(op_cache: dict, local: dict) -> None:
    for part_key, part in local.items():
        op_cache.setdefault(part_key, {}).update(part)


def _largest_first(graph, config) -> list:
    """Nodes by their roofline time (FLOP at the FP8 tensor peak vs minimum bytes at the HBM
    peak; a comm-stream node's bytes at the network's achieved bandwidth), largest first,
    ties in issue order: what a cut-short fill covers best."""
    peaks = chip_peaks(config.to_dict())
    tflops = peaks.get("tensor_fp8_tflops") or peaks.get("tensor_bf16_tflops") or 1.0
    network_gbps = float(config.links.network_achieved_gbps)

    def roof_us(node) -> float:
        gbps = network_gbps if node.stream == "comm" else peaks["hbm_gbps"]
        return max(node.flops / (tflops * 1e6), node.bytes_min / (gbps * 1e3))
    order = sorted(enumerate(graph.nodes), key=lambda kn: (-roof_us(kn[1]), kn[0]))
    return [node for _, node in order]


def fill_op_cache(graph, config, fidelity: str = "sampled", path: str | Path | None = None,
                  progress=None, *, workers: int = 1, largest_first: bool = False,
                  budget_s: float | None = None) -> OpCache:
    """Time every distinct op of `graph` once (see the module docstring). `workers` > 1
    simulates ops in that many processes; `largest_first` takes the ops by roofline time,
    largest first; `budget_s` stops handing out ops after that many seconds of wall time
    (ops in flight finish; the rest stay for a rerun)."""
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    check_config(graph, config)
    if not isinstance(workers, int) or workers < 1:
        raise InputError(f"workers={workers!r}: accepted a positive integer")
    path = Path(path) if path is not None else None
    cache = load(path) if path is not None else OpCache()
    keys = {name: op.key for name, op in node_ops(graph, config).items()}
    done = part(cache, config, fidelity)
    todo, seen = [], set()
    for node in (_largest_first(graph, config) if largest_first else graph.nodes):
        key = keys[node.name]
        if key in seen or key in cache.failed or key in done:
            continue
        seen.add(key)
        todo.append(node)
    started = time.monotonic()

    def record(node, local, error, cpu) -> None:
        _merge(cache.op_cache, local)
        if error is not None:
            cache.failed[keys[node.name]] = error
        cache.cpu_s[node.name] = cpu
        if path is not None:
            save(cache, path)
        if progress is not None:
            progress(node.name, cpu, error)

    def in_budget() -> bool:
        return budget_s is None or time.monotonic() - started < budget_s

    if workers == 1:
        for node in todo:
            if not in_budget():
                break
            record(node, *_time_alone(node, graph.name, dict(graph.meta), config, fidelity))
    else:
        with ProcessPoolExecutor(workers) as pool:
            pending: dict = {}
            queue = list(todo)
            while queue or pending:
                while queue and len(pending) < workers and in_budget():
                    node = queue.pop(0)
                    pending[pool.submit(_time_alone, node, graph.name, dict(graph.meta),
                                        config, fidelity)] = node
                if not pending:
                    break
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    record(pending.pop(future), *future.result())
    for name, key in keys.items():
        if key in cache.failed:
            cache.unsimulated[name] = cache.failed[key]
    if path is not None:
        save(cache, path)
    return cache


def missing(graph, config, cache: OpCache, fidelity: str = "sampled") -> list[str]:
    """Nodes whose op has neither a result for `config` and `fidelity` (`part`) nor a
    recorded failure in `cache`."""
    done = part(cache, config, fidelity)
    return [name for name, op in node_ops(graph, config).items()
            if op.key not in done and name not in cache.unsimulated]


def cached_only(graph, config, cache: OpCache, fidelity: str = "sampled") -> None:
    """InputError naming the nodes of `graph` whose op `simulate_workload` would have to
    simulate afresh (no result for `config` and `fidelity` in `cache`)."""

    done = part(cache, config, fidelity)
    absent = [name for name, op in node_ops(graph, config).items()
              if op.kind != LINK and op.key not in done]
    if absent:
        raise InputError(f"op cache: no result for this config and fidelity {fidelity!r} "
                         f"for {len(absent)} node(s) ({', '.join(absent[:5])}"
                         f"{', ...' if len(absent) > 5 else ''}); fill the cache first "
                         "(fill_op_cache) or take them out (without)")


def without(graph, names) -> object:
    """`graph` without the nodes in `names`; their users depend on their deps instead."""
    from functools import cache


    drop = set(names)
    deps = {n.name: n.deps for n in graph.nodes}

    @cache
    def resolved(name: str) -> tuple[str, ...]:   # once per node: no path blow-up
        if name not in drop:
            return (name,)
        return tuple(dict.fromkeys(d for dep in deps[name] for d in resolved(dep)))

    nodes = tuple(replace(n, deps=tuple(dict.fromkeys(d for dep in n.deps
                                                       for d in resolved(dep))))
                  for n in graph.nodes if n.name not in drop)
    return KernelGraph(graph.name, nodes, dict(graph.meta))
