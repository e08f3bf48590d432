"""Decode attention through the XQA-style template (`workloads.kernels.templates.xqa`),
with XQA's own launch: chosen by `kernels.decode_attention = "xqa"` for one query token,
head dim 128 (Q/K and V), bf16/fp16, on an sm_90a chip, and only for GQA/MQA shapes
(kv_heads < heads). MHA shapes (kv_heads == heads) stay on the FlashAttention-3-style
template: TensorRT-LLM's runtime sends them to its masked-MHA (MMHA) decode kernel, which is
not modelled here. The XQA sources this template follows (`cpp/kernels/xqa/`) do not contain
that runtime dispatch, so the rule is not taken from them; the template itself runs MHA
(one q head per KV head, N padded to 8), as the kernel's sources allow.

Launch (TensorRT-LLM `launchHopperF8MHA`): grid (1, sub-sequences, kv heads x batch),
384 threads, sub-sequences by `templates.xqa.sub_sequences` (about 0.75 CTA per SM,
capped by the 64-token tiles); the KV cache is a pool of 64-token pages in sequence order
(a freshly filled cache) with its block table; every request has `seqlen_k` tokens.
Registers: `XQA_REGS` per thread, one CTA per SM. XQA's count is not in its sources; its
launch bounds (384, no minimum of CTAs) allow up to 168, and the sources keep a separate
`USE_H100_WARP_SPECIALIZED_2CTA_PER_SM` build that `setmaxnreg`s to 80 on average to fit
two CTAs per SM, so the default build uses more than 85 (two CTAs of 384 threads would
need at most 85). Any count from 86 to 168 gives the same occupancy.

Sampled fidelity (`attention_sampling`'s model, T = o + A a + B b over CTAs of n tiles):
without multi-block three reduced launches (batch enough for k waves of the CTA slots,
n tiles per CTA, the real last tile's fill); multi-block launches (few CTAs) run whole.
Left out: requests of different lengths, beam search, fp8 KV cache, PDL overlap with the
previous kernel.
Units: tokens, bytes, FLOP.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

import isa
from models.cta_dispatch import occupancy
from workloads.kernels.templates.xqa import HEAD, TILE, sub_sequences, xqa_kernel
from workloads.ops import attention_sampling as sampling
from workloads.ops.registry import HOST_BYTES_PER_CTA, Launch, OpPlan, check_op_size

XQA_REGS = 168          # launch bounds (384): 65536 / 384 rounded down to 8
NUMPY = {"bf16": ml_dtypes.bfloat16, "fp16": np.float16}
FUNCTIONAL_ELEMENTS = 1 << 20


def applies(config, heads: int, kv_heads: int, seqlen_q: int, headdim: int,
            headdim_v: int, v_from_k: bool, dtype: str) -> bool:
    """Whether `kernels.decode_attention` sends this attention to the XQA template: decode
    of a GQA/MQA shape (kv_heads < heads); MHA keeps the FlashAttention-3-style one."""
    return (config.kernels.decode_attention == "xqa" and seqlen_q == 1 and not v_from_k
            and kv_heads < heads and headdim == HEAD and headdim_v == HEAD
            and dtype in NUMPY)


def _launch(kernel, b, h, hkv, sk, sub, dtype, shape_only, rng, scale, tag) -> Launch:
    cfg = kernel.config
    dt = NUMPY[dtype]
    pps = math.ceil(sk / TILE)
    shapes = {"q": (b, h, HEAD), "k": (b * pps, hkv, TILE, HEAD),
              "v": (b * pps, hkv, TILE, HEAD), "out": (b, h, HEAD)}
    t = {}
    for name, shape in shapes.items():
        if shape_only:
            t[name] = isa.ShapeOnly(shape, dt)
        elif name == "out":
            t[name] = np.zeros(shape, dt)
        else:
            t[name] = rng.standard_normal(shape).astype(dt)
    scratch = {}
    if cfg.multi_block:
        part = (b, hkv, sub, cfg.n)
        scratch = {"part_o": isa.ShapeOnly((*part, HEAD), np.float32) if shape_only
                   else np.zeros((*part, HEAD), np.float32),
                   "part_ml": isa.ShapeOnly((*part, 2), np.float32) if shape_only
                   else np.zeros((*part, 2), np.float32),
                   "semaphores": np.zeros(b * hkv, np.uint32)}   # real: picks the last CTA
    args = kernel.args(t["q"], t["k"], t["v"], t["out"],
                       np.arange(b * pps, dtype=np.int32).reshape(b, pps),
                       np.full(b, sk, np.int32), sub_seqs=sub, softmax_scale=scale, **scratch)
    detail = {"tiles": {"group": cfg.group, "n": cfg.n, "page": cfg.page, "sub_seqs": sub},
              "template": "xqa", "uses_wgmma": True}
    return Launch(tag, kernel.ptx, kernel.entry, kernel.grid(b, hkv, sub), kernel.block,
                  args, kernel.shared_bytes, timing_only=shape_only, detail=detail,
                  regs_per_thread=XQA_REGS)


def _cta_tiles(b: int, hkv: int, sk: int, sub: int) -> np.ndarray:
    """Tiles of every CTA in dispatch order (y fastest, then z)."""
    ntiles = math.ceil(sk / TILE)
    n = min(ntiles, sub)
    per = np.array([-(-(ntiles - y) // n) if y < n else 0 for y in range(sub)])
    return np.tile(per, b * hkv)


def _samples(kernel, config, b, h, hkv, sk, sub, dtype, scale, launch) -> tuple:
    """Weighted reduced launches, the note and their tile shares; () when not sampled."""
    if kernel.config.multi_block:
        return (), "", ()
    per_sm = occupancy(config, 384, XQA_REGS, kernel.shared_bytes).ctas_per_sm
    slots = int(config.sm.count - config.sm.comm_count) * per_sm
    tiles = _cta_tiles(b, hkv, sk, sub)
    points = sampling.sample_points(tiles, False)
    if not sampling.worth_sampling(tiles, slots, points):
        return (), "", ()
    target = sampling.critical_slot(tiles, slots)
    tail = sk - (math.ceil(sk / TILE) - 1) * TILE
    group = h // hkv
    out, basis, shares = [], [], []
    for waves, n in points:
        bs = math.ceil(waves * slots / hkv)
        sks = (n - 1) * TILE + tail
        own = _cta_tiles(bs, hkv, sks, 1)
        basis.append(sampling.critical_slot(own, slots))
        shares.append(float(own.sum()) / float(tiles.sum()))
        out.append(_launch(kernel, bs, hkv * group, hkv, sks, 1, dtype, True, None,
                           scale, f"sample-{waves}w-{n}"))
    weights = sampling.sample_weights(basis, target)
    note = (" + ".join(f"{w:.3f} T({k}w,{n})" for w, (k, n) in zip(weights, points, strict=True))
            + f" on {slots} CTA slots; critical slot {target[0]} CTAs, {target[1]} tiles")
    return tuple(zip(weights, out, strict=True)), note, tuple(shares)


def plan(config, kind: str, sizes: dict, *, batch, heads, kv_heads, seqlen_k, dtype, scale,
         seed, shape_only, flops, nbytes) -> OpPlan:
    """The OpPlan of one decode attention through the XQA-style template."""
    sms = int(config.sm.count - config.sm.comm_count)
    sub = sub_sequences(sms, batch, kv_heads, seqlen_k)
    kernel = xqa_kernel(heads // kv_heads, dtype, TILE, multi_block=sub > 1)
    if shape_only is None:
        elements = batch * heads * 2 * HEAD + batch * seqlen_k * kv_heads * 2 * HEAD
        shape_only = elements > FUNCTIONAL_ELEMENTS
    check_op_size(config, kind, sizes, {
        "per-CTA state": float(sub * kv_heads * batch * HOST_BYTES_PER_CTA),
        "numpy tensors and their copy": 0.0 if shape_only else 2.0 * nbytes}, nbytes)
    launch = _launch(kernel, batch, heads, kv_heads, seqlen_k, sub, dtype, shape_only,
                     np.random.default_rng(seed), scale, kind)
    samples, note, shares = _samples(kernel, config, batch, heads, kv_heads, seqlen_k, sub,
                                     dtype, scale, launch)
    return OpPlan(kind, sizes, (launch,), float(flops), float(nbytes),
                  f"tensor_{dtype}_tflops", samples=samples, sample_note=note,
                  sample_work_shares=shares)
