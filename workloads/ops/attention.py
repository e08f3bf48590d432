"""Attention op: fused attention forward (FlashAttention-3 style) through the template
`workloads.kernels.templates.attention`, with FlashAttention's launch heuristics.

Choices, the same for every shape (no per-shape factors):

* heads packed per CTA (`pack` = heads / kv_heads) when GQA groups heads and the queries
  are few (seqlen_q <= `PACK_MAX_SEQLEN_Q`, decode), as FA3's PackGQA (a CTA holds whole
  groups of up to m_tile heads, or a slice of a group that is a multiple of m_tile);
* one CTA per SM (two consumer warpgroups or 160-216 KiB of shared memory), or two per
  SM when a CTA has one consumer warpgroup (decode) and no V-from-K (MLA's 64 x 512 O
  needs the registers): kv_block is then cut to a multiple of 64 keys for which two CTAs'
  Q and K/V stages fit the SM (64 for head dim 128), the consumers `setmaxnreg` to 232
  and the launch gives 128 registers per thread. With one CTA per SM a decode CTA waits
  out each HBM round trip alone (TensorRT-LLM's decode kernels keep several per SM).
  Packed GQA decode CTAs (a kv head's query heads together) keep the 64-key blocks but run
  one per SM (`kernels.attention_packed_decode_ctas_per_sm`): chosen on the decode-attention
  FIT rows (`workloads.calibration.attention_accuracy`; its 210 GQA fit rows read 39.7 %
  MAPE with two per SM, 28.8 % with one), where the reference's GQA rows cost about 4.8 us
  x SM per (request, kv head) whatever the cache length up to 64 tokens (TensorRT-LLM runs
  another kernel for GQA than for MHA, whose rows keep two per SM);
* m_tile 64 (one consumer warpgroup) when a CTA's rows (seqlen_q, x group when packed)
  are at most 64, else 128 (two), or 192 (three, `HD96_TILE`) for head dim 96 as FA3's
  tile table (FA3's 192-row tiles for head dim 64 are not taken: 128 there);
* kv_block: the largest multiple of 16, at most 128 (144 for head dim 96), for which Q
  plus two K/V stages fit in 227 KiB (128 for head dims up to 192/128, 80 for 256/256,
  144 for 96/96, as FA3's tile table; FA3 runs head dim 96's P.V from shared memory, the
  template from registers), and
  no more than the keys rounded up to 16 (a decode step over a short cache computes no
  padding block, and its sampled launches time blocks of the keys it really reads), except
  that packed GQA decode computes whole pages (`kernels.attention_packed_decode_whole_pages`:
  a cache shorter than a page is one page-sized block, as a fixed-tile decode kernel runs
  it; the 210 GQA FIT rows 20.8 -> 16.3 % MAPE, while MHA decode keeps cut blocks: whole
  pages read its 134 FIT rows 11.8 -> 13.6 %);
* split-KV (FA's num_splits heuristic, simplified) when not causal (or one query) and
  the CTAs fill less than 80 % of the compute SMs: splits = SMs / CTAs, at most the KV
  blocks and 128, evened so that no split is empty; a combine kernel then merges them
  (`kernels.attention_split_combine` "kernel", FA3's), or the last CTA of each row block
  does ("inline", as decode kernels with a multi-block mode); MLA keeps FlashMLA's combine
  kernel;
* registers: what one CTA per SM leaves (as the GEMM op); `setmaxnreg` redistributes;
* the consumer schedule of prefill (seqlen_q > PACK_MAX_SEQLEN_Q) is
  `kernels.attention_schedule`: "fa3" (FA3's intra-warpgroup overlap and warpgroup
  ping-pong, `templates.attention`) or "plain"; decode, MLA and the 192-row tiles of head
  dim 96 (whose S, P and O in flight do not fit 160 registers) run "plain". The default
  follows a rule declared before any figure was computed: the schedule with the lower
  absolute error on the FIT row wins. FIT: the one Hopper-native prefill attention
  measured on our H100, the LLaMA-3-8B prefill layer's attention kernel
  (`workloads/reference/h100/llama3_8b_layer_prefill.json`: cuDNN's sm90 flash fprop,
  wgmma, 384 threads, 132 persistent CTAs; batch 1, 32 q / 8 kv heads, 4096 tokens, head
  dim 128, causal; 258.3 us, the mean of its two launches). Held back, reported and not
  used to choose: the 24 rows of `workloads/reference/h100/sdpa.csv`, PyTorch's flash
  SDPA backend, which runs FlashAttention-2's sm80 kernels (mma.sync, no warp
  specialization), so a program other than either schedule. Figures: docs/accuracy.md
  ("Attention template");
* decode (seqlen_q <= PACK_MAX_SEQLEN_Q, not MLA) reads a paged KV cache of
  `kernels.attention_kv_page_keys` keys per page (0: contiguous K/V; `--kv-page` per op): a
  serving engine's cache, whose producer loads each KV block's pool page from the block
  table before its TMA copies (`templates.attention` `page`), a block reading whole boxes
  of its page (no zero fill past the cache's end); a page smaller than the KV block shrinks
  the block (a box never straddles pages; kernels that gather several small pages per
  block are not modelled). 64 keys (TensorRT-LLM's tokens_per_block) on the decode-attention
  FIT rows (344 rows: contiguous 19.4 %, paged 17.1 % MAPE, the launch overhead refitted to
  the paged kernels).

`--dtype fp8` (FA3's FP8 forward: e4m3 Q, K, V, bf16 O; `templates.attention`) runs
prefill only (seqlen_q > PACK_MAX_SEQLEN_Q: no packed GQA decode, paging, split-KV or
XQA), head dims 128 and 256 with Dv = D, FA3's fp8 tiles (`FP8_KV_BLOCK`, m_tile 128),
either `kernels.attention_schedule`, descales 1 (data drawn as e4m3); the backward and the
sm_80 template refuse it. Its peak is `tensor_fp8_tflops`, as the GEMM op's fp8.

Conventions: `flops` = 2 B H Sq Sk (D + Dv), halved when causal (FlashAttention's 4 B H
Sq Sk D for D = Dv); `bytes` = Q, K, V and O once (fp8: 1 B per Q/K/V element, 2 B per
O element). Below `FUNCTIONAL_ELEMENTS` elements
the op runs with random data, above in timing mode (`isa.ShapeOnly`). `fidelity=
"sampled"` uses `attention_sampling` (three reduced launches, fitted per CTA).
`backward=True` (`--backward`) plans the backward instead (`attention_backward`: the
FA2/FA3-style preprocess, main and postprocess kernels; flops 2.5 x the forward's).
`kernels.decode_attention = "xqa"` sends GQA/MQA decode (one query token, kv_heads < heads,
head dim 128, bf16/fp16, not MLA) on sm_90a to `attention_xqa` (TensorRT-LLM's XQA kernel
and launch) instead; MHA decode stays here (TensorRT-LLM's MMHA kernel is not modelled).
Template by ISA target (`workloads.kernels.templates.targets.pick_template`): the choices
above are the `sm_90a` templates'; an sm_80 chip (a100_sxm) runs the forward through
`attention_sm80` (FlashAttention-2 style, its own choices); the backward and MLA decode have
no sm_80 template and refuse it with an `InputError` naming the op, the target and the
templates that exist.
Units: elements, bytes, FLOP.
"""

