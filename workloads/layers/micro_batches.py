"""Micro-batches of one rank whose communication overlaps the other's computation.

What it models
--------------
DeepSeek's inference deployments split a GPU's batch into two micro-batches of equal
attention load and run them together: while one micro-batch's MoE all-to-all (dispatch,
combine) is in flight, the other's attention or experts compute (deepseek-ai/profile-data
README, prefill and decode). `micro_batches(graph, count)` repeats one micro-batch's layer
graph `count` times, the copies named `mb0/<node>`, `mb1/<node>`, ... (the prefix
`workloads.layers.dualpipe.micro_batch` reads), each keeping its own dependencies, all on
the same streams. The copies are issued segment by segment, a segment being a micro-batch's
nodes up to and including its next collective: mb0's attention up to its dispatch, mb1's
attention up to its dispatch, mb0's experts up to its combine, mb1's, then the sums. With
`workloads.execute`'s schedule (each micro-batch in order per stream; a free stream takes
the node that can start first, ties in issue order) this is the alternation DeepSeek's
profiles show: mb1's attention computes while mb0 dispatches, mb0's experts while mb1
dispatches, mb1's experts while mb0 combines. Training's pair of a forward and a backward
micro-batch is `dualpipe.dualpipe_pair`.

The meta of the result counts the whole rank: `tokens` and `batch` are the micro-batch's
times `count`; `micro_batch_tokens`, `micro_batch_batch` and `micro_batches` keep the parts.

Left out: the layer before and after (so the first micro-batch's attention and the last
one's combine have no other micro-batch's work to overlap, as they would in a stack of
layers), uneven splits. Units: as `workloads.layers.ops`.
"""

from __future__ import annotations

from dataclasses import replace

from workloads.graph import COMM_OPS, GraphError, KernelGraph
from workloads.layers.dualpipe import MICRO_BATCH_SEPARATOR

MAX_MICRO_BATCHES = 8


def micro_batch_name(index: int) -> str:
    """The prefix of micro-batch `index` (`mb0`, `mb1`, ...)."""
    return f"mb{index}"


def micro_batches(graph: KernelGraph, count: int) -> KernelGraph:
    """`count` copies of one micro-batch's layer graph (see the module docstring); one
    copy is `graph` itself, unchanged."""
    if isinstance(count, bool) or not isinstance(count, int) or \
            not 1 <= count <= MAX_MICRO_BATCHES:
        raise GraphError(f"micro_batches={count!r}: accepted 1 .. {MAX_MICRO_BATCHES}")
    if count == 1:
        return graph
    if any(MICRO_BATCH_SEPARATOR in n.name for n in graph):
        raise GraphError(f"micro_batches: graph {graph.name!r} is already split into "
                         "micro-batches (accepted: one layer graph from workloads.layer)")
    segments = _segments(graph)
    nodes = []
    for segment in range(max(segments) + 1):
        for index in range(count):
            prefix = micro_batch_name(index) + MICRO_BATCH_SEPARATOR
            nodes += [replace(n, name=prefix + n.name, deps=tuple(prefix + d for d in n.deps))
                      for n, s in zip(graph, segments, strict=True) if s == segment]
    meta = {**graph.meta, "micro_batches": count,
            "micro_batch_tokens": graph.meta.get("tokens"),
            "micro_batch_batch": graph.meta.get("batch")}
    for key in ("tokens", "batch"):
        if isinstance(graph.meta.get(key), int):
            meta[key] = graph.meta[key] * count
    return KernelGraph(f"{graph.name}.mb{count}", tuple(nodes), meta)


def _segments(graph: KernelGraph) -> list[int]:
    """Per node in issue order, the number of collectives issued before it (a collective
    closes its own segment)."""
    out, seen = [], 0
    for n in graph:
        out.append(seen)
        seen += n.op in COMM_OPS
    return out
