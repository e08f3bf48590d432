"""PTX text of the fused attention forward (the emitter behind `templates.attention`).

`emit(cfg)` returns the `.entry` of a validated `templates.attention.Config` (the split-KV
combine kernel is `attention_combine_ptx.emit_combine`). Layout shared by the pieces:

    shared: Q atoms [d_atoms][m_tile rows][k_span B]; then per stage s at
            q_bytes + s * stage_bytes: K atoms [d_atoms][kv_block][k_span B], V atoms
            [v_atoms][kv_block][v_span B] (absent when V is the first columns of K); all
            swizzled by TMA over their span (128 B: 64 columns; 64 B: 32 columns, head
            dim 96); fp8: per stage K, V transposed (`vt_bytes`, atoms [Dv rows][128
            keys], the P.V's K-major B operand), V as loaded; then mbarriers q_full,
            full[stages], empty[stages] (with the fa3 schedule or fp8 full/empty are K's,
            then V's full_v[stages], empty_v[stages]; fp8 then the as-loaded V's
            full_raw[stages], empty_raw[stages]), then one ping-pong token per consumer
            warpgroup when there are several.
    registers (consumer thread): %s S fragment (m64 x kv_block, f32), %pp P packed to
            16-bit pairs, or e4m3 quadruples (the A fragment of the P.V wgmma), %o the O fragment
            (m64 x headdim_v, f32), in chunks of at most 256 columns.
    params: tmap_q, tmap_k, tmap_v (args 0-2), q, k, v, o, lse (3-7), batch, seqlen_q,
            seqlen_k, heads, group, splits, blocks_per_split, scale_log2 (fp8: then
            v_descale).

Fragment element i of lane l in warp w (wgmma accumulator): row 16 w + l/4 +
8 (i % 4 >= 2), column 8 (i / 4) + (i & 1) + 2 (l % 4).
"""

from __future__ import annotations

import numpy as np

from workloads.kernels.templates.pipeline_ptx import (
    WARPS_PER_GROUP,
    advance_stage,
    param_addresses,
    release_stage,
    smem_desc,
    warp_leader,
)

SWIZZLE_MODE = {128: 1, 64: 2}      # descriptor bits 62-63 per swizzle span (bytes)


def k_major_desc(span: int) -> int:
    """Layout bits of a K-major swizzled operand with `span`-byte atom rows: SBO = 8 rows,
    LBO 16 B (unused when swizzled)."""
    return (SWIZZLE_MODE[span] << 62) | ((8 * span >> 4) << 32) | (1 << 16)


def mn_major_desc(span: int, atom_bytes: int) -> int:
    """Layout bits of an MN-major swizzled operand (V): SBO = 8 K rows of `span` bytes,
    LBO = `atom_bytes`, the stride from one span-wide column atom to the next."""
    return (SWIZZLE_MODE[span] << 62) | ((8 * span >> 4) << 32) | ((atom_bytes >> 4) << 16)


FP8_MAX_OFFSET = 8
"""FA3's `Max_offset` for fp8: P = exp2(S scale log2(e) - max + 8), in [0, 256], so that P
uses e4m3's range (largest finite 448) instead of [0, 1]; the row sums carry the same
2^8, which cancels in O and is taken out of the log-sum-exp."""
VT_ATOM_KEYS = 128
"""Keys per atom of fp8's transposed V (K-major rows of 128 bytes, 128B swizzle)."""
FP8_PRODUCER_REGS = 32
"""`setmaxnreg.dec` of fp8's producer warpgroup, which transposes V in registers: ptxas
spills at FA3's 24 (two consumer warpgroups); 128 x 32 + 256 x 240 fill the 64 K
registers."""
TRANSPOSE_BARRIER = 2
"""Named barrier of the fp8 producer warpgroup's transpose (FA3's TransposeBarrier; 1 is
the inline combine's)."""
NEG_INF = "0fFF800000"
ZERO = "0f00000000"
TMA_LOAD = ("    cp.async.bulk.tensor.{n}d.shared::cluster.global.tile.mbarrier::complete_tx"
            "::bytes [%r8], [{map}, {{{coords}}}], [{bar}];")


def emit(cfg) -> str:
    return "\n".join(_head(cfg) + _consumer(cfg) + _producer(cfg)) + "\n"


def _regs(cfg) -> list[str]:
    return [
        "    .reg .pred %p<8>;", "    .reg .pred %ptrue, %pfalse, %pmask, %pv0, %pv1, %pl;",
        "    .reg .pred %plead;", "    .reg .b32 %lane;",
        "    .reg .b32 %r<24>;", "    .reg .b64 %rd<12>;",
        f"    .reg .f32 %s<{cfg.kv_block // 2}>;", f"    .reg .b32 %pp<{cfg.kv_block // 4}>;",
        f"    .reg .f32 %o<{cfg.headdim_v // 2}>;",
        "    .reg .f32 %sl2, %nsl2, %f<8>, %mx<2>, %mn<2>, %mu<2>, %l<2>, %sc<2>, %nm<2>;",
        "    .reg .b32 %thr, %bars, %stage, %phase, %it, %n, %nbeg, %nend, %maskfrom;",
        "    .reg .b32 %B, %Sq, %Sk, %H, %G, %nsplit, %bps, %m0, %y, %b, %split, %hkv;",
        "    .reg .b32 %qg, %qs, %slo, %shi, %row0, %col0, %sq0, %sq1, %hd<2>, %lim<2>, %rl<2>;",
        "    .reg .b64 %desc_q, %desc_k, %desc_v, %po<2>;",
    ] + ([  # the fa3 schedule (`_consumer_fa3`)
        "    .reg .b32 %sprev, %vphase, %tphase, %tok, %tnext;"] if cfg.fa3 else
        ["    .reg .b32 %sprev, %vphase;"] if cfg.fp8 else []) + ([
        # fp8: P packing, the producer's V transpose (`_producer_fp8`), v_descale
        "    .reg .b16 %ph<2>;", "    .reg .b32 %tx<8>, %xr, %xt, %nmx;",
        "    .reg .pred %pel, %pk;", "    .reg .f32 %vds;"] if cfg.fp8 else []) + ([
        # inline split combine (`_inline_combine`)
        "    .reg .b32 %ic<8>;", "    .reg .b64 %icd<4>, %icl<2>, %ica<2>;",
        "    .reg .f32 %icm<2>, %ics<2>, %icx<2>;",
        f"    .reg .f32 %ict<{2 * sum(len(_o_pairs(cfg, h)) for h in range(2))}>;",
        "    .reg .pred %icp<2>;"] if cfg.inline_combine else [])


