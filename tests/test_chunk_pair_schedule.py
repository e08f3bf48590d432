"""Scheduling the DeepSeek-V3 chunk pair from the op cache, and the op cache's config key.

The report's last step once ran for more than 14 minutes: the cache held results under
the config of before a preset change, `fill_op_cache` and `missing` counted them as done,
and `simulate_workload`, which reads only the current config's results, simulated those
ops again one by one. Here the whole layer pair (71 nodes, two micro-batches, three
streams) is scheduled from a cache primed with made-up op times (nothing is simulated: a
call to `simulate_op` fails the test), with and without the nodes a partial fill leaves
out, and a stale config's results are shown not to count as done."""

from __future__ import annotations

import pandas as pd
import pytest

import models
import simulator
import workloads.ops as ops_pkg
from isa.errors import InputError
from workloads.graph import KernelGraph
from workloads.layers import ops as L
from workloads.layers.dualpipe import micro_batch
from workloads.node_ops import LINK
from workloads.traces import chunk_pair as cp
from workloads.traces.distinct_ops import (
    OpCache,
    cached_only,
    fill_op_cache,
    load,
    missing,
    node_ops,
    part,
    without,
)


def _primed(graph, config) -> OpCache:
    """A cache with a made-up result for every distinct op: the k-th distinct op in issue
    order takes 10 + 7 k us."""
    cache = OpCache()
    done = part(cache, config, "sampled")
    ops = node_ops(graph, config)
    for node in graph.nodes:
        op = ops[node.name]
        if op.kind == LINK or op.key in done:
            continue
        time_us = 10.0 + 7.0 * len(done)
        done[op.key] = ({"time_us": time_us, "flops": float(node.flops),
                         "bytes": float(node.bytes_min), "hbm_bytes": float(node.bytes_min),
                         "l2_bytes": 0.0, "roofline_us": 1.0, "bound": "compute",
                         "link_bytes": 0.0}, pd.DataFrame(), None)
    return cache


@pytest.fixture()
def no_simulation(monkeypatch):
    def refuse(plan, *args, **kwargs):
        raise AssertionError(f"{plan.kind}: scheduling from the cache simulated an op")
    monkeypatch.setattr(ops_pkg, "simulate_op", refuse)


def _check_schedule(graph, kernels: pd.DataFrame) -> None:
    """Every node after its deps; one node at a time per stream; each micro-batch keeps
    its issue order per stream."""
    rows = kernels.set_index("name")
    for node in graph.nodes:
        start = rows.loc[node.name, "start_us"]
        assert rows.loc[node.name, "end_us"] == pytest.approx(start +
                                                              rows.loc[node.name, "time_us"])
        for dep in node.deps:
            assert start >= rows.loc[dep, "end_us"] - 1e-9, (node.name, dep)
    for _stream, lane in kernels.groupby("stream"):
        lane = lane.sort_values("start_us", kind="stable")
        assert (lane["start_us"].to_numpy()[1:] >= lane["end_us"].to_numpy()[:-1] - 1e-9).all()
        issue = {n.name: i for i, n in enumerate(graph.nodes)}
        for _mb, mb_rows in lane.groupby(lane["name"].map(micro_batch)):
            ranks = [issue[n] for n in mb_rows["name"]]
            assert ranks == sorted(ranks)


