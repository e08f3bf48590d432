"""DeepSeek-V3 MLA decode attention (absorbed form, FlashMLA-style) as an instance of the
fused attention template (`templates.attention`).

Absorbed MLA: with W_UK folded into the query, each head's query is a vector of
kv_lora_rank + rope_dim elements (512 + 64) scored against the latent KV cache
[B, kv_len, 1, 576] that all heads share; the value is the first kv_lora_rank columns of
the same cache (the template's `v_from_k`: no separate V copies, P.V reads the K tile),
and the output per head has kv_lora_rank elements. Heads are packed into the CTA's rows,
`ROWS_PER_CTA` (64) per CTA as FlashMLA does, KV blocks of 64 tokens in a two-stage ring
(Q 72 KiB + 2 x 72 KiB of shared memory), and `split=True` spreads the KV length over
CTAs with the template's combine kernel after.

Left out (beyond the template's own list): FlashMLA splits the 64 x 512 f32 output over
two warpgroups that exchange P through shared memory; here one warpgroup holds it all
(256 registers: ptxas spills, the timing model does not see the spill traffic). Paged
KV (block tables) and the FP8 cache are not modeled. Units: elements, bytes.
"""

from __future__ import annotations

from isa.errors import InputError
from workloads.kernels.templates.attention import AttentionKernel, attention_kernel

ROWS_PER_CTA = 64
KV_BLOCK = 64


def mla_dims(kv_lora_rank: int = 512, rope_dim: int = 64) -> tuple[int, int]:
    """(score head dim, value head dim) = (kv_lora_rank + rope_dim, kv_lora_rank)."""
    d = kv_lora_rank + rope_dim
    if kv_lora_rank % 64 or d % 64 or kv_lora_rank > 512 or rope_dim <= 0:
        raise InputError(f"kv_lora_rank={kv_lora_rank}, rope_dim={rope_dim}: accepted a "
                         "kv_lora_rank that is a multiple of 64 up to 512 and a positive "
                         "rope_dim with kv_lora_rank + rope_dim a multiple of 64 (up to 576)")
    return d, kv_lora_rank


def mla_decode_kernel(heads: int = 128, kv_lora_rank: int = 512, rope_dim: int = 64,
                      dtype: str = "bf16", split: bool = True) -> AttentionKernel:
    """The MLA decode kernel for `heads` query heads sharing one latent cache."""
    d, dv = mla_dims(kv_lora_rank, rope_dim)
    if not isinstance(heads, int) or heads < 1 or (heads % ROWS_PER_CTA
                                                    and ROWS_PER_CTA % heads):
        raise InputError(f"mla_decode_kernel: heads={heads!r}; accepted a divisor or "
                         f"multiple of {ROWS_PER_CTA}")
    return attention_kernel(d, dv, m_tile=ROWS_PER_CTA, kv_block=KV_BLOCK, stages=2,
                            dtype=dtype, pack=heads, split=split, v_from_k=True)
