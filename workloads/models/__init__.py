"""Model configs by name: DeepSeek-V3, LLaMA-3 8B/70B, GPT-3 175B, BERT-base.

`MODELS` maps a name to its frozen `ModelConfig`; `get_model(name)` looks one up and
raises `isa.errors.InputError` listing the known names. Each family module cites the
paper or config.json behind every value.

Left out: models beyond these five (add a family module and a registry entry).

Units: sizes are element counts; see `config.py`.
"""

from __future__ import annotations

from types import MappingProxyType

from isa.errors import InputError
from workloads.models.bert import BERT_BASE
from workloads.models.config import (
    GqaAttention,
    MlaAttention,
    Mlp,
    ModelConfig,
    Moe,
    PrecisionRecipe,
)
from workloads.models.deepseek import DEEPSEEK_V3
from workloads.models.gpt import GPT3_175B
from workloads.models.llama import LLAMA3_8B, LLAMA3_70B

MODELS = MappingProxyType({m.name: m for m in (DEEPSEEK_V3, LLAMA3_8B, LLAMA3_70B,
                                                GPT3_175B, BERT_BASE)})


def get_model(model: str | ModelConfig) -> ModelConfig:
    """The config called `model` (a ModelConfig passes through); InputError otherwise."""
    if isinstance(model, ModelConfig):
        return model
    if isinstance(model, str) and model in MODELS:
        return MODELS[model]
    raise InputError(f"unknown model {model!r} (expected one of {', '.join(MODELS)})")


__all__ = ["MODELS", "BERT_BASE", "DEEPSEEK_V3", "GPT3_175B", "LLAMA3_8B", "LLAMA3_70B",
           "GqaAttention", "MlaAttention", "Mlp", "ModelConfig", "Moe", "PrecisionRecipe",
           "get_model"]
