"""`layer(...)`: the kernel graph of one transformer layer of a named model.

Phases:
* prefill: `tokens` = batch x seqlen new tokens, attention over the sequence (causal
  for decoders, bidirectional for encoders) plus `kv_len` cached tokens if given;
* decode: `batch` sequences each add one token and attend `kv_len` keys (the cache,
  this step's token included; default 4096 capped at the model's positions); every
  token-wise GEMM has m = batch; DeepSeek-V3 uses absorbed MLA;
* train: the prefill forward followed by its backward (`layers/backward.py`).

Tokens are per rank. With expert parallelism (`ep`) each rank runs attention on its own
tokens and holds routed_experts / ep experts, plus `redundant_experts` copies of hot
experts where the deployment hosts them (DeepSeek-V3 prefill: 8 + 1 per GPU, §3.4.1); the
MoE all-to-all routes tokens evenly (balanced, as DeepSeek's profiles assume) or by
`routing`, the tokens this rank (rank 0) sends to each of the `ep` ranks; with
`comm_holds_sms=False` it is an RDMA all-to-all that frees the SMs once its messages are
issued (DeepSeek's decode). Tensor parallelism (`tp`) splits heads and MLP width and adds
all-reduces. Several micro-batches of one rank: `workloads.deployments`. DeepSeek-V3
layers 0-2 are dense, 3-60 MoE; the default `layer_index` is the first MoE layer of a MoE
model, else 0.

Dtypes follow the model's recipe; `dtype` overrides the GEMM dtype only (attention,
norms and activations keep the recipe's). A non-FP8 GEMM dtype also turns the FP8
dispatch into the activation dtype.

Left out: embeddings and the output head, pipeline parallelism, speculative decoding.

Units: token counts; sizes in elements.
"""

from __future__ import annotations

from dataclasses import replace

from isa.errors import InputError
from workloads.graph import KernelGraph
from workloads.layers import ops
from workloads.layers.attention import add_gqa_attention
from workloads.layers.backward import add_backward
from workloads.layers.builder import GraphBuilder, LayerShape
from workloads.layers.mla import add_mla
from workloads.layers.mlp import add_mlp
from workloads.layers.moe import add_moe
from workloads.layers.norms import add_norm, add_residual
from workloads.models import ModelConfig, get_model
from workloads.models.config import MlaAttention

PHASES = ("prefill", "decode", "train")
DEFAULT_TOKENS = 4096
DEFAULT_KV_LEN = 4096


def layer(model: str | ModelConfig, phase: str = "prefill", tokens: int | None = None,
          batch: int = 1, seqlen: int | None = None, layer_index: int | None = None,
          ep: int = 1, tp: int = 1, dtype: str | None = None,
          kv_len: int | None = None, redundant_experts: int = 0,
          routing: tuple[int, ...] | None = None,
          comm_holds_sms: bool = True) -> KernelGraph:
    """Kernel graph of one layer of `model` in `phase` (see the module docstring).

    `tokens` defaults to batch x seqlen, or to 4096 per sequence capped at the model's
    positions; in decode it may only equal `batch`. `redundant_experts` (per rank, ep > 1),
    `routing` (ep token counts) and `comm_holds_sms` shape the MoE block.
    """
    cfg = get_model(model)
    index = _layer_index(cfg, layer_index)
    shape = _shape(cfg, phase, tokens, batch, seqlen, ep, tp, dtype, kv_len)
    shape = _with_moe_options(cfg, shape, redundant_experts, routing, comm_holds_sms)
    b = GraphBuilder(shape)
    _forward(b, cfg, index)
    if phase == "train":
        add_backward(b)
    meta = {"model": cfg.name, "phase": phase, "tokens": shape.tokens, "batch": batch,
            "seqlen_q": shape.seqlen_q, "seqlen_k": shape.seqlen_k, "layer_index": index,
            "layer_kind": "moe" if cfg.is_moe_layer(index) else "dense", "ep": ep, "tp": tp,
            "gemm_dtype": shape.gemm_dtype}
    if redundant_experts:
        meta["redundant_experts"] = redundant_experts
    if routing is not None:
        meta["routing"] = list(shape.routing)
    if not comm_holds_sms:
        meta["comm_holds_sms"] = False
    return b.build(f"{cfg.name}.{phase}.layer{index}", meta)


