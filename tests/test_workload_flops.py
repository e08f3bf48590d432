"""Closed-form flops and bytes of layer graphs: GEMMs vs parameters, attention, train."""

import pytest

from workloads import MODELS, layer
from workloads.layers import ops

GEMMS = ("gemm", "grouped_gemm")
DSV3 = MODELS["deepseek-v3"]


def _gemm_flops(g, role="forward"):
    return sum(n.flops for n in g if n.op in GEMMS and n.role == role)


def _weight_params(cfg, layer_index, *, active):
    """Weights a token multiplies in one layer (GEMM operands only)."""
    h = cfg.hidden_size
    out = cfg.attention.weight_params(h)
    if cfg.is_moe_layer(layer_index):
        experts = cfg.moe.experts_per_token if active else cfg.moe.routed_experts
        return out + (experts + cfg.moe.shared_experts) * cfg.moe.expert_params(h)
    return out + cfg.mlp.weight_params(h)


@pytest.mark.parametrize("model, index", [("deepseek-v3", 3), ("deepseek-v3", 0),
                                          ("llama3-8b", 0), ("llama3-70b", 0),
                                          ("gpt3-175b", 0), ("bert-base", 0)])
def test_forward_gemm_flops_per_token_are_twice_the_active_weights(model, index):
    """Forward GEMM flops / token = 2 x (attention + MLP or top-k+shared expert) weights."""
    cfg = MODELS[model]
    g = layer(model, seqlen=512, batch=2, layer_index=index)
    assert _gemm_flops(g) == 2 * 1024 * _weight_params(cfg, index, active=True)
    active = cfg.active_params_per_layer(index)
    assert _gemm_flops(g) / 1024 == pytest.approx(2 * active, rel=0.005)


@pytest.mark.parametrize("model", list(MODELS))
def test_forward_gemm_weights_add_up_to_the_layer_parameters(model):
    """The k x n weight operands of a layer's GEMMs are its weight parameters."""
    cfg = MODELS[model]
    index = 3 if cfg.moe else 0
    g = layer(model, seqlen=256, batch=4, layer_index=index)
    weights = sum(n.args["groups"] * n.args["n"] * n.args["k"] for n in g
                  if n.op in GEMMS)
    assert weights == _weight_params(cfg, index, active=False)


def test_causal_attention_flops_are_half_of_4_b_h_s_s_d():
    """LLaMA-3 prefill attention: 4 B H S^2 D / 2 under the causal mask."""
    b, s = 3, 2048
    att = layer("llama3-8b", batch=b, seqlen=s).node("attention")
    assert att.flops == 4 * b * 32 * s * s * 128 // 2


def test_bidirectional_attention_flops_are_4_b_h_s_s_d():
    """BERT encoder attention: 4 B H S^2 D with no mask."""
    att = layer("bert-base", batch=8, seqlen=384).node("attention")
    assert att.flops == 4 * 8 * 12 * 384 * 384 * 64


def test_decode_attention_flops_are_4_b_h_kv_d():
    """GQA decode: one query per sequence against kv_len keys, 4 B H kv D."""
    att = layer("llama3-70b", phase="decode", batch=16, kv_len=3000).node("attention")
    assert att.flops == 4 * 16 * 64 * 3000 * 128
    assert (att.args["seqlen_q"], att.args["seqlen_k"], att.args["kv_heads"]) == (1, 3000, 8)


def test_mla_prefill_attention_uses_qk_192_and_v_128():
    """MLA prefill: 2 B H (S^2/2) (192 + 128) flops."""
    att = layer("deepseek-v3", tokens=4096).node("attention")
    assert att.flops == 2 * 128 * 4096 * 4096 // 2 * (192 + 128)


def test_mla_decode_flops_cover_latent_scores_and_values():
    """Absorbed MLA decode: 2 B H kv ((512 + 64) + 512) flops over the latent cache."""
    mla = layer("deepseek-v3", phase="decode", batch=64, kv_len=4096).node("mla_decode")
    assert mla.flops == 2 * 64 * 128 * 4096 * (576 + 512)
    assert mla.bytes_min >= 64 * 4096 * 576 * 2  # the bf16 latent cache is read once


