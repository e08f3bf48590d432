"""DualPipe chunk pairs and sub-blocks of a `train` layer graph.

What it models
--------------
DeepSeek-V3's DualPipe (§3.2.1) runs the forward chunk of one micro-batch beside the
backward chunk of another, so that the all-to-all of one hides behind the computation of
the other. `dualpipe_pair(graph)` builds that pair from a `train` layer graph: the forward
nodes of micro-batch 1 (names `mb1/<node>`) and the backward (dgrad and wgrad) nodes of
micro-batch 0 (`mb0/<node>`). The backward nodes keep their dependencies among themselves;
those on forward nodes are dropped (micro-batch 0's forward ran in an earlier chunk). Both
micro-batches issue on the same streams (compute, comm, wgrad);
`workloads.execute` keeps each micro-batch's kernels in issue order per stream and lets
the stream take whichever micro-batch's next kernel can start first, which is the overlap
DualPipe arranges by hand. `micro_batch(name)` reads the prefix back.

`moe_block(graph)` keeps the nodes of the MoE feed-forward block of a layer graph (from
`ffn_norm` to `ffn_residual` and their backward nodes), dropping dependencies on the
attention part: the what-if of `notebooks/comm_whatif.ipynb` looks at the block whose
all-to-all it changes.

Left out: DualPipe's split of the backward into input and weight gradients of separate
chunks (the wgrad stream stands for it), the pipeline-parallel send/receive between
stages, and the bidirectional schedule around the pair. Units: as `workloads.layers.ops`.
"""

from __future__ import annotations

from dataclasses import replace

from workloads.graph import GraphError, KernelGraph

MICRO_BATCH_SEPARATOR = "/"
FORWARD_MB, BACKWARD_MB = "mb1", "mb0"
MOE_FIRST, MOE_LAST = "ffn_norm", "ffn_residual"


def micro_batch(name: str) -> str:
    """The micro-batch prefix of a node name (`""` for a name without one)."""
    head, sep, _ = name.partition(MICRO_BATCH_SEPARATOR)
    return head if sep else ""


def _check_train(graph: KernelGraph, what: str) -> None:
    if graph.meta.get("phase") != "train" or not any(n.role != "forward" for n in graph):
        raise GraphError(f"{what}: graph {graph.name!r} is not a train graph with backward "
                         "nodes (build it with workloads.layer(..., phase='train'))")


def dualpipe_pair(graph: KernelGraph) -> KernelGraph:
    """Forward of micro-batch 1 beside backward of micro-batch 0 (see the module docstring)."""
    _check_train(graph, "dualpipe_pair")
    forward = {n.name for n in graph if n.role == "forward"}
    nodes = []
    for n in graph:
        mb = FORWARD_MB if n.name in forward else BACKWARD_MB
        deps = tuple(f"{mb}{MICRO_BATCH_SEPARATOR}{d}" for d in n.deps
                     if (d in forward) == (n.name in forward))
        nodes.append(replace(n, name=f"{mb}{MICRO_BATCH_SEPARATOR}{n.name}", deps=deps))
    meta = {**graph.meta, "dualpipe": True}
    return KernelGraph(f"{graph.name}.dualpipe", tuple(nodes), meta)


def moe_block(graph: KernelGraph) -> KernelGraph:
    """The MoE feed-forward block of a layer graph and its backward nodes."""
    names = list(graph.names())
    if MOE_FIRST not in names or MOE_LAST not in names or graph.meta.get("layer_kind") != "moe":
        raise GraphError(f"moe_block: graph {graph.name!r} has no MoE block (accepted: a "
                         f"layer graph of an MoE layer, with nodes {MOE_FIRST!r} .. "
                         f"{MOE_LAST!r})")
    first, last = names.index(MOE_FIRST), names.index(MOE_LAST)
    forward = set(names[first:last + 1])
    keep = set(forward)
    _add_backward_of(graph, forward, keep)
    nodes = tuple(replace(n, deps=tuple(d for d in n.deps if d in keep))
                  for n in graph if n.name in keep)
    return KernelGraph(f"{graph.name}.moe", nodes, dict(graph.meta))


def _add_backward_of(graph: KernelGraph, forward: set[str], keep: set[str]) -> None:
    """Backward nodes derived from the block's forward nodes (`<name>.bwd`, `.dgrad`,
    `.wgrad`, `.dy_quant`)."""
    for n in graph:
        if n.role == "forward":
            continue
        base = n.name
        for suffix in (".bwd", ".dgrad", ".wgrad", ".dy_quant"):
            if base.endswith(suffix):
                base = base[: -len(suffix)]
                break
        if base in forward:
            keep.add(n.name)
