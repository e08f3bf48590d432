"""Attention backward op (`attention_op(..., backward=True)`, `ptxsim op attention
--backward`): the three launches of `templates.attention_bwd` (preprocess, main kernel,
postprocess) with FlashAttention-3's backward tile choice, and op-level sampling.

Choices, the same for every shape:
* 64 query rows per iteration; keys per CTA 128 (two consumer warpgroups) with a
  two-stage Q/dO ring, else 64 keys (one warpgroup) when K, V, the stages and dS^T
  exceed 227 KiB (head dim 256), as FA3's backward tile table (64 x 128 for head dims up
  to 192, 64 x 64 at 256); one CTA per SM, registers as the forward op.
* GQA: a CTA loops over the q heads of its kv head (grid = key blocks x kv heads x batch).

Conventions: `flops` = 2.5 x the forward's (FlashAttention's backward count: 10 B H Sq Sk
D for D = Dv, i.e. 2.5 x 4 B H Sq Sk D, halved when causal; with D != Dv, 2.5 x 2 B H Sq
Sk (D + Dv) as the workload graphs count it, while the five products the kernel issues
are 2 B H Sq Sk (3 D + 2 Dv)); `bytes` = Q, K, V, O, dO read and dQ, dK, dV written once.
Below `FUNCTIONAL_ELEMENTS` elements the launches run on random data (O, dO random, LSE
0), above in timing mode.

Sampled fidelity (`attention_sampling`'s per-CTA cost model T = o + A a + B b with B the
query-block iterations on the critical CTA slot): three reduced main-kernel launches at
`SAMPLE_POINTS` (k waves, n), batch 1 and one q head per kv head; non-causal: n query
blocks (seqlen_q = 64 n) against as many key blocks per head as the real launch has (at
most a wave), heads filling k waves; causal: a causal attention of n key blocks per head
(its CTAs iterate over 2n .. 2 query blocks like the real ones' diagonal tails). The
preprocess and postprocess launches are simulated as they are (weight 1). Measured against
full runs: within 1 % on the tests' two 4-SM shapes; on 16 SMs, 8 heads x 2048 tokens,
-0.02 % (head dim 128) and -0.06 % (192/128 causal). Left out: HBM bytes extrapolate with
the time weights (no `sample_byte_weights`; 7.4 vs 5.3 MB full on the 4-SM head-dim-64 test
shape). Units: elements, bytes, FLOP.
"""

from __future__ import annotations

import math

import numpy as np

import isa
from models.cta_dispatch import occupancy
from workloads.kernels.templates.attention import MAX_SHARED
from workloads.kernels.templates.attention_bwd import (
    Q_ROWS,
    Config,
    attention_bwd_kernel,
    padded,
)
from workloads.kernels.templates.targets import pick_template
from workloads.ops import attention as forward  # imports this module: names resolve at call time
from workloads.ops import attention_sampling as sampling
from workloads.ops.registry import HOST_BYTES_PER_CTA, Launch, OpPlan, check_op_size


def choose(headdim: int, headdim_v: int, dtype: str, causal: bool) -> dict:
    """Keys per CTA and stages (module docstring)."""
    for consumers, stages in ((2, 2), (1, 2), (1, 1)):
        cfg = Config(headdim, headdim_v, consumers, stages, dtype, causal)
        if cfg.shared_bytes <= MAX_SHARED:
            return {"consumers": consumers, "stages": stages, "kv_rows": cfg.kv_rows}
    raise AssertionError("head dims up to 256 always fit one consumer, one stage")


