"""MLA decode op: DeepSeek-V3 multi-head latent attention at decode, in the absorbed form
that FlashMLA runs, through the attention template (`templates.mla`).

Per request, `seqlen_q` new tokens x `heads` query heads, each a vector of kv_lora_rank +
rope_dim (512 + 64 = 576) elements (W_UK absorbed into q), attend over a latent KV cache
of kv_len x 576 elements shared by all heads (one "kv head"); the value is the first
kv_lora_rank columns of the same cache, and the output is kv_lora_rank per head (W_UV is
applied afterwards, outside this op). The softmax scale is 1 / sqrt(qk_nope + rope) =
1 / sqrt(192), DeepSeek-V3's. The template packs the heads into the CTA's rows (64 per
CTA, as FlashMLA), reads the cache once per 64 heads and splits the KV length across
CTAs when batch x heads / 64 leaves SMs idle, with a combine kernel after (see
`workloads.ops.attention.choose`).

Conventions: memory-bound; `bytes` = the latent cache once + q + out; `flops` = 2 B Sq H
kv_len (576 + 512). Left out: the paged cache (block tables), FP8 KV, the causal mask
among several new tokens (`seqlen_q` > 1 attends to the whole cache, as speculative
verification with the new tokens already appended would not). Units: elements, bytes, FLOP.
"""

from __future__ import annotations

import math

from isa.errors import InputError
from workloads.kernels.templates.attention import ELEM
from workloads.kernels.templates.mla import ROWS_PER_CTA, mla_dims
from workloads.ops.attention import DTYPES, plan
from workloads.ops.registry import Flag, OpPlan, positive, register

QK_HEAD_DIM = 192                 # DeepSeek-V3 qk_nope_head_dim 128 + qk_rope_head_dim 64

MLA_FLAGS = (
    Flag("--batch", "requests", required=True),
    Flag("--heads", "query heads (DeepSeek-V3: 128; 128 / TP under tensor parallelism)",
         required=True),
    Flag("--kv-len", "tokens in the latent KV cache", required=True),
    Flag("--kv-lora-rank", "latent (compressed KV) width (default 512)", default=512),
    Flag("--rope-dim", "decoupled RoPE key width (default 64)", default=64),
    Flag("--seqlen-q", "new tokens per request (default 1)", default=1),
    Flag("--dtype", "bf16 or fp16 (default bf16)", kind="str", default="bf16"),
)


@register("mla-decode", MLA_FLAGS,
          "DeepSeek-V3 MLA decode attention, absorbed form (FlashMLA-style, split-KV)")
def mla_decode_op(config, batch, heads, kv_len, kv_lora_rank=512, rope_dim=64, seqlen_q=1,
                  dtype="bf16", seed=0, shape_only=None) -> OpPlan:
    """The plan of one MLA decode attention (+ its split-KV combine)."""
    for flag, v in (("--batch", batch), ("--heads", heads), ("--kv-len", kv_len),
                    ("--kv-lora-rank", kv_lora_rank), ("--rope-dim", rope_dim),
                    ("--seqlen-q", seqlen_q)):
        positive(flag, v)
    if dtype not in DTYPES:
        raise InputError(f"--dtype {dtype!r}: accepted {', '.join(DTYPES)}")
    headdim, headdim_v = mla_dims(kv_lora_rank, rope_dim)
    if heads % ROWS_PER_CTA and ROWS_PER_CTA % heads:
        raise InputError(f"--heads {heads}: accepted a divisor or multiple of "
                         f"{ROWS_PER_CTA} (heads are packed {ROWS_PER_CTA} rows per CTA)")
    e = ELEM[dtype]
    rows = batch * seqlen_q * heads
    nbytes = e * (batch * kv_len * headdim + rows * (headdim + headdim_v))
    flops = 2.0 * rows * kv_len * (headdim + headdim_v)
    sizes = {"batch": batch, "heads": heads, "kv_len": kv_len, "kv_lora_rank": kv_lora_rank,
             "rope_dim": rope_dim, "seqlen_q": seqlen_q, "dtype": dtype}
    return plan(config, "mla-decode", sizes, batch=batch, heads=heads, kv_heads=1,
                seqlen_q=seqlen_q, seqlen_k=kv_len, headdim=headdim, headdim_v=headdim_v,
                causal=False, dtype=dtype, v_from_k=True,
                scale=1.0 / math.sqrt(QK_HEAD_DIM), seed=seed, shape_only=shape_only,
                flops=flops, nbytes=nbytes)