from __future__ import annotations

import dataclasses
import math

import ml_dtypes
import numpy as np

import isa
from isa.errors import InputError
from models.cta_dispatch import occupancy
from workloads.codesign.codesign_ops import attention_hook
from workloads.kernels.templates.attention import (
    DTYPE_BYTES,
    ELEM,
    FP8_HEADDIMS,
    MAX_SHARED,
    OUT_DTYPE,
    attention_kernel,
)
from workloads.kernels.templates.targets import Template, pick_template
from workloads.ops import attention_backward, attention_sm80, attention_xqa
from workloads.ops import attention_sampling as sampling
from workloads.ops.registry import (
    HOST_BYTES_PER_CTA,
    Flag,
    Launch,
    OpPlan,
    check_op_size,
    positive,
    register,
)

DTYPES = tuple(ELEM)              # 16-bit types (MLA decode, the backward)
FORWARD_DTYPES = tuple(DTYPE_BYTES)   # the forward also takes fp8
NUMPY = {"bf16": ml_dtypes.bfloat16, "fp16": np.float16, "fp8": ml_dtypes.float8_e4m3fn}
FUNCTIONAL_ELEMENTS = 1 << 20
PACK_MAX_SEQLEN_Q = 64
HD96_TILE = (192, 144)
"""(m_tile, kv_block) for head dim 96: FA3's `tile_size_fwd_sm90` row for hdim <= 96
(192 x 144, three consumer warpgroups)."""
FP8_KV_BLOCK = {128: 224, 256: 128}
"""kv_block of the fp8 forward by head dim: FA3's `tile_size_fwd_sm90` fp8 rows (128 x 224
for hdim <= 128, 128 x 128 for 256, causal or not)."""
SPLIT_FILL = 0.8
MAX_SPLITS = 128