def _head(cfg) -> list[str]:
    """Parameters, CTA coordinates, KV block range, barrier init, role branch."""
    lines = [
        ".version 8.0", ".target sm_90a", ".address_size 64",
        ".extern .shared .align 1024 .b8 smem[];", "",
        f".visible .entry {cfg.entry}(",
        "    .param .align 64 .b8 tmap_q[128],", "    .param .align 64 .b8 tmap_k[128],",
        "    .param .align 64 .b8 tmap_v[128],",
        "    .param .u64 q,", "    .param .u64 k,", "    .param .u64 v,", "    .param .u64 o,",
        "    .param .u64 lse,", "    .param .u32 batch,", "    .param .u32 seqlen_q,",
        "    .param .u32 seqlen_k,", "    .param .u32 heads,", "    .param .u32 group,",
        "    .param .u32 splits,", "    .param .u32 blocks_per_split,",
        "    .param .f32 scale_log2" + ("," if cfg.inline_combine or cfg.page or cfg.fp8
                                        else ""),
        *(["    .param .f32 v_descale"] if cfg.fp8 else []),
        *(["    .param .u64 block_table,", "    .param .u32 pages_per_seq"
           + ("," if cfg.inline_combine else "")] if cfg.page else []),
        *(["    .param .u64 out,", "    .param .u64 counters"] if cfg.inline_combine else []),
        ")",
        f".maxntid {cfg.threads}, 1, 1", f".minnctapersm {cfg.ctas_per_sm}", "{", *_regs(cfg),
        "    mov.u32 %thr, %tid.x;",
        "    mov.u32 %bars, smem;", f"    add.u32 %bars, %bars, {cfg.barrier_offset};",
        "    ld.param.u32 %B, [batch];", "    ld.param.u32 %Sq, [seqlen_q];",
        "    ld.param.u32 %Sk, [seqlen_k];", "    ld.param.u32 %H, [heads];",
        "    ld.param.u32 %G, [group];", "    ld.param.u32 %nsplit, [splits];",
        "    ld.param.u32 %bps, [blocks_per_split];", "    ld.param.f32 %sl2, [scale_log2];",
        "    neg.f32 %nsl2, %sl2;",
        "    mov.u32 %m0, %ctaid.x;", f"    mul.lo.u32 %m0, %m0, {cfg.block_rows};",
        "    mov.u32 %y, %ctaid.y;", "    mov.u32 %r0, %ctaid.z;",
        "    div.u32 %b, %r0, %nsplit;", "    rem.u32 %split, %r0, %nsplit;",
    ]
    last = cfg.block_rows - 1
    if cfg.pack:
        g = cfg.pack
        lines += ["    // packed GQA: CTA row R is (query s = R / G, head hkv * G + R % G)",
                  "    mov.u32 %hkv, %y;", f"    rem.u32 %qg, %m0, {g};",
                  f"    div.u32 %qs, %m0, {g};", "    mov.u32 %slo, %qs;",
                  f"    add.u32 %shi, %m0, {last};", f"    div.u32 %shi, %shi, {g};"]
    else:
        lines += ["    // one q head per CTA row block: kv head = head / group",
                  "    div.u32 %hkv, %y, %G;", "    rem.u32 %qg, %y, %G;", "    mov.u32 %qs, %m0;",
                  "    mov.u32 %slo, %m0;", f"    add.u32 %shi, %m0, {last};"]
    kvb = cfg.kv_block
    lines += ["    sub.u32 %r1, %Sq, 1;", "    min.u32 %shi, %shi, %r1;",
              f"    add.u32 %nend, %Sk, {kvb - 1};", f"    div.u32 %nend, %nend, {kvb};",
              "    mov.u32 %maskfrom, %Sk;"]
    if cfg.causal:
        lines += ["    // causal, bottom-right aligned: key j visible to query s if j <= s+Sk-Sq",
                  "    sub.u32 %r2, %Sk, %Sq;", "    add.u32 %r3, %shi, %r2;",
                  f"    add.u32 %r3, %r3, {kvb};", f"    div.u32 %r3, %r3, {kvb};",
                  "    min.u32 %nend, %nend, %r3;", "    add.u32 %r3, %slo, %r2;",
                  "    add.u32 %r3, %r3, 1;", "    min.u32 %maskfrom, %maskfrom, %r3;"]
    lines += ["    mul.lo.u32 %nbeg, %split, %bps;", "    add.u32 %r4, %nbeg, %bps;",
              "    min.u32 %nend, %nend, %r4;"]
    tokens = tuple(cfg.token_bar(w) for w in range(cfg.consumers)) if cfg.pingpong else ()
    return lines + init_barriers(cfg, warp_bars=tokens)


def init_barriers(cfg, consumer_bars: tuple[int, ...] = (),
                  warp_bars: tuple[int, ...] = ()) -> list[str]:
    """The predicates %ptrue/%pfalse, thread 0's init of the stage ring's mbarriers (full:
    the producer's one arrival; empty: every consumer warp, `release_stage`; with
    `split_kv_bars` a second full/empty pair per stage for V), of `consumer_bars` (every
    consumer thread) and of `warp_bars` (the 4 warps of one warpgroup), then the split
    into producer and consumer warps."""
    lines = ["    setp.eq.u32 %ptrue, %thr, %thr;", "    setp.ne.u32 %pfalse, %thr, %thr;",
             "    setp.ne.u32 %p0, %thr, 0;", "    @%p0 bra INIT_DONE;",
             "    mbarrier.init.shared::cta.b64 [%bars], 1;"]
    consumer_warps = WARPS_PER_GROUP * cfg.consumers
    pairs = [(cfg.full_bar, cfg.empty_bar, consumer_warps)]
    if getattr(cfg, "split_kv_bars", False):
        pairs.append((cfg.full_v_bar, cfg.empty_v_bar, consumer_warps))
    if getattr(cfg, "fp8", False):      # V as loaded: freed by one producer thread
        pairs.append((cfg.full_raw_bar, cfg.empty_raw_bar, 1))
    for full, empty, count in pairs:
        for s in range(cfg.stages):
            lines += [f"    mbarrier.init.shared::cta.b64 [%bars+{full(s)}], 1;",
                      f"    mbarrier.init.shared::cta.b64 [%bars+{empty(s)}], {count};"]
    lines += [f"    mbarrier.init.shared::cta.b64 [%bars+{b}], {WARPS_PER_GROUP};"
              for b in warp_bars]
    lines += [f"    mbarrier.init.shared::cta.b64 [%bars+{b}], {128 * cfg.consumers};"
              for b in consumer_bars]
    return lines + ["    fence.mbarrier_init.release.cluster;", "INIT_DONE:", "    bar.sync 0;",
                    f"    setp.ge.u32 %p0, %thr, {128 * cfg.consumers};",
                    "    @%p0 bra PRODUCER;"]


def producer_stage_wait(cfg, tx_bytes: int, full0: int | None = None,
                        empty0: int | None = None, tag: str = "") -> list[str]:
    """The producer's turn at stage %stage: %r3 its full and %r4 its empty mbarrier (those
    of stage 0 at `full0`/`empty0`, default the ring's); from the stage ring's second round
    on, wait until the consumers freed the stage (empty[s] of the previous phase), then
    expect `tx_bytes` of TMA loads on full[s]. `tag` makes the labels unique."""
    full0 = cfg.full_bar(0) if full0 is None else full0
    empty0 = cfg.empty_bar(0) if empty0 is None else empty0
    return ["    shl.b32 %r2, %stage, 3;", "    add.u32 %r3, %bars, %r2;",
            f"    add.u32 %r4, %r3, {empty0};   // empty[s]",
            f"    add.u32 %r3, %r3, {full0};   // full[s]",
            f"    setp.lt.u32 %p0, %it, {cfg.stages};", f"    @%p0 bra P_ISSUE{tag};",
            "    xor.b32 %r5, %phase, 1;", f"P_WAIT{tag}:",
            "    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r4], %r5;",
            f"    @!%p1 bra P_WAIT{tag};", f"P_ISSUE{tag}:",
            f"    mbarrier.arrive.expect_tx.shared::cta.b64 %rd3, [%r3], {tx_bytes};"]


def _load_q(cfg) -> list[str]:
    """The producer lane's tensor-map addresses (%rd0..%rd2: Q, K, V) and the Q block's TMA
    copies, one per 128-byte atom, on the first full barrier."""
    qbox = cfg.m_tile * cfg.k_span
    lines = [*param_addresses({"%rd0": "tmap_q", "%rd1": "tmap_k", "%rd2": "tmap_v"}),
             f"    mbarrier.arrive.expect_tx.shared::cta.b64 %rd3, [%bars], {cfg.q_tx_bytes};",
             "    mov.u32 %r6, smem;"]
    for j in range(cfg.d_atoms):
        lines += [f"    add.u32 %r8, %r6, {j * qbox};",
                  TMA_LOAD.format(n=5, map="%rd0", bar="%bars",
                                  coords=f"{cfg.k_cols * j}, %qg, %hkv, %qs, %b")]
    return lines


