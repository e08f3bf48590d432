"""PTX text of the XQA-style decode attention (the emitter behind `templates.xqa`).

`emit(cfg)` returns the `.entry` of a validated `templates.xqa.Config`. Layout:

    shared: Q [2 parts][N rows][128 B]; K part buffers [2][64 tokens][128 B]; V tile
            buffers [2][2 parts][64 tokens][128 B]; X [2][N q heads][64 tokens x 2 B];
            all 128B-swizzled (TMA for K/V, by address for Q and X); per X buffer the
            softmax side data wmax[4 warps][N], sum[4 warps][N], m[N] (f32); the 13
            mbarriers (q, kprod[2], kcons[2], vprod[2], vcons[2], xprod[2], xcons[2]);
            the last-CTA flag.
    registers: gemm0 %acc (S^T fragment, 64 tokens x N, f32), %m running max per q-head
            column of the thread; gemm1 %o (O^T fragments of head rows 0-63 and 64-127),
            %mp last max, %l running sum.
    params: tmap_k, tmap_v (args 0-1), k_pool, v_pool (their bases), q, out,
            block_table, seqlens, pages_per_seq, nb_kheads, scale_log2
            [, part_o, part_ml, semaphores].

Accumulator element i of lane l in warp w: row 16 w + l/4 + 8 (i % 4 >= 2), column
2 (l % 4) + (i & 1) + 8 (i / 4); the thread's distinct columns are indexed
k = (i & 1) + 2 (i / 4).
"""

from __future__ import annotations

from workloads.kernels.templates.pipeline_ptx import DESC_SWIZZLE128, param_addresses, smem_desc
from workloads.kernels.templates.xqa import PART_BYTES, TILE

NEG_INF = "0fFF800000"
MERGE_DEPTH = 2
"""Sub-sequences whose partials the last CTA loads before merging them (`_merge_body`)."""
TMA = ("    @%p2 cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx"
       "::bytes [{dst}], [{map}, {{{part}, 0, %hkv, %r18}}], [{bar}];")


def emit(cfg) -> str:
    return "\n".join(_head(cfg) + _io(cfg) + _gemm0(cfg) + _gemm1(cfg)
                     + ["EXIT:", "    ret;", "}"]) + "\n"


def _cols(cfg) -> int:
    return cfg.n // 4


def _across_rows(op: str) -> list[str]:
    """`op`.f32 of %f0 over the 8 lanes that hold one column (xor distances 4, 8, 16)."""
    lines = []
    for d in (4, 8, 16):
        lines += [f"    shfl.sync.bfly.b32 %f1, %f0, {d}, 31, 0xffffffff;",
                  f"    {op}.f32 %f0, %f0, %f1;"]
    return lines


