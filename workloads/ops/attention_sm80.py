"""The attention op on an sm_80 chip (`chip.isa_target` sm_80, a100_sxm): the FlashAttention-2
style template (`workloads.kernels.templates.attention_sm80`), with FlashAttention-2's launch
choices on sm_80.

Choices, the same for every shape (no per-shape factors):

* decode with GQA (one query, heads > kv_heads): the kernel runs over the group's q heads as
  its queries and the kv heads as its heads (FlashAttention-2's `seqlenq_ngroups_swapped`),
  so a kv head's q heads share one CTA and its K/V reads;
* rows of one CTA: 128 in 8 warps of 16 rows for head dims above 128 (FlashAttention-2's
  tile on sm_80), else 64 in 4 warps (FlashAttention-2 runs 128 in 4 warps of 32 rows,
  which spill here: the template's `PTXAS_REGISTERS`; three 64-row CTAs share an A100 SM
  where two of its fit);
* kv_block: FlashAttention-2's tile table for sm_80, 128 keys for head dim 64 and 64 above;
  when the kernel's queries are at most `SMALL_ROWS` (decode) its split-KV kernel's, 256,
  128 and 64 keys for head dims 64, 128 and above;
* split-KV when not causal (or one query) and the CTAs fill less than 80 % of the CTA slots
  (compute SMs x CTAs per SM by registers and shared memory): splits = slots / CTAs, at most
  the KV blocks and 128, evened so that no split is empty (as the sm_90a op; FlashAttention-2
  picks the split count by its wave-efficiency heuristic), then the combine kernel;
* registers: ptxas's count (`PTXAS_REGISTERS`), so CTAs per SM follow from it.

Accepted: what the attention op accepts, with (headdim, headdim_v) among `HEAD_DIMS`.
Refused with an `InputError` naming the op, the target and what is accepted: other head dim
pairs, and a paged KV cache (`--kv-page` > 0; the template reads contiguous K/V, so decode on
sm_80 reads it contiguous whatever `kernels.attention_kv_page_keys` says).
Sampled fidelity: the reduced launches of `attention_sampling` (three launches, fitted per
CTA), built in the kernel's view of the rows.
Left out: FlashAttention-2's own split-count heuristic and its split-KV kernel's paged cache;
the backward and MLA decode (no sm_80 template: those ops refuse a100_sxm).
Units: elements, bytes, FLOP.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

import isa
from isa.errors import InputError
from models.cta_dispatch import occupancy
from workloads.kernels.templates.attention_sm80 import (
    ELEM_BYTES,
    PTXAS_REGISTERS,
    attention_sm80_kernel,
)
from workloads.ops import attention_sampling as sampling
from workloads.ops.registry import HOST_BYTES_PER_CTA, Launch, OpPlan, check_op_size

NUMPY = {"bf16": ml_dtypes.bfloat16, "fp16": np.float16}
FUNCTIONAL_ELEMENTS = 1 << 20     # as the sm_90a op: above, timing mode (ShapeOnly)
SMALL_ROWS = 64                   # kernel queries up to this: the split-KV kernel's tiles
WIDE_HEADDIM = 128                # head dims above: 128-row CTAs of 8 warps
SPLIT_FILL = 0.8
MAX_SPLITS = 128
KV_BLOCK = {64: 128, 128: 64, 192: 64, 256: 64}          # 128-row CTAs, by head dim
KV_BLOCK_SMALL = {64: 256, 128: 128, 192: 64, 256: 64}   # 64-row CTAs (split-KV kernel)
HEAD_DIMS = tuple(sorted({(d, dv) for d, dv, *_ in PTXAS_REGISTERS}))
"""(headdim, headdim_v) pairs the sm_80 op runs (those ptxas was asked about)."""


def compute_sms(config) -> int:
    return int(config.sm.count - config.sm.comm_count)


def kernel_view(batch: int, heads: int, kv_heads: int, seqlen_q: int) -> dict:
    """The kernel's queries, heads and group, and whether decode's q heads are swapped in as
    queries (module docstring)."""
    group = heads // kv_heads
    if seqlen_q == 1 and group > 1:
        return {"rows": group, "heads": kv_heads, "group": 1, "swap": True}
    return {"rows": seqlen_q, "heads": heads, "group": group, "swap": False}


def choose(config, batch, heads, kv_heads, seqlen_q, seqlen_k, headdim, headdim_v,
           causal) -> dict:
    """Template arguments and launch split for one attention (module docstring)."""
    view = kernel_view(batch, heads, kv_heads, seqlen_q)
    small = view["rows"] <= SMALL_ROWS
    m_tile, warps = (64, 4) if small or headdim <= WIDE_HEADDIM else (128, 8)
    kv_block = (KV_BLOCK_SMALL if small else KV_BLOCK)[headdim]
    regs = PTXAS_REGISTERS[(headdim, headdim_v, m_tile, kv_block, warps)]
    smem = (m_tile + kv_block) * headdim * ELEM_BYTES + kv_block * headdim_v * ELEM_BYTES
    per_sm = occupancy(config, 32 * warps, regs, smem).ctas_per_sm
    slots = compute_sms(config) * per_sm
    m_blocks = math.ceil(view["rows"] / m_tile)
    ctas = m_blocks * view["heads"] * batch
    nb = math.ceil(seqlen_k / kv_block)
    splits = 1
    if (not causal or seqlen_q == 1) and ctas < SPLIT_FILL * slots:
        splits = max(1, min(nb, MAX_SPLITS, slots // ctas))
    bps = math.ceil(nb / splits)
    splits = math.ceil(nb / bps)
    return {"m_tile": m_tile, "kv_block": kv_block, "warps": warps, "splits": splits,
            "split": splits > 1, "blocks_per_split": bps, "m_blocks": m_blocks,
            "ctas_per_sm": per_sm, "slots": slots, "swap": view["swap"]}


def _tensors(b, sq, h, hkv, sk, d, dv, splits, split, dtype, shape_only, rng) -> dict:
    dt = NUMPY[dtype]
    shapes = {"q": ((b, sq, h, d), dt), "k": ((b, sk, hkv, d), dt), "v": ((b, sk, hkv, dv), dt),
              "out": ((b, sq, h, dv), dt), "lse": ((splits, b, sq, h), np.float32)}
    if split:
        shapes["part"] = ((splits, b, sq, h, dv), np.float32)
    out = {}
    for name, (shape, t) in shapes.items():
        if shape_only:
            out[name] = isa.ShapeOnly(shape, t)
        elif name in ("q", "k", "v"):
            out[name] = rng.standard_normal(shape).astype(t)
        else:
            out[name] = np.zeros(shape, t)
    return out


def _launches(kernel, choice, template, b, h, hkv, sq, sk, dv, dtype, shape_only, rng, scale,
              tag, swap) -> list[Launch]:
    """The forward launch (and the combine launch when split) at these sizes."""
    cfg = kernel.config
    splits = choice["splits"]
    t = _tensors(b, sq, h, hkv, sk, cfg.headdim, dv, splits, cfg.split, dtype, shape_only, rng)
    o = t["part"] if cfg.split else t["out"]
    args = kernel.args(t["q"], t["k"], t["v"], o, t["lse"], splits=splits,
                       blocks_per_split=choice["blocks_per_split"], softmax_scale=scale,
                       swap_groups=swap)
    rows, heads = (h // hkv, hkv) if swap else (sq, h)
    detail = {"tiles": {k: choice[k] for k in ("m_tile", "kv_block", "warps", "splits",
                                               "ctas_per_sm", "swap")},
              "template": template.name}
    out = [Launch(tag, kernel.ptx, kernel.entry, kernel.grid(b, heads, rows, splits),
                  kernel.block, args, kernel.shared_bytes, timing_only=shape_only,
                  detail=detail, regs_per_thread=kernel.registers)]
    if cfg.split:
        n_rows = b * sq * h
        out.append(Launch(tag + "-combine", kernel.combine_ptx, cfg.combine_entry,
                          kernel.combine_grid(n_rows), (dv, 1, 1),
                          [t["part"], t["lse"], t["out"], np.uint32(splits), np.uint32(n_rows)],
                          timing_only=shape_only, detail={"template": template.name}))
    return out


def _sample_sizes(choice, slots, group, rows, causal, waves, n, tail) -> dict:
    """Sizes (kernel view, batch 1) of one reduced launch, as the sm_90a op's unpacked ones:
    causal, n m-blocks per head (rows = keys); else the real queries up to m_tile, as many
    CTAs reading one kv head as the real launch has, the last KV block holding `tail` keys."""
    m_tile, kvb = choice["m_tile"], choice["kv_block"]
    if causal:
        r = n * m_tile
        h = waves * max(1, slots // n)
        return {"h": h, "hkv": h // math.gcd(group, h), "sq": r, "sk": r}
    share = max(1, min(slots, choice["m_blocks"] * group))
    per_wave = math.ceil(slots / share)
    return {"h": waves * per_wave * max(1, slots // per_wave), "hkv": waves * per_wave,
            "sq": min(rows, m_tile), "sk": (n - 1) * kvb + tail}


def _samples(kernel, choice, template, view, batch, sk, dv, dtype, causal, scale, launches):
    """Weighted reduced launches (`attention_sampling`), or () when not worth it; the note;
    each one's KV blocks as a share of the op's (NaN for the combine, run as it is)."""
    m_tile, kvb, slots = choice["m_tile"], choice["kv_block"], choice["slots"]

    def cta_list(b, y, sq, keys, splits, bps):
        per_cta = sampling.blocks_per_cta(math.ceil(sq / m_tile), m_tile, 0, sq, keys, kvb,
                                          causal, splits, bps)
        return sampling.cta_blocks(per_cta, y, b)

    blocks = cta_list(batch, view["heads"], view["rows"], sk, choice["splits"],
                      choice["blocks_per_split"])
    points = sampling.sample_points(blocks, causal)
    if not sampling.worth_sampling(blocks, slots, points):
        return (), "", ()
    target = sampling.critical_slot(blocks, slots)
    tail = kvb
    if not causal and choice["splits"] == 1:
        tail = sk - (math.ceil(sk / kvb) - 1) * kvb
    sizes, basis, shares = [], [], []
    for waves, n in points:
        z = _sample_sizes(choice, slots, view["group"], view["rows"], causal, waves, n, tail)
        nb = math.ceil(z["sk"] / kvb)
        own = cta_list(1, z["h"], z["sq"], z["sk"], 1, nb)
        sizes.append((z, nb))
        basis.append(sampling.critical_slot(own, slots))
        shares.append(float(own.sum()) / float(blocks.sum()))
    weights = sampling.sample_weights(basis, target)
    out = []
    for w, (z, nb), (waves, n) in zip(weights, sizes, points, strict=True):
        one = {**choice, "splits": 1, "blocks_per_split": nb}
        fwd = _launches(kernel, one, template, 1, z["h"], z["hkv"], z["sq"], z["sk"], dv, dtype,
                        True, None, scale, f"sample-{waves}w-{n}", False)[0]
        out.append((w, fwd))
    out += [(1.0, launch) for launch in launches[1:]]       # the combine, as it is
    shares += [float("nan")] * len(launches[1:])
    terms = " + ".join(f"{w:.3f} T({k}w,{n}: {ab[0]} CTAs {ab[1]} blocks)"
                       for w, (k, n), ab in zip(weights, points, basis, strict=True))
    note = (f"T = {terms} on {slots} CTA slots; critical slot {target[0]} CTAs, "
            f"{target[1]} KV blocks")
    return tuple(out), note, tuple(shares)


def plan(config, template, kind: str, sizes: dict, *, batch, heads, kv_heads, seqlen_q,
         seqlen_k, headdim, headdim_v, causal, dtype, scale, seed, shape_only, flops, nbytes,
         kv_page=None) -> OpPlan:
    """The OpPlan of one attention forward through the sm_80 template (sizes already checked
    by the op)."""
    target = config.chip.isa_target
    if (headdim, headdim_v) not in HEAD_DIMS:
        raise InputError(f"op {kind} on ISA target {target}: --headdim {headdim} "
                         f"--headdim-v {headdim_v} has no kernel template there; "
                         f"{template.name} ({template.source}) takes (headdim, headdim_v) "
                         f"in {', '.join(map(str, HEAD_DIMS))}; accepted: those, or a preset "
                         "whose chip.isa_target is sm_90a (ptxsim models lists them)")
    if kv_page:
        raise InputError(f"op {kind} on ISA target {target}: --kv-page {kv_page}: "
                         f"{template.name} reads contiguous K/V (no paged KV cache); "
                         "accepted: --kv-page 0 or none, or a preset whose chip.isa_target "
                         "is sm_90a")
    if seqlen_q == 1:
        causal = False          # one query sees every key: the mask is empty
    choice = choose(config, batch, heads, kv_heads, seqlen_q, seqlen_k, headdim, headdim_v,
                    causal)
    kernel = attention_sm80_kernel(headdim, headdim_v, choice["m_tile"], choice["kv_block"],
                                   choice["warps"], dtype, causal, choice["split"])
    if shape_only is None:
        elements = (batch * seqlen_q * heads * (headdim + headdim_v)
                    + batch * seqlen_k * kv_heads * (headdim + headdim_v))
        shape_only = elements > FUNCTIONAL_ELEMENTS
    view = kernel_view(batch, heads, kv_heads, seqlen_q)
    ctas = math.prod(kernel.grid(batch, view["heads"], view["rows"], choice["splits"]))
    check_op_size(config, kind, sizes, {
        "per-CTA state": float(ctas * HOST_BYTES_PER_CTA),
        "numpy tensors and their copy": 0.0 if shape_only else 2.0 * nbytes}, nbytes)
    launches = _launches(kernel, choice, template, batch, heads, kv_heads, seqlen_q, seqlen_k,
                         headdim_v, dtype, shape_only, np.random.default_rng(seed), scale,
                         kind, view["swap"])
    samples, note, shares = _samples(kernel, choice, template, view, batch, seqlen_k,
                                     headdim_v, dtype, causal, scale, launches)
    return OpPlan(kind, sizes, tuple(launches), float(flops), float(nbytes),
                  f"tensor_{dtype}_tflops", samples=samples, sample_note=note,
                  sample_work_shares=shares)