def _producer(cfg) -> list[str]:
    """One elected lane of warp 0 of the last warpgroup: Q once, then K/V per block."""
    if cfg.fp8:
        return _producer_fp8(cfg)
    lines = ["", "    // ---- producer: one elected lane issues the TMA copies ----",
             "PRODUCER:", "    setmaxnreg.dec.sync.aligned.u32 24;",
             f"    sub.u32 %r0, %thr, {128 * cfg.consumers};",
             "    setp.ge.u32 %p0, %r0, 32;", "    @%p0 bra DONE;",
             "    elect.sync %r1|%p0, 0xffffffff;", "    @!%p0 bra DONE;", *_load_q(cfg)]
    lines += ["    mov.u32 %stage, 0;", "    mov.u32 %phase, 0;", "    mov.u32 %it, 0;",
              "    mov.u32 %n, %nbeg;", "    setp.ge.u32 %p0, %n, %nend;", "    @%p0 bra DONE;"]
    seq = "%b"                               # the K/V box's outer coordinate
    if cfg.page:                             # the first block's pool page, before the loop
        lines += ["    ld.param.u64 %rd4, [block_table];", "    cvta.to.global.u64 %rd4, %rd4;",
                  "    ld.param.u32 %r18, [pages_per_seq];", "    mul.lo.u32 %r18, %r18, %b;",
                  *_page_load(cfg, "%n")]
        seq = "%r19"
    lines += ["P_K:", *producer_stage_wait(cfg, cfg.k_bytes if cfg.split_kv_bars
                                           else cfg.stage_bytes),
              "    mov.u32 %r6, smem;", f"    mad.lo.u32 %r6, %stage, {cfg.stage_bytes}, %r6;",
              f"    add.u32 %r6, %r6, {cfg.q_bytes};"]
    if cfg.page:                             # key offset of the block within its page
        lines += [f"    rem.u32 %r7, %n, {cfg.page // cfg.kv_block};",
                  f"    mul.lo.u32 %r7, %r7, {cfg.kv_block};"]
    else:
        lines += [f"    mul.lo.u32 %r7, %n, {cfg.kv_block};"]
    for j in range(cfg.d_atoms):
        lines += [f"    add.u32 %r8, %r6, {j * cfg.kv_block * cfg.k_span};",
                  TMA_LOAD.format(n=4, map="%rd1", bar="%r3",
                                  coords=f"{cfg.k_cols * j}, %hkv, %r7, {seq}")]
    if cfg.split_kv_bars:              # V waits for its own slot and has its own barrier
        lines += producer_stage_wait(cfg, cfg.v_bytes, cfg.full_v_bar(0), cfg.empty_v_bar(0),
                                     "_V")
    if not cfg.v_from_k:
        for j in range(cfg.v_atoms):
            lines += [f"    add.u32 %r8, %r6, {cfg.k_bytes + j * cfg.kv_block * cfg.v_span};",
                      TMA_LOAD.format(n=4, map="%rd2", bar="%r3",
                                      coords=f"{cfg.v_cols * j}, %hkv, %r7, {seq}")]
    lines += [*advance_stage(cfg), "    add.u32 %it, %it, 1;", "    add.u32 %n, %n, 1;",
              "    setp.lt.u32 %p0, %n, %nend;"]
    if cfg.page:                # the next block's page, loaded while the next stage frees
        lines += ["    @!%p0 bra DONE;", *_page_load(cfg, "%n")]
    lines += ["    @%p0 bra P_K;", "DONE:", "    ret;", "}"]
    return lines


def _producer_fp8(cfg) -> list[str]:
    """fp8's producer warpgroup (FA3's with `Transpose_V`): its elected lane issues Q, then
    K one block ahead of V, as FA3's IntraWGOverlap load order: K(first); per block n
    K(n + 1) (when there is one), V(n) into the stage's as-loaded slot (its own full/empty
    mbarriers); then all 128 threads transpose V(n) into the stage's K-major V
    (`_transpose_v`, after V(n) landed and the consumers freed the slot), fence the
    generic-proxy writes for the async proxy, meet on a named barrier, and one thread
    marks the transposed V full and the as-loaded slot empty."""
    c0 = 128 * cfg.consumers

    def issue_k(tag):
        lines = [*producer_stage_wait(cfg, cfg.k_bytes, tag=tag), "    mov.u32 %r6, smem;",
                 f"    mad.lo.u32 %r6, %stage, {cfg.stage_bytes}, %r6;",
                 f"    add.u32 %r6, %r6, {cfg.q_bytes};",
                 f"    mul.lo.u32 %r7, %n, {cfg.kv_block};"]
        for j in range(cfg.d_atoms):
            lines += [f"    add.u32 %r8, %r6, {j * cfg.kv_block * cfg.k_span};",
                      TMA_LOAD.format(n=4, map="%rd1", bar="%r3",
                                      coords=f"{cfg.k_cols * j}, %hkv, %r7, %b")]
        return lines

    def stage_bar(reg, off):
        return ["    shl.b32 %r2, %sprev, 3;", f"    add.u32 {reg}, %bars, %r2;",
                f"    add.u32 {reg}, {reg}, {off};"]

    def wait(label, reg, parity):
        return [f"{label}:",
                f"    mbarrier.try_wait.parity.shared::cta.b64 %p1, [{reg}], {parity};",
                f"    @!%p1 bra {label};"]

    raw = cfg.k_bytes + cfg.vt_bytes
    lines = ["", "    // ---- producer warpgroup: TMA by one elected lane, V transposed by all",
             "PRODUCER:", f"    setmaxnreg.dec.sync.aligned.u32 {FP8_PRODUCER_REGS};",
             f"    sub.u32 %r11, %thr, {c0};   // producer thread",
             "    elect.sync %r1|%p2, 0xffffffff;",
             "    setp.lt.u32 %p3, %r11, 32;", "    and.pred %pel, %p2, %p3;",
             *_transpose_lanes(cfg), "    @!%pel bra P_Q_DONE;", *_load_q(cfg)]
    lines += ["P_Q_DONE:", "    mov.u32 %stage, 0;", "    mov.u32 %phase, 0;",
              "    mov.u32 %it, 0;",
              "    mov.u32 %n, %nbeg;", "    setp.ge.u32 %p0, %n, %nend;", "    @%p0 bra DONE;",
              "    @!%pel bra P_K0_DONE;", *issue_k("_K0"), "P_K0_DONE:",
              "P_LOOP:   // K(n + 1) ahead, then V(n) loaded and transposed",
              "    mov.u32 %sprev, %stage;", "    mov.u32 %vphase, %phase;",
              f"    mul.lo.u32 %r9, %n, {cfg.kv_block};", *advance_stage(cfg),
              "    add.u32 %it, %it, 1;", "    add.u32 %n, %n, 1;",
              "    setp.lt.u32 %pk, %n, %nend;", "    and.pred %p2, %pk, %pel;",
              "    @!%p2 bra P_KN_DONE;", *issue_k("_KN"), "P_KN_DONE:",
              "    @!%pel bra P_V_DONE;   // V(n) into its as-loaded slot",
              *stage_bar("%r3", cfg.full_raw_bar(0)),
              f"    add.u32 %r4, %r3, {cfg.empty_raw_bar(0) - cfg.full_raw_bar(0)};",
              f"    setp.le.u32 %p0, %it, {cfg.stages};", "    @%p0 bra P_V_ISSUE;",
              "    xor.b32 %r5, %vphase, 1;", *wait("P_V_WAIT", "%r4", "%r5"), "P_V_ISSUE:",
              f"    mbarrier.arrive.expect_tx.shared::cta.b64 %rd3, [%r3], {cfg.v_bytes};",
              "    mov.u32 %r6, smem;", f"    mad.lo.u32 %r6, %sprev, {cfg.stage_bytes}, %r6;",
              f"    add.u32 %r6, %r6, {cfg.q_bytes + raw};"]
    for j in range(cfg.v_atoms):
        lines += [f"    add.u32 %r8, %r6, {j * cfg.kv_block * cfg.v_span};",
                  TMA_LOAD.format(n=4, map="%rd2", bar="%r3",
                                  coords=f"{cfg.v_cols * j}, %hkv, %r9, %b")]
    lines += ["P_V_DONE:   // all 128 threads: V(n) landed, its K-major slot free",
              *stage_bar("%r3", cfg.full_raw_bar(0)), *wait("P_T_WAIT", "%r3", "%vphase"),
              *stage_bar("%r4", cfg.empty_v_bar(0)),
              f"    setp.le.u32 %p0, %it, {cfg.stages};", "    @%p0 bra P_T_GO;",
              "    xor.b32 %r5, %vphase, 1;", *wait("P_T_FREE", "%r4", "%r5"), "P_T_GO:",
              "    mov.u32 %r6, smem;", f"    mad.lo.u32 %r6, %sprev, {cfg.stage_bytes}, %r6;",
              f"    add.u32 %r6, %r6, {cfg.q_bytes + cfg.k_bytes};",
              f"    add.u32 %r7, %r6, {cfg.vt_bytes};", "    add.u32 %r7, %r7, %xr;",
              "    add.u32 %r8, %r6, %xt;", *_transpose_v(cfg),
              "    fence.proxy.async.shared::cta;   // stmatrix writes -> wgmma reads",
              f"    bar.sync {TRANSPOSE_BARRIER}, 128;", "    setp.eq.u32 %p2, %r11, 0;",
              *stage_bar("%r3", cfg.full_v_bar(0)),
              "    @%p2 mbarrier.arrive.shared::cta.b64 %rd3, [%r3];",
              *stage_bar("%r4", cfg.empty_raw_bar(0)),
              "    @%p2 mbarrier.arrive.shared::cta.b64 %rd3, [%r4];",
              "    @%pk bra P_LOOP;", "DONE:", "    ret;", "}"]
    return lines


