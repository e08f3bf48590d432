"""DeepSeek-V3 (671B total, 37B active): MLA attention, 256 routed experts top-8 plus one
shared expert, first three layers dense, FP8 GEMM training/inference recipe.

Sources: config.json of huggingface.co/deepseek-ai/DeepSeek-V3 (sizes) and the
DeepSeek-V3 Technical Report, arXiv:2412.19437 (recipe: §3.3 FP8 training with 1x128
activation tiles and 128x128 weight blocks, BF16 attention and norms, FP8 dispatch
and BF16 combine).

Left out: the multi-token-prediction module (one extra layer used in training only),
group-limited routing (n_group 8, topk_group 4: changes which experts, not how many).

Units: sizes are element counts.
"""

from __future__ import annotations

from workloads.models.config import MlaAttention, Mlp, ModelConfig, Moe, PrecisionRecipe

DEEPSEEK_V3 = ModelConfig(
    name="deepseek-v3",
    family="deepseek",
    hidden_size=7168,  # config.json hidden_size
    num_layers=61,  # config.json num_hidden_layers
    vocab_size=129280,  # config.json vocab_size
    max_positions=163840,  # config.json max_position_embeddings (YaRN-extended)
    attention=MlaAttention(
        heads=128,  # config.json num_attention_heads
        q_lora_rank=1536,  # config.json q_lora_rank
        kv_lora_rank=512,  # config.json kv_lora_rank
        qk_nope_head_dim=128,  # config.json qk_nope_head_dim
        qk_rope_head_dim=64,  # config.json qk_rope_head_dim
        v_head_dim=128,  # config.json v_head_dim
    ),
    mlp=Mlp(kind="swiglu", intermediate_size=18432),  # config.json intermediate_size
    moe=Moe(
        routed_experts=256,  # config.json n_routed_experts
        experts_per_token=8,  # config.json num_experts_per_tok
        shared_experts=1,  # config.json n_shared_experts
        expert_intermediate_size=2048,  # config.json moe_intermediate_size
        first_moe_layer=3,  # config.json first_k_dense_replace
        router_bias=True,  # report §2.1.2: bias term of auxiliary-loss-free balancing
    ),
    norm="rmsnorm",  # config.json rms_norm_eps; report §2.1
    position="rope",  # decoupled RoPE on qk_rope_head_dim, report §2.1.1
    causal=True,
    tie_embeddings=False,  # config.json tie_word_embeddings
    precision=PrecisionRecipe(
        gemm_dtype="e4m3",  # report §3.3.1: Fprop, Dgrad, Wgrad GEMMs in FP8 (E4M3)
        attention_dtype="bf16",  # report §3.3.1: attention kept in BF16
        activation_dtype="bf16",  # report §3.3.1: norms, embeddings, outputs in BF16/FP32
        kv_cache_dtype="bf16",  # FlashMLA serves a BF16 latent cache
        dispatch_dtype="e4m3",  # report §3.3.3: activations before dispatch quantized to FP8
        combine_dtype="bf16",  # report §3.3.3: combine kept in BF16
        fp8_block_elems=128,  # report §3.3.2: 1x128 activation tiles, 128x128 weight blocks
    ),
    source="huggingface.co/deepseek-ai/DeepSeek-V3 config.json; arXiv:2412.19437",
)
