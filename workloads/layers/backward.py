"""Backward pass of a layer, derived node by node from its forward graph.

Forward nodes are visited in reverse issue order. A node's backward waits for the
backward nodes that produce the gradient of its output (the data-gradient nodes of its
consumers; for the layer output, the end of the forward pass). Rules per op:

* gemm / grouped_gemm: dgrad dX = dY . W^T (m, k, n) on `compute`, wgrad dW = X^T . dY
  (k, n, m; reduction over the rows, FP32 output) on `wgrad`. FP8 GEMMs first quantize
  dY row-wise and column-wise (one `quantize` node with transpose), so both read K-major.
* attention: one backward node at 2.5 x the forward flops (simulated by the attention op's
  backward: preprocess, main and postprocess kernels, `workloads.ops.attention_backward`).
* norms, activations, rope, residual adds, softmax, gating: the same op, role `dgrad`,
  at twice the forward flops (a residual add's backward is the gradient accumulation).
* dispatch <-> combine swap (gradients travel back in the combine dtype); all-reduce
  stays an all-reduce.
* forward quantize nodes pass gradients through (no backward node).

Left out: activation recomputation, gradient all-reduce/reduce-scatter of weights
across data-parallel ranks, optimizer step.

Units: as in `ops`.
"""

from __future__ import annotations

from workloads.graph import KernelNode
from workloads.layers import ops
from workloads.layers.builder import GraphBuilder

_ELEMENTWISE = ("rmsnorm", "layernorm", "swiglu", "gelu", "rope", "residual_add", "softmax")
_SWAP = {"alltoall_dispatch": "alltoall_combine", "alltoall_combine": "alltoall_dispatch"}


def add_backward(b: GraphBuilder) -> None:
    """Append the backward nodes of every forward node in `b`."""
    forward = [n for n in b.nodes if n.role == "forward"]
    consumers: dict[str, list[str]] = {n.name: [] for n in forward}
    for n in forward:
        for d in n.deps:
            consumers[d].append(n.name)
    outputs = tuple(n.name for n in forward if not consumers[n.name])
    grad_of: dict[str, tuple[str, ...]] = {}  # node -> nodes giving d(loss)/d(its inputs)
    for node in reversed(forward):
        ready: list[str] = []
        for c in consumers[node.name]:
            ready.extend(g for g in grad_of[c] if g not in ready)
        upstream = tuple(ready) if consumers[node.name] else outputs
        grad_of[node.name] = _emit(b, node, upstream) or upstream


def _emit(b: GraphBuilder, node: KernelNode, deps: tuple[str, ...]) -> tuple[str, ...]:
    """Add `node`'s backward nodes; return those producing its input gradient."""
    s, a, op = b.shape, node.args, node.op
    if op in ("gemm", "grouped_gemm"):
        return _gemm_backward(b, node, deps)
    if op == "attention":
        kw = {k: a[k] for k in ("batch", "heads", "kv_heads", "seqlen_q", "seqlen_k",
                                "headdim", "headdim_v", "causal", "dtype")}
        return (b.add(ops.attention(f"{node.name}.bwd", **kw, deps=deps, backward=True,
                                    role="dgrad")),)
    if op in _ELEMENTWISE:
        extra = {k: v for k, v in a.items() if k not in ("rows", "cols", "out_cols", "dtype",
                                                          "inputs", "backward")}
        return (b.add(ops.elementwise(f"{node.name}.bwd", op, rows=a["rows"], cols=a["cols"],
                                      out_cols=a["out_cols"], dtype=a["dtype"],
                                      inputs=a["inputs"], deps=deps, backward=True,
                                      role="dgrad", **extra)),)
    if op == "moe_gating":
        return (b.add(ops.moe_gating(f"{node.name}.bwd", tokens=a["tokens"],
                                     hidden=a["hidden"], experts=a["experts"], topk=a["topk"],
                                     dtype=a["dtype"], deps=deps, backward=True,
                                     role="dgrad")),)
    if op in _SWAP:
        return (b.add(ops.alltoall(f"{node.name}.bwd", _SWAP[op], tokens=a["tokens"],
                                   hidden=a["hidden"], topk=a["topk"], ep=a["ep"],
                                   dtype=s.combine_dtype, deps=deps, block=s.block,
                                   role="dgrad", routing=a.get("routing"),
                                   holds_sms=a.get("holds_sms", True))),)
    if op == "allreduce":
        return (b.add(ops.allreduce(f"{node.name}.bwd", elements=a["elements"],
                                    dtype=a["dtype"], ranks=a["ranks"], deps=deps,
                                    role="dgrad")),)
    return ()  # quantize: straight-through


def _gemm_backward(b: GraphBuilder, node: KernelNode, deps: tuple[str, ...]) -> tuple[str, ...]:
    s, a = b.shape, node.args
    dtype, grouped = a["dtype"], node.op == "grouped_gemm"
    rows = a["m_total"] if grouped else a["m"] * a["groups"]
    fp8 = ops.nbytes(dtype) == 1
    if fp8:
        deps = (b.add(ops.quantize(f"{node.name}.dy_quant", rows=rows, cols=a["n"],
                                   dtype=s.act_dtype, out_dtype=dtype, deps=deps,
                                   block=s.block, transpose=True, role="dgrad")),)
    dgrad_layout, wgrad_layout = ("kk", "kk") if fp8 else ("kn", "mn")
    common = {"dtype": dtype, "deps": deps, "block": s.block}
    if grouped:
        dgrad = ops.grouped_gemm(f"{node.name}.dgrad", groups=a["groups"], m_total=rows,
                                 n=a["k"], k=a["n"], out_dtype=s.act_dtype,
                                 layout=dgrad_layout, role="dgrad", **common)
        wgrad = ops.grouped_gemm(f"{node.name}.wgrad", groups=a["groups"], m=a["k"],
                                 n=a["n"], k_total=rows, out_dtype="f32",
                                 layout=wgrad_layout, role="wgrad", stream="wgrad", **common)
    else:
        dgrad = ops.gemm(f"{node.name}.dgrad", m=a["m"], n=a["k"], k=a["n"],
                         groups=a["groups"], out_dtype=s.act_dtype, layout=dgrad_layout,
                         role="dgrad", **common)
        wgrad = ops.gemm(f"{node.name}.wgrad", m=a["k"], n=a["n"], k=a["m"],
                         groups=a["groups"], out_dtype="f32", layout=wgrad_layout,
                         role="wgrad", stream="wgrad", **common)
    name = b.add(dgrad)
    b.add(wgrad)
    return (name,)