def _transpose_lanes(cfg) -> list[str]:
    """Per producer thread (%r11 in 0..127; warp w = %r0 / 32, lane l): %xr, the byte offset
    in the as-loaded V atom of the 16-byte row it addresses for `ldmatrix` (matrix l / 8:
    keys l % 8 + 8 (l / 8 & 1) of a 16-key group, bytes 16 (2w + l / 16) ..  of the
    row, 128B-swizzled: chunk ^= key % 8); %xt, the offset of the transposed V row it
    addresses for `stmatrix` (matrix j = l / 8, row r = l % 8: V column 32 w + 16 (j / 2)
    + 2 r + j % 2); %nmx, that row's swizzle term 16 (column % 8)."""
    return ["    shr.u32 %r2, %r11, 5;                  // producer warp w",
            "    and.b32 %r3, %r11, 31;", "    shr.u32 %r4, %r3, 3;                  // matrix j",
            "    and.b32 %r5, %r3, 7;                  // row r",
            "    and.b32 %r6, %r4, 1;", "    shl.b32 %r6, %r6, 3;", "    add.u32 %r6, %r6, %r5;",
            "    shl.b32 %xr, %r6, 7;                  // key x 128 B",
            "    shr.u32 %r6, %r4, 1;", "    shl.b32 %r7, %r2, 1;", "    add.u32 %r6, %r6, %r7;",
            "    xor.b32 %r6, %r6, %r5;                // chunk ^ key % 8",
            "    shl.b32 %r6, %r6, 4;", "    add.u32 %xr, %xr, %r6;",
            "    shr.u32 %r6, %r4, 1;", "    shl.b32 %r6, %r6, 4;", "    shl.b32 %r7, %r2, 5;",
            "    add.u32 %r6, %r6, %r7;", "    shl.b32 %r7, %r5, 1;", "    add.u32 %r6, %r6, %r7;",
            "    and.b32 %r7, %r4, 1;", "    add.u32 %r6, %r6, %r7;   // V column",
            f"    shl.b32 %xt, %r6, {VT_ATOM_KEYS.bit_length() - 1};",
            "    and.b32 %nmx, %r6, 7;", "    shl.b32 %nmx, %nmx, 4;"]


