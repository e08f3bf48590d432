"""Mixture-of-experts block (DeepSeek-V3): router, dispatch all-to-all, grouped expert
GEMMs, combine all-to-all, shared expert, weighted sum.

Each rank runs its own `tokens` through attention (data-parallel attention) and holds
routed_experts / ep experts plus the shape's `redundant_experts` (copies of hot experts,
DeepSeek-V3 §3.4.1). With balanced routing every rank receives tokens x top_k
(token, expert) rows in total, spread evenly over its local experts: a grouped GEMM of
min(local experts, rows) groups. A routing table (`LayerShape.routing`: tokens this rank
sends to each rank) sets the all-to-all's volumes; the rank is taken to receive as many rows
as balanced routing gives it. The shared expert runs on the compute stream while the
dispatch is in flight. The router is one `moe_gating` node.

Left out: token dropping; the rows an imbalanced table would bring to this rank's experts;
node-limited routing and per-node deduplication in the graph's `link_bytes` (the
collective kernel, `workloads.ops.comm`, models both).

Units: sizes in elements, tokens counted per rank.
"""

from __future__ import annotations

from workloads.layers import ops
from workloads.layers.builder import GraphBuilder
from workloads.layers.mlp import add_mlp
from workloads.layers.norms import add_residual
from workloads.models.config import ModelConfig


def add_moe(b: GraphBuilder, model: ModelConfig, x: str) -> str:
    """MoE over `x`; returns the node producing the weighted sum of expert outputs."""
    s, h, t, moe = b.shape, model.hidden_size, b.shape.tokens, model.moe
    topk, width = moe.experts_per_token, moe.expert_intermediate_size
    rows = t * topk
    groups = min(moe.routed_experts // s.ep + s.redundant_experts, rows)
    comm = {"routing": s.routing, "holds_sms": s.comm_holds_sms}
    gate = b.add(ops.moe_gating("moe_gating", tokens=t, hidden=h, experts=moe.routed_experts,
                                topk=topk, dtype=s.act_dtype, deps=(x,)))
    x_in = b.gemm_input(x, t, h)
    dispatch = b.add(ops.alltoall("dispatch", "alltoall_dispatch", tokens=t, hidden=h,
                                  topk=topk, ep=s.ep, dtype=s.dispatch_dtype,
                                  deps=(gate, *x_in), block=s.block, **comm))
    shared = add_mlp(b, model, x, kind="swiglu", intermediate=moe.shared_experts * width,
                     prefix="shared_expert")
    up = b.add(ops.grouped_gemm("experts.gate_up_proj", groups=groups, m_total=rows,
                                n=2 * width, k=h, dtype=s.gemm_dtype, out_dtype=s.act_dtype,
                                deps=(dispatch,), block=s.block))
    act = b.add(ops.elementwise("experts.swiglu", "swiglu", rows=rows, cols=2 * width,
                                out_cols=width, dtype=s.act_dtype, deps=(up,)))
    act_in = b.gemm_input(act, rows, width)
    down = b.add(ops.grouped_gemm("experts.down_proj", groups=groups, m_total=rows, n=h,
                                  k=width, dtype=s.gemm_dtype, out_dtype=s.act_dtype,
                                  deps=act_in, block=s.block))
    combine = b.add(ops.alltoall("combine", "alltoall_combine", tokens=t, hidden=h,
                                 topk=topk, ep=s.ep, dtype=s.combine_dtype, deps=(down,),
                                 block=s.block, **comm))
    return add_residual(b, "moe_sum", (combine, shared), cols=h, inputs=topk + 1)
