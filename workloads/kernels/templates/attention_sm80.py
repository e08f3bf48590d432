"""Fused attention forward for Ampere, FlashAttention-2 style, generated as PTX (sm_80).

`attention_sm80_kernel(...)` -> `AttentionSm80Kernel` computes, per batch b, query s and head
h, O[b, s, h] = softmax(scale * Q[b, s, h] K[b, :, h / group]^T) V[b, :, h / group] (GQA:
`group` q heads share one kv head), optionally causal (bottom-right aligned as FlashAttention
2: key j is visible to query s when j <= s + seqlen_k - seqlen_q), with no instruction newer
than sm_80. Tensors are row-major K [B, Sk, Hkv, D], V [B, Sk, Hkv, Dv] and Q [B, Sq, H, D],
O [B, Sq, H, Dv] in bf16 or fp16, f32 accumulation; also the log-sum-exp per row (base 2,
of the scaled scores) into lse [splits, B, Sq, H].

Kernel structure (FlashAttention-2's `flash_fwd_kernel` / `flash_fwd_splitkv_kernel` on
sm_80, `Flash_fwd_kernel_traits<D, m_tile, kv_block, warps>`):

* one CTA per (m_tile query rows, head, batch x split), grid (ceil(Sq / m_tile), H, B x
  splits); `warps` warps, warp w owning the m16 row tiles 16 w + 16 warps a (a < mi =
  m_tile / (16 warps): 128 rows in 4 warps of 2 x 16 rows, or in 8 warps of 16 rows).
* rows through strides: the kernel's query s, head h lies at row b Sq H + s row_stride +
  h head_stride of Q, O and lse ([B, Sq, H] rows: row_stride H, head_stride 1). With
  row_stride 1 and head_stride group a launch over seqlen_q = group queries and
  Hkv heads of group 1 computes one query of every head (FlashAttention-2's
  `seqlenq_ngroups_swapped` for decode: a kv head's q heads share a CTA and its K/V).
* shared memory (dynamic, `shared_bytes`): Q [m_tile][D], K [kv_block][D], V [kv_block][Dv]
  in 16-bit elements; 16-byte chunk c of row r lies at chunk (c & ~7) | ((c ^ r) & 7)
  (CUTLASS's Swizzle<3,3,3> on 64-column blocks), so the 8 rows an `ldmatrix` reads at one
  logical chunk fall in 8 distinct 16-byte bank groups, and a warp's `cp.async` stores
  fill whole 128-byte lines: no bank conflict either way.
* global -> shared: `cp.async.cg.shared.global` of 16 bytes, thread t copying chunk t & 7
  of every 64-column block of rows (t >> 3) + 4 warps i; the source size 0 (zero fill) past
  Sq or Sk, addresses clamped into the tensor. The K/V ring is FlashAttention-2's: Q and
  the first K block in the prologue; per KV block n wait, `bar.sync`, issue V[n], S =
  Q K^T, wait, `bar.sync`, issue K[n + 1] (overlapping softmax and P V), so the V copy
  runs under QK^T and the next K copy under softmax and PV.
* S = Q K^T: per k16 step `ldmatrix.x4` of Q (one per m16 tile) and of K (one per 16
  keys), `mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}`; -inf past Sk and, causal,
  above the diagonal, only in the blocks that reach past the first masked key.
* online softmax in registers: row max over the 4 lanes of a row (`shfl.sync.bfly` 1, 2),
  exponents by `ex2.approx.ftz` of s scale log2(e) - m, running row sums per thread, O
  rescaled; P converted to 16-bit pairs (`cvt.rn.bf16x2.f32`) that are directly the A
  fragments of O += P V, whose B fragments are `ldmatrix.x4.trans` of V.
* epilogue: row sums reduced over the 4 lanes, O / rowsum stored as 16-bit pairs (with
  `split`: f32 partials O_z [splits, B, Sq, H, Dv] and lse_z for the combine kernel,
  FlashAttention-2's `flash_fwd_splitkv_combine_kernel`'s role, here the one-thread-per-
  column kernel of `attention_combine_ptx` assembled for sm_80). Split z does KV blocks
  [z bps, (z + 1) bps).

Requirements: head dims multiples of 64 up to 256; m_tile 64 or 128 with 16 or more rows
per warp; kv_block up to 256 keys, a multiple of the rows one cp.async pass fills (4 warps:
16, 8 warps: 32).
Left out: a paged KV cache (block tables), the softmax of one block overlapped with the
next block's QK^T (FlashAttention-2 does neither on sm_80 either), Q kept in registers
(`Is_Q_in_regs`), K and Q sharing shared memory, dropout, ALiBi, sliding windows, varlen
batches, rotary embedding inside the kernel.
Units: elements, bytes, threads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from isa.errors import InputError
from workloads.kernels.templates import attention_combine_ptx

PTX_TYPE = {"bf16": "bf16", "fp16": "f16"}
ELEM_BYTES = 2
CHUNK_BYTES = 16                 # one cp.async, one ldmatrix row
BLOCK_CHUNKS = 8                 # 16-byte chunks of a 64-column block (the swizzle's span)
NEG_INF = "0fFF800000"
ZERO = "0f00000000"
ENTRY_LOOP = "KV_LOOP"           # the main loop's head label
PTXAS_REGISTERS = {     # (headdim, headdim_v, m_tile, kv_block, warps): registers per thread
    (64, 64, 64, 128, 4): 168, (128, 128, 64, 64, 4): 161, (192, 128, 128, 64, 8): 167,
    (192, 192, 128, 64, 8): 205, (256, 256, 128, 64, 8): 237,
    (64, 64, 64, 256, 4): 240, (128, 128, 64, 128, 4): 214, (192, 128, 64, 64, 4): 167,
    (192, 192, 64, 64, 4): 205, (256, 256, 64, 64, 4): 237,
}
"""Registers per thread ptxas allocates, with no spill (`ptxas -arch=sm_80 -v`, CUDA 13.0, the
most over the causal and split variants, bf16 or fp16), for the configurations the op
chooses: the launch count the occupancy uses. 128 rows in 4 warps (32 rows a warp, as
FlashAttention-2's 128 x 64 tile for head dims 64 and 128) spill 24-40 bytes at 255 registers
here (the S and O fragments alone take 192), and 128 rows in 8 warps take 158-168 registers,
one CTA per A100 SM; so the op runs head dims up to 128 in 64-row CTAs of 4 warps (three per
SM, 192 rows in flight against FlashAttention-2's 256)."""


@dataclass(frozen=True)
class Config:
    """A validated choice of the template's parameters."""

    headdim: int = 128
    headdim_v: int = 128
    m_tile: int = 128
    kv_block: int = 64
    warps: int = 4
    dtype: str = "bf16"
    causal: bool = False
    split: bool = False

    threads = property(lambda s: 32 * s.warps)
    mi = property(lambda s: s.m_tile // (16 * s.warps))        # m16 tiles per warp
    nb = property(lambda s: s.kv_block // 8)                   # n8 tiles of S
    nv = property(lambda s: s.headdim_v // 8)                  # n8 tiles of O
    row_bytes = property(lambda s: s.headdim * ELEM_BYTES)
    v_row_bytes = property(lambda s: s.headdim_v * ELEM_BYTES)
    pass_rows = property(lambda s: s.threads // BLOCK_CHUNKS)  # rows one cp.async pass fills
    q_bytes = property(lambda s: s.m_tile * s.row_bytes)
    k_bytes = property(lambda s: s.kv_block * s.row_bytes)
    v_bytes = property(lambda s: s.kv_block * s.v_row_bytes)
    shared_bytes = property(lambda s: s.q_bytes + s.k_bytes + s.v_bytes)

    @property
    def entry(self) -> str:
        name = (f"attn_fwd_sm80_{self.dtype}_d{self.headdim}v{self.headdim_v}_m{self.m_tile}"
                f"n{self.kv_block}_w{self.warps}")
        return name + ("_causal" if self.causal else "") + ("_split" if self.split else "")

    @property
    def combine_entry(self) -> str:
        return f"attn_combine_sm80_{self.dtype}_v{self.headdim_v}"


@dataclass(frozen=True)
class AttentionSm80Kernel:
    """A generated kernel (plus, with `split`, its combine kernel); see `args`."""

    config: Config
    ptx: str
    combine_ptx: str = ""

    @property
    def entry(self) -> str:
        return self.config.entry

    @property
    def block(self) -> tuple[int, int, int]:
        return (self.config.threads, 1, 1)

    @property
    def shared_bytes(self) -> int:
        return self.config.shared_bytes

    @property
    def registers(self) -> int:
        """Registers per thread (`PTXAS_REGISTERS`); an `InputError` for a configuration
        ptxas was not asked about."""
        c = self.config
        key = (c.headdim, c.headdim_v, c.m_tile, c.kv_block, c.warps)
        if key not in PTXAS_REGISTERS:
            raise InputError(f"attention_sm80: no ptxas register count for (headdim, "
                             f"headdim_v, m_tile, kv_block, warps) = {key}; listed: "
                             f"{', '.join(map(str, sorted(PTXAS_REGISTERS)))}")
        return PTXAS_REGISTERS[key]

    def grid(self, batch: int, heads: int, seqlen_q: int, splits: int = 1
             ) -> tuple[int, int, int]:
        """(query blocks, heads, batch x splits) in the kernel's view of the rows."""
        return (math.ceil(seqlen_q / self.config.m_tile), heads, batch * splits)

    def combine_grid(self, rows: int) -> tuple[int, int, int]:
        return (rows, 1, 1)

    def args(self, q, k, v, o, lse, *, splits: int = 1, blocks_per_split: int | None = None,
             softmax_scale: float | None = None, swap_groups: bool = False) -> list:
        """Arguments for `isa.run_kernel`: q [B, Sq, H, D], k [B, Sk, Hkv, D], v [B, Sk, Hkv,
        Dv], o [B, Sq, H, Dv] (f32 [splits, B, Sq, H, Dv] partials when split), lse f32
        [splits, B, Sq, H]; numpy arrays or `isa.ShapeOnly` tensors. `swap_groups` (Sq = 1
        only) runs the kernel over seqlen_q = group, heads = Hkv (module docstring); the grid
        is then `grid(B, Hkv, group, splits)`."""
        cfg = self.config
        b, sq, h, d = _shape(q, "q")
        _, sk, hkv, _ = _shape(k, "k")
        want = {"q": (b, sq, h, cfg.headdim), "k": (b, sk, hkv, cfg.headdim),
                "v": (b, sk, hkv, cfg.headdim_v),
                "o": (splits, b, sq, h, cfg.headdim_v) if cfg.split else
                     (b, sq, h, cfg.headdim_v),
                "lse": (splits, b, sq, h)}
        for name, arr in (("q", q), ("k", k), ("v", v), ("o", o), ("lse", lse)):
            if tuple(arr.shape) != want[name]:
                raise InputError(f"attention_sm80 args: {name} has shape {tuple(arr.shape)}; "
                                 f"accepted {want[name]} for this kernel and q {q.shape}")
        if h % hkv:
            raise InputError(f"attention_sm80 args: {h} q heads are not a multiple of {hkv} "
                             "kv heads; accepted heads = group x kv_heads")
        if splits > 1 and not cfg.split:
            raise InputError(f"attention_sm80 args: splits={splits} for a kernel built "
                             "without split; accepted splits=1")
        group = h // hkv
        if swap_groups:
            if sq != 1 or cfg.causal:
                raise InputError("attention_sm80 args: swap_groups needs one query "
                                 f"(seqlen_q {sq}) and a non-causal kernel")
            rows_q, heads, kgroup, row_stride, head_stride = group, hkv, 1, 1, group
        else:
            rows_q, heads, kgroup, row_stride, head_stride = sq, h, group, h, 1
        nb = math.ceil(sk / cfg.kv_block)
        bps = blocks_per_split or math.ceil(nb / splits)
        scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(cfg.headdim)
        return [q, k, v, o, lse, np.uint32(b), np.uint32(rows_q), np.uint32(sk),
                np.uint32(heads), np.uint32(kgroup), np.uint32(splits), np.uint32(bps),
                np.float32(scale * math.log2(math.e)), np.uint32(row_stride),
                np.uint32(head_stride)]


def _shape(arr, name: str) -> tuple[int, ...]:
    if not hasattr(arr, "shape") or len(arr.shape) != 4:
        raise InputError(f"attention_sm80 args: {name} must be a 4-D tensor")
    return tuple(int(x) for x in arr.shape)


def _bad(arg: str, value, accepted: str) -> InputError:
    return InputError(f"attention_sm80_kernel: {arg}={value!r} is not accepted; "
                      f"accepted: {accepted}")


def attention_sm80_kernel(headdim: int = 128, headdim_v: int | None = None, m_tile: int = 128,
                          kv_block: int = 64, warps: int = 4, dtype: str = "bf16",
                          causal: bool = False, split: bool = False) -> AttentionSm80Kernel:
    """Generate the FlashAttention-2 style forward (module docstring); an `InputError` for a
    choice the template does not have."""
    headdim_v = headdim if headdim_v is None else headdim_v
    if dtype not in PTX_TYPE:
        raise _bad("dtype", dtype, ", ".join(PTX_TYPE))
    for name, d in (("headdim", headdim), ("headdim_v", headdim_v)):
        if not isinstance(d, int) or d <= 0 or d % 64 or d > 256:
            raise _bad(name, d, "a multiple of 64 up to 256")
    if warps not in (4, 8):
        raise _bad("warps", warps, "4 or 8")
    if m_tile not in (64, 128) or m_tile % (16 * warps):
        raise _bad("m_tile", m_tile, f"64 or 128, at least 16 rows per warp ({16 * warps})")
    if not isinstance(kv_block, int) or kv_block % (4 * warps) or not 16 <= kv_block <= 256:
        raise _bad("kv_block", kv_block, f"a multiple of {4 * warps} (the rows one cp.async "
                   f"pass of {warps} warps fills) from 16 to 256")
    cfg = Config(headdim, headdim_v, m_tile, kv_block, warps, dtype, bool(causal), bool(split))
    combine = ""
    if split:      # the combine kernel has no Hopper instruction: the same text for sm_80
        combine = attention_combine_ptx.emit_combine(cfg).replace(".target sm_90a",
                                                                  ".target sm_80")
    return AttentionSm80Kernel(cfg, emit(cfg), combine)


# -- PTX ------------------------------------------------------------------------------------
def emit(cfg: Config) -> str:
    lines = (_head(cfg) + _setup(cfg) + _prologue(cfg) + _main_loop(cfg) + _epilogue(cfg)
             + ["    ret;", "}"])
    return "\n".join(lines) + "\n"


def s_reg(cfg: Config, a: int, j: int, e: int) -> str:
    """S accumulator element e of m16 tile a, n8 tile j."""
    return f"%s{(a * cfg.nb + j) * 4 + e}"


def o_reg(cfg: Config, a: int, j: int, e: int) -> str:
    """O accumulator element e of m16 tile a, n8 tile j."""
    return f"%o{(a * cfg.nv + j) * 4 + e}"


def _head(cfg: Config) -> list[str]:
    rh = 2 * cfg.mi       # row halves of a thread: rows lane / 4 (+ 8) of each m16 tile
    return [
        ".version 8.0", ".target sm_80", ".address_size 64",
        ".extern .shared .align 128 .b8 smem[];", "",
        f".visible .entry {cfg.entry}(",
        "    .param .u64 q,", "    .param .u64 k,", "    .param .u64 v,", "    .param .u64 o,",
        "    .param .u64 lse,", "    .param .u32 batch,", "    .param .u32 seqlen_q,",
        "    .param .u32 seqlen_k,", "    .param .u32 heads,", "    .param .u32 group,",
        "    .param .u32 splits,", "    .param .u32 blocks_per_split,",
        "    .param .f32 scale_log2,", "    .param .u32 row_stride,",
        "    .param .u32 head_stride", ")",
        f".maxntid {cfg.threads}, 1, 1", ".minnctapersm 1", "{",
        "    .reg .pred %p<8>, %pmask, %pl, %pmore, %pv;",
        "    .reg .b32 %r<24>;", "    .reg .b64 %rd<12>;",
        f"    .reg .f32 %s<{cfg.mi * cfg.nb * 4}>;", f"    .reg .f32 %o<{cfg.mi * cfg.nv * 4}>;",
        f"    .reg .b32 %pp<{cfg.mi * cfg.nb * 2}>;",
        f"    .reg .b32 %qa<{4 * cfg.mi}>, %kb<4>, %vb<4>;",
        f"    .reg .f32 %mx<{rh}>, %l<{rh}>, %f<8>, %fz, %sl2;",
        "    .reg .b32 %thr, %lane, %warp, %B, %Sq, %Sk, %H, %G, %nsplit, %bps, %RS, %HS;",
        "    .reg .b32 %m0, %y, %b, %split, %hkv, %nbeg, %nend, %n, %maskfrom, %col0;",
        "    .reg .b32 %smem, %cpk, %cpv, %r0r, %kstr, %kst, %rowsb, %rowb, %diag;",
        "    .reg .b32 %qo, %ko, %vo, %ldq, %ldk, %ldv, %kstride, %vstride;",
        "    .reg .b64 %kg, %vg;",
    ]


def _setup(cfg: Config) -> list[str]:
    """Parameters, CTA coordinates, KV block range, copy slots, ldmatrix offsets."""
    kvb = cfg.kv_block
    lines = [
        "    mov.u32 %thr, %tid.x;", "    and.b32 %lane, %thr, 31;", "    shr.u32 %warp, %thr, 5;",
        "    ld.param.u32 %B, [batch];", "    ld.param.u32 %Sq, [seqlen_q];",
        "    ld.param.u32 %Sk, [seqlen_k];", "    ld.param.u32 %H, [heads];",
        "    ld.param.u32 %G, [group];", "    ld.param.u32 %nsplit, [splits];",
        "    ld.param.u32 %bps, [blocks_per_split];", "    ld.param.f32 %sl2, [scale_log2];",
        "    ld.param.u32 %RS, [row_stride];", "    ld.param.u32 %HS, [head_stride];",
        f"    mov.f32 %fz, {ZERO};",
        "    mov.u32 %m0, %ctaid.x;", f"    mul.lo.u32 %m0, %m0, {cfg.m_tile};",
        "    mov.u32 %y, %ctaid.y;", "    mov.u32 %r0, %ctaid.z;",
        "    div.u32 %b, %r0, %nsplit;", "    rem.u32 %split, %r0, %nsplit;",
        "    div.u32 %hkv, %y, %G;", "    mul.lo.u32 %rowsb, %Sq, %H;   // rows of one batch",
        # KV block range [nbeg, nend): the split's share, causal up to the last row's diagonal
        f"    add.u32 %nend, %Sk, {kvb - 1};", f"    div.u32 %nend, %nend, {kvb};",
        "    mov.u32 %maskfrom, %Sk;",
    ]
    if cfg.causal:
        lines += ["    // causal, bottom-right aligned: key j visible to query s if j <= s+Sk-Sq",
                  "    sub.u32 %r1, %Sq, 1;", f"    add.u32 %r2, %m0, {cfg.m_tile - 1};",
                  "    min.u32 %r2, %r2, %r1;", "    sub.u32 %r3, %Sk, %Sq;",
                  "    add.u32 %r2, %r2, %r3;", f"    add.u32 %r2, %r2, {kvb};",
                  f"    div.u32 %r2, %r2, {kvb};", "    min.u32 %nend, %nend, %r2;",
                  "    add.u32 %r2, %m0, %r3;", "    add.u32 %r2, %r2, 1;",
                  "    min.u32 %maskfrom, %maskfrom, %r2;"]
    lines += ["    mul.lo.u32 %nbeg, %split, %bps;", "    add.u32 %r4, %nbeg, %bps;",
              "    min.u32 %nend, %nend, %r4;",
              "    mov.u32 %smem, smem;",
              # copy slot: rows thr >> 3 + pass_rows i, chunk thr & 7 of each 64-column block
              "    shr.u32 %r0r, %thr, 3;", "    and.b32 %r1, %thr, 7;",
              "    and.b32 %r2, %r0r, 7;", "    xor.b32 %r2, %r2, %r1;", "    shl.b32 %r2, %r2, 4;",
              f"    mad.lo.u32 %cpk, %r0r, {cfg.row_bytes}, %r2;",
              "    add.u32 %cpk, %cpk, %smem;",
              f"    add.u32 %cpk, %cpk, {cfg.q_bytes};   // the thread's K copy slot",
              f"    mad.lo.u32 %cpv, %r0r, {cfg.v_row_bytes}, %r2;",
              "    add.u32 %cpv, %cpv, %smem;",
              f"    add.u32 %cpv, %cpv, {cfg.q_bytes + cfg.k_bytes};",
              "    shl.b32 %r3, %r1, 4;   // byte offset of the chunk in its 64-column block",
              # K/V of (b, hkv): row (b Sk + key) Hkv + hkv, key 0 here
              "    div.u32 %r5, %H, %G;   // kv heads",
              "    mul.lo.u32 %r6, %b, %Sk;", "    mad.lo.u32 %r6, %r6, %r5, %hkv;",
              f"    mul.lo.u32 %kstride, %r5, {cfg.row_bytes};",
              f"    mul.lo.u32 %vstride, %r5, {cfg.v_row_bytes};",
              "    ld.param.u64 %rd1, [k];", "    cvta.to.global.u64 %rd1, %rd1;",
              f"    mul.wide.u32 %rd2, %r6, {cfg.row_bytes};", "    add.s64 %rd1, %rd1, %rd2;",
              "    cvt.u64.u32 %rd3, %r3;", "    add.s64 %kg, %rd1, %rd3;",
              "    ld.param.u64 %rd1, [v];", "    cvta.to.global.u64 %rd1, %rd1;",
              f"    mul.wide.u32 %rd2, %r6, {cfg.v_row_bytes};", "    add.s64 %rd1, %rd1, %rd2;",
              "    add.s64 %vg, %rd1, %rd3;"]
    # ldmatrix offsets (module docstring's swizzle): Q and V rows (l & 7) + 8 ((l >> 3) & 1)
    # at chunk 2 k + (l >> 4); K rows (l & 7) + 8 (l >> 4) at chunk 2 k + ((l >> 3) & 1);
    # the addresses of step 0 (`_swizzled` derives the others)
    lines += ["    and.b32 %r7, %lane, 7;", "    shr.u32 %r8, %lane, 3;",
              "    and.b32 %r8, %r8, 1;",
              "    shr.u32 %r9, %lane, 4;",
              "    shl.b32 %r10, %r8, 3;", "    add.u32 %r10, %r10, %r7;    // Q / V row",
              "    shl.b32 %r11, %r9, 3;", "    add.u32 %r11, %r11, %r7;    // K row",
              "    xor.b32 %r12, %r9, %r7;     // Q / V chunk term",
              "    xor.b32 %r13, %r8, %r7;     // K chunk term",
              f"    mad.lo.u32 %r14, %warp, {16 * cfg.row_bytes}, %smem;",
              f"    mad.lo.u32 %r14, %r10, {cfg.row_bytes}, %r14;",
              f"    add.u32 %r15, %smem, {cfg.q_bytes};",
              f"    mad.lo.u32 %r15, %r11, {cfg.row_bytes}, %r15;",
              f"    add.u32 %r16, %smem, {cfg.q_bytes + cfg.k_bytes};",
              f"    mad.lo.u32 %r16, %r10, {cfg.v_row_bytes}, %r16;"]
    lines += ["    shl.b32 %r17, %r12, 4;", "    add.u32 %qo, %r14, %r17;",
              "    add.u32 %vo, %r16, %r17;",
              "    shl.b32 %r17, %r13, 4;", "    add.u32 %ko, %r15, %r17;"]
    lines += _rows(cfg)
    lines += [f"    mov.f32 %o{i}, {ZERO};" for i in range(cfg.mi * cfg.nv * 4)]
    lines += [f"    mov.f32 %mx{h}, {NEG_INF};\n    mov.f32 %l{h}, {ZERO};"
              for h in range(2 * cfg.mi)]
    return lines


def _rows(cfg: Config) -> list[str]:
    """%rowb: the query of the thread's first S element (row m0 + 16 warp + lane / 4; row
    half h adds `_row_offset`); %col0 its first key in a block; %diag (causal) the key
    limit of query %rowb, Sk - Sq + 1 past it. Per-row values are recomputed from these
    where used, so no register holds them through the loop."""
    lines = ["    shr.u32 %rowb, %lane, 2;", "    shl.b32 %r19, %warp, 4;",
             "    add.u32 %rowb, %rowb, %r19;", "    add.u32 %rowb, %rowb, %m0;",
             "    and.b32 %col0, %lane, 3;", "    shl.b32 %col0, %col0, 1;"]
    if cfg.causal:
        lines += ["    sub.u32 %diag, %Sk, %Sq;", "    add.u32 %diag, %diag, %rowb;",
                  "    add.u32 %diag, %diag, 1;"]
    return lines


def _row_offset(cfg: Config, h: int) -> int:
    """Rows from %rowb to row half h (m16 tile h >> 1, rows +8 for h odd)."""
    return 16 * cfg.warps * (h >> 1) + 8 * (h & 1)


def _copy_rows(cfg: Config, rows: int, base_reg: str, stride: str, row0: str, limit: str,
               slot: str, row_bytes: int, width: int, guard: str) -> list[str]:
    """cp.async of `rows` rows (row0 + the slot's rows) of `width` columns: global row r at
    `base_reg` + r `stride` (bytes, 32-bit), into shared `slot` + rows x `row_bytes`; zero
    fill for rows at or past `limit` (a register), whose address is clamped to row limit-1."""
    lines = []
    g = f"@{guard} " if guard else ""
    for i in range(rows // cfg.pass_rows):
        lines += [f"    add.u32 %r1, {row0}, {i * cfg.pass_rows};",
                  f"    setp.lt.u32 %p1, %r1, {limit};",
                  f"    selp.b32 %r2, {CHUNK_BYTES}, 0, %p1;",
                  f"    sub.u32 %r3, {limit}, 1;", "    min.u32 %r1, %r1, %r3;",
                  f"    mad.wide.u32 %rd4, %r1, {stride}, {base_reg};"]
        reg, _, base = slot.partition("+")
        for cb in range(width // 64):
            lines.append(f"    {g}cp.async.cg.shared.global "
                         f"[{reg}+{int(base or 0) + i * cfg.pass_rows * row_bytes + cb * 128}], "
                         f"[%rd4+{cb * 128}], {CHUNK_BYTES}, %r2;")
    return lines


def _copy_kv(cfg: Config, which: str, block: str, guard: str = "") -> list[str]:
    """K or V block `block` (a register) into its buffer."""
    lines = [f"    mul.lo.u32 %kst, {block}, {cfg.kv_block};", "    add.u32 %kstr, %kst, %r0r;"]
    if which == "k":
        return lines + _copy_rows(cfg, cfg.kv_block, "%kg", "%kstride", "%kstr", "%Sk",
                                  "%cpk", cfg.row_bytes, cfg.headdim, guard)
    if cfg.headdim == cfg.headdim_v:     # V's slot and row stride are K's (fewer registers)
        return lines + _copy_rows(cfg, cfg.kv_block, "%vg", "%kstride", "%kstr", "%Sk",
                                  f"%cpk+{cfg.k_bytes}", cfg.v_row_bytes, cfg.headdim_v, guard)
    return lines + _copy_rows(cfg, cfg.kv_block, "%vg", "%vstride", "%kstr", "%Sk", "%cpv",
                              cfg.v_row_bytes, cfg.headdim_v, guard)


def _prologue(cfg: Config) -> list[str]:
    """Q (rows m0 + slot rows of this head, zero filled past Sq) and the first K block."""
    lines = ["    ld.param.u64 %rd5, [q];", "    cvta.to.global.u64 %rd5, %rd5;",
             "    mul.lo.u32 %r5, %b, %rowsb;", "    mad.lo.u32 %r5, %y, %HS, %r5;",
             "    mad.lo.u32 %r5, %m0, %RS, %r5;   // row of query m0",
             f"    mul.wide.u32 %rd6, %r5, {cfg.row_bytes};",
             "    add.s64 %rd5, %rd5, %rd6;", "    cvt.u64.u32 %rd6, %r3;",
             "    add.s64 %rd5, %rd5, %rd6;",
             f"    mul.lo.u32 %r7, %RS, {cfg.row_bytes};",
             "    sub.u32 %r9, %Sq, %m0;   // queries of this block",
             f"    sub.u32 %r8, %cpk, {cfg.q_bytes};   // Q copy slot"]
    lines += _copy_rows(cfg, cfg.m_tile, "%rd5", "%r7", "%r0r", "%r9", "%r8", cfg.row_bytes,
                        cfg.headdim, "")
    lines += ["    setp.lt.u32 %pmore, %nbeg, %nend;", *_copy_kv(cfg, "k", "%nbeg", "%pmore"),
              "    cp.async.commit_group;", "    mov.u32 %n, %nbeg;",
              "    @!%pmore bra KV_END;"]
    return lines


def _main_loop(cfg: Config) -> list[str]:
    return ([f"{ENTRY_LOOP}:", "    cp.async.wait_group 0;", "    bar.sync 0;",
             *_copy_kv(cfg, "v", "%n"), "    cp.async.commit_group;"]
            + _qk(cfg) + _mask(cfg)
            + ["    cp.async.wait_group 0;", "    bar.sync 0;", "    add.u32 %n, %n, 1;",
               "    setp.lt.u32 %pmore, %n, %nend;", *_copy_kv(cfg, "k", "%n", "%pmore"),
               "    cp.async.commit_group;"]
            + _softmax(cfg) + _pv(cfg)
            + [f"    @%pmore bra {ENTRY_LOOP};", "KV_END:", "    cp.async.wait_all;"])


def _swizzled(step: int, base: str, reg: str) -> tuple[str, str]:
    """The ldmatrix address register of logical chunk 2 step (+ the lane's own) from the
    step-0 address `base`, and the instruction computing it into `reg` ("" for step 0 mod
    4): rows start 128-byte aligned, so the swizzle's XOR of chunk bits 1-2 is an XOR of
    bits 5-6 of the address; steps of 4 chunks more add 128 bytes (the caller's offset)."""
    if step & 3 == 0:
        return base, ""
    return reg, f"    xor.b32 {reg}, {base}, {32 * (step & 3)};"


def _qk(cfg: Config) -> list[str]:
    """S[mi x 16, kv_block] = Q K^T over k16 steps of D (the first step adds zero)."""
    t = PTX_TYPE[cfg.dtype]
    lines = []
    for ks in range(cfg.headdim // 16):
        blk = (ks >> 2) * 128
        qo, ko = _swizzled(ks, "%qo", "%ldq"), _swizzled(ks, "%ko", "%ldk")
        lines += [x for x in (qo[1], ko[1]) if x]
        qo, ko = qo[0], ko[0]
        for a in range(cfg.mi):
            regs = ", ".join(f"%qa{4 * a + e}" for e in range(4))
            off = a * 16 * cfg.warps * cfg.row_bytes + blk
            lines.append(f"    ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{regs}}}, "
                         f"[{qo}+{off}];")
        for jj in range(cfg.nb // 2):
            lines.append("    ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%kb0, %kb1, %kb2, %kb3}, "
                         f"[{ko}+{jj * 16 * cfg.row_bytes + blk}];")
            for a in range(cfg.mi):
                qa = ", ".join(f"%qa{4 * a + e}" for e in range(4))
                for half in range(2):
                    j = 2 * jj + half
                    d = ", ".join(s_reg(cfg, a, j, e) for e in range(4))
                    c = "%fz, %fz, %fz, %fz" if ks == 0 else d
                    lines.append(f"    mma.sync.aligned.m16n8k16.row.col.f32.{t}.{t}.f32 "
                                 f"{{{d}}}, {{{qa}}}, {{%kb{2 * half}, %kb{2 * half + 1}}}, "
                                 f"{{{c}}};")
    return lines


def _mask(cfg: Config) -> list[str]:
    """-inf where key >= the row's limit (Sk, and causal the diagonal); only in blocks that
    reach past `maskfrom` (uniform across the CTA)."""
    kvb = cfg.kv_block
    lines = [f"    mul.lo.u32 %r5, %n, {kvb};", f"    add.u32 %r6, %r5, {kvb};",
             "    setp.gt.u32 %pmask, %r6, %maskfrom;", "    @!%pmask bra SOFTMAX;",
             "    add.u32 %r5, %r5, %col0;"]
    for h in range(2 * cfg.mi):
        a, half = h >> 1, h & 1
        if cfg.causal:
            lines += [f"    add.u32 %r7, %diag, {_row_offset(cfg, h)};",
                      "    min.u32 %r7, %r7, %Sk;", "    sub.s32 %r7, %r7, %r5;"]
        else:
            lines.append("    sub.s32 %r7, %Sk, %r5;")
        for j in range(cfg.nb):
            for e in (2 * half, 2 * half + 1):
                lines += [f"    setp.le.s32 %p4, %r7, {8 * j + (e & 1)};",
                          f"    @%p4 mov.f32 {s_reg(cfg, a, j, e)}, {NEG_INF};"]
    return lines + ["SOFTMAX:"]


def _softmax(cfg: Config) -> list[str]:
    """Online softmax per row half: max over the 4 lanes, exponents, running sums, O
    rescaled; P packed to the A fragments of P V."""
    cvt = "bf16x2" if cfg.dtype == "bf16" else "f16x2"
    lines = []
    for h in range(2 * cfg.mi):
        a, half = h >> 1, h & 1
        els = [s_reg(cfg, a, j, e) for j in range(cfg.nb) for e in (2 * half, 2 * half + 1)]
        lines.append(f"    max.f32 %f0, {els[0]}, {els[1]};")
        lines += [f"    max.f32 %f0, %f0, {x};" for x in els[2:]]
        for d in (1, 2):
            lines += [f"    shfl.sync.bfly.b32 %f1, %f0, {d}, 31, 0xffffffff;",
                      "    max.f32 %f0, %f0, %f1;"]
        lines += [f"    max.f32 %f2, %mx{h}, %f0;", f"    setp.eq.f32 %p5, %f2, {NEG_INF};",
                  f"    selp.f32 %f3, {ZERO}, %f2, %p5;   // all masked: exponent base 0",
                  f"    sub.f32 %f4, %mx{h}, %f3;", "    mul.f32 %f4, %f4, %sl2;",
                  "    ex2.approx.ftz.f32 %f4, %f4;   // rescale of the old sums and O",
                  f"    mov.f32 %mx{h}, %f2;", "    mul.f32 %f5, %f3, %sl2;",
                  "    neg.f32 %f5, %f5;"]
        for x in els:
            lines += [f"    fma.rn.f32 {x}, {x}, %sl2, %f5;", f"    ex2.approx.ftz.f32 {x}, {x};"]
        lines.append(f"    mul.f32 %l{h}, %l{h}, %f4;")
        lines += [f"    add.f32 %l{h}, %l{h}, {x};" for x in els]
        lines += [f"    mul.f32 {o_reg(cfg, a, j, e)}, {o_reg(cfg, a, j, e)}, %f4;"
                  for j in range(cfg.nv) for e in (2 * half, 2 * half + 1)]
    for a in range(cfg.mi):      # A fragment of key step t: tiles 2t, 2t + 1, rows +0/+8
        for t in range(cfg.nb // 2):
            for r, (j, e) in enumerate(((2 * t, 0), (2 * t, 2), (2 * t + 1, 0),
                                        (2 * t + 1, 2))):
                lines.append(f"    cvt.rn.{cvt}.f32 %pp{(a * cfg.nb // 2 + t) * 4 + r}, "
                             f"{s_reg(cfg, a, j, e + 1)}, {s_reg(cfg, a, j, e)};")
    return lines


def _pv(cfg: Config) -> list[str]:
    """O[mi x 16, Dv] += P[mi x 16, kv_block] V[kv_block, Dv] (V by ldmatrix.trans)."""
    t = PTX_TYPE[cfg.dtype]
    lines = []
    for kt in range(cfg.nb // 2):
        for jj in range(cfg.nv // 2):
            off = kt * 16 * cfg.v_row_bytes + (jj >> 2) * 128
            vo, xor = _swizzled(jj, "%vo", "%ldv")
            lines += [xor] if xor else []
            lines.append("    ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 "
                         f"{{%vb0, %vb1, %vb2, %vb3}}, [{vo}+{off}];")
            for a in range(cfg.mi):
                pa = ", ".join(f"%pp{(a * cfg.nb // 2 + kt) * 4 + r}" for r in range(4))
                for half in range(2):
                    d = ", ".join(o_reg(cfg, a, 2 * jj + half, e) for e in range(4))
                    lines.append(f"    mma.sync.aligned.m16n8k16.row.col.f32.{t}.{t}.f32 "
                                 f"{{{d}}}, {{{pa}}}, {{%vb{2 * half}, %vb{2 * half + 1}}}, "
                                 f"{{{d}}};")
    return lines


def _epilogue(cfg: Config) -> list[str]:
    """O /= rowsum stored (bf16/fp16, or f32 partials when split); lse (base 2, scaled:
    m scale_log2 + lg2 l) per row by lane % 4 == 0."""
    ob = 4 if cfg.split else ELEM_BYTES
    cvt = "bf16x2" if cfg.dtype == "bf16" else "f16x2"
    lines = ["    // the CTA's coordinates again: nothing of them stays live through the loop",
             "    mov.u32 %thr, %tid.x;", "    and.b32 %lane, %thr, 31;",
             "    shr.u32 %warp, %thr, 5;", "    ld.param.u32 %B, [batch];",
             "    ld.param.u32 %Sq, [seqlen_q];", "    ld.param.u32 %H, [heads];",
             "    ld.param.u32 %nsplit, [splits];", "    ld.param.u32 %RS, [row_stride];",
             "    ld.param.u32 %HS, [head_stride];", "    mov.u32 %y, %ctaid.y;",
             "    mov.u32 %r0, %ctaid.z;", "    div.u32 %b, %r0, %nsplit;",
             "    rem.u32 %split, %r0, %nsplit;", "    mul.lo.u32 %rowsb, %Sq, %H;",
             "    mov.u32 %m0, %ctaid.x;", f"    mul.lo.u32 %m0, %m0, {cfg.m_tile};",
             *_rows(cfg),
             "    ld.param.u64 %rd6, [o];", "    cvta.to.global.u64 %rd6, %rd6;",
             "    ld.param.u64 %rd7, [lse];", "    cvta.to.global.u64 %rd7, %rd7;",
             "    and.b32 %r20, %lane, 3;", "    setp.eq.u32 %pl, %r20, 0;",
             "    mul.lo.u32 %r21, %split, %B;", "    add.u32 %r21, %r21, %b;",
             "    mul.lo.u32 %r21, %r21, %rowsb;", "    mad.lo.u32 %r21, %y, %HS, %r21;",
             "    cvt.u64.u32 %rd9, %col0;", f"    mul.lo.u64 %rd9, %rd9, {ob};"]
    for h in range(2 * cfg.mi):
        a, half = h >> 1, h & 1
        lines += [f"    shfl.sync.bfly.b32 %f1, %l{h}, 1, 31, 0xffffffff;",
                  f"    add.f32 %l{h}, %l{h}, %f1;",
                  f"    shfl.sync.bfly.b32 %f1, %l{h}, 2, 31, 0xffffffff;",
                  f"    add.f32 %l{h}, %l{h}, %f1;",
                  f"    setp.eq.f32 %p5, %l{h}, {ZERO};", f"    rcp.approx.ftz.f32 %f3, %l{h};",
                  f"    selp.f32 %f3, {ZERO}, %f3, %p5;",
                  f"    lg2.approx.ftz.f32 %f4, %l{h};", f"    fma.rn.f32 %f4, %mx{h}, %sl2, %f4;",
                  f"    add.u32 %r18, %rowb, {_row_offset(cfg, h)};   // query",
                  "    setp.lt.u32 %pv, %r18, %Sq;",
                  "    mad.lo.u32 %r22, %r18, %RS, %r21;   // row of O (split z's with split)",
                  "    mul.wide.u32 %rd8, %r22, 4;", "    add.s64 %rd8, %rd7, %rd8;",
                  "    and.pred %p6, %pv, %pl;", "    @%p6 st.global.f32 [%rd8], %f4;"]
        lines += [f"    mul.wide.u32 %rd10, %r22, {cfg.headdim_v * ob};",
                  "    add.s64 %rd10, %rd6, %rd10;", "    add.s64 %rd10, %rd10, %rd9;"]
        for j in range(cfg.nv):
            lo, hi = o_reg(cfg, a, j, 2 * half), o_reg(cfg, a, j, 2 * half + 1)
            lines += [f"    mul.f32 {lo}, {lo}, %f3;", f"    mul.f32 {hi}, {hi}, %f3;"]
            if cfg.split:
                lines.append(f"    @%pv st.global.v2.f32 [%rd10+{8 * j * ob}], "
                             f"{{{lo}, {hi}}};")
            else:
                lines += [f"    cvt.rn.{cvt}.f32 %r23, {hi}, {lo};",
                          f"    @%pv st.global.b32 [%rd10+{8 * j * ob}], %r23;"]
    return lines
