"""LLaMA-3 8B and 70B: grouped-query attention (8 KV heads), SwiGLU MLP, RMSNorm, RoPE.

Sources: config.json of huggingface.co/meta-llama/Meta-Llama-3-8B and
Meta-Llama-3-70B; "The Llama 3 Herd of Models", arXiv:2407.21783, Table 3.

Left out: RoPE scaling of the 3.1 releases (position count only).

Units: sizes are element counts.
"""

from __future__ import annotations

from workloads.models.config import GqaAttention, Mlp, ModelConfig, PrecisionRecipe

_BF16 = PrecisionRecipe(  # released weights and reference inference are BF16 (config.json)
    gemm_dtype="bf16", attention_dtype="bf16", activation_dtype="bf16",
    kv_cache_dtype="bf16", dispatch_dtype="bf16", combine_dtype="bf16")

LLAMA3_8B = ModelConfig(
    name="llama3-8b",
    family="llama",
    hidden_size=4096,  # config.json hidden_size
    num_layers=32,  # config.json num_hidden_layers
    vocab_size=128256,  # config.json vocab_size
    max_positions=8192,  # config.json max_position_embeddings
    attention=GqaAttention(
        heads=32,  # config.json num_attention_heads
        kv_heads=8,  # config.json num_key_value_heads
        head_dim=128,  # hidden_size / num_attention_heads
    ),
    mlp=Mlp(kind="swiglu", intermediate_size=14336),  # config.json intermediate_size
    norm="rmsnorm",  # config.json rms_norm_eps
    position="rope",  # config.json rope_theta 500000
    causal=True,
    tie_embeddings=False,  # config.json tie_word_embeddings
    precision=_BF16,
    source="huggingface.co/meta-llama/Meta-Llama-3-8B config.json; arXiv:2407.21783",
)

LLAMA3_70B = ModelConfig(
    name="llama3-70b",
    family="llama",
    hidden_size=8192,  # config.json hidden_size
    num_layers=80,  # config.json num_hidden_layers
    vocab_size=128256,  # config.json vocab_size
    max_positions=8192,  # config.json max_position_embeddings
    attention=GqaAttention(
        heads=64,  # config.json num_attention_heads
        kv_heads=8,  # config.json num_key_value_heads
        head_dim=128,  # hidden_size / num_attention_heads
    ),
    mlp=Mlp(kind="swiglu", intermediate_size=28672),  # config.json intermediate_size
    norm="rmsnorm",  # config.json rms_norm_eps
    position="rope",  # config.json rope_theta 500000
    causal=True,
    tie_embeddings=False,  # config.json tie_word_embeddings
    precision=_BF16,
    source="huggingface.co/meta-llama/Meta-Llama-3-70B config.json; arXiv:2407.21783",
)
