"""Norms, residual adds and rotary embeddings of a layer.

RMSNorm or LayerNorm over [tokens, hidden] with its weight (and bias), residual adds of
two or more [tokens, hidden] tensors, RoPE applied to the rotated part of q and k.

Left out: fusing a norm with the following FP8 quantization (kept as two nodes).

Units: sizes in elements.
"""

from __future__ import annotations

from workloads.layers.builder import GraphBuilder
from workloads.models.config import ModelConfig


def add_norm(b: GraphBuilder, model: ModelConfig, name: str, deps: tuple[str, ...],
             *, cols: int | None = None) -> str:
    """The model's norm over [tokens, cols] (cols defaults to hidden)."""
    cols = model.hidden_size if cols is None else cols
    params = cols * (2 if model.norm_bias else 1)
    return b.elementwise(name, model.norm, deps, rows=b.shape.tokens, cols=cols,
                         params=params)


def add_rmsnorm(b: GraphBuilder, name: str, deps: tuple[str, ...], *, cols: int) -> str:
    """RMSNorm over [tokens, cols] (the MLA latent norms)."""
    return b.elementwise(name, "rmsnorm", deps, rows=b.shape.tokens, cols=cols, params=cols)


def add_residual(b: GraphBuilder, name: str, deps: tuple[str, ...], *, cols: int,
                 inputs: int = 2) -> str:
    """Sum of `inputs` tensors [tokens, cols]."""
    return b.elementwise(name, "residual_add", deps, rows=b.shape.tokens, cols=cols,
                         inputs=inputs)


def add_rope(b: GraphBuilder, name: str, deps: tuple[str, ...], *, cols: int) -> str:
    """Rotary embedding over `cols` rotated elements per token (q and k together)."""
    return b.elementwise(name, "rope", deps, rows=b.shape.tokens, cols=cols)
