"""Fused attention forward for Hopper, FlashAttention-3 style, generated as PTX (sm_90a);
also the engine of the MLA decode template (`templates.mla`).

`attention_kernel(...)` -> `AttentionKernel` computes, per batch b, query s and head h,
O[b, s, h] = softmax(scale * Q[b, s, h] K[b, :, h / group]^T) V[b, :, h / group]
(GQA: `group` q heads share one kv head), optionally causal (bottom-right aligned as
FlashAttention 2/3: key j is visible to query s when j <= s + seqlen_k - seqlen_q).
Tensors are row-major Q [B, Sq, H, D], K [B, Sk, Hkv, D], V [B, Sk, Hkv, Dv], O [B, Sq,
H, Dv] in bf16 or fp16, or (`dtype` "fp8") Q, K, V in e4m3 with O in bf16; f32
accumulation; also the log-sum-exp per row (base 2, of the scaled scores) into lse
[splits, B, Sq, H].

Kernel structure (`block` = 128 x (consumers + 1) threads, one CTA per m_tile rows):

* rows: normally m_tile consecutive queries of one q head (grid (ceil(Sq / m_tile), H,
  B x splits)); with `pack` = group (decode), the rows are (query, q head) pairs of one
  kv head, R = s x group + g (grid (ceil(Sq x group / block_rows), Hkv, B x splits)), so
  the q heads that share K/V share one CTA (FA3's PackGQA, FlashMLA's head packing); a
  CTA holds whole groups (block_rows = m_tile // group x group rows when group < m_tile,
  e.g. 60 of 64 rows for 12 heads) or a 64/128-head slice of a larger group.
* shared-memory atoms: rows of 128 bytes (64 columns, 128B swizzle) when the head dim is
  a multiple of 64; for head dim 96 rows of 64 bytes (32 columns, 64B swizzle, three atoms
  per row), the atom CUTLASS's `ss_smem_selector` picks when 64 does not divide the K (or
  MN) extent and FA3 uses for its hdim-96 kernels; wgmma descriptors use the matching
  swizzle mode (K-major Q/K, MN-major V).
* producer warp (one elected lane, `setmaxnreg.dec` to 24): TMA of the Q block (5-D map,
  box 1 x m_tile x one atom's columns), then for each KV block of `kv_block`
  keys the K and V boxes (4-D maps) into a ring of `stages` buffers with full/empty
  mbarriers. With `v_from_k` (MLA) V is the first Dv columns of K: no V copies, the P.V
  wgmma reads the K tile.
* consumer warpgroups (64 rows each: m_tile 64, 128 or 192, `setmaxnreg.inc` to
  `consumer_regs`: 240, 232 for two CTAs per SM, 160 for three warpgroups as FA3), per
  KV block: S = Q K^T (SS wgmma m64 n kv_block k16, swizzled K-major descriptors), then
  wait; mask (-inf past seqlen_k and, causal, above the diagonal; only in blocks that
  need it);
  online softmax (row max over the 4 lanes by `shfl.bfly`, exponent by `ex2.approx` of
  s log2(e) scale - m, running row sums, O rescaled); P converted to 16-bit pairs, which
  are the A fragment of the RS wgmma O += P V (V MN-major, transposed descriptor, chunks
  of at most 256 columns); then release the stage. Causal CTAs stop at their diagonal.
* `schedule` "fa3" (FA3's `IntraWGOverlap` with `UseSchedulerBarrier`; not with
  `v_from_k` or m_tile 192): K and V of a stage get separate full/empty mbarriers (the
  producer loads K, then V, each when its own slot is free); the first block runs alone
  (QK^T, wait, softmax, P), then per block n one step issues S = Q K_n^T and
  O += P_(n-1) V_(n-1) as two commit groups, waits for S only (`wait_group 1`), releases
  K_n, masks and runs the softmax statistics on S while the P.V runs, waits for it,
  releases V_(n-1), rescales O and packs P_n; the last P.V follows the loop. With two
  consumer warpgroups their GEMM issues alternate (ping-pong): a warpgroup waits on its
  token mbarrier before issuing a step's GEMMs and arrives (one arrival per warp) on the
  other's after, and warpgroup 1 gives warpgroup 0 the first token, as FA3's
  `warp_scheduler_barrier_sync/arrive` and `mma_init` do with named barriers (here
  mbarriers: the interpreter runs `bar.sync` but not `bar.arrive`), so one warpgroup's
  softmax runs under the other's GEMMs. "plain": per block QK^T, wait, softmax, P.V,
  wait, then one release of the stage.
* fp8 (FA3's FP8 forward with row-major V, head dims 128 and 256, Dv = D): Q/K/V atoms are
  128-byte rows of 128 e4m3 columns; S = Q K^T is an SS wgmma m64 n kv_block k32 (both
  K-major). The P.V wgmma k32 needs V K-major too, so each stage holds K, V as its TMA box
  lands, and V transposed, [Dv rows, keys] in atoms of 128 keys (128B swizzle; a last
  atom of a kv_block that is not a multiple of 128 is partly used), each with its own
  full/empty mbarriers. The whole producer warpgroup stays (`setmaxnreg.dec` 32): one
  elected lane issues Q, K one block ahead of V (FA3's load order) and V into the
  as-loaded slot; then all 128 threads transpose V(n) as FA3's producer does,
  `ldmatrix.x4.trans` (b16) + `prmt` + `stmatrix.x4` per 16 keys x 32 columns, fence the
  writes for the async proxy (`fence.proxy.async`), meet on a named barrier, and one
  thread arrives on the transposed V's full barrier and the as-loaded slot's empty one.
  Softmax as FA3's fp8: q_descale k_descale folded into the scale (`args`), P =
  exp2(S scale log2(e) - max + 8) in [0, 256] (`Max_offset`), converted in registers to
  e4m3 (saturating) in the order of the k32 A fragment: the accumulator gives a lane S
  columns 2t, 2t+1, 8+2t, 9+2t of each 16, the A fragment wants 4 consecutive k per
  register, so a register packs S columns (2t, 2t+1, 8+2t, 9+2t) and the transpose
  writes V's keys in that same order (FA3 permutes the accumulator registers to the FP8
  A-operand layout, notes fa3-forward.md; its exact permutation is not in the notes and
  this order is derived from the fragment layouts); the permutation is of the summed dimension,
  so O comes out in order (the notes record FA3 un-permuting O; here each V column's
  keys go to that column's own row, so nothing is left to undo). v_descale and 1 /
  rowsum scale O at the end; lse drops the 8. Either schedule: with "plain" the consumer
  waits for K before QK^T and for the transposed V before P.V, and releases both.
* epilogue: O / rowsum to O (or, with `split`, f32 partials O_z [splits, B, Sq, H, Dv]
  and lse_z for `emit_combine`'s kernel). Split z does KV blocks [z bps, (z + 1) bps).
  With `inline_combine` (split only) there is no combine kernel: each CTA then counts
  itself on its row block's int32 counter (membar.gl, one atomic add, the count shared
  through an 8-byte flag after the mbarriers), and the CTA that counts last merges every
  split's partials of its fragment rows into `out` (per split, both rows' lse and partial
  loads issued before use) and zeroes the counter, as decode kernels with a multi-block
  mode do (FlashDecoding, TensorRT-LLM's XQA).
* paged KV cache (`page` keys per page, a multiple of kv_block): K and V are pools of pages
  [P, page, Hkv, D] and an int32 block table [B, pages per sequence] names each sequence's
  pages (vLLM, TensorRT-LLM). The producer loads the first block's pool page before its
  loop and each next block's right after issuing the current block's copies (one
  dependent global load, in flight while it waits for the next free stage; FA3's paged
  KV loads its page indices ahead the same way), and the K/V boxes take (key within the
  page, pool page) as their outer coordinates.

Left out (simplifications timing studies should know): with "plain", the warpgroups of a
CTA overlap only as the warp schedulers interleave them, and K and V share one full
barrier per stage; with "fa3", FA3's `RescaleOBeforeGemm` (head dim > 128: O rescaled
before the P.V issue, here always after its wait), the persistent tile scheduler and the
QueryEmpty handshake (one tile per CTA); fp8 only for prefill-shaped launches (no packed
heads, split-KV, paging or V from K), head dims 128 and 256 (FA3 also has 64, 96 and 192,
and a column-major-V input that needs no transpose), descales as scalar kernel parameters
(FA3 reads them from device tensors), no e5m2; head dims are multiples of 64 or 96; P.V
always takes P from registers (FA3 stages P in shared memory for its hdim-96 tile); with
Dv = 512 (MLA) one warpgroup holds the whole 64 x 512 f32 O (256 registers: FlashMLA
splits it over two warpgroups exchanging P through shared memory); no dropout, ALiBi,
sliding window or varlen batches; the combine keeps no lse.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from isa.errors import InputError
from isa.tensor_map import make_tensor_map
from workloads.kernels.templates import attention_combine_ptx, attention_ptx

MAX_SHARED = 232448            # 227 KiB opt-in shared memory per CTA (sm_90)
ELEM = {"bf16": 2, "fp16": 2}      # the 16-bit types (the backward and MLA take these)
DTYPE_BYTES = {**ELEM, "fp8": 1}    # the forward's input types (fp8: e4m3)
PTX_TYPE = {"bf16": "bf16", "fp16": "f16", "fp8": "e4m3"}
NUMPY_IN = {"bf16": "bfloat16", "fp16": "float16", "fp8": "float8_e4m3fn"}
OUT_DTYPE = {"bf16": "bf16", "fp16": "fp16", "fp8": "bf16"}   # O's type per input type
SCHEDULES = ("plain", "fa3")
FP8_HEADDIMS = (128, 256)
VT_ATOM_KEYS = attention_ptx.VT_ATOM_KEYS


@dataclass(frozen=True)
class Config:
    """Validated generator arguments plus the shared-memory layout the emitter uses."""
    headdim: int
    headdim_v: int
    m_tile: int
    kv_block: int
    stages: int
    dtype: str
    causal: bool
    pack: int             # 0: one q head per CTA; G: rows are (query, head) of G heads
    split: bool
    v_from_k: bool
    consumer_regs: int = 240   # consumers' setmaxnreg.inc (232: two CTAs/SM; 160: m_tile 192)
    inline_combine: bool = False   # split: the last CTA of a row block combines (no kernel)
    page: int = 0         # paged KV cache: keys per page (0: contiguous K/V)
    schedule: str = "plain"   # consumer mainloop: "plain" or "fa3" (module docstring)

    ptx_type = property(lambda s: PTX_TYPE[s.dtype])
    out_type = property(lambda s: PTX_TYPE[OUT_DTYPE[s.dtype]])
    elem = property(lambda s: DTYPE_BYTES[s.dtype])
    fp8 = property(lambda s: s.dtype == "fp8")
    consumers = property(lambda s: s.m_tile // 64)
    threads = property(lambda s: 128 * (s.consumers + 1))
    fa3 = property(lambda s: s.schedule == "fa3")
    pingpong = property(lambda s: s.fa3 and s.consumers > 1)
    split_kv_bars = property(lambda s: s.fa3 or s.fp8)
    """K and V of a stage have their own full/empty mbarriers (FA3's two pipelines; fp8:
    V is ready when the producer has transposed it, not when its TMA lands)."""
    ctas_per_sm = property(lambda s: 2 if s.consumer_regs == 232 else 1)
    """`.minnctapersm`: with two CTAs per SM ptxas must fit a thread in 128 registers
    (the consumers' 232 come from the producer's `setmaxnreg.dec`)."""
    k_cols = property(lambda s: atom_columns(s.headdim, s.elem))
    """Columns of one Q/K shared-memory atom: 128-byte rows (128B swizzle; 64 16-bit or
    128 fp8 columns), or 64-byte rows (64B swizzle) for a head dim whose rows are not a
    multiple of 128 bytes (16-bit 96), the atom CUTLASS's `ss_smem_selector` picks for
    such a K extent."""
    v_cols = property(lambda s: s.k_cols if s.v_from_k else atom_columns(s.headdim_v, s.elem))
    k_span = property(lambda s: s.elem * s.k_cols)   # bytes per atom row (= swizzle span)
    v_span = property(lambda s: s.elem * s.v_cols)
    d_atoms = property(lambda s: s.headdim // s.k_cols)
    v_atoms = property(lambda s: s.headdim_v // s.v_cols)
    q_bytes = property(lambda s: s.d_atoms * s.m_tile * s.k_span)
    q_tx_bytes = property(lambda s: s.d_atoms * s.block_rows * s.k_span)

    @property
    def block_rows(self) -> int:
        """Rows a CTA computes: m_tile, or whole (query, head) groups when packing fewer
        than m_tile heads (the Q box holds m_tile // pack queries of pack heads)."""
        if self.pack and self.pack < self.m_tile:
            return self.m_tile // self.pack * self.pack
        return self.m_tile
    k_bytes = property(lambda s: s.d_atoms * s.kv_block * s.k_span)
    v_bytes = property(lambda s: 0 if s.v_from_k else s.v_atoms * s.kv_block * s.v_span)
    """V as its TMA box lands (keys x Dv; with fp8 the producer's source, `vt_bytes` the
    transposed copy the P.V reads)."""
    vt_atoms = property(lambda s: -(-s.kv_block // VT_ATOM_KEYS) if s.fp8 else 0)
    vt_atom_bytes = property(lambda s: s.headdim_v * VT_ATOM_KEYS)
    vt_bytes = property(lambda s: s.vt_atoms * s.vt_atom_bytes)
    stage_bytes = property(lambda s: s.k_bytes + s.vt_bytes + s.v_bytes)
    """Per stage: K, then (fp8) the transposed V, then V as loaded."""
    barrier_offset = property(lambda s: s.q_bytes + s.stages * s.stage_bytes)
    ring_bars = property(lambda s: (6 if s.fp8 else 4 if s.split_kv_bars else 2) * s.stages)
    flag_offset = property(lambda s: s.barrier_offset + 8 * (
        1 + s.ring_bars + (s.consumers if s.pingpong else 0)))
    shared_bytes = property(lambda s: s.flag_offset + (8 if s.inline_combine else 0))

    def full_bar(self, s: int) -> int:
        return 8 + 8 * s

    def empty_bar(self, s: int) -> int:
        return 8 + 8 * (self.stages + s)

    def full_v_bar(self, s: int) -> int:
        return 8 + 8 * (2 * self.stages + s)

    def empty_v_bar(self, s: int) -> int:
        return 8 + 8 * (3 * self.stages + s)

    def full_raw_bar(self, s: int) -> int:
        """fp8: V's TMA box of stage s has landed (the producer's transpose waits)."""
        return 8 + 8 * (4 * self.stages + s)

    def empty_raw_bar(self, s: int) -> int:
        """fp8: the producer has transposed stage s's V box (its slot may be reloaded)."""
        return 8 + 8 * (5 * self.stages + s)

    def token_bar(self, warpgroup: int) -> int:
        """The ping-pong token mbarrier of a consumer warpgroup."""
        return 8 + 8 * (self.ring_bars + warpgroup)

    @property
    def v_chunks(self) -> list[tuple[int, int]]:
        """(first column, width) of the O accumulator chunks (wgmma N <= 256)."""
        return [(c, min(256, self.headdim_v - c)) for c in range(0, self.headdim_v, 256)]

    @property
    def entry(self) -> str:
        name = (f"attn_fwd_{self.dtype}_d{self.headdim}v{self.headdim_v}_m{self.m_tile}"
                f"n{self.kv_block}_s{self.stages}")
        return name + ("_causal" if self.causal else "") + \
            (f"_pack{self.pack}" if self.pack else "") + ("_split" if self.split else "") + \
            ("_vk" if self.v_from_k else "") + \
            (f"_r{self.consumer_regs}" if self.consumer_regs != 240 else "") + \
            ("_ic" if self.inline_combine else "") + (f"_pg{self.page}" if self.page else "") + \
            ("_fa3" if self.fa3 else "")

    @property
    def combine_entry(self) -> str:
        return f"attn_combine_{self.dtype}_v{self.headdim_v}"


@dataclass(frozen=True)
class AttentionKernel:
    """A generated kernel (plus, with `split`, its combine kernel); see `args`."""
    ptx: str
    entry: str
    block: tuple[int, int, int]
    shared_bytes: int
    config: Config
    combine_ptx: str = ""

    def rows(self, seqlen_q: int) -> int:
        return seqlen_q * (self.config.pack or 1)

    def grid(self, batch: int, heads: int, seqlen_q: int, splits: int = 1,
             group: int = 1) -> tuple[int, int, int]:
        cfg = self.config
        y = heads // group if cfg.pack else heads
        return (math.ceil(self.rows(seqlen_q) / cfg.block_rows), y, batch * splits)

    def combine_grid(self, batch: int, heads: int, seqlen_q: int) -> tuple[int, int, int]:
        return (batch * seqlen_q * heads, 1, 1)

    def args(self, q, k, v, o, lse, *, splits: int = 1, blocks_per_split: int | None = None,
             softmax_scale: float | None = None, out=None, counters=None,
             block_table=None, seqlen_k: int | None = None, q_descale: float = 1.0,
             k_descale: float = 1.0, v_descale: float = 1.0) -> list:
        """Arguments for `isa.run_kernel`: q [B, Sq, H, D], k [B, Sk, Hkv, D], v [B, Sk,
        Hkv, Dv] (None with v_from_k: V = k[..., :Dv]), o [B, Sq, H, Dv] (f32 [splits, B,
        Sq, H, Dv] partials when split), lse f32 [splits, B, Sq, H]; numpy arrays or
        `isa.ShapeOnly` tensors (any object with `shape` and `dtype`). With
        `inline_combine` also `out` [B, Sq, H, Dv] (the combined O) and `counters`, zeroed
        int32 with one entry per CTA of a split (`counter_count`), left zeroed.
        With `page` (paged KV cache) k and v are page pools [P, page, Hkv, D] / [P, page,
        Hkv, Dv], `block_table` int32 [B, pages per sequence] names the pool page of each
        sequence's i-th page (read by the kernel, so a real array even in timing mode) and
        `seqlen_k` gives the keys per sequence (at most pages per sequence x page).
        fp8: q, k, v in e4m3, o in bf16, and FA3's per-tensor descale factors (the real
        values are q_descale q etc.): q_descale k_descale is folded into the softmax
        scale, v_descale multiplies O at the end; other types accept only 1.0."""
        cfg = self.config
        if not cfg.fp8 and (q_descale, k_descale, v_descale) != (1.0, 1.0, 1.0):
            raise InputError(f"attention args: descale factors ({q_descale}, {k_descale}, "
                             f"{v_descale}) for a {cfg.dtype} kernel; accepted 1.0 (fp8 "
                             "kernels only)")
        b, sq, h, d = _shape(q, 4, "q")
        if cfg.page:
            pool, page, hkv, _ = _shape(k, 4, "k")
            pps = _paging(block_table, b, pool, page, cfg.page, seqlen_k)
            sk = int(seqlen_k)
        else:
            _, sk, hkv, _ = _shape(k, 4, "k")
        if cfg.v_from_k:
            v = k
        dv = cfg.headdim_v
        kv_rows = (k.shape[0], cfg.page) if cfg.page else (b, sk)
        want = {"q": (b, sq, h, cfg.headdim), "k": (*kv_rows, hkv, cfg.headdim),
                "v": (*kv_rows, hkv, cfg.headdim if cfg.v_from_k else dv),
                "o": (splits, b, sq, h, dv) if cfg.split else (b, sq, h, dv),
                "lse": (splits, b, sq, h)}
        for name, arr in (("q", q), ("k", k), ("v", v), ("o", o), ("lse", lse)):
            if tuple(arr.shape) != want[name]:
                raise InputError(f"attention args: {name} has shape {tuple(arr.shape)}; "
                                 f"accepted {want[name]} for this kernel and q {q.shape}")
        if h % hkv:
            raise InputError(f"attention args: {h} q heads are not a multiple of {hkv} kv "
                             "heads; accepted heads = group x kv_heads")
        group = h // hkv
        if cfg.pack and cfg.pack != group:
            raise InputError(f"attention args: kernel packs {cfg.pack} heads per kv head, "
                             f"tensors have {group}; accepted heads / kv_heads == {cfg.pack}")
        if splits > 1 and not cfg.split:
            raise InputError(f"attention args: splits={splits} for a kernel built without "
                             "split; accepted splits=1")
        nb = math.ceil(sk / cfg.kv_block)
        bps = blocks_per_split or math.ceil(nb / splits)
        scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(cfg.headdim)
        rows_box = (max(1, cfg.block_rows // group), min(group, cfg.m_tile)) if cfg.pack \
            else (cfg.m_tile, 1)
        kc, vc = cfg.k_cols, cfg.v_cols
        tq = _map(q, (b, sq, hkv, group, d), (1, rows_box[0], 1, rows_box[1], kc), 3)
        tk = _map(k, (*kv_rows, hkv, cfg.headdim), (1, cfg.kv_block, 1, kc), 4)
        tv = tk if cfg.v_from_k else _map(v, (*kv_rows, hkv, dv), (1, cfg.kv_block, 1, vc), 5)
        out_args = [block_table, pps] if cfg.page else []
        if cfg.inline_combine:
            n_ctr = self.counter_count(b, h, sq, group)
            if out is None or tuple(out.shape) != (b, sq, h, dv):
                raise InputError(f"attention args: inline combine needs out of shape "
                                 f"{(b, sq, h, dv)}")
            if counters is None or int(np.prod(counters.shape)) < n_ctr:
                raise InputError(f"attention args: inline combine needs {n_ctr} int32 "
                                 "counters (zeroed)")
            out_args += [out, counters]
        scale_log2 = np.float32(scale * q_descale * k_descale * math.log2(math.e))
        fp8_args = [np.float32(v_descale)] if cfg.fp8 else []
        return [tq, tk, tv, q, k, v, o, lse, b, sq, sk, h, group, splits, bps, scale_log2,
                *fp8_args, *out_args]

    def counter_count(self, batch: int, heads: int, seqlen_q: int, group: int) -> int:
        """Counters an inline-combine launch needs: one per (row block, head or kv head,
        batch), the CTAs of one split."""
        x, y, _ = self.grid(batch, heads, seqlen_q, 1, group)
        return x * y * batch


def _paging(table, batch: int, pool: int, page: int, want_page: int, seqlen_k) -> int:
    """Pages per sequence of a paged launch, after checking the pool's page size, the block
    table (int32 [batch, pages], entries within the pool) and `seqlen_k`."""
    if page != want_page:
        raise InputError(f"attention args: k pool pages hold {page} keys; accepted "
                         f"{want_page} (the kernel's page)")
    if not isinstance(table, np.ndarray) or table.dtype != np.int32 or table.ndim != 2 \
            or table.shape[0] != batch:
        raise InputError(f"attention args: a paged kernel needs block_table, an int32 numpy "
                         f"array [{batch}, pages per sequence]")
    if table.size and (table.min() < 0 or table.max() >= pool):
        raise InputError(f"attention args: block_table entries must lie in [0, {pool}) "
                         "(pages of the k/v pools)")
    pps = int(table.shape[1])
    if seqlen_k is None or not 0 < int(seqlen_k) <= pps * page:
        raise InputError(f"attention args: seqlen_k={seqlen_k!r}; accepted 1 .. "
                         f"{pps * page} ({pps} pages of {page} keys)")
    return pps


def _shape(arr, ndim: int, name: str) -> tuple[int, ...]:
    if not hasattr(arr, "shape") or len(arr.shape) != ndim:
        raise InputError(f"attention args: {name} must be a {ndim}-D tensor")
    return tuple(int(x) for x in arr.shape)


def atom_columns(headdim: int, elem: int = 2) -> int:
    """Columns of a shared-memory atom for this head dim and element size in bytes
    (`Config.k_cols`): 128-byte rows when they divide a row, else 64-byte rows."""
    return (128 if headdim * elem % 128 == 0 else 64) // elem


def _map(arr, shape, box, arg: int) -> np.ndarray:
    """Tensor map over `arr` viewed as `shape` (a numpy array or a ShapeOnly tensor),
    swizzled over the box's inner extent (128 or 64 bytes, its atom's rows)."""
    swizzle = np.dtype(arr.dtype).itemsize * box[-1]
    if isinstance(arr, np.ndarray):
        if not arr.flags.c_contiguous:
            raise InputError(f"attention args: argument {arg} must be C-contiguous")
        return make_tensor_map(arr.reshape(shape), box, swizzle=swizzle, arg=arg)
    return make_tensor_map(0, box, swizzle=swizzle, arg=arg, shape=shape, dtype=arr.dtype)


def _bad(arg: str, value, accepted: str) -> InputError:
    return InputError(f"attention_kernel: {arg}={value!r} is not accepted; accepted: {accepted}")


def attention_kernel(headdim: int = 128, headdim_v: int | None = None, m_tile: int = 128,
                     kv_block: int = 128, stages: int = 2, dtype: str = "bf16",
                     causal: bool = False, pack: int = 0, split: bool = False,
                     v_from_k: bool = False, consumer_regs: int | None = None,
                     inline_combine: bool = False, page: int = 0,
                     schedule: str = "plain") -> AttentionKernel:
    """Generate the warp-specialized TMA + wgmma attention forward (module docstring)."""
    headdim_v = headdim if headdim_v is None else headdim_v
    if dtype not in DTYPE_BYTES:
        raise _bad("dtype", dtype, ", ".join(DTYPE_BYTES))
    for name, d in (("headdim", headdim), ("headdim_v", headdim_v)):
        if not isinstance(d, int) or d <= 0 or (d % 64 and d != 96) or d > 576:
            raise _bad(name, d, "a multiple of 64 up to 576, or 96")
    if v_from_k and atom_columns(headdim) != atom_columns(headdim_v):
        raise _bad("headdim_v", headdim_v, f"with v_from_k, a multiple of 64 when "
                   f"headdim={headdim} is (V is read from K's atoms)")
    if headdim_v > 256 and not v_from_k:
        raise _bad("headdim_v", headdim_v, "at most 256 (512 only with v_from_k, MLA)")
    if v_from_k and headdim_v > headdim:
        raise _bad("headdim_v", headdim_v, f"at most headdim={headdim} with v_from_k")
    if m_tile not in (64, 128, 192):
        raise _bad("m_tile", m_tile, "64, 128 or 192 (one, two or three consumer "
                   "warpgroups)")
    if not isinstance(kv_block, int) or kv_block % 16 or not 16 <= kv_block <= 256:
        raise _bad("kv_block", kv_block, "a multiple of 16 from 16 to 256")
    if not isinstance(stages, int) or stages < 1:
        raise _bad("stages", stages, "a positive integer")
    if not isinstance(pack, int) or pack < 0 or (pack > m_tile and pack % m_tile):
        raise _bad("pack", pack, f"0, at most m_tile={m_tile}, or a multiple of m_tile")
    regs = (160,) if m_tile == 192 else (232, 240)
    consumer_regs = regs[-1] if consumer_regs is None else consumer_regs
    if consumer_regs not in regs:
        raise _bad("consumer_regs", consumer_regs, "160 with m_tile 192 (three consumer "
                   "warpgroups), else 240 (one CTA per SM) or 232 (two)")
    if inline_combine and not split:
        raise _bad("inline_combine", inline_combine, "False without split")
    if schedule not in SCHEDULES:
        raise _bad("schedule", schedule, ", ".join(SCHEDULES))
    if schedule == "fa3" and (v_from_k or m_tile == 192):
        raise _bad("schedule", schedule, "plain with v_from_k (MLA: V is read from the K "
                   "tile, the 64 x 512 O leaves no registers for S and P in flight) or "
                   "m_tile 192 (S, P and O in flight need more than 160 registers; FA3 "
                   "stages P in shared memory there)")
    if dtype == "fp8":
        _check_fp8(headdim, headdim_v, m_tile, kv_block, pack, split, v_from_k, page)
    if page and (not isinstance(page, int) or page % kv_block or v_from_k):
        raise _bad("page", page, f"0, or a multiple of kv_block={kv_block} (not with "
                   "v_from_k)")
    cfg = Config(headdim, headdim_v, m_tile, kv_block, stages, dtype, bool(causal), pack,
                 bool(split), bool(v_from_k), consumer_regs, bool(inline_combine), page,
                 schedule)
    if cfg.shared_bytes > MAX_SHARED:
        raise _bad("stages", stages, f"a layout within {MAX_SHARED} bytes of shared memory: "
                   f"Q {cfg.q_bytes} B + {stages} x {cfg.stage_bytes} B = {cfg.shared_bytes} B")
    combine = attention_combine_ptx.emit_combine(cfg) if split and not inline_combine else ""
    return AttentionKernel(attention_ptx.emit(cfg), cfg.entry, (cfg.threads, 1, 1),
                           cfg.shared_bytes, cfg, combine)


def _check_fp8(headdim, headdim_v, m_tile, kv_block, pack, split, v_from_k, page) -> None:
    """The fp8 path's limits (module docstring): prefill tiles of one q head per CTA."""
    if headdim not in FP8_HEADDIMS or headdim_v != headdim:
        raise _bad("headdim", headdim, f"with dtype fp8, one of {FP8_HEADDIMS} and headdim_v "
                   "equal to it")
    if m_tile == 192:
        raise _bad("m_tile", m_tile, "64 or 128 with dtype fp8")
    if kv_block % 32:
        raise _bad("kv_block", kv_block, "a multiple of 32 with dtype fp8 (the P.V wgmma's "
                   "k32 steps)")
    for name, value in (("pack", pack), ("split", split), ("v_from_k", v_from_k),
                        ("page", page)):
        if value:
            raise _bad(name, value, "0/False with dtype fp8 (prefill only)")


def reference(q, k, v, causal: bool, softmax_scale: float | None = None) -> np.ndarray:
    """float64 numpy attention (the same conventions), O [B, Sq, H, Dv]."""
    q64, k64, v64 = (np.asarray(x, np.float64) for x in (q, k, v))
    b, sq, h, d = q64.shape
    sk, hkv = k64.shape[1], k64.shape[2]
    g = h // hkv
    kk = np.repeat(k64, g, axis=2)
    vv = np.repeat(v64, g, axis=2)
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(d)
    s = np.einsum("bqhd,bkhd->bhqk", q64, kk) * scale
    if causal:
        allowed = np.arange(sk)[None, :] <= np.arange(sq)[:, None] + (sk - sq)
        s = np.where(allowed[None, None], s, -np.inf)
    s -= s.max(-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(-1, keepdims=True)
    return np.einsum("bhqk,bkhd->bqhd", p, vv)
