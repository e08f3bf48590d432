"""Fused attention backward for Hopper, FlashAttention-2/3 style, generated as PTX (sm_90a).

`attention_bwd_kernel(...)` -> `AttentionBwdKernel`, three kernels that compute, for the
forward O = softmax(scale Q K^T) V of `templates.attention` (same layouts, GQA, causal
bottom-right aligned) and the output gradient dO [B, Sq, H, Dv]:

    P = 2^(scale log2(e) Q K^T - LSE), D = rowsum(dO o O), dV = P^T dO,
    dP = dO V^T, dS = P o (dP - D), dQ = scale dS K, dK = scale dS^T Q

(dK, dV [B, Sk, Hkv, .] summed over the q heads of a kv head), with LSE the forward's
base-2 log-sum-exp of the scaled scores (lse [1, B, Sq, H]).

1. preprocess (`pre_entry`, one warp per (b, h, s) row, rows padded to 64 queries):
   D = rowsum(dO o O) and LSE copied to [B, H, Sq_pad] f32 (padding rows D = 0, LSE =
   +inf, so their P is 0), the f32 dQ accumulator dq_acc [B, H, Sq_pad, D] zeroed.
2. main kernel (`entry`), one CTA per (block of kv_rows keys, kv head, batch), block =
   128 x (consumers + 1) threads. The producer warp (one elected lane, `setmaxnreg.dec`
   24) loads K_j and V_j once (TMA, 128B swizzle), then for every q head of the group and
   every query block i of 64 rows (causal: from the block holding the first query that
   sees key j) Q_i, dO_i (TMA) and LSE_i, D_i (bulk copies) into a ring of `stages`
   buffers (full/empty mbarriers). Consumer warpgroup wg owns keys 64 wg .. 64 wg + 63
   and per iteration computes, in the transposed orientation of FA3 (rows = keys):
   S^T = K Q_i^T and dP^T = V dO_i^T (SS wgmma), P^T = 2^(S^T scale log2 e - LSE) (masked
   in the blocks straddling the causal diagonal), dV += P^T dO_i (RS wgmma, P^T from
   registers), dS^T = P^T o (dP^T - D), dK += dS^T Q_i (RS wgmma); dS^T goes to shared
   memory, then dQ_i = dS K_j (SS wgmma, the D columns split between the warpgroups)
   and `red.global.add.f32` of each element into dq_acc. The epilogue stores dK x scale
   and dV (16-bit).
3. postprocess (`post_entry`, one warp per row): dQ = 16-bit(dq_acc x scale).

GQA: the CTA loops over the q heads of its kv head (FA2's alternative to summing
per-q-head dK/dV afterwards), so dK/dV stay in registers and need no reduction kernel.

Left out (what FA3's backward does that this one does not): FA3 writes dQ through
shared memory and a dedicated warp's TMA reduce-add (`cp.reduce.async.bulk`) instead of
per-element atomics from the MMA warpgroups; it overlaps the next iteration's S/dP MMAs
with the softmax gradient of the current one (here only dP overlaps P); its tile table
also uses 128-query tiles for head dim 64 and may keep dS in registers for dQ
(`Mma_dQ_is_RS`). Keys past seqlen_k are not masked (K and V rows there are TMA zeros,
so they add nothing to dQ; their dK/dV rows are not stored). No deterministic mode
(dQ's atomic order is the simulator's lane order), dropout, ALiBi, sliding window,
varlen or fp8. Head dims: multiples of 64 up to 256.
Units: elements and bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from isa.errors import InputError
from workloads.kernels.templates import attention_bwd_ptx as emit
from workloads.kernels.templates import attention_bwd_rows_ptx as rows
from workloads.kernels.templates.attention import ELEM, MAX_SHARED, PTX_TYPE, _map, _shape

Q_ROWS = emit.Q_ROWS


@dataclass(frozen=True)
class Config:
    """Validated generator arguments plus the shared-memory layout the emitter uses."""
    headdim: int
    headdim_v: int
    consumers: int        # warpgroups of 64 keys: kv_rows = 64 consumers
    stages: int
    dtype: str
    causal: bool
    consumer_regs: int = 240

    ptx_type = property(lambda s: PTX_TYPE[s.dtype])
    kv_rows = property(lambda s: 64 * s.consumers)
    threads = property(lambda s: 128 * (s.consumers + 1))
    d_atoms = property(lambda s: s.headdim // 64)
    v_atoms = property(lambda s: s.headdim_v // 64)
    k_bytes = property(lambda s: s.d_atoms * s.kv_rows * 128)
    kv_bytes = property(lambda s: (s.d_atoms + s.v_atoms) * s.kv_rows * 128)
    q_stage_bytes = property(lambda s: s.d_atoms * Q_ROWS * 128)
    stage_bytes = property(lambda s: (s.d_atoms + s.v_atoms) * Q_ROWS * 128)
    stage_tx_bytes = property(lambda s: s.stage_bytes + 2 * Q_ROWS * 4)
    stages_offset = property(lambda s: s.kv_bytes)
    ds_offset = property(lambda s: s.kv_bytes + s.stages * s.stage_bytes)
    lsed_offset = property(lambda s: s.ds_offset + s.kv_rows * Q_ROWS * 2)
    barrier_offset = property(lambda s: s.lsed_offset + s.stages * 2 * Q_ROWS * 4)
    shared_bytes = property(lambda s: s.barrier_offset + 8 * (3 + 2 * s.stages))
    ds_full_bar = property(lambda s: 8 + 16 * s.stages)
    ds_empty_bar = property(lambda s: 16 + 16 * s.stages)

    def full_bar(self, s: int) -> int:
        return 8 + 8 * s

    def empty_bar(self, s: int) -> int:
        return 8 + 8 * (self.stages + s)

    @property
    def dq_pieces(self) -> list[list[tuple[int, int]]]:
        """Per warpgroup, the (first column, width) wgmma pieces of its share of dQ's D
        columns: D / consumers each, cut at 64-column (128-byte swizzle atom) edges."""
        share = self.headdim // self.consumers
        out = []
        for wg in range(self.consumers):
            lo, hi, pieces = wg * share, (wg + 1) * share, []
            while lo < hi:
                end = min(hi, (lo // 64 + 1) * 64)
                pieces.append((lo, end - lo))
                lo = end
            out.append(pieces)
        return out

    @property
    def entry(self) -> str:
        return (f"attn_bwd_{self.dtype}_d{self.headdim}v{self.headdim_v}_n{self.kv_rows}"
                f"_s{self.stages}" + ("_causal" if self.causal else "") +
                (f"_r{self.consumer_regs}" if self.consumer_regs != 240 else ""))

    @property
    def pre_entry(self) -> str:
        return f"attn_bwd_pre_{self.dtype}_d{self.headdim}v{self.headdim_v}"

    @property
    def post_entry(self) -> str:
        return f"attn_bwd_post_{self.dtype}_d{self.headdim}"


def padded(seqlen_q: int) -> int:
    """Query rows padded to whole 64-row blocks (the LSE/D/dQ_acc row count)."""
    return Q_ROWS * math.ceil(seqlen_q / Q_ROWS)


@dataclass(frozen=True)
class AttentionBwdKernel:
    """The three generated kernels; see `pre_args`, `args`, `post_args` and the grids."""
    pre_ptx: str
    ptx: str
    post_ptx: str
    block: tuple[int, int, int]
    shared_bytes: int
    config: Config

    entry = property(lambda s: s.config.entry)
    pre_entry = property(lambda s: s.config.pre_entry)
    post_entry = property(lambda s: s.config.post_entry)
    row_block = (128, 1, 1)            # pre/post: four warps, one row each

    def grid(self, batch: int, kv_heads: int, seqlen_k: int) -> tuple[int, int, int]:
        return (math.ceil(seqlen_k / self.config.kv_rows), kv_heads, batch)

    def pre_grid(self, batch: int, heads: int, seqlen_q: int) -> tuple[int, int, int]:
        return (math.ceil(batch * heads * padded(seqlen_q) / 4), 1, 1)

    def post_grid(self, batch: int, heads: int, seqlen_q: int) -> tuple[int, int, int]:
        return (math.ceil(batch * heads * seqlen_q / 4), 1, 1)

    def pre_args(self, o, do, lse, lse_pad, dsum, dq_acc) -> list:
        """o, do [B, Sq, H, Dv]; lse f32 [1, B, Sq, H] (the forward's); lse_pad, dsum f32
        [B, H, Sq_pad]; dq_acc f32 [B, H, Sq_pad, D]."""
        b, sq, h, _ = _shape(o, 4, "o")
        want = {"do": tuple(o.shape), "lse": (1, b, sq, h), "lse_pad": (b, h, padded(sq)),
                "dsum": (b, h, padded(sq)), "dq_acc": (b, h, padded(sq), self.config.headdim)}
        _check(want, {"do": do, "lse": lse, "lse_pad": lse_pad, "dsum": dsum,
                      "dq_acc": dq_acc}, o.shape)
        return [o, do, lse, lse_pad, dsum, dq_acc, b, sq, h, padded(sq)]

    def args(self, q, k, v, do, lse_pad, dsum, dq_acc, dk, dv, *,
             softmax_scale: float | None = None) -> list:
        """Arguments of the main kernel: q [B, Sq, H, D], k [B, Sk, Hkv, D], v [B, Sk,
        Hkv, Dv], do [B, Sq, H, Dv], lse_pad/dsum/dq_acc from the preprocess, dk, dv like
        k, v; numpy arrays or `isa.ShapeOnly` tensors."""
        cfg = self.config
        b, sq, h, _ = _shape(q, 4, "q")
        _, sk, hkv, _ = _shape(k, 4, "k")
        d, dvd = cfg.headdim, cfg.headdim_v
        want = {"q": (b, sq, h, d), "k": (b, sk, hkv, d), "v": (b, sk, hkv, dvd),
                "do": (b, sq, h, dvd), "lse_pad": (b, h, padded(sq)),
                "dsum": (b, h, padded(sq)), "dq_acc": (b, h, padded(sq), d),
                "dk": (b, sk, hkv, d), "dv": (b, sk, hkv, dvd)}
        _check(want, {"q": q, "k": k, "v": v, "do": do, "lse_pad": lse_pad, "dsum": dsum,
                      "dq_acc": dq_acc, "dk": dk, "dv": dv}, q.shape)
        if h % hkv:
            raise InputError(f"attention backward args: {h} q heads are not a multiple of "
                             f"{hkv} kv heads; accepted heads = group x kv_heads")
        scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(d)
        tq = _map(q, (b, sq, h, d), (1, Q_ROWS, 1, 64), 4)
        tk = _map(k, (b, sk, hkv, d), (1, cfg.kv_rows, 1, 64), 5)
        tv = _map(v, (b, sk, hkv, dvd), (1, cfg.kv_rows, 1, 64), 6)
        tdo = _map(do, (b, sq, h, dvd), (1, Q_ROWS, 1, 64), 7)
        return [tq, tk, tv, tdo, q, k, v, do, lse_pad, dsum, dq_acc, dk, dv,
                b, sq, sk, h, h // hkv, padded(sq), np.float32(scale * math.log2(math.e)),
                np.float32(scale)]

    def post_args(self, dq_acc, dq, *, softmax_scale: float | None = None) -> list:
        """dq_acc f32 [B, H, Sq_pad, D] -> dq [B, Sq, H, D]."""
        b, sq, h, d = _shape(dq, 4, "dq")
        _check({"dq_acc": (b, h, padded(sq), self.config.headdim)}, {"dq_acc": dq_acc},
               dq.shape)
        scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(d)
        return [dq_acc, dq, b, sq, h, padded(sq), np.float32(scale)]


def _check(want: dict, got: dict, ref_shape) -> None:
    for name, arr in got.items():
        if tuple(arr.shape) != want[name]:
            raise InputError(f"attention backward args: {name} has shape {tuple(arr.shape)}; "
                             f"accepted {want[name]} for this kernel and {tuple(ref_shape)}")


def _bad(arg: str, value, accepted: str) -> InputError:
    return InputError(f"attention_bwd_kernel: {arg}={value!r} is not accepted; "
                      f"accepted: {accepted}")


def attention_bwd_kernel(headdim: int = 128, headdim_v: int | None = None,
                         consumers: int = 2, stages: int = 2, dtype: str = "bf16",
                         causal: bool = False, consumer_regs: int = 240) -> AttentionBwdKernel:
    """Generate the three attention backward kernels (module docstring)."""
    headdim_v = headdim if headdim_v is None else headdim_v
    if dtype not in ELEM:
        raise _bad("dtype", dtype, ", ".join(ELEM))
    for name, d in (("headdim", headdim), ("headdim_v", headdim_v)):
        if not isinstance(d, int) or d <= 0 or d % 64 or d > 256:
            raise _bad(name, d, "a multiple of 64 up to 256")
    if consumers not in (1, 2):
        raise _bad("consumers", consumers, "1 or 2 (64 or 128 keys per CTA)")
    if not isinstance(stages, int) or stages < 1:
        raise _bad("stages", stages, "a positive integer")
    if consumer_regs not in (232, 240):
        raise _bad("consumer_regs", consumer_regs, "240 or 232")
    cfg = Config(headdim, headdim_v, consumers, stages, dtype, bool(causal), consumer_regs)
    if cfg.shared_bytes > MAX_SHARED:
        raise _bad("stages", stages, f"a layout within {MAX_SHARED} bytes of shared memory: "
                   f"K/V {cfg.kv_bytes} B + {stages} x {cfg.stage_bytes} B + dS "
                   f"{cfg.kv_rows * Q_ROWS * 2} B = {cfg.shared_bytes} B")
    return AttentionBwdKernel(rows.emit_pre(cfg), emit.emit_main(cfg), rows.emit_post(cfg),
                              (cfg.threads, 1, 1), cfg.shared_bytes, cfg)


def reference_backward(q, k, v, do, causal: bool, softmax_scale: float | None = None):
    """float64 numpy gradients (dQ, dK, dV) of `templates.attention.reference`'s O at dO."""
    q64, k64, v64, do64 = (np.asarray(x, np.float64) for x in (q, k, v, do))
    b, sq, h, d = q64.shape
    sk, hkv = k64.shape[1], k64.shape[2]
    g = h // hkv
    kk, vv = np.repeat(k64, g, axis=2), np.repeat(v64, g, axis=2)
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(d)
    s = np.einsum("bqhd,bkhd->bhqk", q64, kk) * scale
    if causal:
        allowed = np.arange(sk)[None, :] <= np.arange(sq)[:, None] + (sk - sq)
        s = np.where(allowed[None, None], s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    dvv = np.einsum("bhqk,bqhd->bkhd", p, do64)
    dp = np.einsum("bqhd,bkhd->bhqk", do64, vv)
    ds = p * (dp - (p * dp).sum(-1, keepdims=True))
    dq = np.einsum("bhqk,bkhd->bqhd", ds, kk) * scale
    dkk = np.einsum("bhqk,bqhd->bkhd", ds, q64) * scale
    fold = (b, sk, hkv, g)
    return (dq, dkk.reshape(*fold, d).sum(3), dvv.reshape(*fold, v64.shape[-1]).sum(3))