def _forward(b: GraphBuilder, cfg: ModelConfig, index: int) -> None:
    h = cfg.hidden_size
    if cfg.post_norm:
        attn = _attention(b, cfg, None)
        r1 = add_residual(b, "attn_residual", (attn,), cols=h)
        x = add_norm(b, cfg, "attn_norm", (r1,))
        ffn = _ffn(b, cfg, index, x)
        r2 = add_residual(b, "ffn_residual", (ffn, x), cols=h)
        add_norm(b, cfg, "ffn_norm", (r2,))
        return
    x = add_norm(b, cfg, "attn_norm", ())
    attn = _attention(b, cfg, x)
    r1 = add_residual(b, "attn_residual", (attn,), cols=h)
    x = add_norm(b, cfg, "ffn_norm", (r1,))
    ffn = _ffn(b, cfg, index, x)
    add_residual(b, "ffn_residual", (ffn, r1), cols=h)


def _attention(b: GraphBuilder, cfg: ModelConfig, x: str | None) -> str:
    if isinstance(cfg.attention, MlaAttention):
        return add_mla(b, cfg, x)
    return add_gqa_attention(b, cfg, x)


def _ffn(b: GraphBuilder, cfg: ModelConfig, index: int, x: str) -> str:
    if cfg.is_moe_layer(index):
        return add_moe(b, cfg, x)
    return add_mlp(b, cfg, x, kind=cfg.mlp.kind, intermediate=cfg.mlp.intermediate_size)


def _layer_index(cfg: ModelConfig, layer_index: int | None) -> int:
    if layer_index is None:
        return cfg.moe.first_moe_layer if cfg.moe is not None else 0
    if not isinstance(layer_index, int) or not 0 <= layer_index < cfg.num_layers:
        raise InputError(f"layer_index={layer_index!r}: {cfg.name} has layers 0.."
                         f"{cfg.num_layers - 1}")
    return layer_index


