"""Multi-head latent attention (DeepSeek-V3): low-rank query, compressed joint KV latent
with a decoupled RoPE key.

Prefill/train (non-absorbed): q_a / kv_a down-projections, latent RMSNorms, q_b and
kv_b up-projections, RoPE, fused attention with qk head dim 192 and v head dim 128,
output projection. Decode (absorbed, FlashMLA-style): the per-head W_UK is folded into
the query (a batched GEMM into the 512-wide latent), attention runs over the cached
latent + rope key (`mla_decode`), W_UV maps the latent output back per head.

Left out: chunked prefill against a cached prefix (kv_b of the cached latents), latent
cache append (fused).

Units: sizes in elements.
"""

from __future__ import annotations

from workloads.layers import ops
from workloads.layers.builder import GraphBuilder
from workloads.layers.norms import add_rmsnorm, add_rope
from workloads.models.config import MlaAttention, ModelConfig


def add_mla(b: GraphBuilder, model: ModelConfig, x: str | None) -> str:
    """MLA over input `x` (None: the layer input); returns the output node."""
    a: MlaAttention = model.attention
    s, h, t = b.shape, model.hidden_size, b.shape.tokens
    heads = a.heads // s.tp
    q_a = b.linear("q_a_proj", x, rows=t, n=a.q_lora_rank, k=h)
    kv_a = b.linear("kv_a_proj", x, rows=t, n=a.kv_lora_rank + a.qk_rope_head_dim, k=h)
    q_norm = add_rmsnorm(b, "q_a_norm", (q_a,), cols=a.q_lora_rank)
    kv_norm = add_rmsnorm(b, "kv_a_norm", (kv_a,), cols=a.kv_lora_rank)
    q_b = b.linear("q_b_proj", q_norm, rows=t, n=heads * a.qk_head_dim, k=a.q_lora_rank)
    rope = add_rope(b, "rope", (q_b, kv_a), cols=(heads + 1) * a.qk_rope_head_dim)
    if s.phase == "decode":
        out = _absorbed_decode(b, a, heads, q_b, rope, kv_norm)
    else:
        kv_b = b.linear("kv_b_proj", kv_norm, rows=t,
                        n=heads * (a.qk_nope_head_dim + a.v_head_dim), k=a.kv_lora_rank)
        out = b.add(ops.attention(
            "attention", batch=s.batch, heads=heads, kv_heads=heads, seqlen_q=s.seqlen_q,
            seqlen_k=s.seqlen_k, headdim=a.qk_head_dim, headdim_v=a.v_head_dim,
            causal=s.causal, dtype=s.attention_dtype, deps=(rope, kv_b)))
    o = b.linear("o_proj", out, rows=t, n=h, k=heads * a.v_head_dim)
    return b.allreduce("o_proj.allreduce", o, rows=t, cols=h)


def _absorbed_decode(b: GraphBuilder, a: MlaAttention, heads: int, q_b: str, rope: str,
                     kv_norm: str) -> str:
    s, t = b.shape, b.shape.tokens
    q_absorb = b.add(ops.gemm(
        "q_absorb", m=t, n=a.kv_lora_rank, k=a.qk_nope_head_dim, groups=heads,
        dtype=s.attention_dtype, out_dtype=s.attention_dtype, layout="kn", deps=(q_b,),
        note="per-head W_UK folded into the query"))
    mla = b.add(ops.mla_decode(
        "mla_decode", batch=s.batch, heads=heads, seqlen_q=s.seqlen_q, kv_len=s.seqlen_k,
        kv_lora_rank=a.kv_lora_rank, rope_dim=a.qk_rope_head_dim, dtype=s.kv_cache_dtype,
        deps=(q_absorb, rope, kv_norm)))
    return b.add(ops.gemm(
        "v_absorb", m=t, n=a.v_head_dim, k=a.kv_lora_rank, groups=heads,
        dtype=s.attention_dtype, out_dtype=s.act_dtype, layout="kn", deps=(mla,),
        note="per-head W_UV applied to the latent output"))