def _elems(cfg, k: int) -> list[int]:
    """Accumulator elements (of N/2) in the thread's column k."""
    return [i for i in range(cfg.n // 2) if (i & 1) + 2 * (i // 4) == k]


def _col_off(k: int) -> int:
    """Column of k minus 2 (lane % 4)."""
    return (k & 1) + 8 * (k >> 1)


def _wait(bar: str, parity: str, label: str) -> list[str]:
    return [f"{label}:", f"    mbarrier.try_wait.parity.shared::cta.b64 %p1, [{bar}], {parity};",
            f"    @!%p1 bra {label};"]


def _bar(cfg, name: str, i: int = 0) -> int:
    return cfg.bar(name, i) - cfg.bar_off


def _head(cfg) -> list[str]:
    n2 = cfg.n // 2
    params = ["    .param .align 64 .b8 tmap_k[128],", "    .param .align 64 .b8 tmap_v[128],",
              "    .param .u64 k_pool,", "    .param .u64 v_pool,",
              "    .param .u64 q,", "    .param .u64 out,", "    .param .u64 block_table,",
              "    .param .u64 seqlens,", "    .param .u32 pages_per_seq,",
              "    .param .u32 nb_kheads,", "    .param .f32 scale_log2"]
    if cfg.multi_block:
        params[-1] += ","
        params += ["    .param .u64 part_o,", "    .param .u64 part_ml,",
                   "    .param .u64 semaphores"]
    lines = [".version 8.0", ".target sm_90a", ".address_size 64",
             ".extern .shared .align 1024 .b8 smem[];", "",
             f".visible .entry {cfg.entry}(", *params, ")", ".maxntid 128, 1, 3", "{",
             "    .reg .pred %p<8>;", "    .reg .pred %ptrue, %pfalse;",
             "    .reg .b32 %r<40>;", "    .reg .b64 %rd<16>;", "    .reg .f32 %f<12>;",
             "    .reg .b16 %h<2>;",
             f"    .reg .f32 %acc<{n2}>;", f"    .reg .f32 %o<{cfg.n}>;",
             *[f"    .reg .f32 %ma{d}_<{2 * _cols(cfg)}>, %pm{d}_<{cfg.n}>;"
               for d in range(MERGE_DEPTH)],
             f"    .reg .f32 %m<{_cols(cfg)}>, %mp<{_cols(cfg)}>, %l<{_cols(cfg)}>;",
             "    .reg .b32 %tx, %tz, %lane, %warp, %smem, %bar, %b, %hkv, %Hkv, %sub;",
             "    .reg .b32 %nsub, %nsubg, %slen, %ntiles, %mytiles, %it, %tile, %t0, %c0;",
             "    .reg .f32 %sl2;", "    .reg .b64 %desc_a, %desc_b;",
             "    mov.u32 %tx, %tid.x;", "    mov.u32 %tz, %tid.z;",
             "    and.b32 %lane, %tx, 31;", "    shr.u32 %warp, %tx, 5;",
             "    setp.eq.u32 %ptrue, %tx, %tx;", "    setp.ne.u32 %pfalse, %tx, %tx;",
             "    mov.u32 %smem, smem;", f"    add.u32 %bar, %smem, {cfg.bar_off};",
             "    ld.param.u32 %Hkv, [nb_kheads];", "    ld.param.f32 %sl2, [scale_log2];",
             "    mov.u32 %sub, %ctaid.y;", "    mov.u32 %nsubg, %nctaid.y;",
             "    mov.u32 %r0, %ctaid.z;", "    div.u32 %b, %r0, %Hkv;",
             "    rem.u32 %hkv, %r0, %Hkv;",
             "    // row 16 w + l / 4 of the fragment, column 2 (l % 4)",
             "    shl.b32 %t0, %warp, 4;", "    shr.u32 %r1, %lane, 2;",
             "    add.u32 %t0, %t0, %r1;", "    and.b32 %c0, %lane, 3;",
             "    shl.b32 %c0, %c0, 1;",
             "    // every thread reads the request's sequence length",
             "    ld.param.u64 %rd0, [seqlens];", "    cvta.to.global.u64 %rd0, %rd0;",
             "    mul.wide.u32 %rd1, %b, 4;", "    add.s64 %rd0, %rd0, %rd1;",
             "    ld.global.nc.u32 %slen, [%rd0];",
             f"    add.u32 %ntiles, %slen, {TILE - 1};", "    shr.u32 %ntiles, %ntiles, 6;",
             "    // multi-block: nbSubSeq = min(tiles, gridDim.y); idle sub-sequences exit",
             "    min.u32 %nsub, %ntiles, %nsubg;", "    setp.ge.u32 %p0, %sub, %nsub;",
             "    @%p0 bra EXIT;",
             "    // tiles sub, sub + nsub, ... (round robin)",
             "    sub.u32 %r1, %ntiles, %sub;", "    add.u32 %r1, %r1, %nsub;",
             "    sub.u32 %r1, %r1, 1;", "    div.u32 %mytiles, %r1, %nsub;",
             "    or.b32 %r2, %tx, %tz;", "    setp.ne.u32 %p0, %r2, 0;",
             "    @%p0 bra INIT_DONE;"]
    counts = {"q": 32, "kprod": 128, "kcons": 160, "vprod": 128, "vcons": 160,
              "xprod": 128, "xcons": 128}
    for name, count in counts.items():
        for i in range(1 if name == "q" else 2):
            lines.append(f"    mbarrier.init.shared::cta.b64 [%bar+{_bar(cfg, name, i)}], "
                         f"{count};")
    return lines + ["    fence.mbarrier_init.release.cluster;", "INIT_DONE:",
                    "    bar.sync 0;", "    setp.eq.u32 %p0, %tz, 0;", "    @%p0 bra GEMM0;",
                    "    setp.eq.u32 %p0, %tz, 1;", "    @%p0 bra GEMM1;"]


def _io(cfg) -> list[str]:
    """Warps of tid.z 2: Q (warp 0), K (1), V (2); warp 3 exits."""
    lines = ["", "    // ---- IO warps ----", "    setp.eq.u32 %p0, %warp, 0;",
             "    @%p0 bra QLOAD;", "    setp.eq.u32 %p0, %warp, 1;", "    @%p0 bra KLOAD;",
             "    setp.eq.u32 %p0, %warp, 2;", "    @%p0 bra VLOAD;", "    bra EXIT;",
             "QLOAD:", "    ld.param.u64 %rd2, [q];", "    cvta.to.global.u64 %rd2, %rd2;",
             "    mul.lo.u32 %r7, %b, %Hkv;", "    add.u32 %r7, %r7, %hkv;",
             f"    mul.lo.u32 %r7, %r7, {cfg.group * 128};"]
    for it in range(cfg.n // 2):      # 16-byte chunks (row c, chunk j): 16 N of them
        lines += [f"    add.u32 %r4, %lane, {32 * it};", "    shr.u32 %r5, %r4, 4;",
                  "    and.b32 %r6, %r4, 15;",
                  "    mov.b32 %r8, 0;", "    mov.b32 %r9, 0;", "    mov.b32 %r10, 0;",
                  "    mov.b32 %r11, 0;", f"    setp.lt.u32 %p1, %r5, {cfg.group};",
                  "    shl.b32 %r12, %r5, 7;", "    add.u32 %r12, %r12, %r7;",
                  "    shl.b32 %r13, %r6, 3;", "    add.u32 %r12, %r12, %r13;",
                  "    mul.wide.u32 %rd3, %r12, 2;", "    add.s64 %rd3, %rd2, %rd3;",
                  "    @%p1 ld.global.nc.v4.u32 {%r8, %r9, %r10, %r11}, [%rd3];",
                  "    shr.u32 %r13, %r6, 3;", f"    mul.lo.u32 %r13, %r13, {cfg.q_part_bytes};",
                  "    shr.u32 %r14, %r5, 3;", "    shl.b32 %r14, %r14, 10;",
                  "    add.u32 %r13, %r13, %r14;", "    and.b32 %r14, %r5, 7;",
                  "    shl.b32 %r15, %r14, 7;", "    add.u32 %r13, %r13, %r15;",
                  "    and.b32 %r15, %r6, 7;", "    xor.b32 %r15, %r15, %r14;",
                  "    shl.b32 %r15, %r15, 4;", "    add.u32 %r13, %r13, %r15;",
                  "    add.u32 %r13, %r13, %smem;",
                  "    st.shared.v4.u32 [%r13], {%r8, %r9, %r10, %r11};"]
    lines += ["    fence.proxy.async.shared::cta;",
              f"    mbarrier.arrive.shared::cta.b64 %rd4, [%bar+{_bar(cfg, 'q')}];",
              "    bra EXIT;"]
    for which in ("K", "V"):
        lines += _loader(cfg, which)
    return lines


def _loader(cfg, which: str) -> list[str]:
    """The K or V loader warp: per tile its page index (plain load, every lane), then per
    buffer: all lanes arrive on `consumed` and wait, one elected lane issues the TMA."""
    lines = [f"{which}LOAD:", "    ld.param.u64 %rd4, [block_table];",
             "    cvta.to.global.u64 %rd4, %rd4;", "    ld.param.u32 %r16, [pages_per_seq];",
             "    mul.lo.u32 %r16, %r16, %b;",
             *param_addresses({"%rd5": "tmap_k" if which == "K" else "tmap_v"}),
             "    mov.u32 %it, 0;", "    mov.u32 %tile, %sub;", f"{which}_LOOP:",
             "    add.u32 %r17, %r16, %tile;", "    mul.wide.u32 %rd6, %r17, 4;",
             "    add.s64 %rd6, %rd4, %rd6;", "    ld.global.nc.u32 %r18, [%rd6];"]
    if which == "K":                  # two part buffers, each used once per tile
        lines += ["    and.b32 %r19, %it, 1;"]
        for p in range(cfg.parts):
            lines += [f"    add.u32 %r20, %bar, {_bar(cfg, 'kcons', p)};",
                      "    mbarrier.arrive.shared::cta.b64 %rd7, [%r20];",
                      *_wait("%r20", "%r19", f"K_WAIT{p}"),
                      "    elect.sync %r21|%p2, 0xffffffff;",
                      f"    add.u32 %r8, %smem, {cfg.k_off + p * cfg.k_buf_bytes};",
                      f"    add.u32 %r22, %bar, {_bar(cfg, 'kprod', p)};",
                      TMA.format(dst="%r8", map="%rd5", part=p * PART_BYTES // 2, bar="%r22")]
    else:                             # two whole-tile buffers, alternating
        lines += ["    and.b32 %r19, %it, 1;", "    shr.u32 %r23, %it, 1;",
                  "    and.b32 %r23, %r23, 1;", "    shl.b32 %r24, %r19, 3;",
                  f"    add.u32 %r20, %bar, {_bar(cfg, 'vcons')};", "    add.u32 %r20, %r20, %r24;",
                  f"    add.u32 %r22, %bar, {_bar(cfg, 'vprod')};", "    add.u32 %r22, %r22, %r24;",
                  "    mbarrier.arrive.shared::cta.b64 %rd7, [%r20];",
                  *_wait("%r20", "%r23", "V_WAIT"), "    elect.sync %r21|%p2, 0xffffffff;",
                  f"    mad.lo.u32 %r8, %r19, {cfg.v_buf_bytes}, %smem;",
                  f"    add.u32 %r8, %r8, {cfg.v_off};"]
        for p in range(cfg.parts):
            lines += [f"    add.u32 %r9, %r8, {p * cfg.k_buf_bytes};",
                      TMA.format(dst="%r9", map="%rd5", part=p * PART_BYTES // 2, bar="%r22")]
    return lines + ["    add.u32 %it, %it, 1;", "    add.u32 %tile, %tile, %nsub;",
                    "    setp.lt.u32 %p1, %it, %mytiles;", f"    @%p1 bra {which}_LOOP;",
                    "    bra EXIT;"]


def _gemm0(cfg) -> list[str]:
    """tid.z 0: per tile S^T = K Q^T, mask, online softmax, X to shared memory."""
    n, n2 = cfg.n, cfg.n // 2
    acc = ", ".join(f"%acc{i}" for i in range(n2))
    lines = ["", "    // ---- gemm0 warpgroup ----", "GEMM0:",
             f"    add.u32 %r20, %bar, {_bar(cfg, 'kcons')};",
             "    mbarrier.arrive.shared::cta.b64 %rd7, [%r20];",
             "    mbarrier.arrive.shared::cta.b64 %rd7, [%r20+8];",
             *[f"    mov.f32 %m{k}, {NEG_INF};" for k in range(_cols(cfg))],
             f"    add.u32 %r20, %bar, {_bar(cfg, 'q')};", *_wait("%r20", "0", "Q_WAIT"),
             "    mov.u32 %it, 0;", "    mov.u32 %tile, %sub;", "G0_LOOP:",
             "    and.b32 %r19, %it, 1;"]
    for p in range(cfg.parts):
        lines += [f"    add.u32 %r20, %bar, {_bar(cfg, 'kprod', p)};",
                  f"    mbarrier.arrive.expect_tx.shared::cta.b64 %rd7, [%r20], "
                  f"{cfg.k_buf_bytes // 128};", *_wait("%r20", "%r19", f"G0_K{p}"),
                  f"    add.u32 %r21, %smem, {cfg.q_off + p * cfg.q_part_bytes};",
                  *smem_desc("%desc_b", "%r21", DESC_SWIZZLE128),
                  f"    add.u32 %r21, %smem, {cfg.k_off + p * cfg.k_buf_bytes};",
                  *smem_desc("%desc_a", "%r21", DESC_SWIZZLE128), "    wgmma.fence.sync.aligned;"]
        for q in range(PART_BYTES // 32):
            first = p == 0 and q == 0
            lines += [f"    add.s64 %rd8, %desc_a, {2 * q};",
                      f"    add.s64 %rd9, %desc_b, {2 * q};",
                      f"    wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{cfg.ptx_type}."
                      f"{cfg.ptx_type} {{{acc}}}, %rd8, %rd9, {'%pfalse' if first else '%ptrue'}"
                      ", 1, 1, 0, 0;"]
        lines += ["    wgmma.commit_group.sync.aligned;", "    wgmma.wait_group.sync.aligned 0;",
                  f"    add.u32 %r20, %bar, {_bar(cfg, 'kcons', p)};",
                  "    mbarrier.arrive.shared::cta.b64 %rd7, [%r20];"]
    lines += [f"    mul.f32 %acc{i}, %acc{i}, %sl2;" for i in range(n2)]
    lines += ["    // mask tokens past the sequence, in its last tile only",
              "    sub.u32 %r1, %ntiles, 1;", "    setp.ne.u32 %p1, %tile, %r1;",
              "    @%p1 bra G0_NOMASK;", "    shl.b32 %r2, %tile, 6;",
              "    sub.u32 %r2, %slen, %r2;", "    setp.ge.u32 %p2, %t0, %r2;",
              "    add.u32 %r3, %t0, 8;", "    setp.ge.u32 %p3, %r3, %r2;"]
    lines += [f"    @%p{3 if i % 4 >= 2 else 2} mov.f32 %acc{i}, {NEG_INF};" for i in range(n2)]
    lines += ["G0_NOMASK:",
              "    // X buffer it % 2: wait until gemm1 consumed its previous use",
              "    shl.b32 %r24, %r19, 3;", f"    add.u32 %r20, %bar, {_bar(cfg, 'xcons')};",
              "    add.u32 %r20, %r20, %r24;", "    shr.u32 %r23, %it, 1;",
              "    and.b32 %r23, %r23, 1;", *_wait("%r20", "%r23", "G0_X"),
              f"    mad.lo.u32 %r25, %r19, {cfg.side_bytes}, %smem;",
              f"    add.u32 %r25, %r25, {cfg.side_off};",
              "    // per-warp column max to wmax[warp][col], by lanes 0-3",
              "    setp.lt.u32 %p4, %lane, 4;", f"    mul.lo.u32 %r26, %warp, {4 * n};",
              "    shl.b32 %r27, %c0, 2;", "    add.u32 %r26, %r26, %r27;",
              "    add.u32 %r26, %r26, %r25;"]
    for k in range(_cols(cfg)):
        a, b = _elems(cfg, k)
        lines += [f"    max.f32 %f0, %acc{a}, %acc{b};", *_across_rows("max")]
        lines += [f"    @%p4 st.shared.f32 [%r26+{4 * _col_off(k)}], %f0;"]
    lines += ["    bar.sync 1, 128;", "    shl.b32 %r27, %c0, 2;", "    add.u32 %r27, %r27, %r25;"]
    for k in range(_cols(cfg)):
        for w in range(4):
            lines += [f"    ld.shared.f32 %f0, [%r27+{4 * (w * n + _col_off(k))}];",
                      f"    max.f32 %m{k}, %m{k}, %f0;"]
        for i in _elems(cfg, k):
            lines += [f"    sub.f32 %acc{i}, %acc{i}, %m{k};",
                      f"    ex2.approx.ftz.f32 %acc{i}, %acc{i};"]
        a, b = _elems(cfg, k)
        lines += [f"    add.f32 %f0, %acc{a}, %acc{b};", *_across_rows("add")]
        lines += [f"    @%p4 st.shared.f32 [%r26+{4 * (4 * n + _col_off(k))}], %f0;"]
    lines += ["    setp.eq.u32 %p5, %tx, %lane;", "    and.pred %p5, %p5, %p4;"]
    lines += [f"    @%p5 st.shared.f32 [%r27+{4 * (8 * n + _col_off(k))}], %m{k};"
              for k in range(_cols(cfg))]
    lines += ["    // X[col][token], 128B-swizzled: 16-byte chunk (token / 8) ^ (col % 8)",
              f"    mad.lo.u32 %r28, %r19, {cfg.x_buf_bytes}, %smem;",
              f"    add.u32 %r28, %r28, {cfg.x_off};"]
    for i in range(n2):
        k = (i & 1) + 2 * (i // 4)
        t = "%t0" if i % 4 < 2 else "%r3"
        lines += ["    add.u32 %r3, %t0, 8;" if i % 4 >= 2 else "",
                  f"    add.u32 %r29, %c0, {k & 1};",                 # col % 8
                  "    shl.b32 %r30, %r29, 7;", f"    add.u32 %r30, %r30, {1024 * (k >> 1)};",
                  f"    shr.u32 %r31, {t}, 3;", "    xor.b32 %r31, %r31, %r29;",
                  "    shl.b32 %r31, %r31, 4;", "    add.u32 %r30, %r30, %r31;",
                  f"    and.b32 %r31, {t}, 7;", "    shl.b32 %r31, %r31, 1;",
                  "    add.u32 %r30, %r30, %r31;", "    add.u32 %r30, %r30, %r28;",
                  f"    cvt.rn.{cfg.ptx_type}.f32 %h0, %acc{i};",
                  "    st.shared.b16 [%r30], %h0;"]
    lines = [x for x in lines if x]
    lines += ["    fence.proxy.async.shared::cta;",
              f"    add.u32 %r20, %bar, {_bar(cfg, 'xprod')};", "    add.u32 %r20, %r20, %r24;",
              "    mbarrier.arrive.shared::cta.b64 %rd7, [%r20];",
              "    add.u32 %it, %it, 1;", "    add.u32 %tile, %tile, %nsub;",
              "    setp.lt.u32 %p1, %it, %mytiles;", "    @%p1 bra G0_LOOP;", "    bra EXIT;"]
    return lines


def _o_elems(cfg):
    """(register index, half h, element i) of the thread's O^T fragments."""
    n2 = cfg.n // 2
    return [(h * n2 + i, h, i) for h in range(2) for i in range(n2)]


def _col_o_elems(cfg, k: int):
    """(register index, half h, element i, element offset within the thread's 128-element
    head row) of the thread's O^T fragments in column k."""
    return [(j, h, i, 64 * h + 8 * (i % 4 >= 2)) for j, h, i in _o_elems(cfg)
            if i in _elems(cfg, k)]


def _scratch_row(k: int, base: str) -> list[str]:
    """%r34 = the scratch row of column k in the sub-sequence whose first row is `base`."""
    return [f"    add.u32 %r29, %c0, {_col_off(k)};", f"    add.u32 %r34, {base}, %r29;"]


def _part_o_address() -> list[str]:
    """%rd12 = the thread's f32 partial O in scratch row %r34 (part_o at %rd10)."""
    return ["    shl.b32 %r35, %r34, 7;", "    add.u32 %r35, %r35, %t0;",
            "    mul.wide.u32 %rd12, %r35, 4;", "    add.s64 %rd12, %rd10, %rd12;"]


def _part_ml_address() -> list[str]:
    """%rd13 = the (max, sum) pair of scratch row %r34 (part_ml at %rd11)."""
    return ["    mul.wide.u32 %rd13, %r34, 8;", "    add.s64 %rd13, %rd11, %rd13;"]


def _gemm1(cfg) -> list[str]:
    """tid.z 1: per tile rescale, O^T += V^T X^T; then the epilogue (or the partials and
    the last sub-sequence's merge)."""
    n, n2 = cfg.n, cfg.n // 2
    lines = ["", "    // ---- gemm1 warpgroup ----", "GEMM1:",
             f"    add.u32 %r20, %bar, {_bar(cfg, 'vcons')};",
             "    mbarrier.arrive.shared::cta.b64 %rd7, [%r20];",
             "    mbarrier.arrive.shared::cta.b64 %rd7, [%r20+8];",
             f"    add.u32 %r20, %bar, {_bar(cfg, 'xcons')};",
             "    mbarrier.arrive.shared::cta.b64 %rd7, [%r20];",
             "    mbarrier.arrive.shared::cta.b64 %rd7, [%r20+8];",
             *[f"    mov.f32 %o{j}, 0f00000000;" for j in range(n)],
             *[f"    mov.f32 %mp{k}, {NEG_INF};" for k in range(_cols(cfg))],
             *[f"    mov.f32 %l{k}, 0f00000000;" for k in range(_cols(cfg))],
             "    shl.b32 %r27, %c0, 2;", "    mov.u32 %it, 0;", "G1_LOOP:",
             "    and.b32 %r19, %it, 1;", "    shr.u32 %r23, %it, 1;", "    and.b32 %r23, %r23, 1;",
             "    shl.b32 %r24, %r19, 3;", f"    add.u32 %r20, %bar, {_bar(cfg, 'xprod')};",
             "    add.u32 %r20, %r20, %r24;", *_wait("%r20", "%r23", "G1_X"),
             f"    mad.lo.u32 %r25, %r19, {cfg.side_bytes}, %smem;",
             f"    add.u32 %r25, %r25, {cfg.side_off};", "    add.u32 %r25, %r25, %r27;"]
    for k in range(_cols(cfg)):
        c = _col_off(k)
        lines += [f"    ld.shared.f32 %f2, [%r25+{4 * (8 * n + c)}];"]
        lines += [f"    ld.shared.f32 %f{4 + w}, [%r25+{4 * (4 * n + w * n + c)}];"
                  for w in range(4)]
        lines += ["    add.f32 %f4, %f4, %f5;", "    add.f32 %f6, %f6, %f7;",
                  "    add.f32 %f4, %f4, %f6;",
                  f"    sub.f32 %f3, %mp{k}, %f2;", "    ex2.approx.ftz.f32 %f3, %f3;",
                  f"    fma.rn.f32 %l{k}, %l{k}, %f3, %f4;", f"    mov.f32 %mp{k}, %f2;"]
        lines += [f"    mul.f32 %o{j}, %o{j}, %f3;" for j, _, _, _ in _col_o_elems(cfg, k)]
    lines += [f"    add.u32 %r20, %bar, {_bar(cfg, 'vprod')};", "    add.u32 %r20, %r20, %r24;",
              "    mbarrier.arrive.expect_tx.shared::cta.b64 %rd7, [%r20], "
              f"{cfg.v_buf_bytes // 128};",
              *_wait("%r20", "%r23", "G1_V"),
              f"    mad.lo.u32 %r21, %r19, {cfg.v_buf_bytes}, %smem;",
              f"    add.u32 %r21, %r21, {cfg.v_off};",
              *smem_desc("%desc_a", "%r21", DESC_SWIZZLE128),
              f"    mad.lo.u32 %r21, %r19, {cfg.x_buf_bytes}, %smem;",
              f"    add.u32 %r21, %r21, {cfg.x_off};",
              *smem_desc("%desc_b", "%r21", DESC_SWIZZLE128),
              "    wgmma.fence.sync.aligned;"]
    for h in range(2):
        frag = ", ".join(f"%o{h * n2 + i}" for i in range(n2))
        for kk in range(TILE // 16):
            lines += [f"    add.s64 %rd8, %desc_a, {(h * cfg.k_buf_bytes + kk * 16 * 128) >> 4};",
                      f"    add.s64 %rd9, %desc_b, {(kk * 32) >> 4};",
                      f"    wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{cfg.ptx_type}."
                      f"{cfg.ptx_type} {{{frag}}}, %rd8, %rd9, %ptrue, 1, 1, 1, 0;"]
    lines += ["    wgmma.commit_group.sync.aligned;", "    wgmma.wait_group.sync.aligned 0;",
              f"    add.u32 %r20, %bar, {_bar(cfg, 'vcons')};", "    add.u32 %r20, %r20, %r24;",
              "    mbarrier.arrive.shared::cta.b64 %rd7, [%r20];",
              f"    add.u32 %r20, %bar, {_bar(cfg, 'xcons')};", "    add.u32 %r20, %r20, %r24;",
              "    mbarrier.arrive.shared::cta.b64 %rd7, [%r20];",
              "    add.u32 %it, %it, 1;", "    setp.lt.u32 %p1, %it, %mytiles;",
              "    @%p1 bra G1_LOOP;"]
    if cfg.multi_block:
        lines += ["    setp.gt.u32 %p1, %nsub, 1;", "    @%p1 bra G1_PARTIAL;"]
    lines += _store_out(cfg) + ["    bra EXIT;"]
    if cfg.multi_block:
        lines += _partial_and_merge(cfg)
    return lines


def _store_out(cfg) -> list[str]:
    """O^T / l to out[b, hkv G + col, row] (16-bit scalar stores, columns < group)."""
    lines = [*[f"    rcp.approx.ftz.f32 %l{k}, %l{k};" for k in range(_cols(cfg))],
             "    ld.param.u64 %rd10, [out];", "    cvta.to.global.u64 %rd10, %rd10;",
             "    mul.lo.u32 %r7, %b, %Hkv;", "    add.u32 %r7, %r7, %hkv;",
             f"    mul.lo.u32 %r7, %r7, {cfg.group * 128};", "    add.u32 %r7, %r7, %t0;",
             "    mul.wide.u32 %rd11, %r7, 2;", "    add.s64 %rd10, %rd10, %rd11;"]
    for k in range(_cols(cfg)):
        lines += [f"    add.u32 %r29, %c0, {_col_off(k)};",
                  f"    setp.lt.u32 %p2, %r29, {cfg.group};", "    mul.wide.u32 %rd12, %r29, 256;",
                  "    add.s64 %rd13, %rd10, %rd12;"]
        for j, _, _, e in _col_o_elems(cfg, k):
            lines += [f"    mul.f32 %f0, %o{j}, %l{k};", f"    cvt.rn.{cfg.ptx_type}.f32 %h0, %f0;",
                      f"    @%p2 st.global.b16 [%rd13+{2 * e}], %h0;"]
    return lines


def _partial_and_merge(cfg) -> list[str]:
    """Multi-block tail: normalised f32 partial O and (max, sum) per column to scratch,
    `atom.inc` on the (request, kv head) semaphore; the last sub-sequence merges."""
    n = cfg.n
    lines = ["G1_PARTIAL:", "    mul.lo.u32 %r30, %b, %Hkv;", "    add.u32 %r30, %r30, %hkv;",
             "    mul.lo.u32 %r32, %r30, %nsubg;", "    add.u32 %r31, %r32, %sub;",
             "    ld.param.u64 %rd10, [part_o];", "    cvta.to.global.u64 %rd10, %rd10;",
             "    ld.param.u64 %rd11, [part_ml];", "    cvta.to.global.u64 %rd11, %rd11;",
             f"    mul.lo.u32 %r33, %r31, {n};"]
    for k in range(_cols(cfg)):
        lines += [*_scratch_row(k, "%r33"), *_part_o_address(),
                  f"    rcp.approx.ftz.f32 %f1, %l{k};"]
        for j, _, _, e in _col_o_elems(cfg, k):
            lines += [f"    mul.f32 %f0, %o{j}, %f1;", f"    st.global.f32 [%rd12+{4 * e}], %f0;"]
        lines += ["    setp.eq.u32 %p3, %t0, 0;", *_part_ml_address(),
                  f"    @%p3 st.global.v2.f32 [%rd13], {{%mp{k}, %l{k}}};"]
    lines += ["    membar.gl;", "    bar.sync 2, 128;", "    setp.ne.u32 %p1, %tx, 0;",
              "    @%p1 bra G1_SEM_DONE;", "    ld.param.u64 %rd14, [semaphores];",
              "    cvta.to.global.u64 %rd14, %rd14;", "    mul.wide.u32 %rd15, %r30, 4;",
              "    add.s64 %rd14, %rd14, %rd15;", "    sub.u32 %r36, %nsub, 1;",
              "    atom.global.inc.u32 %r37, [%rd14], %r36;", "    setp.eq.u32 %p2, %r37, %r36;",
              "    selp.u32 %r38, 1, 0, %p2;", f"    add.u32 %r39, %smem, {cfg.flag_off};",
              "    st.shared.u32 [%r39], %r38;", "G1_SEM_DONE:", "    bar.sync 2, 128;",
              f"    add.u32 %r39, %smem, {cfg.flag_off};", "    ld.shared.u32 %r38, [%r39];",
              "    setp.eq.u32 %p1, %r38, 0;", "    @%p1 bra EXIT;", "    membar.gl;",
              "    // merge the partials of every sub-sequence (running max and sum)",
              *[f"    mov.f32 %o{j}, 0f00000000;" for j in range(n)],
              *[f"    mov.f32 %mp{k}, {NEG_INF};" for k in range(_cols(cfg))],
              *[f"    mov.f32 %l{k}, 0f00000000;" for k in range(_cols(cfg))],
              "    mov.u32 %r36, 0;", "G1_MERGE:", "    add.u32 %r31, %r32, %r36;",
              f"    mul.lo.u32 %r33, %r31, {n};"]
    return lines + _merge_body(cfg)


def _merge_loads(cfg, base: str, ml: str, px: str, guard: str = "") -> list[str]:
    """Every column's (max, sum) pair and partial O elements of the sub-sequence whose
    scratch row is `base` x N, into `ml`{2k, 2k + 1} and `px`{j} (`guard`: a predicate the
    loads wait on; unloaded, the pair reads (-inf, 0) and the elements 0, so merging them
    changes nothing)."""
    lines = []
    if guard:
        lines += [*[f"    mov.f32 %{ml}{2 * k}, {NEG_INF};" for k in range(_cols(cfg))],
                  *[f"    mov.f32 %{ml}{2 * k + 1}, 0f00000000;" for k in range(_cols(cfg))],
                  *[f"    mov.f32 %{px}{j}, 0f00000000;" for j, _, _ in _o_elems(cfg)]]
    for k in range(_cols(cfg)):
        lines += [*_scratch_row(k, base), *_part_ml_address(),
                  f"    {guard}ld.global.v2.f32 {{%{ml}{2 * k}, %{ml}{2 * k + 1}}}, [%rd13];",
                  *_part_o_address()]
        lines += [f"    {guard}ld.global.f32 %{px}{j}, [%rd12+{4 * e}];"
                  for j, _, _, e in _col_o_elems(cfg, k)]
    return lines


def _merge_one(cfg, ml: str, px: str) -> list[str]:
    """One sub-sequence's loaded partial into the running (max, sum, O) of each column."""
    lines = []
    for k in range(_cols(cfg)):
        lines += [f"    max.f32 %f2, %mp{k}, %{ml}{2 * k};", f"    sub.f32 %f3, %mp{k}, %f2;",
                  "    ex2.approx.ftz.f32 %f3, %f3;", f"    sub.f32 %f4, %{ml}{2 * k}, %f2;",
                  "    ex2.approx.ftz.f32 %f4, %f4;", f"    mul.f32 %f4, %f4, %{ml}{2 * k + 1};",
                  f"    fma.rn.f32 %l{k}, %l{k}, %f3, %f4;", f"    mov.f32 %mp{k}, %f2;"]
        for j, _, _, _ in _col_o_elems(cfg, k):
            lines += [f"    mul.f32 %o{j}, %o{j}, %f3;",
                      f"    fma.rn.f32 %o{j}, %{px}{j}, %f4, %o{j};"]
    return lines


def _merge_body(cfg) -> list[str]:
    """`MERGE_DEPTH` sub-sequences a step (`%r33` = the first's scratch row x N; the others
    only where they exist): every one's loads issued, all columns at once, before any
    merges, so a step waits about one L2 round trip (TensorRT-LLM's XQA streams the partials
    through a 4-deep buffer filled by its IO warps)."""
    n = cfg.n
    lines = []
    for d in range(MERGE_DEPTH):
        guard = ""
        if d:
            lines += [f"    add.u32 %r37, %r36, {d};", f"    setp.lt.u32 %p{3 + d}, %r37, %nsub;",
                      f"    add.u32 %r38, %r33, {d * n};"]
            guard = f"@%p{3 + d} "
        lines += _merge_loads(cfg, "%r38" if d else "%r33", f"ma{d}_", f"pm{d}_", guard)
    for d in range(MERGE_DEPTH):
        lines += _merge_one(cfg, f"ma{d}_", f"pm{d}_")
    lines += [f"    add.u32 %r36, %r36, {MERGE_DEPTH};", "    setp.lt.u32 %p1, %r36, %nsub;",
              "    @%p1 bra G1_MERGE;"]
    return lines + _store_out(cfg) + ["    bra EXIT;"]
