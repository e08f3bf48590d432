"""Multi-head and grouped-query attention block: fused QKV projection, RoPE (where the
model uses it), fused attention, output projection, tensor-parallel all-reduce.

Heads are split over `tp` ranks; key/value heads too, replicated when fewer than tp.
Prefill/train: causal (decoders) or bidirectional (encoders) over the sequence;
decode: one query per sequence against `seqlen_k` cached keys.

Left out: KV-cache append (fused into RoPE in serving kernels), bias adds (fused).

Units: sizes in elements.
"""

from __future__ import annotations

from workloads.layers import ops
from workloads.layers.builder import GraphBuilder
from workloads.layers.norms import add_rope
from workloads.models.config import GqaAttention, ModelConfig


def add_gqa_attention(b: GraphBuilder, model: ModelConfig, x: str | None) -> str:
    """Attention over input `x` (None: the layer input); returns the output node."""
    a: GqaAttention = model.attention
    s, h = b.shape, model.hidden_size
    heads, kv_heads, d = a.heads // s.tp, max(1, a.kv_heads // s.tp), a.head_dim
    last = b.linear("qkv_proj", x, rows=s.tokens, n=(heads + 2 * kv_heads) * d, k=h)
    if model.position == "rope":
        last = add_rope(b, "rope", (last,), cols=(heads + kv_heads) * d)
    attn = b.add(ops.attention(
        "attention", batch=s.batch, heads=heads, kv_heads=kv_heads, seqlen_q=s.seqlen_q,
        seqlen_k=s.seqlen_k, headdim=d, causal=s.causal, dtype=s.attention_dtype,
        deps=(last,)))
    out = b.linear("o_proj", attn, rows=s.tokens, n=h, k=heads * d)
    return b.allreduce("o_proj.allreduce", out, rows=s.tokens, cols=h)