def _transpose_v(cfg) -> list[str]:
    """V(n) [kv_block keys, Dv] (as loaded, %r7 = this lane's `ldmatrix` row) into its
    K-major copy [Dv rows, keys] (%r8 = this lane's `stmatrix` row), FA3's LDSM.T +
    byte_perm + STSM: warp w takes the 32-column strips w, w + 4, ..; per strip and 16-key
    group one `ldmatrix.x4.trans` (b16: lane quad t of row group h gets keys 2t, 2t+1 of
    columns 2h, 2h+1 from the keys 0-7 and 8-15 matrices of each 16-column half), two
    `prmt` per half gather column 2h's and 2h+1's keys (2t, 2t+1, 8+2t, 9+2t) into one
    register each (the key order `_pack_p_fp8` gives P), and one `stmatrix.x4` writes
    them as 4 bytes of the K-major rows of those columns (16-byte chunk = the key group,
    128B-swizzled by the row)."""
    groups = cfg.kv_block // 16
    lines = []
    for i in range(cfg.headdim_v // 128):             # strips w + 4 i: atom i of V
        for g in range(groups):
            src = i * cfg.kv_block * cfg.v_span + g * 16 * cfg.v_span
            dst = (g * 16 // VT_ATOM_KEYS) * cfg.vt_atom_bytes + i * 128 * VT_ATOM_KEYS
            lines += [f"    ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {{%tx0, %tx1, %tx2, "
                      f"%tx3}}, [%r7+{src}];",
                      "    prmt.b32 %tx4, %tx0, %tx1, 0x6420;",
                      "    prmt.b32 %tx5, %tx0, %tx1, 0x7531;",
                      "    prmt.b32 %tx6, %tx2, %tx3, 0x6420;",
                      "    prmt.b32 %tx7, %tx2, %tx3, 0x7531;",
                      f"    xor.b32 %r10, %nmx, {16 * (g % 8)};", "    add.u32 %r10, %r10, %r8;",
                      f"    stmatrix.sync.aligned.m8n8.x4.shared.b16 [%r10+{dst}], "
                      "{%tx4, %tx5, %tx6, %tx7};"]
    return lines


def _page_load(cfg, block: str) -> list[str]:
    """%r19 = block_table[b, block / blocks per page] (%rd4 the table, %r18 = b x pages
    per sequence): the pool page holding KV block `block`."""
    return [f"    div.u32 %r20, {block}, {cfg.page // cfg.kv_block};",
            "    add.u32 %r20, %r20, %r18;", "    mul.wide.u32 %rd5, %r20, 4;",
            "    add.s64 %rd5, %rd4, %rd5;", "    ld.global.nc.u32 %r19, [%rd5];"]


def _rows(cfg) -> list[str]:
    """Per fragment row half h: query %s<h>x, head %hd<h>, valid %pv<h>, key limit %lim<h>."""
    lines = ["    shr.u32 %r10, %thr, 7;                 // consumer warpgroup",
             "    and.b32 %r11, %thr, 127;", "    shr.u32 %r12, %r11, 5;                 // warp",
             "    and.b32 %r13, %r11, 31;                // lane",
             "    shr.u32 %row0, %r13, 2;", "    shl.b32 %r14, %r12, 4;",
             "    add.u32 %row0, %row0, %r14;", "    shl.b32 %r14, %r10, 6;",
             "    add.u32 %row0, %row0, %r14;            // CTA row of element 0",
             "    and.b32 %col0, %r13, 3;", "    shl.b32 %col0, %col0, 1;",
             "    sub.u32 %r15, %Sk, %Sq;"]
    for h in range(2):
        lines += ["    add.u32 %r16, %m0, %row0;", f"    add.u32 %r16, %r16, {8 * h};"]
        if cfg.pack:
            lines += [f"    div.u32 %sq{h}, %r16, {cfg.pack};",
                      f"    rem.u32 %r17, %r16, {cfg.pack};",
                      f"    mad.lo.u32 %hd{h}, %hkv, {cfg.pack}, %r17;"]
        else:
            lines += [f"    mov.u32 %sq{h}, %r16;", f"    mov.u32 %hd{h}, %y;"]
        lines += [f"    setp.lt.u32 %pv{h}, %sq{h}, %Sq;", f"    mov.u32 %lim{h}, %Sk;"]
        if cfg.block_rows < cfg.m_tile:      # rows past the packed (query, head) pairs
            lines += [f"    add.u32 %r17, %row0, {8 * h};",
                      f"    setp.lt.and.u32 %pv{h}, %r17, {cfg.block_rows}, %pv{h};"]
        if cfg.causal:
            lines += [f"    add.u32 %r17, %sq{h}, %r15;", "    add.u32 %r17, %r17, 1;",
                      f"    min.u32 %lim{h}, %lim{h}, %r17;"]
    return lines


def _consumer(cfg) -> list[str]:
    kvb = cfg.kv_block
    v_desc = k_major_desc(128) if cfg.fp8 else mn_major_desc(cfg.v_span, kvb * cfg.v_span)
    k_desc = k_major_desc(cfg.k_span)
    lines = ["", "    // ---- consumer warpgroups: S = Q K^T, online softmax, O += P V ----",
             f"    setmaxnreg.inc.sync.aligned.u32 {cfg.consumer_regs};", *warp_leader(),
             *_rows(cfg)]
    lines += [f"    mov.f32 %o{i}, {ZERO};" for i in range(cfg.headdim_v // 2)]
    lines += [f"    mov.f32 %mx{h}, {NEG_INF};\n    mov.f32 %l{h}, {ZERO};" for h in range(2)]
    lines += ["    mov.u32 %r18, smem;",
              f"    shl.b32 %r19, %r10, {(64 * cfg.k_span).bit_length() - 1};   "
              f"// 64 rows x {cfg.k_span} B",
              "    add.u32 %r18, %r18, %r19;", *smem_desc("%desc_q", "%r18", k_desc),
              "    mov.u32 %phase, 0;",
              "C_QWAIT:", "    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%bars], %phase;",
              "    @!%p1 bra C_QWAIT;",
              "    mov.u32 %stage, 0;", "    mov.u32 %phase, 0;", "    mov.u32 %n, %nbeg;",
              "    setp.ge.u32 %p0, %n, %nend;", "    @%p0 bra C_END;"]
    if cfg.fa3:
        return lines + _consumer_fa3(cfg, k_desc, v_desc)
    lines += ["C_K:", "    shl.b32 %r2, %stage, 3;", "    add.u32 %r3, %bars, %r2;",
              f"    add.u32 %r3, %r3, {cfg.full_bar(0)};   // full[s]",
              "C_WAIT:", "    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r3], %phase;",
              "    @!%p1 bra C_WAIT;",
              "    mov.u32 %r6, smem;", f"    mad.lo.u32 %r6, %stage, {cfg.stage_bytes}, %r6;",
              f"    add.u32 %r6, %r6, {cfg.q_bytes};",
              *smem_desc("%desc_k", "%r6", k_desc)]
    if not cfg.v_from_k:
        lines.append(f"    add.u32 %r6, %r6, {cfg.k_bytes};")
    lines += smem_desc("%desc_v", "%r6", v_desc)
    lines += _qk(cfg) + _mask(cfg) + _softmax(cfg)
    if cfg.split_kv_bars:      # fp8: the transposed V has its own full barrier
        lines += [f"    add.u32 %r3, %r3, {cfg.full_v_bar(0) - cfg.full_bar(0)};",
                  "C_WAITV:", "    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r3], "
                  "%phase;", "    @!%p1 bra C_WAITV;"]
    lines += _pv(cfg)
    releases = [cfg.empty_bar(0) - cfg.full_bar(0)] if not cfg.split_kv_bars else [
        cfg.empty_bar(0) - cfg.full_v_bar(0), cfg.empty_v_bar(0) - cfg.full_v_bar(0)]
    for off in releases:            # K/V are read by wgmma only
        lines += [f"    add.{'s' if off < 0 else 'u'}32 %r4, %r3, {off};",
                  *release_stage("%r4", warp_sync=False)]
    lines += [*advance_stage(cfg), "    add.u32 %n, %n, 1;",
              "    setp.lt.u32 %p0, %n, %nend;", "    @%p0 bra C_K;", "C_END:",
              *_epilogue(cfg), *(_inline_combine(cfg) if cfg.inline_combine else []),
              "    bra.uni DONE;"]
    return lines


def _consumer_fa3(cfg, k_desc: int, v_desc: int) -> list[str]:
    """FA3's consumer mainloop (`IntraWGOverlap`, with `UseSchedulerBarrier` ping-pong
    when there are several consumer warpgroups): the first block alone (QK^T, wait,
    softmax, P); then per block n: issue S = Q K_n^T and O += P_(n-1) V_(n-1), wait for
    S only, release K_n, mask and softmax statistics on S while the P.V runs, wait for it,
    release V_(n-1), rescale O, pack P_n; after the loop the last P.V. The GEMM issues of
    a step sit between a wait on this warpgroup's token mbarrier and an arrival on the
    next warpgroup's (`_tokens`)."""
    ring = "    shl.b32 %r2, {st}, 3;\n    add.u32 {reg}, %bars, %r2;\n" \
           "    add.u32 {reg}, {reg}, {off};"
    tile = ["    mov.u32 %r6, smem;", "    mad.lo.u32 %r6, {st}, " f"{cfg.stage_bytes}, %r6;",
            f"    add.u32 %r6, %r6, {cfg.q_bytes};"]

    def wait(st, off, parity, label):
        return [ring.format(st=st, reg="%r3", off=off), f"{label}:",
                f"    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r3], {parity};",
                f"    @!%p1 bra {label};"]

    def wait_k(label):
        return [*wait("%stage", cfg.full_bar(0), "%phase", label),
                *[t.format(st="%stage") for t in tile], *smem_desc("%desc_k", "%r6", k_desc)]

    def wait_v(label):
        return [*wait("%sprev", cfg.full_v_bar(0), "%vphase", label),
                *[t.format(st="%sprev") for t in tile], f"    add.u32 %r6, %r6, {cfg.k_bytes};",
                *smem_desc("%desc_v", "%r6", v_desc)]

    def release(st, off):
        return [ring.format(st=st, reg="%r4", off=off), *release_stage("%r4", warp_sync=False)]

    def next_block():
        return ["    mov.u32 %sprev, %stage;", "    mov.u32 %vphase, %phase;", *advance_stage(cfg),
                "    add.u32 %n, %n, 1;", "    setp.lt.u32 %p0, %n, %nend;"]

    turn, pass_on, setup = _tokens(cfg)
    stats = _softmax_stats(cfg, 0) + _softmax_stats(cfg, 1)
    return [*setup, "    // first block: S = Q K^T, softmax, P (O is zero: no rescale)",
            *wait_k("C_WAIT0"), *turn("C_TOK0"), *_qk(cfg, wait=False), *pass_on,
            "    wgmma.wait_group.sync.aligned 0;", *release("%stage", cfg.empty_bar(0)),
            *_mask(cfg, "C_SOFTMAX0"), *stats, *_pack_p(cfg), *next_block(),
            "    @!%p0 bra C_LAST;",
            "C_K:   // S_n = Q K_n^T and O += P_(n-1) V_(n-1) in flight together",
            *wait_k("C_WAIT"), *wait_v("C_WAITV"), *turn("C_TOK"), *_qk(cfg, wait=False),
            *_pv(cfg, fence=False, wait=False), *pass_on,
            "    wgmma.wait_group.sync.aligned 1;   // S_n ready, P.V still running",
            *release("%stage", cfg.empty_bar(0)), *_mask(cfg), *stats,
            "    wgmma.wait_group.sync.aligned 0;", *release("%sprev", cfg.empty_v_bar(0)),
            *_rescale_o(cfg, 0), *_rescale_o(cfg, 1), *_pack_p(cfg), *next_block(),
            "    @%p0 bra C_K;",
            "C_LAST:   // the last block's P.V", *wait_v("C_WAITL"), *_pv(cfg),
            *release("%sprev", cfg.empty_v_bar(0)), "C_END:",
            *_epilogue(cfg), *(_inline_combine(cfg) if cfg.inline_combine else []),
            "    bra.uni DONE;"]


def _tokens(cfg):
    """FA3's warp-scheduler barriers as mbarriers, one per consumer warpgroup (count: the
    4 warps of the warpgroup before it in the ring): `turn(label)` waits for this
    warpgroup's token (phase %tphase), `pass_on` hands the next warpgroup its token (one
    arrival per warp), `setup` computes the addresses and lets the last warpgroup give
    warpgroup 0 the first token (FA3's `mma_init`). Without ping-pong all three are
    empty."""
    if not cfg.pingpong:
        return (lambda label: []), [], []
    c = cfg.consumers
    setup = ["    // ping-pong: the warpgroups issue their GEMMs in turn (token ring)",
             "    shl.b32 %r2, %r10, 3;", f"    add.u32 %tok, %bars, {cfg.token_bar(0)};",
             "    add.u32 %tok, %tok, %r2;", "    add.u32 %r2, %r10, 1;",
             f"    setp.eq.u32 %p2, %r2, {c};", "    selp.u32 %r2, 0, %r2, %p2;",
             "    shl.b32 %r2, %r2, 3;", f"    add.u32 %tnext, %bars, {cfg.token_bar(0)};",
             "    add.u32 %tnext, %tnext, %r2;", "    mov.u32 %tphase, 0;",
             f"    setp.eq.u32 %p2, %r10, {c - 1};", "    and.pred %p3, %p2, %plead;",
             f"    add.u32 %r4, %bars, {cfg.token_bar(0)};",
             "    @%p3 mbarrier.arrive.shared::cta.b64 %rd3, [%r4];"]

    def turn(label):
        return [f"{label}:", "    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%tok], %tphase;",
                f"    @!%p1 bra {label};", "    xor.b32 %tphase, %tphase, 1;"]

    pass_on = ["    @%plead mbarrier.arrive.shared::cta.b64 %rd3, [%tnext];"]
    return turn, pass_on, setup


def _qk(cfg, wait: bool = True) -> list[str]:
    """S[64, kv_block] = Q[64 rows of this group, D] K[kv_block, D]^T (SS wgmma, k16),
    committed as one group (and waited for with `wait`)."""
    frag = ", ".join(f"%s{i}" for i in range(cfg.kv_block // 2))
    k, trans = ("k32", "") if cfg.fp8 else ("k16", ", 0, 0")   # fp8: K-major only
    lines = ["    wgmma.fence.sync.aligned;"]
    first = True
    for j in range(cfg.d_atoms):
        for q in range(cfg.k_span // 32):        # k16 (k32 fp8) steps of 32 bytes per row
            a_off = j * cfg.m_tile * cfg.k_span + 32 * q
            b_off = j * cfg.kv_block * cfg.k_span + 32 * q
            lines += [f"    add.s64 %rd4, %desc_q, {a_off >> 4};",
                      f"    add.s64 %rd5, %desc_k, {b_off >> 4};",
                      f"    wgmma.mma_async.sync.aligned.m64n{cfg.kv_block}{k}.f32.{cfg.ptx_type}."
                      f"{cfg.ptx_type} {{{frag}}}, %rd4, %rd5, {'%pfalse' if first else '%ptrue'}"
                      f", 1, 1{trans};"]
            first = False
    return lines + ["    wgmma.commit_group.sync.aligned;"] + \
        (["    wgmma.wait_group.sync.aligned 0;"] if wait else [])


def _half(cfg, h: int, count: int) -> list[int]:
    """Fragment elements of row half h among `count` accumulator registers."""
    return [i for i in range(count) if (i % 4 >= 2) == bool(h)]


def _o_pairs(cfg, h: int) -> list[tuple[int, int]]:
    """(column, register index) of each adjacent pair %o<x>, %o<x+1> of fragment half h
    (rows l/4 or l/4 + 8): the O elements a thread stores, in the order it stores them."""
    return [(c0 + 8 * (i // 4), c0 // 2 + i) for c0, width in cfg.v_chunks
            for i in _half(cfg, h, width // 2)[::2]]


def _mask(cfg, done: str = "C_SOFTMAX") -> list[str]:
    """-inf where key >= the row's limit (seqlen_k edge, causal diagonal); only in blocks
    that reach past `maskfrom` (uniform across the CTA); ends at label `done`."""
    lines = [f"    mul.lo.u32 %r5, %n, {cfg.kv_block};",
             f"    add.u32 %r7, %r5, {cfg.kv_block};",
             "    setp.gt.u32 %pmask, %r7, %maskfrom;", f"    @!%pmask bra {done};",
             "    add.u32 %r5, %r5, %col0;"]
    for h in range(2):
        lines.append(f"    sub.s32 %rl{h}, %lim{h}, %r5;")
        for i in _half(cfg, h, cfg.kv_block // 2):
            const = 8 * (i // 4) + (i & 1)
            lines += [f"    setp.le.s32 %p4, %rl{h}, {const};",
                      f"    @%p4 mov.f32 %s{i}, {NEG_INF};"]
    return lines + [f"{done}:"]


def _softmax(cfg) -> list[str]:
    """Online softmax on the S fragment (rows reduced over the 4 lanes sharing them),
    O rescaled, P packed to 16-bit pairs for the register-A wgmma."""
    lines = []
    for h in range(2):
        lines += _softmax_stats(cfg, h) + _rescale_o(cfg, h)
    return lines + _pack_p(cfg)


def _softmax_stats(cfg, h: int) -> list[str]:
    """Row half h of the online softmax: new row max %mx, rescale factor %sc<h>, S turned
    into exp2(S scale log2(e) - max), row sums %l rescaled and accumulated."""
    els = _half(cfg, h, cfg.kv_block // 2)
    lines = [f"    max.f32 %f0, %s{els[0]}, %s{els[1]};"]
    lines += [f"    max.f32 %f0, %f0, %s{i};" for i in els[2:]]
    for d in (1, 2):
        lines += [f"    shfl.sync.bfly.b32 %f1, %f0, {d}, 31, 0xffffffff;",
                  "    max.f32 %f0, %f0, %f1;"]
    lines += [f"    max.f32 %mn{h}, %mx{h}, %f0;",
              f"    setp.eq.f32 %p5, %mn{h}, {NEG_INF};",
              f"    selp.f32 %mu{h}, {ZERO}, %mn{h}, %p5;   // all masked: exponent base 0",
              f"    sub.f32 %f2, %mx{h}, %mu{h};", "    mul.f32 %f2, %f2, %sl2;",
              f"    ex2.approx.ftz.f32 %sc{h}, %f2;", f"    mov.f32 %mx{h}, %mn{h};",
              f"    mul.f32 %nm{h}, %mu{h}, %nsl2;" if not cfg.fp8 else
              f"    fma.rn.f32 %nm{h}, %mu{h}, %nsl2, {_f32(FP8_MAX_OFFSET)};   // + Max_offset"]
    for i in els:
        lines += [f"    fma.rn.f32 %s{i}, %s{i}, %sl2, %nm{h};",
                  f"    ex2.approx.ftz.f32 %s{i}, %s{i};"]
    lines.append(f"    mul.f32 %l{h}, %l{h}, %sc{h};")
    return lines + [f"    add.f32 %l{h}, %l{h}, %s{i};" for i in els]


def _rescale_o(cfg, h: int) -> list[str]:
    """O's row half h times its rescale factor %sc<h>."""
    return [f"    mul.f32 %o{i}, %o{i}, %sc{h};" for i in _half(cfg, h, cfg.headdim_v // 2)]


def _pack_p(cfg) -> list[str]:
    """P = the exponentiated S packed to 16-bit pairs (the A fragment of the P.V wgmma);
    fp8: `_pack_p_fp8`."""
    if cfg.fp8:
        return _pack_p_fp8(cfg)
    cvt = "bf16x2" if cfg.dtype == "bf16" else "f16x2"
    return [f"    cvt.rn.{cvt}.f32 %pp{j}, %s{2 * j + 1}, %s{2 * j};"
            for j in range(cfg.kv_block // 4)]


def _pv(cfg, fence: bool = True, wait: bool = True) -> list[str]:
    """O[64, D_v] += P[64, kv_block] V[kv_block, D_v]: A from registers, V MN-major (fp8:
    `_pv_fp8_steps`); one commit group (after a `wgmma.fence` with `fence`, waited for
    with `wait`)."""
    lines = ["    wgmma.fence.sync.aligned;"] if fence else []
    if cfg.fp8:
        lines += _pv_fp8_steps(cfg)
    for t in range(0 if cfg.fp8 else cfg.kv_block // 16):
        a = ", ".join(f"%pp{4 * t + e}" for e in range(4))
        for c0, width in cfg.v_chunks:
            frag = ", ".join(f"%o{c0 // 2 + i}" for i in range(width // 2))
            off = (c0 // cfg.v_cols) * cfg.kv_block * cfg.v_span + t * 16 * cfg.v_span
            lines += [f"    add.s64 %rd5, %desc_v, {off >> 4};",
                      f"    wgmma.mma_async.sync.aligned.m64n{width}k16.f32.{cfg.ptx_type}."
                      f"{cfg.ptx_type} {{{frag}}}, {{{a}}}, %rd5, %ptrue, 1, 1, 1;"]
    return lines + ["    wgmma.commit_group.sync.aligned;"] + \
        (["    wgmma.wait_group.sync.aligned 0;"] if wait else [])


def _f32(x: float) -> str:
    """A PTX f32 immediate (hex form) of `x`."""
    return "0f" + np.float32(x).view(np.uint32).item().to_bytes(4, "big").hex().upper()


def _pack_p_fp8(cfg) -> list[str]:
    """P = the exponentiated S as e4m3, four per register, in the order of the k32 A
    fragment (lane quad t holds, for its two rows, A columns 4t .. 4t+3 and 16+4t ..
    16+4t+3 of each 32-column step). The accumulator gives a lane S columns 2t, 2t+1,
    8+2t, 9+2t, 16+2t, ... of each step, so register a0 of step c packs S elements
    16c + (0, 1, 4, 5), a1 (2, 3, 6, 7), a2 (8, 9, 12, 13), a3 (10, 11, 14, 15): A
    column 4t + j of a step holds key (2t, 2t+1, 8+2t, 9+2t)[j] of its 16-key half, the
    key order this packing gives P (derived from the fragment layouts; FA3's own register
    permutation is not in the notes) and the producer's transpose gives V
    (`_producer_fp8`). Saturating conversion (P <= 256
    < 448)."""
    lines = []
    for c in range(cfg.kv_block // 32):
        for r, base in enumerate((0, 2, 8, 10)):
            e = [16 * c + base + d for d in (0, 1, 4, 5)]
            lines += [f"    cvt.rn.satfinite.e4m3x2.f32 %ph0, %s{e[1]}, %s{e[0]};",
                      f"    cvt.rn.satfinite.e4m3x2.f32 %ph1, %s{e[3]}, %s{e[2]};",
                      f"    mov.b32 %pp{4 * c + r}, {{%ph0, %ph1}};"]
    return lines


def _pv_fp8_steps(cfg) -> list[str]:
    """fp8 P.V: per 32 keys one wgmma m64 N k32 with P from registers and the transposed V
    K-major (atoms of 128 keys x Dv rows, 128B swizzle; a k32 step advances 32 bytes
    within its atom row)."""
    lines = []
    for t in range(cfg.kv_block // 32):
        a = ", ".join(f"%pp{4 * t + e}" for e in range(4))
        for c0, width in cfg.v_chunks:
            frag = ", ".join(f"%o{c0 // 2 + i}" for i in range(width // 2))
            off = (32 * t // VT_ATOM_KEYS) * cfg.vt_atom_bytes + 32 * t % VT_ATOM_KEYS \
                + c0 * VT_ATOM_KEYS
            lines += [f"    add.s64 %rd5, %desc_v, {off >> 4};",
                      f"    wgmma.mma_async.sync.aligned.m64n{width}k32.f32.e4m3.e4m3 "
                      f"{{{frag}}}, {{{a}}}, %rd5, %ptrue, 1, 1;"]
    return lines


def _epilogue(cfg) -> list[str]:
    """O /= rowsum, stored (bf16/fp16, or f32 partials when split); log-sum-exp (base 2,
    scaled: m * scale_log2 + lg2 l) per row by lane l % 4 == 0."""
    split = cfg.split
    ob = 4 if split else 2
    lines = ["    // ---- epilogue ----", *(["    ld.param.f32 %vds, [v_descale];"]
                                         if cfg.fp8 else []), "    ld.param.u64 %rd6, [o];",
             "    cvta.to.global.u64 %rd6, %rd6;",
             "    ld.param.u64 %rd7, [lse];", "    cvta.to.global.u64 %rd7, %rd7;",
             "    and.b32 %r20, %thr, 3;", "    setp.eq.u32 %pl, %r20, 0;",
             "    mad.lo.u32 %r21, %split, %B, %b;"]
    for h in range(2):
        lines += [f"    shfl.sync.bfly.b32 %f1, %l{h}, 1, 31, 0xffffffff;",
                  f"    add.f32 %l{h}, %l{h}, %f1;",
                  f"    shfl.sync.bfly.b32 %f1, %l{h}, 2, 31, 0xffffffff;",
                  f"    add.f32 %l{h}, %l{h}, %f1;",
                  f"    setp.eq.f32 %p5, %l{h}, {ZERO};", f"    rcp.approx.ftz.f32 %f3, %l{h};",
                  f"    selp.f32 %f3, {ZERO}, %f3, %p5;",
                  f"    lg2.approx.ftz.f32 %f4, %l{h};", f"    fma.rn.f32 %f4, %mx{h}, %sl2, %f4;",
                  *([f"    sub.f32 %f4, %f4, {_f32(FP8_MAX_OFFSET)};   // P carried 2^8",
                     "    mul.f32 %f3, %f3, %vds;   // v_descale"] if cfg.fp8 else []),
                  "    // row index ((split * B + b) * Sq + s) * H + head",
                  f"    mad.lo.u32 %r22, %r21, %Sq, %sq{h};",
                  f"    mad.lo.u32 %r22, %r22, %H, %hd{h};",
                  "    mul.wide.u32 %rd8, %r22, 4;", "    add.s64 %rd8, %rd7, %rd8;",
                  f"    and.pred %p6, %pv{h}, %pl;", "    @%p6 st.global.f32 [%rd8], %f4;",
                  f"    mul.wide.u32 %rd9, %r22, {cfg.headdim_v * ob};",
                  "    add.s64 %rd9, %rd6, %rd9;", "    mul.wide.u32 %rd10, %col0, " f"{ob};",
                  f"    add.s64 %po{h}, %rd9, %rd10;"]
        els = _half(cfg, h, cfg.headdim_v // 2)
        lines += [f"    mul.f32 %o{i}, %o{i}, %f3;" for i in els]
        cvt = f"{cfg.out_type}x2"
        for col, x in _o_pairs(cfg, h):
            if split:
                lines.append(f"    @%pv{h} st.global.v2.f32 [%po{h}+{col * ob}], "
                             f"{{%o{x}, %o{x + 1}}};")
            else:
                lines += [f"    cvt.rn.{cvt}.f32 %r23, %o{x + 1}, %o{x};",
                          f"    @%pv{h} st.global.b32 [%po{h}+{col * ob}], %r23;"]
    return lines


def _inline_combine(cfg) -> list[str]:
    """Split-KV combine inside the kernel (FlashDecoding / TensorRT-LLM multi-block style):
    after its partials and lse are stored, each CTA counts itself on its row block's
    counter; the CTA that counts last reads every split's lse and partial O of its own
    fragment rows and writes O = sum_z 2^(lse_z - max) O_z / sum_z 2^(lse_z - max), then
    zeroes the counter. Consumer threads only (named barrier 1); the count goes through a
    shared-memory flag. Per split, a thread issues the loads of both its rows' lse and
    partials before using them (one memory round trip per split, not one per column)."""
    nc = 128 * cfg.consumers
    dv = cfg.headdim_v
    cvt = "bf16x2" if cfg.dtype == "bf16" else "f16x2"
    pairs = [(h, col, x) for h in range(2) for col, x in _o_pairs(cfg, h)]
    lines = ["    // ---- inline combine: the last split CTA of this row block combines ----",
             "    membar.gl;", f"    bar.sync 1, {nc};",
             "    ld.param.u64 %icd2, [counters];", "    cvta.to.global.u64 %icd2, %icd2;",
             "    mov.u32 %ic0, %nctaid.y;", "    mad.lo.u32 %ic0, %b, %ic0, %y;",
             "    mov.u32 %ic1, %nctaid.x;", "    mov.u32 %ic2, %ctaid.x;",
             "    mad.lo.u32 %ic0, %ic0, %ic1, %ic2;",
             "    mul.wide.u32 %icd0, %ic0, 4;", "    add.s64 %icd2, %icd2, %icd0;",
             "    mov.u32 %ic3, smem;", f"    add.u32 %ic3, %ic3, {cfg.flag_offset};",
             "    setp.eq.u32 %icp0, %thr, 0;",
             "    @%icp0 atom.global.add.u32 %ic4, [%icd2], 1;",
             "    @%icp0 st.shared.u32 [%ic3], %ic4;", f"    bar.sync 1, {nc};",
             "    ld.shared.u32 %ic4, [%ic3];", "    sub.u32 %ic5, %nsplit, 1;",
             "    setp.ne.u32 %icp1, %ic4, %ic5;", "    @%icp1 bra IC_END;",
             "    membar.gl;",
             "    ld.param.u64 %icd3, [out];", "    cvta.to.global.u64 %icd3, %icd3;",
             "    mul.lo.u32 %ic1, %B, %Sq;", "    mul.lo.u32 %ic1, %ic1, %H;   // rows per split",
             "    mul.wide.u32 %icd1, %ic1, 4;              // lse bytes per split"]
    for h in range(2):      # row of fragment half h without split; lse address of split 0
        lines += [f"    mad.lo.u32 %ic{6 + h}, %b, %Sq, %sq{h};",
                  f"    mad.lo.u32 %ic{6 + h}, %ic{6 + h}, %H, %hd{h};",
                  f"    mul.wide.u32 %icd0, %ic{6 + h}, 4;", f"    add.s64 %icl{h}, %rd7, %icd0;",
                  f"    mov.f32 %icm{h}, {NEG_INF};", f"    mov.f32 %ics{h}, {ZERO};"]
    lines += [f"    mov.f32 %o{x}, {ZERO};\n    mov.f32 %o{x + 1}, {ZERO};" for _, _, x in pairs]
    lines += ["    // max over the splits: both rows' lse loaded together",
              "    mov.u32 %ic2, 0;", "    mov.b64 %icd0, 0;", "IC_MAX:"]
    lines += [f"    add.s64 %ica{h}, %icl{h}, %icd0;\n    @%pv{h} ld.global.f32 %icx{h}, [%ica{h}];"
              for h in range(2)]
    lines += [f"    @%pv{h} max.f32 %icm{h}, %icm{h}, %icx{h};" for h in range(2)]
    lines += ["    add.s64 %icd0, %icd0, %icd1;", "    add.u32 %ic2, %ic2, 1;",
              "    setp.lt.u32 %icp0, %ic2, %nsplit;", "    @%icp0 bra IC_MAX;",
              "    // weighted sum: per split all loads first, then the FMAs",
              "    mov.u32 %ic2, 0;", "    mov.b64 %icd0, 0;", "IC_SUM:"]
    for h in range(2):
        lines += [f"    add.s64 %ica{h}, %icl{h}, %icd0;",
                  f"    @%pv{h} ld.global.f32 %icx{h}, [%ica{h}];",
                  f"    sub.u64 %ica{h}, %ica{h}, %rd7;   // 4 x (row + split rows)",
                  f"    mul.lo.u64 %ica{h}, %ica{h}, {dv};",
                  f"    add.s64 %ica{h}, %ica{h}, %rd6;",
                  f"    mad.wide.u32 %ica{h}, %col0, 4, %ica{h};"]
    for k, (h, col, _) in enumerate(pairs):
        lines.append(f"    @%pv{h} ld.global.v2.f32 {{%ict{2 * k}, %ict{2 * k + 1}}}, "
                     f"[%ica{h}+{col * 4}];")
    for h in range(2):
        lines += [f"    sub.f32 %icx{h}, %icx{h}, %icm{h};",
                  f"    ex2.approx.ftz.f32 %icx{h}, %icx{h};",
                  f"    add.f32 %ics{h}, %ics{h}, %icx{h};"]
    for k, (h, _, x) in enumerate(pairs):
        lines += [f"    fma.rn.f32 %o{x}, %icx{h}, %ict{2 * k}, %o{x};",
                  f"    fma.rn.f32 %o{x + 1}, %icx{h}, %ict{2 * k + 1}, %o{x + 1};"]
    lines += ["    add.s64 %icd0, %icd0, %icd1;", "    add.u32 %ic2, %ic2, 1;",
              "    setp.lt.u32 %icp0, %ic2, %nsplit;", "    @%icp0 bra IC_SUM;"]
    for h in range(2):
        lines += [f"    rcp.approx.ftz.f32 %ics{h}, %ics{h};",
                  f"    mul.wide.u32 %ica{h}, %ic{6 + h}, {dv * 2};",
                  f"    add.s64 %ica{h}, %icd3, %ica{h};",
                  f"    mad.wide.u32 %ica{h}, %col0, 2, %ica{h};"]
    for h, col, x in pairs:
        lines += [f"    mul.f32 %o{x}, %o{x}, %ics{h};",
                  f"    mul.f32 %o{x + 1}, %o{x + 1}, %ics{h};",
                  f"    cvt.rn.{cvt}.f32 %r23, %o{x + 1}, %o{x};",
                  f"    @%pv{h} st.global.b32 [%ica{h}+{col * 2}], %r23;"]
    return lines + ["    setp.eq.u32 %icp0, %thr, 0;", "    @%icp0 st.global.u32 [%icd2], 0;",
                    "IC_END:"]
