"""GPT-3 175B: dense decoder, multi-head attention, GELU MLP (4x hidden), pre-LayerNorm,
learned positions, tied input/output embeddings, biases everywhere.

Sources: "Language Models are Few-Shot Learners", arXiv:2005.14165, Table 2.1
(n_layers, d_model, n_heads, d_head, context 2048) and §2.1 (GPT-2 architecture);
GPT-2 BPE vocabulary of 50257 tokens (Radford et al. 2019).

Left out: the alternating dense/locally-banded sparse attention of the paper (all
layers are modeled dense, as in reproductions such as OPT-175B).

Units: sizes are element counts.
"""

from __future__ import annotations

from workloads.models.config import GqaAttention, Mlp, ModelConfig, PrecisionRecipe

GPT3_175B = ModelConfig(
    name="gpt3-175b",
    family="gpt",
    hidden_size=12288,  # Table 2.1 d_model
    num_layers=96,  # Table 2.1 n_layers
    vocab_size=50257,  # GPT-2 BPE vocabulary, reused by GPT-3 (§2.1)
    max_positions=2048,  # Table 2.1 / §2.1: context window n_ctx = 2048
    attention=GqaAttention(
        heads=96,  # Table 2.1 n_heads
        kv_heads=96,  # multi-head attention
        head_dim=128,  # Table 2.1 d_head
        bias=True,  # GPT-2 architecture: Conv1D layers with bias
    ),
    mlp=Mlp(kind="gelu", intermediate_size=4 * 12288, bias=True),  # §2.1: d_ff = 4 d_model
    norm="layernorm",  # GPT-2 architecture: pre-LayerNorm
    position="learned",  # GPT-2 architecture: learned position embeddings
    causal=True,
    tie_embeddings=True,  # GPT-2 architecture: output head shares the token embedding
    norm_bias=True,  # LayerNorm gain and bias
    precision=PrecisionRecipe(  # §2.3: trained in mixed precision (FP16 on V100)
        gemm_dtype="f16", attention_dtype="f16", activation_dtype="f16",
        kv_cache_dtype="f16", dispatch_dtype="f16", combine_dtype="f16"),
    source="arXiv:2005.14165 Table 2.1",
)
