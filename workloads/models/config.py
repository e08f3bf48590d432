"""Model configuration dataclasses and their closed-form parameter counts.

A `ModelConfig` names one transformer: sizes, attention kind (`GqaAttention` for
MHA/GQA, `MlaAttention` for DeepSeek's multi-head latent attention), dense MLP, an
optional `Moe` block, norm and position kinds, and a `PrecisionRecipe` (which dtype
each kind of kernel uses). The family modules fill them in with a source per value.

Left out: dropout, initialisation, tokenizer details, DeepSeek-V3's multi-token
prediction module (not part of the 61 main layers).

Units: every size is a count of elements (not bytes); parameter counts are counts
of scalars. Dtypes are PTX spellings (`e4m3`, `bf16`, `f16`, `f32`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GqaAttention:
    """Multi-head attention with `kv_heads` key/value heads (MHA when equal to heads)."""

    heads: int
    kv_heads: int
    head_dim: int
    bias: bool = False  # q/k/v/o biases (GPT-3, BERT)

    def weight_params(self, hidden: int) -> int:
        q_and_o = 2 * hidden * self.heads * self.head_dim
        return q_and_o + 2 * hidden * self.kv_heads * self.head_dim

    def other_params(self, hidden: int) -> int:
        """Biases (no norms live inside attention)."""
        if not self.bias:
            return 0
        return (self.heads + 2 * self.kv_heads) * self.head_dim + hidden


@dataclass(frozen=True, slots=True)
class MlaAttention:
    """Multi-head latent attention: low-rank query and compressed joint key/value."""

    heads: int
    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    def weight_params(self, hidden: int) -> int:
        q_a = hidden * self.q_lora_rank
        q_b = self.q_lora_rank * self.heads * self.qk_head_dim
        kv_a = hidden * (self.kv_lora_rank + self.qk_rope_head_dim)
        kv_b = self.kv_lora_rank * self.heads * (self.qk_nope_head_dim + self.v_head_dim)
        o = self.heads * self.v_head_dim * hidden
        return q_a + q_b + kv_a + kv_b + o

    def other_params(self, hidden: int) -> int:
        """The RMSNorm weights on the two compressed latents."""
        return self.q_lora_rank + self.kv_lora_rank


@dataclass(frozen=True, slots=True)
class Mlp:
    """Dense feed-forward block: `swiglu` (gate, up, down) or `gelu` (fc1, fc2)."""

    kind: str
    intermediate_size: int
    bias: bool = False

    def weight_params(self, hidden: int) -> int:
        mats = 3 if self.kind == "swiglu" else 2
        return mats * hidden * self.intermediate_size

    def other_params(self, hidden: int) -> int:
        return self.intermediate_size + hidden if self.bias else 0


@dataclass(frozen=True, slots=True)
class Moe:
    """Mixture of SwiGLU experts with a router; layers below `first_moe_layer` are dense."""

    routed_experts: int
    experts_per_token: int
    shared_experts: int
    expert_intermediate_size: int
    first_moe_layer: int
    router_bias: bool = True  # the score-correction bias of auxiliary-loss-free balancing

    def expert_params(self, hidden: int) -> int:
        """Weights of one expert (gate, up, down)."""
        return 3 * hidden * self.expert_intermediate_size

    def router_params(self, hidden: int) -> int:
        return self.routed_experts * hidden + (self.routed_experts if self.router_bias else 0)


@dataclass(frozen=True, slots=True)
class PrecisionRecipe:
    """Dtype per kernel kind; FP8 GEMMs scale activations per 1 x block and weights per
    block x block tile (`fp8_block_elems`)."""

    gemm_dtype: str
    attention_dtype: str
    activation_dtype: str  # norms, activations, residual adds, GEMM outputs
    kv_cache_dtype: str
    dispatch_dtype: str  # rows sent by the MoE dispatch all-to-all
    combine_dtype: str  # rows returned by the MoE combine all-to-all
    fp8_block_elems: int = 128


@dataclass(frozen=True, slots=True)
class ModelConfig:
    """One transformer model: sizes, blocks, norm/position kinds and precision recipe."""

    name: str
    family: str
    hidden_size: int
    num_layers: int
    vocab_size: int
    max_positions: int
    attention: GqaAttention | MlaAttention
    mlp: Mlp
    norm: str  # "rmsnorm" or "layernorm"
    position: str  # "rope" or "learned"
    causal: bool  # decoder (causal) or encoder (bidirectional)
    tie_embeddings: bool
    precision: PrecisionRecipe
    moe: Moe | None = None
    norm_bias: bool = False  # LayerNorm has a bias beside its weight
    post_norm: bool = False  # norm after each residual add (BERT) instead of before the block
    type_vocab_size: int = 0  # BERT segment embeddings
    pooler: bool = False  # BERT pooler dense layer
    source: str = ""

    def is_moe_layer(self, layer_index: int) -> bool:
        return self.moe is not None and layer_index >= self.moe.first_moe_layer

    def norm_params(self) -> int:
        return self.hidden_size * (2 if self.norm_bias else 1)

    def params_per_layer(self, layer_index: int) -> int:
        """All parameters of layer `layer_index` (attention, MLP or MoE, its two norms)."""
        h = self.hidden_size
        attn = self.attention.weight_params(h) + self.attention.other_params(h)
        return attn + self._ffn_params(layer_index, active=False) + 2 * self.norm_params()

    def active_params_per_layer(self, layer_index: int) -> int:
        """Parameters one token touches in layer `layer_index` (top-k routed + shared
        experts of a MoE layer; all of a dense one)."""
        h = self.hidden_size
        attn = self.attention.weight_params(h) + self.attention.other_params(h)
        return attn + self._ffn_params(layer_index, active=True) + 2 * self.norm_params()

    def _ffn_params(self, layer_index: int, *, active: bool) -> int:
        h = self.hidden_size
        if not self.is_moe_layer(layer_index):
            return self.mlp.weight_params(h) + self.mlp.other_params(h)
        moe = self.moe
        experts = moe.experts_per_token if active else moe.routed_experts
        return (experts + moe.shared_experts) * moe.expert_params(h) + moe.router_params(h)

    def embedding_params(self) -> int:
        """Token (and position, segment) embeddings, output head unless tied, final norm,
        and a pooler where the model has one."""
        h = self.hidden_size
        out = self.vocab_size * h * (1 if self.tie_embeddings else 2)
        if self.position == "learned":
            out += self.max_positions * h
        out += self.type_vocab_size * h
        out += self.norm_params()  # final norm (BERT: the embedding LayerNorm)
        if self.pooler:
            out += h * h + h
        return out

    def total_params(self) -> int:
        layers = sum(self.params_per_layer(i) for i in range(self.num_layers))
        return layers + self.embedding_params()

    def active_params(self) -> int:
        layers = sum(self.active_params_per_layer(i) for i in range(self.num_layers))
        return layers + self.embedding_params()
