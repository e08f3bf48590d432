"""MoE router op ("moe-gating"): the gate GEMM and the top-k selection, as DeepSeek-V3 runs it.

Forward: logits[tokens, experts] = x[tokens, hidden] . W_g[experts, hidden]^T in bf16
through the GEMM op (`workloads.ops.gemm`, the warp-specialized TMA + wgmma template),
then `moe_topk_sigmoid` (catalog CUDA kernel, a warp per token): sigmoid, per-expert bias
for the choice, top-k, weights normalized and scaled by `ROUTE_SCALE`.
Backward: the two gradient GEMMs of the gate, dX[tokens, hidden] = dS . W_g (K = experts)
and dW_g[experts, hidden] = dS^T . X (K = tokens), both through the GEMM template (which
reads K-major operands: the transposes a real kernel folds into its TMA loads are free
here). The sigmoid/top-k backward (a few element-wise FLOPs per score) is left out.

FLOPs: 2 tokens hidden experts per GEMM plus `GATING_FLOPS_PER_SCORE` per score; bytes:
inputs once and outputs once. When the GEMM plan carries op-level samples, the gating plan
carries them too, with the top-k launch at weight 1.
Left out: DeepSeek-V3's group-limited routing (top-4 of 8 expert groups before the top-8);
it changes the selection, not the bytes or the order of the FLOPs.
Units: elements, bytes, FLOP.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

import isa
from isa.errors import InputError
from workloads.kernels import cases_layer_ops as geo
from workloads.kernels.case import load_ptx
from workloads.layers.ops import GATING_FLOPS_PER_SCORE
from workloads.ops.registry import Flag, Launch, OpPlan, build_op, positive, register

BF16 = ml_dtypes.bfloat16
BF16_BYTES = 2
ROUTE_SCALE = np.float32(2.5)   # DeepSeek-V3 routed_scaling_factor (config.json of the release)
FUNCTIONAL_ELEMENTS = 1 << 20

GATING_FLAGS = (
    Flag("--tokens", "tokens routed", required=True),
    Flag("--hidden", "hidden size", required=True),
    Flag("--experts", f"routed experts (at most {geo.MAX_EXPERTS})", required=True),
    Flag("--topk", "experts chosen per token", required=True),
    Flag("--backward", "the gate's gradient GEMMs", kind="switch"),
)


def _check(tokens, hidden, experts, topk) -> None:
    for flag, v in (("--tokens", tokens), ("--hidden", hidden), ("--experts", experts),
                    ("--topk", topk)):
        positive(flag, v)
    if experts > geo.MAX_EXPERTS:
        raise InputError(f"--experts {experts}: accepted up to {geo.MAX_EXPERTS} (8 per lane "
                         "of the top-k warp)")
    if topk > min(32, experts):
        raise InputError(f"--topk {topk}: accepted 1..{min(32, experts)} (one lane per "
                         "chosen expert, at most --experts)")


def _topk_launch(tokens: int, experts: int, topk: int, seed: int,
                 shape_only: bool, target: str) -> Launch:
    rng = np.random.default_rng(seed)
    if shape_only:
        args = [isa.ShapeOnly((tokens, experts), BF16), isa.ShapeOnly((experts,), np.float32),
                isa.ShapeOnly((tokens, topk), np.int32),
                isa.ShapeOnly((tokens, topk), np.float32)]
    else:
        args = [rng.standard_normal((tokens, experts)).astype(BF16),
                (rng.standard_normal(experts) * 0.01).astype(np.float32),
                np.zeros((tokens, topk), np.int32), np.zeros((tokens, topk), np.float32)]
    grid, block = geo.rows_launch(tokens, geo.TOKENS_PER_CTA)
    return Launch("moe_topk", load_ptx("moe_topk.cu", target), "moe_topk_sigmoid", grid, block,
                  args + [tokens, experts, topk, ROUTE_SCALE], 0, timing_only=shape_only)


def _combine(kind, sizes, parts, extra: tuple[Launch, ...], flops, nbytes) -> OpPlan:
    launches = tuple(lau for p in parts for lau in p.launches) + extra
    samples: tuple = ()
    byte_weights: tuple[float, ...] = ()
    if any(p.samples for p in parts):
        samples = tuple(s for p in parts
                        for s in (p.samples or tuple((1.0, lau) for lau in p.launches)))
        samples += tuple((1.0, lau) for lau in extra)
    if any(p.sample_byte_weights for p in parts):
        byte_weights = tuple(w for p in parts for w in (
            p.sample_byte_weights or tuple(s[0] for s in p.samples)
            or (1.0,) * len(p.launches))) + (1.0,) * len(extra)
    note = "; ".join(p.sample_note for p in parts if p.sample_note)
    return OpPlan(kind, sizes, launches, float(flops), float(nbytes), "tensor_bf16_tflops",
                  samples, note, byte_weights)


@register("moe-gating", GATING_FLAGS, "MoE router: gate GEMM (bf16) + sigmoid top-k kernel")
def moe_gating_op(config, tokens: int, hidden: int, experts: int, topk: int,
                  backward: bool = False, seed: int = 0,
                  shape_only: bool | None = None) -> OpPlan:
    """Router of `tokens` over `experts` (forward: GEMM + top-k; backward: two GEMMs)."""
    _check(tokens, hidden, experts, topk)
    sizes = {"tokens": tokens, "hidden": hidden, "experts": experts, "topk": topk,
             "backward": backward}
    gemm_flops = 2.0 * tokens * hidden * experts
    if backward:
        dx = build_op("gemm", config, m=tokens, n=hidden, k=experts, dtype="bf16", seed=seed)
        dw = build_op("gemm", config, m=experts, n=hidden, k=tokens, dtype="bf16", seed=seed)
        nbytes = dx.bytes + dw.bytes
        return _combine("moe-gating", sizes, (dx, dw), (), 2 * gemm_flops, nbytes)
    if shape_only is None:
        shape_only = tokens * experts > FUNCTIONAL_ELEMENTS
    logits = build_op("gemm", config, m=tokens, n=experts, k=hidden, dtype="bf16", seed=seed)
    topk_launch = _topk_launch(tokens, experts, topk, seed, bool(shape_only),
                               config.chip.isa_target)
    nbytes = logits.bytes + BF16_BYTES * tokens * experts + 4 * experts + 8 * tokens * topk
    flops = gemm_flops + GATING_FLOPS_PER_SCORE * tokens * experts
    return _combine("moe-gating", sizes, (logits,), (topk_launch,), flops, nbytes)