def iterations_per_cta(seqlen_q: int, seqlen_k: int, kv_rows: int, group: int,
                       causal: bool) -> np.ndarray:
    """Query-block iterations of each key-block CTA, as the kernel computes its range."""
    nqb = math.ceil(seqlen_q / Q_ROWS)
    first = np.zeros(math.ceil(seqlen_k / kv_rows), dtype=np.int64)
    if causal:
        keys = np.arange(len(first)) * kv_rows - (seqlen_k - seqlen_q)
        first = np.minimum(np.maximum(keys, 0) // Q_ROWS, nqb)
    return group * (nqb - first)


def _cta_list(b, hkv, sq, sk, kv_rows, group, causal) -> np.ndarray:
    per = iterations_per_cta(sq, sk, kv_rows, group, causal)
    return np.tile(per, hkv * b)                  # x = key block fastest, then kv head, batch


def _tensors(b, h, hkv, sq, sk, d, dv, dt, shape_only, rng) -> dict:
    shapes = {"q": ((b, sq, h, d), dt), "k": ((b, sk, hkv, d), dt),
              "v": ((b, sk, hkv, dv), dt), "o": ((b, sq, h, dv), dt),
              "do": ((b, sq, h, dv), dt), "lse": ((1, b, sq, h), np.float32),
              "lse_pad": ((b, h, padded(sq)), np.float32),
              "dsum": ((b, h, padded(sq)), np.float32),
              "dq_acc": ((b, h, padded(sq), d), np.float32), "dq": ((b, sq, h, d), dt),
              "dk": ((b, sk, hkv, d), dt), "dv": ((b, sk, hkv, dv), dt)}
    out = {}
    for name, (shape, t) in shapes.items():
        if shape_only:
            out[name] = isa.ShapeOnly(shape, t)
        elif name in ("q", "k", "v", "o", "do"):
            out[name] = rng.standard_normal(shape).astype(t)
        else:
            out[name] = np.zeros(shape, t)
    return out


def _launches(kernel, config, b, h, hkv, sq, sk, dt, shape_only, rng, scale, tag,
              main_only=False) -> list[Launch]:
    cfg = kernel.config
    t = _tensors(b, h, hkv, sq, sk, cfg.headdim, cfg.headdim_v, dt, shape_only, rng)
    tiles = {"m_tile": Q_ROWS, "kv_block": cfg.kv_rows, "stages": cfg.stages, "pack": 0,
             "consumers": cfg.consumers}
    template = pick_template("attention-backward", config.chip.isa_target).name
    main = Launch(tag, kernel.ptx, kernel.entry, kernel.grid(b, hkv, sk), kernel.block,
                  kernel.args(t["q"], t["k"], t["v"], t["do"], t["lse_pad"], t["dsum"],
                              t["dq_acc"], t["dk"], t["dv"], softmax_scale=scale),
                  kernel.shared_bytes, timing_only=shape_only,
                  detail={"tiles": tiles, "template": template, "uses_wgmma": True},
                  regs_per_thread=forward.launch_regs(config, kernel.block[0]))
    if main_only:
        return [main]
    pre = Launch(tag + "-pre", kernel.pre_ptx, kernel.pre_entry, kernel.pre_grid(b, h, sq),
                 kernel.row_block, kernel.pre_args(t["o"], t["do"], t["lse"], t["lse_pad"],
                                                   t["dsum"], t["dq_acc"]),
                 timing_only=shape_only, detail={"tiles": tiles, "template": template})
    post = Launch(tag + "-post", kernel.post_ptx, kernel.post_entry,
                  kernel.post_grid(b, h, sq), kernel.row_block,
                  kernel.post_args(t["dq_acc"], t["dq"], softmax_scale=scale),
                  timing_only=shape_only, detail={"tiles": tiles, "template": template})
    return [pre, main, post]


def _sample_sizes(kv_rows: int, slots: int, nkb: int, causal: bool, waves: int,
                  n: int) -> dict:
    """Sizes of one reduced main launch (module docstring), one q head per kv head."""
    if causal:
        h = waves * max(1, slots // n)
        return {"h": h, "sq": n * kv_rows, "sk": n * kv_rows}
    per_head = max(1, min(nkb, slots))
    return {"h": waves * max(1, slots // per_head), "sq": n * Q_ROWS,
            "sk": per_head * kv_rows}


def _samples(kernel, config, b, h, hkv, sq, sk, dt, causal, scale, launches):
    cfg = kernel.config
    regs = forward.launch_regs(config, kernel.block[0])
    slots = forward.compute_sms(config) * occupancy(config, kernel.block[0], regs,
                                            kernel.shared_bytes).ctas_per_sm
    blocks = _cta_list(b, hkv, sq, sk, cfg.kv_rows, h // hkv, causal)
    if not sampling.worth_sampling(blocks, slots):
        return (), ""
    target = sampling.critical_slot(blocks, slots)
    nkb = math.ceil(sk / cfg.kv_rows)
    sizes, basis = [], []
    for waves, n in sampling.SAMPLE_POINTS:
        z = _sample_sizes(cfg.kv_rows, slots, nkb, causal, waves, n)
        sizes.append(z)
        basis.append(sampling.critical_slot(
            _cta_list(1, z["h"], z["sq"], z["sk"], cfg.kv_rows, 1, causal), slots))
    weights = sampling.sample_weights(basis, target)
    out = [(1.0, launches[0])]
    for w, z, (waves, n) in zip(weights, sizes, sampling.SAMPLE_POINTS, strict=True):
        out.append((w, _launches(kernel, config, 1, z["h"], z["h"], z["sq"], z["sk"], dt,
                                 True, None, scale, f"sample-{waves}w-{n}", True)[0]))
    out.append((1.0, launches[2]))
    terms = " + ".join(f"{w:.3f} T({k}w,{n}: {ab[0]} CTAs {ab[1]} q-blocks)"
                       for w, (k, n), ab in zip(weights, sampling.SAMPLE_POINTS, basis,
                                                strict=True))
    note = (f"main = {terms} on {slots} CTA slots; critical slot {target[0]} CTAs, "
            f"{target[1]} query blocks; pre and post simulated whole")
    return tuple(out), note


def plan(config, sizes: dict, *, batch, heads, kv_heads, seqlen_q, seqlen_k, headdim,
         headdim_v, causal, dtype, numpy_dtype, scale, seed, shape_only, forward_flops,
         forward_bytes) -> OpPlan:
    """The OpPlan of one attention backward (module docstring)."""
    pick_template("attention-backward", config.chip.isa_target)   # refuses older targets
    choice = choose(headdim, headdim_v, dtype, causal)
    kernel = attention_bwd_kernel(headdim, headdim_v, choice["consumers"], choice["stages"],
                                  dtype, causal)
    if shape_only is None:
        elements = (batch * seqlen_q * heads * (headdim + 2 * headdim_v)
                    + batch * seqlen_k * kv_heads * (headdim + headdim_v))
        shape_only = elements > forward.FUNCTIONAL_ELEMENTS
    nbytes = 2 * forward_bytes      # Q, K, V, O and dO (= O) read; dQ, dK, dV written
    ctas = max(math.prod(kernel.grid(batch, kv_heads, seqlen_k)),
               math.prod(kernel.pre_grid(batch, heads, seqlen_q)))
    check_op_size(config, "attention", {**sizes, "backward": True}, {
        "per-CTA state": float(ctas * HOST_BYTES_PER_CTA),
        "numpy tensors and their copy": 0.0 if shape_only else 2.0 * nbytes}, nbytes)
    launches = _launches(kernel, config, batch, heads, kv_heads, seqlen_q, seqlen_k,
                         numpy_dtype, shape_only, np.random.default_rng(seed), scale,
                         "attention-bwd")
    samples, note = _samples(kernel, config, batch, heads, kv_heads, seqlen_q, seqlen_k,
                             numpy_dtype, causal, scale, launches)
    return OpPlan("attention", {**sizes, "backward": True}, tuple(launches),
                  2.5 * forward_flops, float(nbytes), f"tensor_{dtype}_tflops",
                  samples=samples, sample_note=note)
