"""BERT-base: bidirectional encoder, multi-head attention, GELU MLP, post-LayerNorm,
learned positions and segment embeddings, pooler.

Sources: config.json of huggingface.co/google-bert/bert-base-uncased; "BERT",
arXiv:1810.04805, §3 (L=12, H=768, A=12, 110M parameters).

Left out: the pre-training heads (masked-LM transform, next-sentence classifier).
Prefill means encoding a sequence; BERT has no decode phase.

Units: sizes are element counts.
"""

from __future__ import annotations

from workloads.models.config import GqaAttention, Mlp, ModelConfig, PrecisionRecipe

BERT_BASE = ModelConfig(
    name="bert-base",
    family="bert",
    hidden_size=768,  # config.json hidden_size
    num_layers=12,  # config.json num_hidden_layers
    vocab_size=30522,  # config.json vocab_size
    max_positions=512,  # config.json max_position_embeddings
    attention=GqaAttention(
        heads=12,  # config.json num_attention_heads
        kv_heads=12,  # multi-head attention
        head_dim=64,  # hidden_size / num_attention_heads
        bias=True,  # query/key/value/output dense layers have biases
    ),
    mlp=Mlp(kind="gelu", intermediate_size=3072, bias=True),  # config.json intermediate_size
    norm="layernorm",  # config.json layer_norm_eps; post-LN (arXiv:1706.03762 layout)
    position="learned",  # config.json position_embedding_type "absolute"
    causal=False,  # bidirectional encoder
    tie_embeddings=True,  # no separate output head in the encoder
    norm_bias=True,  # LayerNorm gain and bias
    post_norm=True,  # arXiv:1810.04805 §3: the original Transformer encoder (post-LN)
    type_vocab_size=2,  # config.json type_vocab_size
    pooler=True,  # BertModel pooler: dense hidden x hidden + tanh
    precision=PrecisionRecipe(  # FP16 mixed precision as served on GPUs
        gemm_dtype="f16", attention_dtype="f16", activation_dtype="f16",
        kv_cache_dtype="f16", dispatch_dtype="f16", combine_dtype="f16"),
    source="huggingface.co/google-bert/bert-base-uncased config.json; arXiv:1810.04805",
)
