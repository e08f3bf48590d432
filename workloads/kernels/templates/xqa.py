"""Decode attention for Hopper in the shape of TensorRT-LLM's XQA kernel (`mha_sm90.cu`,
`kernel_mha`), generated as PTX (sm_90a); the emitter is `templates.xqa_ptx`.

`xqa_kernel(group, ...)` -> `XqaKernel` computes, for one new token per request b and
q head h, O[b, h] = softmax(scale * Q[b, h] K[b, :seqlen_b, h / group]^T) V[b, :seqlen_b,
h / group] with K and V in a paged cache: pools [pages, kv heads, page tokens, 128]
(TensorRT-LLM's layout: a page holds its tokens of every kv head), an int32 block table
[batch, pages per sequence] and int32 `seqlens` [batch]. Q and O are [batch, heads, 128]
(bf16 or fp16), accumulation in f32.

What of XQA it reproduces (sources: /work/shared/notes/xqa-sm90.md):
* grid (1, sub-sequences, kv heads x batch), CTA (128, 1, 3) = 384 threads, not
  persistent: one CTA per (request, kv head[, sub-sequence]); all `group` q heads of the
  kv head in one CTA, padded to N = roundUp(group, 8), the N dimension of the wgmmas
  (swap-AB: S^T = K Q^T with the 64 tokens of a tile as M);
* warp roles: tid.z 0 the gemm0 warpgroup (K Q^T, mask, online softmax, P to shared
  memory as X), tid.z 1 the gemm1 warpgroup (rescale, O^T += V^T X^T, epilogue), tid.z 2
  the IO warps (one loads Q with 16-byte global loads into a 128B-swizzled buffer, one the
  K tiles, one the V tiles, the fourth exits);
* 64-token tiles, one per 64-token page; the loader warps read each tile's page index
  just in time (plain global load), then one elected lane issues the TMA box(es): K in
  two 128-byte head parts through two part buffers (one tile in flight for a 16-bit
  cache), V in two whole-tile buffers, X in two buffers;
* barrier pairs as XQA's: a consumer thread arrives with `expect_tx` of 1/128 of the
  buffer's bytes and waits (the loader posts no transaction count); the loader warp's 32
  lanes arrive on the `consumed` barrier and wait; consumers pre-arrive once;
* gemm0: 8 wgmma m64nNk16 per tile (both operands in shared memory), commit and wait 0
  after each K part; softmax scale by scale log2(e), mask only in the last tile, running
  max per q head over the sequence, exp2, per-warp column sums through shared memory;
* gemm1: waits X then V, rescales the accumulator by exp2(old max - new max), 8 wgmma
  m64nNk16 (V^T MN-major from shared memory, X^T from shared memory), wait 0;
* multi-block: sub-sequence s takes tiles s, s + n, s + 2n, ... (round robin),
  n = min(tiles, gridDim.y), CTAs past n exit after reading the sequence length; each
  writes a normalised partial O and (max, sum) per head to scratch, counts itself with
  `atom.global.inc` on a per-(request, kv head) semaphore that wraps to zero, and the
  last one merges all partials (running max and sum) and stores O, in the same kernel,
  loading two sub-sequences' partials (every column of both) before merging either.

Simplified (left out): the tile max is combined through per-warp shared slots and a
warpgroup barrier (XQA: a float atomicMax into a shared running max); X is stored with
scalar 16-bit `st.shared` (XQA: `stmatrix`), and X, V and the output staging have their
own buffers (XQA unions them); the rescale is unconditional (no `__ballot` skip); O is
stored with scalar 16-bit global stores from the accumulator fragment (XQA: transposed
through swizzled shared memory, 16-byte stores); partials are f32 (XQA: input precision)
and the last CTA's gemm1 warpgroup merges them with plain loads, two sub-sequences in
flight (XQA: 8 math warps fed by the IO warps' 4-deep cp.async ring); no fp8 cache, no
PDL (`griddepcontrol`), no cache hints, no attention sinks, beam width 1, head size 128
only, page size 64 only.
Units: bytes, tokens, elements.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from isa.errors import InputError
from isa.tensor_map import make_tensor_map

HEAD = 128                 # head elements (XQA's HEAD_ELEMS)
TILE = 64                  # tokens per tile (gemm0CtaTileNbTokens)
PART_BYTES = 128           # bytes of head per K part (cacheHeadPartBytes)
PTX_TYPE = {"bf16": "bf16", "fp16": "f16"}
MAX_GROUP = 32


@dataclass(frozen=True)
class Config:
    """Generator arguments and the shared-memory layout (bytes from the dynamic base)."""
    group: int                 # q heads per kv head
    dtype: str
    page: int                  # tokens per page (= TILE)
    multi_block: bool          # emit the sub-sequence scratch and merge

    ptx_type = property(lambda s: PTX_TYPE[s.dtype])
    n = property(lambda s: 8 * math.ceil(s.group / 8))          # ctaNbQHeads
    parts = property(lambda s: HEAD * 2 // PART_BYTES)
    q_part_bytes = property(lambda s: s.n * PART_BYTES)
    k_buf_bytes = property(lambda s: TILE * PART_BYTES)         # one part of one tile
    v_buf_bytes = property(lambda s: TILE * HEAD * 2)           # a whole tile
    x_buf_bytes = property(lambda s: s.n * TILE * 2)
    q_off = property(lambda s: 0)
    k_off = property(lambda s: _align(s.parts * s.q_part_bytes))
    v_off = property(lambda s: s.k_off + 2 * s.k_buf_bytes)
    x_off = property(lambda s: s.v_off + 2 * s.v_buf_bytes)
    side_bytes = property(lambda s: 9 * s.n * 4)   # per X buffer: wmax[4][N] sum[4][N] m[N]
    side_off = property(lambda s: _align(s.x_off + 2 * s.x_buf_bytes))
    bar_off = property(lambda s: s.side_off + 2 * s.side_bytes)
    flag_off = property(lambda s: s.bar_off + 8 * 13)
    shared_bytes = property(lambda s: s.flag_off + 8)

    def bar(self, name: str, i: int = 0) -> int:
        """Offset of mbarrier `name` (q, kprod, kcons, vprod, vcons, xprod, xcons)[i]."""
        order = {"q": 0, "kprod": 1, "kcons": 3, "vprod": 5, "vcons": 7, "xprod": 9,
                 "xcons": 11}
        return self.bar_off + 8 * (order[name] + i)

    @property
    def entry(self) -> str:
        return f"xqa_decode_{self.dtype}_g{self.group}_pg{self.page}" + \
            ("_mb" if self.multi_block else "")


def _align(n: int, a: int = 1024) -> int:
    return (n + a - 1) // a * a


@dataclass(frozen=True)
class XqaKernel:
    """A generated XQA-style decode kernel; `grid` and `args` build its launch."""
    ptx: str
    entry: str
    block: tuple[int, int, int]
    shared_bytes: int
    config: Config

    def grid(self, batch: int, kv_heads: int, sub_seqs: int = 1) -> tuple[int, int, int]:
        return (1, sub_seqs, kv_heads * batch)

    def args(self, q, k_pool, v_pool, out, block_table, seqlens, *, sub_seqs: int = 1,
             part_o=None, part_ml=None, semaphores=None,
             softmax_scale: float | None = None) -> list:
        """Arguments for `isa.run_kernel`: q and out [B, H, 128]; k_pool and v_pool [pages,
        Hkv, page, 128] (numpy arrays or `isa.ShapeOnly`); block_table int32 [B, pages
        per sequence] and seqlens int32 [B] (real arrays: the kernel reads them). With
        `multi_block`: part_o f32 [B, Hkv, sub_seqs, N, 128], part_ml f32 [B, Hkv,
        sub_seqs, N, 2] and semaphores uint32 [B x Hkv], zeroed (left zeroed)."""
        cfg = self.config
        b, h, d = _shape(q, 3, "q")
        pages, hkv, page, dk = _shape(k_pool, 4, "k_pool")
        if d != HEAD or dk != HEAD or page != cfg.page:
            raise InputError(f"xqa args: head {d}/{dk} and page {page}; accepted head "
                             f"{HEAD} and page {cfg.page}")
        if h != hkv * cfg.group:
            raise InputError(f"xqa args: {h} q heads for {hkv} kv heads; accepted "
                             f"{hkv * cfg.group} (group {cfg.group})")
        for name, arr, want in (("v_pool", v_pool, tuple(k_pool.shape)),
                                ("out", out, (b, h, d))):
            if tuple(arr.shape) != want:
                raise InputError(f"xqa args: {name} has shape {tuple(arr.shape)}; "
                                 f"accepted {want}")
        for name, arr, shape in (("block_table", block_table, None),
                                 ("seqlens", seqlens, (b,))):
            if not isinstance(arr, np.ndarray) or arr.dtype != np.int32 or \
                    (shape and arr.shape != shape) or arr.shape[0] != b:
                raise InputError(f"xqa args: {name} must be an int32 numpy array with "
                                 f"{b} rows")
        pps = int(block_table.shape[1])
        if seqlens.min() < 1 or seqlens.max() > pps * page or block_table.min() < 0 \
                or block_table.max() >= pages:
            raise InputError(f"xqa args: seqlens in 1 .. {pps * page} and block_table "
                             f"entries in [0, {pages}) accepted")
        if sub_seqs > 1 and not cfg.multi_block:
            raise InputError("xqa args: sub_seqs > 1 needs a kernel built with multi_block")
        scratch = [part_o, part_ml, semaphores] if cfg.multi_block else []
        if cfg.multi_block:
            want = {"part_o": (b, hkv, sub_seqs, cfg.n, HEAD),
                    "part_ml": (b, hkv, sub_seqs, cfg.n, 2), "semaphores": (b * hkv,)}
            for name, arr in zip(want, scratch, strict=True):
                if arr is None or tuple(arr.shape) != want[name]:
                    raise InputError(f"xqa args: multi_block needs {name} of shape "
                                     f"{want[name]}")
        scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(HEAD)
        box = (1, 1, page, PART_BYTES // 2)
        tk = _map(k_pool, box, 2)
        tv = _map(v_pool, box, 3)
        return [tk, tv, k_pool, v_pool, q, out, block_table, seqlens, pps, hkv,
                np.float32(scale * math.log2(math.e)), *scratch]


def _shape(arr, ndim: int, name: str) -> tuple[int, ...]:
    if not hasattr(arr, "shape") or len(arr.shape) != ndim:
        raise InputError(f"xqa args: {name} must be a {ndim}-D tensor")
    return tuple(int(x) for x in arr.shape)


def _map(arr, box, arg: int) -> np.ndarray:
    if isinstance(arr, np.ndarray):
        return make_tensor_map(arr, box, swizzle=128, arg=arg)
    return make_tensor_map(0, box, swizzle=128, arg=arg, shape=tuple(arr.shape),
                           dtype=arr.dtype)


def sub_sequences(sms: int, batch: int, kv_heads: int, max_seqlen: int) -> int:
    """gridDim.y of XQA's launch (`computeNbSubSeqPerSeqHopperF8MHA`): min(max(1,
    round(floor(3 SMs / (batch kv heads)) x 0.25)), tiles of the longest sequence); C's
    round (half away from zero)."""
    per = (3 * sms) // (batch * kv_heads)
    return min(max(1, math.floor(per * 0.25 + 0.5)), math.ceil(max_seqlen / TILE))


def xqa_kernel(group: int, dtype: str = "bf16", page: int = TILE,
               multi_block: bool = False) -> XqaKernel:
    """Generate the XQA-style decode kernel (module docstring)."""
    from workloads.kernels.templates import xqa_ptx

    if not isinstance(group, int) or not 1 <= group <= MAX_GROUP:
        raise InputError(f"xqa_kernel: group={group!r}; accepted 1 .. {MAX_GROUP}")
    if dtype not in PTX_TYPE:
        raise InputError(f"xqa_kernel: dtype={dtype!r}; accepted {', '.join(PTX_TYPE)}")
    if page != TILE:
        raise InputError(f"xqa_kernel: page={page!r}; accepted {TILE} (one page per tile)")
    cfg = Config(group, dtype, page, bool(multi_block))
    return XqaKernel(xqa_ptx.emit(cfg), cfg.entry, (128, 1, 3), cfg.shared_bytes, cfg)


def reference(q, k_pool, v_pool, block_table, seqlens,
              softmax_scale: float | None = None) -> np.ndarray:
    """float64 numpy decode attention over the paged cache, O [B, H, 128]."""
    q64 = np.asarray(q, np.float64)
    b, h, d = q64.shape
    hkv, page = k_pool.shape[1], k_pool.shape[2]
    g = h // hkv
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(d)
    out = np.zeros((b, h, d))
    for i in range(b):
        n = int(seqlens[i])
        pages = block_table[i, :math.ceil(n / page)]
        k = np.asarray(k_pool[pages], np.float64).transpose(0, 2, 1, 3).reshape(-1, hkv, d)[:n]
        v = np.asarray(v_pool[pages], np.float64).transpose(0, 2, 1, 3).reshape(-1, hkv, d)[:n]
        for j in range(h):
            s = k[:, j // g] @ q64[i, j] * scale
            p = np.exp(s - s.max())
            out[i, j] = p @ v[:, j // g] / p.sum()
    return out
