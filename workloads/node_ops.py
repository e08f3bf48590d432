"""Kernel-graph node -> simulated op: which registered op (`workloads.ops`) times a node,
with which builder keywords.

`node_op(node, meta)` returns a `NodeOp`: the op kind and its keyword arguments. `meta` is
the graph's meta dict (`workloads.layer` fills model, phase, seqlen_k; `simulate_workload`
adds `comm_sms` and `chunk_bytes` when the caller sets them).

Communication nodes are the collective kernels of `workloads.ops.comm`, simulated on the
communication SMs: alltoall_dispatch / alltoall_combine -> "alltoall" (kind dispatch or
combine, ranks = the node's `ep`, its tokens, hidden, top-k, the model's routed experts
(256 for a model without MoE), dtype e4m3 -> fp8, else bf16, the node's `routing` table
when it has one); allreduce -> "allreduce" (ranks, bytes = elements x dtype bytes). What no
collective kernel models is the kind `LINK`, timed by link bandwidth alone (see
`workloads.execute`): an all-reduce across nodes, a node with no link bytes (one rank),
and an all-to-all that holds no SMs (`holds_sms` False: DeepSeek's decode, whose RDMA
messages travel while the SMs compute; the SMs' issue of them is left out).

Mapping (node op -> op kind):
* gemm -> "gemm": dtype e4m3 -> fp8 (scaling "deepseek", 1x128 / 128x128 blocks, when the
  model's recipe is FP8, else "none"), bf16 -> bf16, f16 -> fp16, f32 -> tf32; groups > 1
  (batched, e.g. MLA's absorbed projections) -> `groups`. The node's `layout` ("kk", "kn",
  "mn") names operand majorness, which the K-major template does not model.
* grouped_gemm -> "gemm" with `groups`, `ragged` ("m" or "k"), `out_dtype`, and
  `layout` "contiguous" (prefill, train) or "masked" (decode), as DeepGEMM names them; the
  totals go along: `m_total` (contiguous), `valid_m` (masked: m is then the rows per
  group), `k_total` (ragged K, wgrad).
* attention -> "attention"; mla_decode -> "mla-decode".
* rmsnorm / layernorm -> "rmsnorm" / "layernorm" forward, "rmsnorm-bwd" / "layernorm-bwd"
  backward; softmax -> "softmax"; swiglu, gelu, rope (rot_dim from the model: MLA's
  qk_rope_head_dim, else the head dim), residual_add -> "residual-add", quantize,
  moe_gating -> "moe-gating".
A node whose op is not registered, or whose builder lacks a keyword the node needs, raises
`MissingOpError` naming the node, the op and what is missing.

Left out: operand layouts other than K-major, f16 element-wise kernels (the bf16 kernels
stand for them) and the f32 LayerNorm kernel standing for a 16-bit forward LayerNorm.
Units: shapes in elements, bytes.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

from isa.errors import InputError
from workloads.graph import COMM_OPS, KernelNode
from workloads.layers.ops import DTYPE_BYTES
from workloads.models import MlaAttention, get_model
from workloads.ops import OPS

LINK = "link"
COMM_OPTIONS = ("comm_sms", "chunk_bytes")   # meta keys passed to the collective ops
DEFAULT_EXPERTS = 256       # DeepSeek-V3's routed experts, for graphs of non-MoE models
NODE_GPUS = 8               # source: HGX H100/H800 8-GPU baseboard (meta gpus_per_node wins)
GEMM_DTYPES = {"e4m3": "fp8", "bf16": "bf16", "f16": "fp16", "f32": "tf32"}
ATTENTION_DTYPES = {"bf16": "bf16", "f16": "fp16", "e4m3": "fp8"}
SIMPLE = {"softmax": "softmax", "swiglu": "swiglu", "gelu": "gelu",
          "residual_add": "residual-add", "quantize": "quantize", "moe_gating": "moe-gating"}


class MissingOpError(InputError):
    """A graph node needs an op (or an op keyword) this build has not registered."""


@dataclass(frozen=True)
class NodeOp:
    """What times one node: an op kind with builder keywords, or LINK with link bytes."""

    kind: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    note: str = ""

    @property
    def key(self) -> tuple:
        """Identical keys are simulated once (the cache key of `simulate_workload`)."""
        return (self.kind, tuple(sorted(self.kwargs.items())))


def _fp8_scaling(meta: dict) -> str:

    model = meta.get("model")
    if model is None:
        return "none"
    recipe = get_model(model).precision
    return "deepseek" if recipe.gemm_dtype == "e4m3" else "none"


def _gemm_dtype(node: KernelNode) -> str:
    dtype = node.args["dtype"]
    if dtype not in GEMM_DTYPES:
        raise InputError(f"node {node.name!r}: GEMM dtype {dtype!r} has no GEMM op dtype "
                         f"(accepted {', '.join(GEMM_DTYPES)})")
    return GEMM_DTYPES[dtype]


def _gemm(node: KernelNode, meta: dict) -> NodeOp:
    a = node.args
    dtype = _gemm_dtype(node)
    kw: dict[str, Any] = {"m": a["m"], "n": a["n"], "k": a["k"], "dtype": dtype}
    if dtype == "fp8":
        kw["scaling"] = _fp8_scaling(meta)
    if a.get("out_dtype") == "f32":
        kw["out_dtype"] = "f32"
    if node.op == "grouped_gemm":
        ragged = a.get("ragged", "m")
        kw.update(groups=a["groups"], ragged=ragged,
                  layout="masked" if meta.get("phase") == "decode" else "contiguous")
        if ragged == "k":
            kw["k_total"] = a["k_total"]
        elif kw["layout"] == "masked":
            kw["valid_m"] = a["m_total"]
        else:
            kw["m_total"] = a["m_total"]
    elif a.get("groups", 1) > 1:
        kw["groups"] = a["groups"]
    return NodeOp("gemm", kw)


def _attention(node: KernelNode) -> NodeOp:
    a = node.args
    kw = {"batch": a["batch"], "heads": a["heads"], "kv_heads": a["kv_heads"],
          "seqlen_q": a["seqlen_q"], "seqlen_k": a["seqlen_k"], "headdim": a["headdim"],
          "headdim_v": a["headdim_v"], "causal": a["causal"],
          "dtype": ATTENTION_DTYPES.get(a["dtype"], a["dtype"])}
    if a.get("backward"):
        kw["backward"] = True
    return NodeOp("attention", kw)


def _mla_decode(node: KernelNode) -> NodeOp:
    a = node.args
    return NodeOp("mla-decode", {"batch": a["batch"], "heads": a["heads"],
                                 "kv_len": a["kv_len"], "kv_lora_rank": a["kv_lora_rank"],
                                 "rope_dim": a["rope_dim"], "seqlen_q": a["seqlen_q"],
                                 "dtype": ATTENTION_DTYPES.get(a["dtype"], a["dtype"])})


def _rot_dim(meta: dict) -> int:

    attn = get_model(meta["model"]).attention
    return attn.qk_rope_head_dim if isinstance(attn, MlaAttention) else attn.head_dim


def _rowwise(node: KernelNode, meta: dict) -> NodeOp:
    a = node.args
    rows, backward = a["rows"], bool(a.get("backward"))
    if node.op in ("rmsnorm", "layernorm"):
        kind = f"{node.op}-bwd" if backward else node.op
        note = ("f32 kernel for a 16-bit LayerNorm" if kind == "layernorm"
                and a.get("dtype") != "f32" else "")
        return NodeOp(kind, {"rows": rows, "cols": a["cols"]}, note)
    if node.op == "swiglu":
        return NodeOp("swiglu", {"rows": rows, "cols": a["out_cols"], "backward": backward})
    if node.op == "gelu":
        return NodeOp("gelu", {"rows": rows, "cols": a["cols"], "backward": backward})
    if node.op == "rope":
        seqlen = min(rows, meta.get("seqlen_k") or rows)
        return NodeOp("rope", {"rows": rows, "cols": a["cols"], "rot_dim": _rot_dim(meta),
                               "seqlen": seqlen, "backward": backward})
    if node.op == "residual_add":
        return NodeOp("residual-add", {"rows": rows, "cols": a["cols"],
                                       "inputs": a.get("inputs", 2)})
    if node.op == "quantize":
        return NodeOp("quantize", {"rows": rows, "cols": a["cols"], "block": a["block"],
                                   "transpose": bool(a.get("transpose"))})
    return NodeOp(SIMPLE[node.op], {"rows": rows, "cols": a["cols"]})


def _link(node: KernelNode, why: str) -> NodeOp:
    return NodeOp(LINK, {"link_bytes": int(node.args.get("link_bytes", 0))},
                  f"modeled by link bandwidth alone ({why})")


def _comm_options(meta: dict) -> dict[str, Any]:
    return {key: meta[key] for key in COMM_OPTIONS if meta.get(key) is not None}


def _collective(node: KernelNode, meta: dict) -> NodeOp:
    a = node.args
    if int(a.get("link_bytes", 0)) == 0:
        return _link(node, "one rank: nothing crosses a link")
    if not a.get("holds_sms", True):
        return _link(node, "RDMA all-to-all that holds no SMs once its messages are issued")
    if node.op == "allreduce":
        ranks = int(a["ranks"])
        if ranks > int(meta.get("gpus_per_node", NODE_GPUS)):
            return _link(node, "all-reduce across nodes has no collective kernel")
        size = int(a["elements"]) * DTYPE_BYTES[a["dtype"]]
        return NodeOp("allreduce", {"ranks": ranks, "bytes": size, **_comm_options(meta)})
    return NodeOp("alltoall", {
        "kind": "dispatch" if node.op == "alltoall_dispatch" else "combine",
        "ranks": int(a["ep"]), "tokens": int(a["tokens"]), "hidden": int(a["hidden"]),
        "topk": int(a["topk"]), "experts": _routed_experts(meta),
        "dtype": "fp8" if a["dtype"] == "e4m3" else "bf16", **_comm_options(meta),
        **({"routing": tuple(a["routing"])} if a.get("routing") is not None else {})})


def _routed_experts(meta: dict) -> int:

    model = meta.get("model")
    moe = get_model(model).moe if model is not None else None
    return moe.routed_experts if moe is not None else DEFAULT_EXPERTS


def node_op(node: KernelNode, meta: dict | None = None) -> NodeOp:
    """The op (kind and keywords) that times `node`; see the module docstring."""
    meta = meta or {}
    if node.op in COMM_OPS:
        return _collective(node, meta)
    if node.op in ("gemm", "grouped_gemm"):
        return _gemm(node, meta)
    if node.op == "attention":
        return _attention(node)
    if node.op == "mla_decode":
        return _mla_decode(node)
    if node.op == "moe_gating":
        a = node.args
        return NodeOp("moe-gating", {"tokens": a["tokens"], "hidden": a["hidden"],
                                     "experts": a["experts"], "topk": a["topk"],
                                     "backward": bool(a.get("backward"))})
    return _rowwise(node, meta)


def check_available(node: KernelNode, op: NodeOp) -> None:
    """MissingOpError unless `op.kind` is registered and its builder takes `op.kwargs`."""

    if op.kind == LINK:
        return
    builder = OPS.get(op.kind)
    if builder is None:
        raise MissingOpError(f"node {node.name!r} ({node.op}) needs op {op.kind!r}, which is "
                             f"not registered (registered: {', '.join(sorted(OPS))})")
    params = inspect.signature(builder).parameters
    named = {n for n, p in params.items() if p.kind is not inspect.Parameter.VAR_KEYWORD}
    missing = sorted(set(op.kwargs) - named)
    if missing:
        raise MissingOpError(f"node {node.name!r} ({node.op}) needs op {op.kind!r} with "
                             f"keyword(s) {', '.join(missing)}, which its builder does not "
                             "take yet")
