"""Simulate each distinct op of a kernel graph once, resumably, into `simulate_workload`'s
op cache.

`fill_op_cache(graph, config, fidelity, path)` walks the graph's nodes in issue order; the
first node of every distinct op (`workloads.node_ops.NodeOp.key`, the key on which
`simulator.simulate_workload` reuses results) is timed alone, through `simulate_workload`
on a one-node graph (its deps dropped) with a shared `op_cache`, and the cache is pickled
to `path` after every op (written beside it, then renamed), so a killed run keeps every op
it finished and a rerun skips them. A node the simulator cannot time (an op not registered
yet, sizes a builder rejects) is recorded in `unsimulated` (node name -> the error, for
every node of that op) and the walk goes on. A later
`simulate_workload(graph, config, op_cache=cache.op_cache)` of a graph made of these ops
then simulates nothing again (only contention pairs, if asked for).

The config must already hold what `simulate_workload` would add for the whole graph
(`sm.comm_count`, and `links.nodes` >= the ranks of its collectives / GPUs per node), or the
one-node graphs and the whole graph key their results under different configs:
`check_config` says so.

Units: microseconds, seconds of CPU time.
"""

from __future__ import annotations

import os
import pickle
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from isa.errors import InputError


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


def load(path: str | Path) -> OpCache:
    """The cache pickled at `path`, or an empty one when there is none."""
    path = Path(path)
    if not path.exists():
        return OpCache()
    with path.open("rb") as fh:
        cache = pickle.load(fh)
    if not isinstance(cache, OpCache):
        raise InputError(f"{path}: not an op cache written by fill_op_cache "
                         f"(found {type(cache).__name__}); delete it to start again")
    cache.__dict__.setdefault("failed", {})  # a cache from before failures were keyed
    return cache


def _save(cache: OpCache, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    with part.open("wb") as fh:
        pickle.dump(cache, fh, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(part, path)


def fill_op_cache(graph, config, fidelity: str = "sampled", path: str | Path | None = None,
                  progress=None) -> OpCache:
    """Time every distinct op of `graph` once (see the module docstring)."""
    import simulator
    from workloads.graph import KernelGraph
    from workloads.node_ops import node_op

    check_config(graph, config)
    path = Path(path) if path is not None else None
    cache = load(path) if path is not None else OpCache()
    meta = {**graph.meta, "gpus_per_node": config.links.gpus_per_node,
            "comm_sms": config.sm.comm_count or None, "chunk_bytes": None}
    seen: set = set()
    for node in graph.nodes:
        key = node_op(node, meta).key
        if key in cache.failed:
            cache.unsimulated[node.name] = cache.failed[key]
        if key in seen:
            continue
        seen.add(key)
        if key in cache.failed or any(key in part for part in cache.op_cache.values()):
            continue
        alone = KernelGraph(f"{graph.name}.{node.name}", (replace(node, deps=()),),
                            dict(graph.meta))
        start = time.process_time()
        try:
            simulator.simulate_workload(alone, config=config, fidelity=fidelity,
                                        timeline=False, contention=False,
                                        op_cache=cache.op_cache)
        except InputError as exc:
            cache.failed[key] = cache.unsimulated[node.name] = str(exc)
        cache.cpu_s[node.name] = time.process_time() - start
        if path is not None:
            _save(cache, path)
        if progress is not None:
            progress(node.name, cache.cpu_s[node.name], cache.unsimulated.get(node.name))
    return cache


def without(graph, names) -> object:
    """`graph` without the nodes in `names`; their users depend on their deps instead."""
    from workloads.graph import KernelGraph

    drop = set(names)
    deps = {n.name: n.deps for n in graph.nodes}

    def resolved(name: str) -> tuple[str, ...]:
        if name not in drop:
            return (name,)
        return tuple(d for dep in deps[name] for d in resolved(dep))

    nodes = tuple(replace(n, deps=tuple(dict.fromkeys(d for dep in n.deps
                                                       for d in resolved(dep))))
                  for n in graph.nodes if n.name not in drop)
    return KernelGraph(graph.name, nodes, dict(graph.meta))