@pytest.mark.parametrize("model", list(MODELS))
def test_train_gemm_flops_are_three_times_forward(model):
    """dgrad and wgrad GEMMs each repeat the forward GEMM flops."""
    g = layer(model, phase="train", seqlen=512, batch=2, ep=8 if model == "deepseek-v3" else 1)
    fwd = _gemm_flops(g)
    assert _gemm_flops(g, "dgrad") == _gemm_flops(g, "wgrad") == fwd
    total = sum(n.flops for n in g if n.op in GEMMS)
    assert total == 3 * fwd


def test_attention_backward_is_2_5_times_forward():
    """The attention backward node costs 2.5x the forward attention flops."""
    g = layer("llama3-8b", phase="train", seqlen=4096)
    assert g.node("attention.bwd").flops == 2.5 * g.node("attention").flops


def test_bf16_gemm_bytes_read_inputs_and_write_output_once():
    """bytes_min of a bf16 GEMM is 2 (m k + k n + m n)."""
    t = 4096
    o = layer("llama3-8b", seqlen=t).node("o_proj")
    assert o.bytes_min == 2 * (t * 4096 + 4096 * 4096 + t * 4096)


def test_fp8_gemm_bytes_include_block_scales():
    """FP8 GEMM: 1-byte operands, bf16 output, FP32 scales per 1x128 strip / 128x128 tile."""
    t = 4096
    q_a = layer("deepseek-v3", tokens=t).node("q_a_proj")
    scales = 4 * (t * 7168 // 128 + (1536 // 128) * (7168 // 128))
    assert q_a.bytes_min == t * 7168 + 7168 * 1536 + 2 * t * 1536 + scales


def test_dispatch_link_bytes_are_the_remote_share_of_token_rows():
    """Dispatch sends tokens x 8 FP8 rows (+ scales), (ep-1)/ep of them off-rank."""
    ep, t = 64, 4096
    d = layer("deepseek-v3", tokens=t, ep=ep).node("dispatch")
    row = 7168 + 4 * 7168 // 128
    assert d.args["link_bytes"] == t * 8 * row * (ep - 1) // ep
    c = layer("deepseek-v3", tokens=t, ep=ep).node("combine")
    assert c.args["link_bytes"] == t * 8 * 7168 * 2 * (ep - 1) // ep


def test_tensor_parallelism_divides_gemm_flops():
    """With tp ranks each rank does 1/tp of the weight GEMM flops (kv heads divide)."""
    full, split = layer("llama3-70b", seqlen=1024), layer("llama3-70b", seqlen=1024, tp=8)
    assert _gemm_flops(split) * 8 == _gemm_flops(full)


def test_expert_parallelism_keeps_per_rank_expert_flops():
    """Balanced EP: each rank's experts do tokens x 8 rows of expert GEMMs for any ep."""
    per_rank = {ep: sum(n.flops for n in layer("deepseek-v3", tokens=2048, ep=ep)
                        .select(op="grouped_gemm")) for ep in (1, 8, 64)}
    assert set(per_rank.values()) == {2 * 2048 * 8 * DSV3.moe.expert_params(7168)}


def test_small_decode_batches_read_only_the_active_experts():
    """Decode with 4 tokens activates 32 of 256 experts; only their weights are read."""
    up = layer("deepseek-v3", phase="decode", batch=4).node("experts.gate_up_proj")
    assert (up.args["groups"], up.args["m"]) == (32, 1)
    assert up.bytes_min < 33 * 2 * 2048 * 7168 * ops.nbytes("e4m3") * 1.1


def test_deepseek_moe_prefill_flops_are_dominated_by_gemms_and_attention():
    """GEMMs, attention and the router make up > 99.5% of a MoE layer's prefill flops."""
    g = layer("deepseek-v3", tokens=4096)
    main = sum(n.flops for n in g if n.op in (*GEMMS, "attention", "moe_gating"))
    closed = (2 * 4096 * _weight_params(DSV3, 3, active=True)
              + 2 * 128 * 4096 * 4096 // 2 * 320 + 2 * 4096 * 7168 * 256 + 5 * 4096 * 256)
    assert main == closed
    assert main / g.flops > 0.995