def compute_sms(config) -> int:
    return int(config.sm.count - config.sm.comm_count)


def launch_regs(config, threads: int, ctas_per_sm: int = 1) -> int:
    return min(255, config.sm.registers_per_sm // (threads * ctas_per_sm) // 8 * 8)


def _kv_block(budget_bytes: int, q_bytes: int, per_key: int, cap: int = 128) -> int:
    """Largest multiple of 16 keys, at most `cap`, with Q + two K/V stages in the budget."""
    return min(cap, (budget_bytes - 64 - q_bytes) // (2 * per_key) // 16 * 16)


def choose(config, batch, heads, kv_heads, seqlen_q, seqlen_k, headdim, headdim_v,
           causal, v_from_k=False, kv_page=None, dtype="bf16") -> dict:
    """Template arguments and launch split for one attention (module docstring), with the
    config's `[kernels]` choices; decode's KV page size `kv_page` (None:
    `kernels.attention_kv_page_keys`)."""
    kernels = config.kernels
    group = heads // kv_heads
    pack = group if group > 1 and seqlen_q <= PACK_MAX_SEQLEN_Q else 0
    rows = seqlen_q * (pack or 1)
    wide = 64 if v_from_k else HD96_TILE[0] if headdim == 96 else 128
    m_tile = 64 if rows <= 64 else wide                  # MLA: 64 rows (FlashMLA)
    if pack > m_tile and pack % m_tile:
        pack, rows = 0, seqlen_q
        m_tile = 64 if rows <= 64 else wide
    block_rows = m_tile // pack * pack if 0 < pack < m_tile else m_tile
    fp8 = dtype == "fp8"
    q_bytes = headdim * m_tile * DTYPE_BYTES[dtype]
    per_key = DTYPE_BYTES[dtype] * (headdim + (0 if v_from_k else headdim_v)) + (headdim_v if fp8
                                                                         else 0)
    kv_page = kernels.attention_kv_page_keys if kv_page is None else kv_page
    page = kv_page if seqlen_q <= PACK_MAX_SEQLEN_Q and not v_from_k else 0
    keys = 16 * math.ceil(seqlen_k / 16)
    if pack and page and kernels.attention_packed_decode_whole_pages:
        keys = max(keys, page)
    cap = HD96_TILE[1] if headdim == 96 else 128
    kv_block = min(_kv_block(MAX_SHARED, q_bytes, per_key, cap), keys)
    if fp8:         # FA3's tile, at most the keys rounded up to the P.V's 32-key steps
        kv_block = min(FP8_KV_BLOCK[headdim], 32 * math.ceil(seqlen_k / 32))
    two_fit = _kv_block(config.sm.max_shared_memory_bytes // 2, q_bytes, per_key) // 64 * 64
    if m_tile == 64 and not v_from_k and two_fit >= 64:  # two CTAs per SM (docstring)
        kv_block = min(kv_block, two_fit)
    while page and page % kv_block:         # a KV block lies within one page
        kv_block -= 16
    m_blocks = math.ceil(rows / block_rows)
    ctas = m_blocks * (kv_heads if pack else heads) * batch
    nb = math.ceil(seqlen_k / kv_block)
    splits = 1
    smem = q_bytes + 2 * kv_block * per_key + 64
    per_sm = 2 if (m_tile == 64 and not v_from_k
                   and (not pack or kernels.attention_packed_decode_ctas_per_sm == 2)
                   and 2 * smem <= config.sm.max_shared_memory_bytes) else 1
    slots = compute_sms(config) * per_sm
    if (not causal or seqlen_q == 1) and ctas < SPLIT_FILL * slots and not fp8:
        splits = max(1, min(nb, MAX_SPLITS, slots // ctas))
    bps = math.ceil(nb / splits)
    splits = math.ceil(nb / bps)
    return {"m_tile": m_tile, "kv_block": kv_block, "stages": 2, "pack": pack,
            "split": splits > 1, "splits": splits, "blocks_per_split": bps,
            "m_blocks": m_blocks, "ctas_per_sm": per_sm,
            "consumer_regs": 160 if m_tile == 192 else 232 if per_sm == 2 else 240,
            "inline_combine": (splits > 1 and kernels.attention_split_combine == "inline"
                               and not v_from_k),
            "page": page,
            "schedule": (kernels.attention_schedule if seqlen_q > PACK_MAX_SEQLEN_Q
                         and not v_from_k and m_tile != 192 else "plain")}


def _tensors(shapes: dict, dtypes: dict, shape_only: bool, rng) -> dict:
    out = {}
    for name, shape in shapes.items():
        dt = dtypes[name]
        if shape is None:
            out[name] = None
        elif shape_only:
            out[name] = isa.ShapeOnly(shape, dt)
        elif name in ("q", "k", "v"):
            out[name] = rng.standard_normal(shape).astype(dt)
        else:
            out[name] = np.zeros(shape, dt)
    return out


def _launches(kernel, choice, config, b, h, hkv, sq, sk, dv, dtype, shape_only, rng, scale,
              tag) -> list[Launch]:
    """The forward launch (and the combine launch when split) at these sizes."""
    cfg = kernel.config
    splits = choice["splits"]
    dt = NUMPY[dtype]
    kv_rows = (b, sk)
    paging = {}
    if cfg.page:      # a pool of each sequence's pages in order (a freshly filled cache)
        pps = math.ceil(sk / cfg.page)
        kv_rows = (b * pps, cfg.page)
        paging = {"block_table": np.arange(b * pps, dtype=np.int32).reshape(b, pps),
                  "seqlen_k": sk}
    shapes = {"q": (b, sq, h, cfg.headdim), "k": (*kv_rows, hkv, cfg.headdim),
              "v": None if cfg.v_from_k else (*kv_rows, hkv, dv), "out": (b, sq, h, dv),
              "part": (splits, b, sq, h, dv) if cfg.split else None,
              "lse": (splits, b, sq, h)}
    dtypes = {"q": dt, "k": dt, "v": dt, "out": NUMPY[OUT_DTYPE[dtype]], "part": np.float32,
              "lse": np.float32}
    t = _tensors(shapes, dtypes, shape_only, rng)
    o = t["part"] if cfg.split else t["out"]
    bps = choice["blocks_per_split"]
    inline = {}
    if cfg.inline_combine:        # real zeros even in timing mode: the count picks the CTA
        inline = {"out": t["out"], "counters": np.zeros(
            kernel.counter_count(b, h, sq, h // hkv), np.int32)}
    args = kernel.args(t["q"], t["k"], t["v"], o, t["lse"], splits=splits,
                       blocks_per_split=bps, softmax_scale=scale, **inline, **paging)
    template = _template(config, cfg.v_from_k).name
    detail = {"tiles": {k: choice[k] for k in ("m_tile", "kv_block", "stages", "pack",
                                               "splits", "ctas_per_sm", "page")},
              "schedule": cfg.schedule,
              "template": template, "uses_wgmma": True}
    out = [Launch(tag, kernel.ptx, kernel.entry, kernel.grid(b, h, sq, splits, h // hkv),
                  kernel.block, args, kernel.shared_bytes, timing_only=shape_only,
                  detail=detail,
                  regs_per_thread=launch_regs(config, kernel.block[0], choice["ctas_per_sm"]))]
    if cfg.split and not cfg.inline_combine:
        out.append(Launch(tag + "-combine", kernel.combine_ptx, cfg.combine_entry,
                          kernel.combine_grid(b, h, sq), (dv, 1, 1),
                          [t["part"], t["lse"], t["out"], splits, b * sq * h],
                          timing_only=shape_only, detail={"template": template}))
    return out


def _template(config, v_from_k: bool) -> Template:
    """The forward template the chip's ISA target runs (MLA's absorbed decode when V is
    K's leading columns), or the `InputError` of `pick_template`."""
    return pick_template("mla-decode" if v_from_k else "attention", config.chip.isa_target)


def _sample_sizes(cfg, choice, slots, group, sq, causal, waves, n, tail) -> dict:
    """Sizes of one reduced launch (`attention_sampling`): batch 1, heads over the wave;
    non-causal, its CTAs' last KV block holds `tail` keys and their rows the real
    queries up to m_tile, as the real CTAs'."""
    sk = (n - 1) * cfg.kv_block + tail
    if cfg.pack:               # the real m-blocks of a kv head, kv heads over the wave
        hkv = waves * max(1, slots // choice["m_blocks"])
        return {"h": hkv * group, "hkv": hkv, "sq": sq, "sk": sk}
    if causal:                 # a causal attention of n m-blocks per head (rows = keys)
        rows = n * cfg.m_tile
        h = waves * max(1, slots // n)
        return {"h": h, "hkv": h // math.gcd(group, h), "sq": rows, "sk": rows}
    share = max(1, min(slots, choice["m_blocks"] * group))   # CTAs reading one kv head
    per_wave = math.ceil(slots / share)
    return {"h": waves * per_wave * max(1, slots // per_wave), "hkv": waves * per_wave,
            "sq": min(sq, cfg.m_tile), "sk": sk}


def _cta_list(cfg, choice, b, y, sq, sk, causal, splits, bps):
    m_blocks = math.ceil(sq * (cfg.pack or 1) / cfg.block_rows)
    per_cta = sampling.blocks_per_cta(m_blocks, cfg.block_rows, cfg.pack, sq, sk, cfg.kv_block,
                                      causal, splits, bps)
    return sampling.cta_blocks(per_cta, y, b)


def _samples(kernel, choice, config, b, h, hkv, sq, sk, dv, dtype, causal, scale,
             launches) -> tuple[tuple, str, tuple]:
    """Weighted reduced launches (`attention_sampling`), or () when not worth it; the note;
    each one's KV blocks as a share of the op's (NaN for the combine, run as it is)."""
    cfg = kernel.config
    regs = launch_regs(config, kernel.block[0], choice["ctas_per_sm"])
    per_sm = occupancy(config, kernel.block[0], regs, kernel.shared_bytes).ctas_per_sm
    slots = compute_sms(config) * per_sm
    group = h // hkv
    blocks = _cta_list(cfg, choice, b, hkv if cfg.pack else h, sq, sk, causal,
                       choice["splits"], choice["blocks_per_split"])
    points = sampling.sample_points(blocks, causal)
    if not sampling.worth_sampling(blocks, slots, points):
        return (), "", ()
    target = sampling.critical_slot(blocks, slots)
    sizes, basis, shares = [], [], []
    tail = cfg.kv_block          # keys in the real CTAs' last block when all CTAs share it
    if not causal and choice["splits"] == 1:
        tail = sk - (math.ceil(sk / cfg.kv_block) - 1) * cfg.kv_block
    for waves, n in points:
        z = _sample_sizes(cfg, choice, slots, group, sq, causal, waves, n, tail)
        nb = math.ceil(z["sk"] / cfg.kv_block)
        own = _cta_list(cfg, choice, 1, z["hkv"] if cfg.pack else z["h"], z["sq"], z["sk"],
                        causal, 1, nb)
        sizes.append((z, nb))
        basis.append(sampling.critical_slot(own, slots))
        shares.append(float(own.sum()) / float(blocks.sum()))
    weights = sampling.sample_weights(basis, target)
    if cfg.inline_combine:     # unsplit samples: every CTA would be last and merge
        kernel = _sibling(kernel, inline_combine=False)
    out = []
    for w, (z, nb), (waves, n) in zip(weights, sizes, points, strict=True):
        one = {**choice, "splits": 1, "blocks_per_split": nb}
        fwd = _launches(kernel, one, config, 1, z["h"], z["hkv"], z["sq"], z["sk"], dv,
                        dtype, True, None, scale, f"sample-{waves}w-{n}")[0]
        out.append((w, fwd))
    out += [(1.0, launch) for launch in launches[1:]]       # the combine, as it is
    shares += [float("nan")] * len(launches[1:])
    terms = " + ".join(f"{w:.3f} T({k}w,{n}: {ab[0]} CTAs {ab[1]} blocks)"
                       for w, (k, n), ab in zip(weights, points, basis, strict=True))
    note = (f"T = {terms} on {slots} CTA slots; critical slot {target[0]} CTAs, "
            f"{target[1]} KV blocks")
    return tuple(out), note, tuple(shares)


def _sibling(kernel, **changes):
    """The template kernel with some generator arguments changed (the template's `Config`
    fields are its generator's arguments)."""
    return attention_kernel(**{**dataclasses.asdict(kernel.config), **changes})


def plan(config, kind: str, sizes: dict, *, batch, heads, kv_heads, seqlen_q, seqlen_k,
         headdim, headdim_v, causal, dtype, v_from_k, scale, seed, shape_only,
         flops, nbytes, kv_page=None) -> OpPlan:
    """The OpPlan of one attention forward (shared by `attention` and `mla-decode`); on an
    sm_80 chip `attention_sm80`'s."""
    template = _template(config, v_from_k)   # refuses a chip the template's target is above
    if template.target == "sm_80":
        return attention_sm80.plan(
            config, template, kind, sizes, batch=batch, heads=heads, kv_heads=kv_heads,
            seqlen_q=seqlen_q, seqlen_k=seqlen_k, headdim=headdim, headdim_v=headdim_v,
            causal=causal, dtype=dtype, scale=scale, seed=seed, shape_only=shape_only,
            flops=flops, nbytes=nbytes, kv_page=kv_page)
    if attention_xqa.applies(config, heads, kv_heads, seqlen_q, headdim, headdim_v,
                             v_from_k, dtype):
        return attention_xqa.plan(config, kind, sizes, batch=batch, heads=heads,
                                  kv_heads=kv_heads, seqlen_k=seqlen_k, dtype=dtype,
                                  scale=scale, seed=seed, shape_only=shape_only, flops=flops,
                                  nbytes=nbytes)
    choice = choose(config, batch, heads, kv_heads, seqlen_q, seqlen_k, headdim, headdim_v,
                    causal, v_from_k, kv_page, dtype)
    kernel = attention_kernel(headdim, headdim_v, choice["m_tile"], choice["kv_block"],
                              choice["stages"], dtype, causal, choice["pack"],
                              choice["split"], v_from_k, choice["consumer_regs"],
                              choice["inline_combine"], choice["page"], choice["schedule"])
    if shape_only is None:
        elements = (batch * seqlen_q * heads * (headdim + headdim_v)
                    + batch * seqlen_k * kv_heads * (headdim + headdim_v))
        shape_only = elements > FUNCTIONAL_ELEMENTS
    ctas = math.prod(kernel.grid(batch, heads, seqlen_q, choice["splits"], heads // kv_heads))
    check_op_size(config, kind, sizes, {   # CTA lists of the sampling, the simulator's state
        "per-CTA state": float(ctas * HOST_BYTES_PER_CTA),
        "numpy tensors and their copy": 0.0 if shape_only else 2.0 * nbytes}, nbytes)
    launches = _launches(kernel, choice, config, batch, heads, kv_heads, seqlen_q, seqlen_k,
                         headdim_v, dtype, shape_only, np.random.default_rng(seed), scale,
                         kind)
    samples, note, shares = _samples(kernel, choice, config, batch, heads, kv_heads,
                                     seqlen_q, seqlen_k, headdim_v, dtype, causal, scale,
                                     launches)
    return OpPlan(kind, sizes, tuple(launches), float(flops), float(nbytes),
                  f"tensor_{dtype}_tflops", samples=samples, sample_note=note,
                  sample_work_shares=shares)


ATTENTION_FLAGS = (
    Flag("--batch", "sequences", required=True),
    Flag("--heads", "query heads", required=True),
    Flag("--kv-heads", "key/value heads (GQA; default: --heads)"),
    Flag("--seqlen", "query length (and key length unless --seqlen-k)", required=True),
    Flag("--seqlen-k", "key/value length (default: --seqlen)"),
    Flag("--headdim", "head dimension of Q and K (96 or a multiple of 64 up to 256)",
         default=128),
    Flag("--headdim-v", "head dimension of V and O (default: --headdim)"),
    Flag("--causal", "causal mask (bottom-right aligned)", kind="switch", default=False),
    Flag("--dtype", "bf16, fp16 or fp8 (e4m3 Q/K/V, bf16 O; prefill forward, head dim "
         "128 or 256; default bf16)", kind="str", default="bf16"),
    Flag("--kv-page", "keys per page of decode's paged KV cache (seqlen <= 64): a multiple "
         "of 16, or 0 for contiguous K/V (default: the config's "
         "kernels.attention_kv_page_keys, 64)"),
    Flag("--backward", "the backward (dQ, dK, dV: preprocess, main, postprocess kernels)",
         kind="switch", default=False),
)


def _check_fp8(config, seqlen_q: int, headdim: int, headdim_v: int, backward: bool) -> None:
    """--dtype fp8: the forward of prefill on sm_90a, head dims FP8_HEADDIMS (module
    docstring)."""
    if backward:
        raise InputError("--dtype fp8 with --backward: accepted bf16 or fp16 (the backward "
                         "template has no fp8)")
    if seqlen_q <= PACK_MAX_SEQLEN_Q:
        raise InputError(f"--dtype fp8 with --seqlen {seqlen_q}: accepted --seqlen > "
                         f"{PACK_MAX_SEQLEN_Q} (prefill; fp8 decode, packed GQA heads, "
                         "paged KV and XQA are bf16/fp16 only)")
    if headdim not in FP8_HEADDIMS or headdim_v != headdim:
        raise InputError(f"--dtype fp8 with --headdim {headdim} --headdim-v {headdim_v}: "
                         f"accepted --headdim one of {FP8_HEADDIMS} and --headdim-v equal to it")
    template = _template(config, False)
    if template.target != "sm_90a":
        raise InputError(f"--dtype fp8 on a {config.chip.isa_target} chip (template "
                         f"{template.name}): accepted on chips that run the sm_90a template "
                         "(the sm_80 forward is bf16/fp16 only)")


@register("attention", ATTENTION_FLAGS,
          "fused attention forward (or --backward), FlashAttention-3 style (TMA + wgmma; "
          "sm_80: FlashAttention-2 style forward, cp.async + mma.sync)")
@attention_hook      # co-design units when the config enables them (workloads/codesign)
def attention_op(config, batch, heads, seqlen=None, headdim=128, kv_heads=None, seqlen_k=None,
                 headdim_v=None, causal=False, dtype="bf16", seed=0, shape_only=None,
                 seqlen_q=None, backward=False, kv_page=None) -> OpPlan:
    """The plan of one attention forward: the template launch (+ combine when split); with
    `backward`, the three backward launches (`attention_backward`)."""
    if seqlen is not None and seqlen_q is not None and seqlen != seqlen_q:
        raise InputError(f"--seqlen {seqlen} and seqlen_q {seqlen_q} disagree; give one")
    sq = seqlen if seqlen is not None else seqlen_q
    if sq is None:
        raise InputError("--seqlen is required (or seqlen_q)")
    kv_heads = heads if kv_heads is None else kv_heads
    sk = sq if seqlen_k is None else seqlen_k
    headdim_v = headdim if headdim_v is None else headdim_v
    for flag, v in (("--batch", batch), ("--heads", heads), ("--kv-heads", kv_heads),
                    ("--seqlen", sq), ("--seqlen-k", sk), ("--headdim", headdim),
                    ("--headdim-v", headdim_v)):
        positive(flag, v)
    if dtype not in FORWARD_DTYPES:
        raise InputError(f"--dtype {dtype!r}: accepted {', '.join(FORWARD_DTYPES)}")
    if heads % kv_heads:
        raise InputError(f"--heads {heads} is not a multiple of --kv-heads {kv_heads}")
    for flag, d in (("--headdim", headdim), ("--headdim-v", headdim_v)):
        if (d % 64 and d != 96) or d > 256:
            raise InputError(f"{flag} {d}: accepted 96 or a multiple of 64 up to 256")
        if backward and d % 64:
            raise InputError(f"{flag} {d} with --backward: accepted a multiple of 64 up to "
                             "256 (the backward template has no 96)")
    if causal and sq > sk:
        raise InputError(f"--causal with --seqlen {sq} > --seqlen-k {sk}: accepted "
                         "seqlen <= seqlen-k (bottom-right aligned mask)")
    if kv_page is not None and (not isinstance(kv_page, int) or kv_page < 0 or kv_page % 16
                                or backward):
        raise InputError(f"--kv-page {kv_page!r}: accepted 0 (contiguous K/V) or a positive "
                         "multiple of 16, for the forward only")
    if dtype == "fp8":
        _check_fp8(config, sq, headdim, headdim_v, backward)
    e, eo = DTYPE_BYTES[dtype], DTYPE_BYTES[OUT_DTYPE[dtype]]
    flops = 2.0 * batch * heads * sq * sk * (headdim + headdim_v) / (2 if causal else 1)
    nbytes = (e * batch * heads * sq * headdim + eo * batch * heads * sq * headdim_v
              + e * batch * kv_heads * sk * (headdim + headdim_v))
    sizes = {"batch": batch, "heads": heads, "kv_heads": kv_heads, "seqlen_q": sq,
             "seqlen_k": sk, "headdim": headdim, "headdim_v": headdim_v,
             "causal": bool(causal), "dtype": dtype}
    if backward:
        return attention_backward.plan(
            config, sizes, batch=batch, heads=heads, kv_heads=kv_heads, seqlen_q=sq,
            seqlen_k=sk, headdim=headdim, headdim_v=headdim_v, causal=bool(causal),
            dtype=dtype, numpy_dtype=NUMPY[dtype], scale=1.0 / math.sqrt(headdim), seed=seed,
            shape_only=shape_only, forward_flops=flops, forward_bytes=nbytes)
    return plan(config, "attention", sizes, batch=batch, heads=heads, kv_heads=kv_heads,
                seqlen_q=sq, seqlen_k=sk, headdim=headdim, headdim_v=headdim_v,
                causal=bool(causal), dtype=dtype, v_from_k=False,
                scale=1.0 / math.sqrt(headdim), seed=seed, shape_only=shape_only,
                flops=flops, nbytes=nbytes, kv_page=kv_page)