def _positive(name: str, value, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise InputError(f"{name}={value!r}: expected a positive integer")


def _shape(cfg: ModelConfig, phase: str, tokens, batch, seqlen, ep, tp, dtype,
           kv_len) -> LayerShape:
    if phase not in PHASES:
        raise InputError(f"phase={phase!r}: expected one of {', '.join(PHASES)}")
    for name, value in (("tokens", tokens), ("seqlen", seqlen)):
        _positive(name, value, allow_none=True)
    for name, value in (("batch", batch), ("ep", ep), ("tp", tp)):
        _positive(name, value)
    if kv_len is not None and (isinstance(kv_len, bool) or not isinstance(kv_len, int)
                               or kv_len < 0):
        raise InputError(f"kv_len={kv_len!r}: expected an integer >= 0")
    _check_parallel(cfg, ep, tp)
    if phase == "decode":
        if not cfg.causal:
            raise InputError(f"phase='decode': {cfg.name} is an encoder; use 'prefill' "
                             "or 'train'")
        if tokens is not None and tokens != batch:
            raise InputError(f"tokens={tokens}: decode adds one token per sequence, so "
                             f"tokens must equal batch={batch} (or be left out)")
        tokens, seqlen_q = batch, 1
        seqlen_k = min(DEFAULT_KV_LEN, cfg.max_positions) if kv_len is None else kv_len
        if seqlen_k < 1:
            raise InputError("kv_len=0: decode attends at least its own token; expected >= 1")
    else:
        tokens, seqlen_q = _prefill_tokens(cfg, tokens, batch, seqlen)
        seqlen_k = seqlen_q + (kv_len or 0)
    if seqlen_k > cfg.max_positions:
        raise InputError(f"kv_len/seqlen: {seqlen_k} positions exceed {cfg.name}'s "
                         f"{cfg.max_positions}")
    return _recipe_shape(cfg, phase, tokens, batch, seqlen_q, seqlen_k, ep, tp, dtype)


def _with_moe_options(cfg: ModelConfig, shape: LayerShape, redundant, routing,
                      holds_sms) -> LayerShape:
    """The shape with the MoE deployment options, each checked against the model and ep."""
    if isinstance(redundant, bool) or not isinstance(redundant, int) or redundant < 0:
        raise InputError(f"redundant_experts={redundant!r}: expected an integer >= 0")
    if redundant and (cfg.moe is None or shape.ep == 1):
        raise InputError(f"redundant_experts={redundant}: copies of experts need ep > 1 "
                         "and an MoE model; expected 0")
    if not isinstance(holds_sms, bool):
        raise InputError(f"comm_holds_sms={holds_sms!r}: expected True or False")
    if routing is not None:
        routing = tuple(routing) if isinstance(routing, (list, tuple)) else routing
        if (not isinstance(routing, tuple) or len(routing) != shape.ep
                or any(isinstance(c, bool) or not isinstance(c, int)
                       or not 0 <= c <= shape.tokens for c in routing)):
            raise InputError(f"routing={routing!r}: expected {shape.ep} token counts (one "
                             f"per rank, this rank first), each 0 .. {shape.tokens}")
    return replace(shape, redundant_experts=redundant, routing=routing,
                   comm_holds_sms=holds_sms)


def _prefill_tokens(cfg: ModelConfig, tokens, batch, seqlen) -> tuple[int, int]:
    if seqlen is None:
        if tokens is None:
            seqlen = min(DEFAULT_TOKENS, cfg.max_positions)
            return batch * seqlen, seqlen
        if tokens % batch:
            raise InputError(f"tokens={tokens}: must be a multiple of batch={batch}")
        seqlen = tokens // batch
    if tokens is None:
        tokens = batch * seqlen
    if tokens != batch * seqlen:
        raise InputError(f"tokens={tokens}: must equal batch x seqlen = {batch * seqlen}")
    return tokens, seqlen


def _check_parallel(cfg: ModelConfig, ep: int, tp: int) -> None:
    if ep > 1 and cfg.moe is None:
        raise InputError(f"ep={ep}: {cfg.name} has no experts; expected ep=1")
    if cfg.moe is not None and cfg.moe.routed_experts % ep:
        raise InputError(f"ep={ep}: must divide the {cfg.moe.routed_experts} routed experts "
                         f"of {cfg.name}")
    heads = cfg.attention.heads
    widths = [cfg.mlp.intermediate_size]
    if cfg.moe is not None:
        widths.append(cfg.moe.expert_intermediate_size * cfg.moe.shared_experts)
    if heads % tp or any(w % tp for w in widths):
        raise InputError(f"tp={tp}: must divide {cfg.name}'s {heads} heads and MLP widths "
                         f"{widths}")
    kv = getattr(cfg.attention, "kv_heads", heads)
    if kv % tp and tp % kv:
        raise InputError(f"tp={tp}: must divide or be a multiple of {kv} key/value heads")


def _recipe_shape(cfg: ModelConfig, phase, tokens, batch, seqlen_q, seqlen_k, ep, tp,
                  dtype) -> LayerShape:
    rec = cfg.precision
    gemm = rec.gemm_dtype if dtype is None else ops.dtype_name(dtype, "dtype")
    fp8 = ops.nbytes(gemm) == 1
    return LayerShape(
        phase=phase, tokens=tokens, batch=batch, seqlen_q=seqlen_q, seqlen_k=seqlen_k,
        causal=cfg.causal and phase != "decode", ep=ep, tp=tp, gemm_dtype=gemm,
        attention_dtype=rec.attention_dtype, act_dtype=rec.activation_dtype,
        kv_cache_dtype=rec.kv_cache_dtype,
        dispatch_dtype=rec.dispatch_dtype if fp8 else rec.activation_dtype,
        combine_dtype=rec.combine_dtype, block=rec.fp8_block_elems)
