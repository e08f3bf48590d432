"""Model configs: registry, published parameter totals, sources cited per value."""

import dataclasses
import inspect
import re

import pytest

from isa.errors import InputError
from workloads import MODELS
from workloads.models import bert, deepseek, get_model, gpt, llama

DSV3 = MODELS["deepseek-v3"]


def test_registry_holds_the_five_models_by_name():
    """MODELS maps each documented name to the config of that name."""
    assert set(MODELS) == {"deepseek-v3", "llama3-8b", "llama3-70b", "gpt3-175b", "bert-base"}
    assert all(cfg.name == name for name, cfg in MODELS.items())


def test_unknown_model_is_input_error_listing_known_names():
    """An unknown name raises InputError that lists every known model."""
    with pytest.raises(InputError) as err:
        get_model("llama2-7b")
    assert "llama2-7b" in str(err.value)
    assert all(name in str(err.value) for name in MODELS)


def test_configs_are_frozen():
    """Model configs cannot be changed in place."""
    with pytest.raises(dataclasses.FrozenInstanceError):
        DSV3.hidden_size = 1


@pytest.mark.parametrize("module", [deepseek, llama, gpt, bert])
def test_every_numeric_value_cites_a_source(module):
    """Each numeric field assignment in a family module carries a source comment."""
    lines = inspect.getsource(module).splitlines()
    numeric = [ln for ln in lines if re.match(r"\s+\w+=[\d(]", ln)]
    assert numeric
    assert all("#" in ln for ln in numeric), [ln for ln in numeric if "#" not in ln]


@pytest.mark.parametrize("name, published, rel", [
    ("llama3-8b", 8.03e9, 0.005),  # HF model card: 8.03B
    ("llama3-70b", 70.6e9, 0.005),  # HF model card: 70.6B
    ("gpt3-175b", 174.6e9, 0.005),  # 175B in arXiv:2005.14165 Table 2.1 (rounded)
    ("deepseek-v3", 671e9, 0.005),  # arXiv:2412.19437 abstract: 671B total
])
def test_total_parameters_match_published_totals(name, published, rel):
    """Layers plus embeddings add up to the published parameter count."""
    assert MODELS[name].total_params() == pytest.approx(published, rel=rel)


def test_bert_base_parameter_count_is_exact():
    """BERT-base (with pooler) has 109,482,240 parameters, as BertModel counts them."""
    assert MODELS["bert-base"].total_params() == 109_482_240


def test_deepseek_v3_activates_37b_parameters_per_token():
    """Top-8 routed plus the shared expert give about 37B activated parameters."""
    assert DSV3.active_params() == pytest.approx(37e9, rel=0.02)


def test_deepseek_v3_moe_layer_has_257_experts_of_44m_parameters():
    """A MoE layer holds 256 routed + 1 shared experts of 3 x 7168 x 2048 weights."""
    expert = 3 * 7168 * 2048
    assert DSV3.moe.expert_params(DSV3.hidden_size) == expert
    router = 256 * 7168 + 256
    mla = DSV3.attention.weight_params(7168) + 1536 + 512
    assert DSV3.params_per_layer(3) == mla + 257 * expert + router + 2 * 7168


def test_deepseek_v3_first_three_layers_are_dense():
    """Layers 0-2 use the 18432-wide dense MLP; layers 3-60 are MoE."""
    assert [DSV3.is_moe_layer(i) for i in range(5)] == [False, False, False, True, True]
    dense_ffn = 3 * 7168 * 18432
    assert DSV3.params_per_layer(0) - DSV3.attention.weight_params(7168) - 2048 \
        == dense_ffn + 2 * 7168


def test_llama3_8b_layer_is_218m_parameters():
    """GQA (32 q heads, 8 kv heads of 128) plus SwiGLU 14336 and two RMSNorms."""
    attn = 4096 * 4096 * 2 + 2 * 4096 * 1024
    assert MODELS["llama3-8b"].params_per_layer(0) == attn + 3 * 4096 * 14336 + 2 * 4096


def test_gpt3_layer_is_12_h_squared_plus_13_h():
    """A GPT-3 layer has 12 h^2 weights and 13 h biases/norm parameters."""
    h = 12288
    assert MODELS["gpt3-175b"].params_per_layer(0) == 12 * h * h + 13 * h