def test_chunk_pair_schedules_from_the_cache_alone(no_simulation):
    """The layer pair less attention backward (no op yet), and that with every third node
    left out as a cut-short fill does: scheduled without simulating, dependencies and
    streams respected, the same table twice, and the streams overlap (DualPipe)."""
    config, full = cp.chunk_pair_config(), cp.chunk_pair_graph()
    graph = without(full, [n.name for n in full.nodes if n.name.endswith("attention.bwd")])
    cache = _primed(graph, config)
    cached_only(graph, config, cache)
    tables = [simulator.simulate_workload(graph, config=config, timeline=False,
                                          contention=False, op_cache=cache.op_cache).kernels
              for _ in range(2)]
    pd.testing.assert_frame_equal(tables[0], tables[1])
    _check_schedule(graph, tables[0])
    assert len(tables[0]) == len(graph.nodes) == len(full.nodes) - 1 == 70
    busy = tables[0].groupby("stream")["time_us"].sum()
    assert tables[0]["end_us"].max() < busy.sum()
    left_out = [n.name for n in graph.nodes[::3]]
    trimmed = without(graph, left_out)
    result = simulator.simulate_workload(trimmed, config=config, timeline=False,
                                         contention=False, op_cache=cache.op_cache)
    assert len(result.kernels) == len(graph.nodes) - len(left_out)
    _check_schedule(trimmed, result.kernels)


def _small_graph() -> KernelGraph:
    nodes = (L.elementwise("a", "rmsnorm", rows=64, cols=256, dtype="bf16"),
             L.elementwise("b", "residual_add", rows=64, cols=256, dtype="bf16", inputs=2,
                           deps=("a",)))
    return KernelGraph("small", nodes, {"model": "llama3-8b", "phase": "prefill"})


def test_results_under_another_config_are_not_done(tmp_path, monkeypatch):
    """Results kept under a config that differs in one link value are stale: `missing`
    names their nodes, `cached_only` refuses to schedule, and the fill simulates them again
    under the new config, after which both hold."""
    graph, path = _small_graph(), tmp_path / "ops.json"
    old = models.load_preset("h800_sxm")
    new = old.with_overrides({"links.nvlink_latency_ns": 2 * old.links.nvlink_latency_ns})
    fill_op_cache(graph, old, "sampled", path)
    calls = []
    real = ops_pkg.simulate_op
    monkeypatch.setattr(ops_pkg, "simulate_op",
                        lambda plan, *a, **kw: calls.append(plan.kind) or real(plan, *a, **kw))
    stale = load(path)
    assert missing(graph, old, stale) == []
    assert missing(graph, new, stale) == ["a", "b"]
    with pytest.raises(InputError, match="no result for this config"):
        cached_only(graph, new, stale)
    filled = fill_op_cache(graph, new, "sampled", path)
    assert sorted(calls) == ["residual-add", "rmsnorm"]
    assert missing(graph, new, filled) == [] and missing(graph, new, filled, "full") == \
        ["a", "b"]
    cached_only(graph, new, filled)
    calls.clear()
    simulator.simulate_workload(graph, config=new, timeline=False, op_cache=filled.op_cache)
    assert calls == []


def test_taking_out_a_ladder_of_diamonds_resolves_each_node_once():
    """30 diamonds in a row (2**30 dependency paths from the last node to the first), all
    but both ends taken out: the last node depends on the first, found by resolving each
    node once (walking every path would not finish)."""
    nodes = [L.elementwise("n0", "rmsnorm", rows=8, cols=8, dtype="bf16")]
    for i in range(1, 31):
        top = nodes[-1].name
        nodes += [L.elementwise(f"a{i}", "rmsnorm", rows=8, cols=8, dtype="bf16", deps=(top,)),
                  L.elementwise(f"b{i}", "rmsnorm", rows=8, cols=8, dtype="bf16", deps=(top,)),
                  L.elementwise(f"n{i}", "rmsnorm", rows=8, cols=8, dtype="bf16",
                                deps=(f"a{i}", f"b{i}"))]
    graph = KernelGraph("ladder", tuple(nodes), {"model": "llama3-8b", "phase": "prefill"})
    trimmed = without(graph, [n.name for n in nodes[1:-1]])
    assert trimmed.names() == ("n0", "n30")
    assert trimmed.node("n30").deps == ("n0",)
    half = without(graph, [f"a{i}" for i in range(1, 31)])
    assert half.node("n1").deps == ("n0", "b1") and half.node("b2").deps == ("n1",)
