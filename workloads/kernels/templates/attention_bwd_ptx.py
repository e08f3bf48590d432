"""PTX text of the attention backward (the emitter behind `templates.attention_bwd`).

`emit_main(cfg)` returns the main kernel's `.entry` for a validated
`templates.attention_bwd.Config` (the preprocess and postprocess kernels are in
`attention_bwd_rows_ptx`). Layout:

    shared: K atoms [d_atoms][kv_rows][128 B], V atoms [v_atoms][kv_rows][128 B] (TMA,
            128B swizzle); per stage s: Q_i atoms [d_atoms][64][128 B] then dO_i atoms
            [v_atoms][64][128 B]; dS^T [kv_rows keys x 64 queries] 16-bit, the
            no-swizzle MN-major A layout of the dQ wgmma (element (query r, key k) at
            (r / 8) (kv_rows 16) + (r % 8) 2 + (k / 8) 128 + (k % 8) 16); per stage
            LSE_i then D_i (64 f32 each, bulk copies); mbarriers kv_full, full[stages],
            empty[stages], ds_full, ds_empty (the consumers' dS^T hand-over, mbarriers
            rather than named barriers).
    registers (consumer thread, warpgroup wg owns keys 64 wg .. 64 wg + 63 of the block):
            %s S^T (m64 keys x n64 queries, f32), %dp dP^T, %pp P^T packed to 16-bit
            pairs, %ds dS^T packed, %dk dK (64 x D), %dv dV (64 x Dv), %dq the slice of
            dQ_i (64 queries x D / consumers columns) this warpgroup adds to dQ_acc.
    params: tmap_q, tmap_k, tmap_v, tmap_do (args 0-3), q, k, v, do, lse_pad, dsum,
            dq_acc, dk, dv (4-12), batch, seqlen_q, seqlen_k, heads, group, seqlen_q_pad,
            scale_log2, softmax_scale.

Accumulator fragment element i of lane l in warp w: row 16 w + l / 4 + 8 (i % 4 >= 2),
column 8 (i / 4) + (i & 1) + 2 (l % 4); in S^T rows are keys and columns queries.
"""

from __future__ import annotations

from workloads.kernels.templates.attention_ptx import (
    NEG_INF,
    TMA_LOAD,
    ZERO,
    init_barriers,
    producer_stage_wait,
)
from workloads.kernels.templates.pipeline_ptx import (
    DESC_SWIZZLE128,
    advance_stage,
    param_addresses,
    release_stage,
    smem_desc,
    warp_leader,
)

Q_ROWS = 64                      # queries per iteration (wgmma N of S^T and dP^T)
BULK_LOAD = ("    cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
             "[{dst}], [{src}], 256, [{bar}];")


def _mn_desc(rows: int) -> int:
    """128B-swizzled MN-major descriptor over TMA atoms of `rows` rows (SBO 1024 B = 8 rows
    of 128 B, LBO = one 64-column atom)."""
    return (1 << 62) | ((1024 >> 4) << 32) | (((rows * 128) >> 4) << 16)


def _ds_desc(cfg) -> int:
    """No-swizzle MN-major descriptor of dS^T: LBO 128 B (8 keys), SBO kv_rows x 16 B."""
    return ((cfg.kv_rows * 16) >> 4) << 32 | (128 >> 4) << 16


def _half(count: int, h: int) -> list[int]:
    return [i for i in range(count) if (i % 4 >= 2) == bool(h)]


def _col(i: int) -> int:
    return 8 * (i // 4) + (i & 1)


# ---------------------------------------------------------------- main kernel -------
def emit_main(cfg) -> str:
    return "\n".join(_head(cfg) + _consumer(cfg) + _producer(cfg)) + "\n"


def _regs(cfg) -> list[str]:
    nq = max(sum(w for _, w in pieces) for pieces in cfg.dq_pieces)
    return [
        "    .reg .pred %p<8>;", "    .reg .pred %ptrue, %pfalse, %pmask, %plead;",
        "    .reg .b32 %lane;",
        "    .reg .b32 %r<32>;", "    .reg .b64 %rd<16>;",
        f"    .reg .f32 %s<{Q_ROWS // 2}>;", f"    .reg .f32 %dp<{Q_ROWS // 2}>;",
        f"    .reg .b32 %pp<{Q_ROWS // 4}>;", f"    .reg .b32 %ds<{Q_ROWS // 4}>;",
        f"    .reg .f32 %dk<{cfg.headdim // 2}>;", f"    .reg .f32 %dv<{cfg.headdim_v // 2}>;",
        f"    .reg .f32 %dq<{nq // 2}>;",
        "    .reg .f32 %sl2, %scale, %f<8>, %nl<2>, %dd<2>;",
        "    .reg .b32 %thr, %bars, %stage, %phase, %it, %niter, %nqit, %ibeg, %qi, %g;",
        "    .reg .b32 %B, %Sq, %Sk, %H, %G, %Sqp, %j, %hkv, %b, %h, %off, %wg, %row0, %col0;",
        "    .reg .b32 %kr<2>, %rl<2>;",
        "    .reg .b64 %desc_k, %desc_v, %desc_q, %desc_do, %desc_qt, %desc_dot, %desc_kt;",
        "    .reg .b64 %desc_ds;",
    ]


def _head(cfg) -> list[str]:
    """Parameters, CTA coordinates, the query-block range, barrier init, role branch."""
    c, br = cfg.kv_rows, Q_ROWS
    lines = [
        ".version 8.0", ".target sm_90a", ".address_size 64",
        ".extern .shared .align 1024 .b8 smem[];", "",
        f".visible .entry {cfg.entry}(",
        *[f"    .param .align 64 .b8 tmap_{n}[128]," for n in ("q", "k", "v", "do")],
        *[f"    .param .u64 {n}," for n in ("q", "k", "v", "do", "lse_pad", "dsum", "dq_acc",
                                           "dk", "dv")],
        *[f"    .param .u32 {n}," for n in ("batch", "seqlen_q", "seqlen_k", "heads", "group",
                                           "seqlen_q_pad")],
        "    .param .f32 scale_log2,", "    .param .f32 softmax_scale", ")",
        f".maxntid {cfg.threads}, 1, 1", ".minnctapersm 1", "{", *_regs(cfg),
        "    mov.u32 %thr, %tid.x;",
        "    mov.u32 %bars, smem;", f"    add.u32 %bars, %bars, {cfg.barrier_offset};",
        "    ld.param.u32 %B, [batch];", "    ld.param.u32 %Sq, [seqlen_q];",
        "    ld.param.u32 %Sk, [seqlen_k];", "    ld.param.u32 %H, [heads];",
        "    ld.param.u32 %G, [group];", "    ld.param.u32 %Sqp, [seqlen_q_pad];",
        "    ld.param.f32 %sl2, [scale_log2];", "    ld.param.f32 %scale, [softmax_scale];",
        "    mov.u32 %j, %ctaid.x;", "    mov.u32 %hkv, %ctaid.y;", "    mov.u32 %b, %ctaid.z;",
        "    sub.s32 %off, %Sk, %Sq;               // key k is seen by queries s >= k - off",
        f"    add.u32 %r0, %Sq, {br - 1};", f"    div.u32 %r0, %r0, {br};   // query blocks",
        "    mov.u32 %ibeg, 0;"]
    if cfg.causal:
        lines += ["    // causal: the first query block that sees the block's first key",
                  f"    mul.lo.u32 %r1, %j, {c};", "    sub.s32 %r1, %r1, %off;",
                  "    max.s32 %r1, %r1, 0;", f"    div.u32 %ibeg, %r1, {br};",
                  "    min.u32 %ibeg, %ibeg, %r0;"]
    lines += ["    sub.u32 %nqit, %r0, %ibeg;", "    mul.lo.u32 %niter, %nqit, %G;"]
    return lines + init_barriers(cfg, (cfg.ds_full_bar, cfg.ds_empty_bar))


def _iteration(label: str) -> list[str]:
    """Query head %h and query block %qi of iteration %it (heads of the group outer)."""
    return [f"    // {label}: iteration it -> (head hkv G + it / nqit, block ibeg + it % nqit)",
            "    div.u32 %g, %it, %nqit;", "    rem.u32 %qi, %it, %nqit;",
            "    add.u32 %qi, %qi, %ibeg;", "    mad.lo.u32 %h, %hkv, %G, %g;"]


def _box_loads(atoms: int, base: int, atom_bytes: int, tmap: str, bar: str,
               head: str) -> list[str]:
    """TMA loads of `atoms` 64-column boxes of a (64 columns, head, rows from %r7, batch)
    tensor into shared memory at %r6 + `base` + a x `atom_bytes`, completing on `bar`."""
    lines = []
    for a in range(atoms):
        lines += [f"    add.u32 %r8, %r6, {base + a * atom_bytes};",
                  TMA_LOAD.format(n=4, map=tmap, bar=bar, coords=f"{64 * a}, {head}, %r7, %b")]
    return lines


def _producer(cfg) -> list[str]:
    """One elected lane: K_j and V_j once, then Q_i, dO_i, LSE_i, D_i per iteration."""
    c = cfg.kv_rows
    atom = c * 128
    lines = ["", "    // ---- producer: one elected lane issues the copies ----",
             "PRODUCER:", "    setmaxnreg.dec.sync.aligned.u32 24;",
             f"    sub.u32 %r0, %thr, {128 * cfg.consumers};",
             "    setp.ge.u32 %p0, %r0, 32;", "    @%p0 bra DONE;",
             "    elect.sync %r1|%p0, 0xffffffff;", "    @!%p0 bra DONE;",
             *param_addresses({"%rd0": "tmap_q", "%rd1": "tmap_k", "%rd2": "tmap_v",
                              "%rd4": "tmap_do"}),
             "    ld.param.u64 %rd5, [lse_pad];", "    cvta.to.global.u64 %rd5, %rd5;",
             "    ld.param.u64 %rd6, [dsum];", "    cvta.to.global.u64 %rd6, %rd6;",
             f"    mbarrier.arrive.expect_tx.shared::cta.b64 %rd3, [%bars], {cfg.kv_bytes};",
             "    mov.u32 %r6, smem;", f"    mul.lo.u32 %r7, %j, {c};"]
    lines += _box_loads(cfg.d_atoms, 0, atom, "%rd1", "%bars", "%hkv")
    lines += _box_loads(cfg.v_atoms, cfg.k_bytes, atom, "%rd2", "%bars", "%hkv")
    lines += ["    mov.u32 %stage, 0;", "    mov.u32 %phase, 0;", "    mov.u32 %it, 0;",
              "    setp.ge.u32 %p0, %it, %niter;", "    @%p0 bra DONE;",
              "P_ITER:", *_iteration("producer"), *producer_stage_wait(cfg, cfg.stage_tx_bytes),
              "    mov.u32 %r6, smem;", f"    mad.lo.u32 %r6, %stage, {cfg.stage_bytes}, %r6;",
              f"    add.u32 %r6, %r6, {cfg.stages_offset};",
              f"    mul.lo.u32 %r7, %qi, {Q_ROWS};"]
    qatom = Q_ROWS * 128
    lines += _box_loads(cfg.d_atoms, 0, qatom, "%rd0", "%r3", "%h")
    lines += _box_loads(cfg.v_atoms, cfg.q_stage_bytes, qatom, "%rd4", "%r3", "%h")
    lines += ["    // LSE_i and D_i: 64 f32 each at ((b H + h) Sq_pad + 64 qi)",
              "    mad.lo.u32 %r9, %b, %H, %h;", "    mad.lo.u32 %r9, %r9, %Sqp, %r7;",
              "    mul.wide.u32 %rd7, %r9, 4;", "    add.s64 %rd8, %rd5, %rd7;",
              "    add.s64 %rd9, %rd6, %rd7;", "    mov.u32 %r10, smem;",
              f"    mad.lo.u32 %r10, %stage, {2 * Q_ROWS * 4}, %r10;",
              f"    add.u32 %r10, %r10, {cfg.lsed_offset};",
              BULK_LOAD.format(dst="%r10", src="%rd8", bar="%r3"),
              f"    add.u32 %r11, %r10, {Q_ROWS * 4};",
              BULK_LOAD.format(dst="%r11", src="%rd9", bar="%r3"),
              *advance_stage(cfg), "    add.u32 %it, %it, 1;",
              "    setp.lt.u32 %p0, %it, %niter;", "    @%p0 bra P_ITER;", "DONE:", "    ret;", "}"]
    return lines


def _consumer(cfg) -> list[str]:
    c = cfg.kv_rows
    lines = ["", "    // ---- consumer warpgroups: one 64-key slice of the KV block each ----",
             f"    setmaxnreg.inc.sync.aligned.u32 {cfg.consumer_regs};", *warp_leader(),
             "    shr.u32 %wg, %thr, 7;", "    and.b32 %r11, %thr, 127;",
             "    shr.u32 %r12, %r11, 5;                 // warp", "    and.b32 %r13, %r11, 31;",
             "    shr.u32 %row0, %r13, 2;", "    shl.b32 %r14, %r12, 4;",
             "    add.u32 %row0, %row0, %r14;            // fragment row of element 0",
             "    and.b32 %col0, %r13, 3;", "    shl.b32 %col0, %col0, 1;",
             f"    mad.lo.u32 %kr0, %j, {c}, %row0;", "    shl.b32 %r14, %wg, 6;",
             "    add.u32 %kr0, %kr0, %r14;              // key of row half 0",
             "    add.u32 %kr1, %kr0, 8;"]
    lines += [f"    mov.f32 %dk{i}, {ZERO};" for i in range(cfg.headdim // 2)]
    lines += [f"    mov.f32 %dv{i}, {ZERO};" for i in range(cfg.headdim_v // 2)]
    lines += ["    mov.u32 %r18, smem;", "    shl.b32 %r19, %wg, 13;   // 64 keys x 128 B",
              "    add.u32 %r18, %r18, %r19;", *smem_desc("%desc_k", "%r18", DESC_SWIZZLE128),
              f"    add.u32 %r18, %r18, {cfg.k_bytes};",
              *smem_desc("%desc_v", "%r18", DESC_SWIZZLE128),
              "    mov.u32 %r18, smem;", *smem_desc("%desc_kt", "%r18", _mn_desc(c)),
              f"    add.u32 %r18, %r18, {cfg.ds_offset};",
              *smem_desc("%desc_ds", "%r18", _ds_desc(cfg)),
              "    // dS^T store address of this thread's element 0",
              "    shr.u32 %r20, %r13, 2;", "    shl.b32 %r20, %r20, 4;",
              "    shl.b32 %r21, %col0, 1;", "    add.u32 %r20, %r20, %r21;",
              "    shl.b32 %r21, %wg, 3;", "    shl.b32 %r22, %r12, 1;",
              "    add.u32 %r21, %r21, %r22;", "    shl.b32 %r21, %r21, 7;",
              "    add.u32 %r20, %r20, %r21;", "    add.u32 %r20, %r20, %r18;",
              "    mov.u32 %phase, 0;",
              "C_KVWAIT:", "    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%bars], %phase;",
              "    @!%p1 bra C_KVWAIT;",
              "    mov.u32 %stage, 0;", "    mov.u32 %it, 0;",
              "    setp.ge.u32 %p0, %it, %niter;", "    @%p0 bra C_END;",
              "C_ITER:", *_iteration("consumer"),
              "    shl.b32 %r2, %stage, 3;", "    add.u32 %r3, %bars, %r2;",
              f"    add.u32 %r3, %r3, {cfg.full_bar(0)};   // full[s]",
              "C_WAIT:", "    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r3], %phase;",
              "    @!%p1 bra C_WAIT;",
              "    mov.u32 %r6, smem;", f"    mad.lo.u32 %r6, %stage, {cfg.stage_bytes}, %r6;",
              f"    add.u32 %r6, %r6, {cfg.stages_offset};",
              *smem_desc("%desc_q", "%r6", DESC_SWIZZLE128),
              *smem_desc("%desc_qt", "%r6", _mn_desc(Q_ROWS)),
              f"    add.u32 %r6, %r6, {cfg.q_stage_bytes};",
              *smem_desc("%desc_do", "%r6", DESC_SWIZZLE128),
              *smem_desc("%desc_dot", "%r6", _mn_desc(Q_ROWS)),
              "    mov.u32 %r7, smem;", f"    mad.lo.u32 %r7, %stage, {2 * Q_ROWS * 4}, %r7;",
              f"    add.u32 %r7, %r7, {cfg.lsed_offset};",
              "    shl.b32 %r8, %col0, 2;", "    add.u32 %r7, %r7, %r8;   // LSE of column col0"]
    lines += _scores(cfg) + _probabilities(cfg) + _dv(cfg) + _ds(cfg) + _dk(cfg)
    lines += _dq(cfg)
    lines += ["    add.u32 %r4, %r3, " f"{cfg.empty_bar(0) - cfg.full_bar(0)};",
              *release_stage("%r4"),
              *_dq_red(cfg),
              *advance_stage(cfg), "    add.u32 %it, %it, 1;",
              "    setp.lt.u32 %p0, %it, %niter;", "    @%p0 bra C_ITER;", "C_END:",
              *_epilogue(cfg), "    bra.uni DONE;"]
    return lines


def _ss(frag: str, n: int, pairs, ptype: str, trans: tuple[int, int] = (0, 0)) -> list[str]:
    """SS wgmmas accumulating into `frag` over (a offset, b offset, a desc, b desc)."""
    lines = []
    for k, (a_off, b_off, da, db) in enumerate(pairs):
        lines += [f"    add.s64 %rd10, {da}, {a_off >> 4};",
                  f"    add.s64 %rd11, {db}, {b_off >> 4};",
                  f"    wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ptype}.{ptype} {{{frag}}}, "
                  f"%rd10, %rd11, {'%pfalse' if k == 0 else '%ptrue'}, 1, 1, {trans[0]}, "
                  f"{trans[1]};"]
    return lines


def _scores(cfg) -> list[str]:
    """S^T = K_wg Q_i^T and dP^T = V_wg dO_i^T (SS, K-major, 64 queries), one group each."""
    c, t = cfg.kv_rows, cfg.ptx_type
    s = ", ".join(f"%s{i}" for i in range(Q_ROWS // 2))
    dp = ", ".join(f"%dp{i}" for i in range(Q_ROWS // 2))
    qk = [(a * c * 128 + 32 * q, a * Q_ROWS * 128 + 32 * q, "%desc_k", "%desc_q")
          for a in range(cfg.d_atoms) for q in range(4)]
    vdo = [(a * c * 128 + 32 * q, a * Q_ROWS * 128 + 32 * q, "%desc_v", "%desc_do")
           for a in range(cfg.v_atoms) for q in range(4)]
    return (["    wgmma.fence.sync.aligned;", *_ss(s, Q_ROWS, qk, t),
             "    wgmma.commit_group.sync.aligned;", *_ss(dp, Q_ROWS, vdo, t),
             "    wgmma.commit_group.sync.aligned;", "    wgmma.wait_group.sync.aligned 1;"])


def _probabilities(cfg) -> list[str]:
    """P^T = 2^(S^T scale_log2 - LSE_query), masked (P = 0) above the causal diagonal in
    the blocks that straddle it; then packed to 16-bit pairs (the A fragment of dV)."""
    n = Q_ROWS // 2
    lines = []
    if cfg.causal:
        lines += ["    // mask when the block's first query + off < its last key",
                  f"    mul.lo.u32 %r9, %qi, {Q_ROWS};", "    add.s32 %r10, %r9, %off;",
                  f"    mad.lo.u32 %r15, %j, {cfg.kv_rows}, {cfg.kv_rows - 1};",
                  "    setp.lt.s32 %pmask, %r10, %r15;", "    @!%pmask bra C_PROB;",
                  "    add.s32 %r10, %r10, %col0;"]
        for h in range(2):
            lines.append(f"    sub.s32 %rl{h}, %kr{h}, %r10;   // mask columns < rl")
            for i in _half(n, h):
                lines += [f"    setp.gt.s32 %p4, %rl{h}, {_col(i)};",
                          f"    @%p4 mov.f32 %s{i}, {NEG_INF};"]
        lines.append("C_PROB:")
    for blk in range(Q_ROWS // 8):
        lines += [f"    ld.shared.v2.f32 {{%nl0, %nl1}}, [%r7+{32 * blk}];",
                  "    neg.f32 %nl0, %nl0;", "    neg.f32 %nl1, %nl1;"]
        for i in range(4 * blk, 4 * blk + 4):
            lines += [f"    fma.rn.f32 %s{i}, %s{i}, %sl2, %nl{i & 1};",
                      f"    ex2.approx.ftz.f32 %s{i}, %s{i};"]
    cvt = "bf16x2" if cfg.dtype == "bf16" else "f16x2"
    return lines + [f"    cvt.rn.{cvt}.f32 %pp{j}, %s{2 * j + 1}, %s{2 * j};"
                    for j in range(Q_ROWS // 4)]


def _rs(frag_name: str, width: int, a_regs: str, desc: str, ptype: str) -> list[str]:
    """RS wgmmas acc[64, width] += A[64, 64 queries] B[64 queries, width] (B MN-major)."""
    lines = []
    for t in range(Q_ROWS // 16):
        a = ", ".join(f"%{a_regs}{4 * t + e}" for e in range(4))
        for c0 in range(0, width, 256):
            w = min(256, width - c0)
            frag = ", ".join(f"%{frag_name}{c0 // 2 + i}" for i in range(w // 2))
            off = (c0 // 64) * Q_ROWS * 128 + t * 16 * 128
            lines += [f"    add.s64 %rd11, {desc}, {off >> 4};",
                      f"    wgmma.mma_async.sync.aligned.m64n{w}k16.f32.{ptype}.{ptype} "
                      f"{{{frag}}}, {{{a}}}, %rd11, %ptrue, 1, 1, 1;"]
    return lines


def _dv(cfg) -> list[str]:
    """dV_wg += P^T dO_i (A = P^T from registers)."""
    return ["    wgmma.fence.sync.aligned;",
            *_rs("dv", cfg.headdim_v, "pp", "%desc_dot", cfg.ptx_type),
            "    wgmma.commit_group.sync.aligned;", "    wgmma.wait_group.sync.aligned 1;"]


def _ds(cfg) -> list[str]:
    """dS^T = P^T (dP^T - D_query), packed to 16-bit pairs."""
    lines = []
    for blk in range(Q_ROWS // 8):
        lines.append(f"    ld.shared.v2.f32 {{%dd0, %dd1}}, [%r7+{Q_ROWS * 4 + 32 * blk}];")
        for i in range(4 * blk, 4 * blk + 4):
            lines += [f"    sub.f32 %f0, %dp{i}, %dd{i & 1};", f"    mul.f32 %s{i}, %s{i}, %f0;"]
    cvt = "bf16x2" if cfg.dtype == "bf16" else "f16x2"
    return lines + [f"    cvt.rn.{cvt}.f32 %ds{j}, %s{2 * j + 1}, %s{2 * j};"
                    for j in range(Q_ROWS // 4)]


def _dk(cfg) -> list[str]:
    """dK_wg += dS^T Q_i (A = dS^T from registers); dS^T also to shared memory for dQ."""
    lines = ["    wgmma.fence.sync.aligned;",
             *_rs("dk", cfg.headdim, "ds", "%desc_qt", cfg.ptx_type),
             "    wgmma.commit_group.sync.aligned;"]
    lines += ["    // dS^T buffer free: every consumer finished the previous iteration's dQ",
              "    and.b32 %r25, %it, 1;", "    xor.b32 %r26, %r25, 1;",
              "    setp.eq.u32 %p2, %it, 0;", "    @%p2 bra C_DS_STORE;", "C_DS_FREE:",
              f"    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%bars+{cfg.ds_empty_bar}], "
              "%r26;", "    @!%p1 bra C_DS_FREE;", "C_DS_STORE:"]
    for j in range(Q_ROWS // 4):
        i = 2 * j
        off = (i // 4) * cfg.kv_rows * 16 + (128 if i % 4 >= 2 else 0)
        lines.append(f"    st.shared.b32 [%r20+{off}], %ds{j};")
    return lines + ["    fence.proxy.async.shared::cta;",
                    f"    mbarrier.arrive.shared::cta.b64 %rd3, [%bars+{cfg.ds_full_bar}];",
                    "C_DS_FULL:",
                    f"    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%bars+{cfg.ds_full_bar}], "
                    "%r25;", "    @!%p1 bra C_DS_FULL;   // dS^T complete"]


def _dq(cfg) -> list[str]:
    """dQ_i[:, piece] = dS K_j[:, piece] (SS: A = dS^T MN-major, B = K MN-major), the
    warpgroup's pieces of the D columns; then wait for every wgmma of the iteration."""
    c, t = cfg.kv_rows, cfg.ptx_type
    lines = []
    for wg, pieces in enumerate(cfg.dq_pieces):
        lines += [f"    setp.ne.u32 %p2, %wg, {wg};", f"    @%p2 bra C_DQ{wg}_END;",
                  "    wgmma.fence.sync.aligned;"]
        reg = 0
        for n0, w in pieces:
            frag = ", ".join(f"%dq{reg + i}" for i in range(w // 2))
            b0 = (n0 // 64) * c * 128 + (n0 % 64) * 2
            pairs = [(256 * k, b0 + 2048 * k, "%desc_ds", "%desc_kt") for k in range(c // 16)]
            lines += _ss(frag, w, pairs, t, (1, 1))
            reg += w // 2
        lines += ["    wgmma.commit_group.sync.aligned;", f"C_DQ{wg}_END:"]
    return lines + ["    wgmma.wait_group.sync.aligned 0;",
                    f"    mbarrier.arrive.shared::cta.b64 %rd3, [%bars+{cfg.ds_empty_bar}];"]


def _dq_red(cfg) -> list[str]:
    """dQ_acc[b, h, 64 qi + row, col] += dQ fragment (f32 atomic adds)."""
    lines = ["    ld.param.u64 %rd12, [dq_acc];", "    cvta.to.global.u64 %rd12, %rd12;",
             "    mad.lo.u32 %r9, %b, %H, %h;", f"    mul.lo.u32 %r10, %qi, {Q_ROWS};",
             "    mad.lo.u32 %r9, %r9, %Sqp, %r10;", "    add.u32 %r9, %r9, %row0;",
             f"    mul.lo.u32 %r9, %r9, {cfg.headdim};", "    add.u32 %r9, %r9, %col0;"]
    for wg, pieces in enumerate(cfg.dq_pieces):
        lines += [f"    setp.ne.u32 %p2, %wg, {wg};", f"    @%p2 bra C_RED{wg}_END;"]
        reg = 0
        for n0, w in pieces:
            for i in range(w // 2):
                col = n0 + _col(i) + (8 * cfg.headdim if i % 4 >= 2 else 0)
                lines += [f"    add.u32 %r10, %r9, {col};", "    mul.wide.u32 %rd13, %r10, 4;",
                          "    add.s64 %rd13, %rd12, %rd13;",
                          f"    red.global.add.f32 [%rd13], %dq{reg + i};"]
            reg += w // 2
        lines.append(f"C_RED{wg}_END:")
    return lines


def _epilogue(cfg) -> list[str]:
    """dK scale and dV to 16-bit, rows past seqlen_k not stored."""
    cvt = "bf16x2" if cfg.dtype == "bf16" else "f16x2"
    lines = ["    // ---- epilogue: dK = scale dS^T Q summed, dV ----",
             "    ld.param.u64 %rd6, [dk];", "    cvta.to.global.u64 %rd6, %rd6;",
             "    ld.param.u64 %rd7, [dv];", "    cvta.to.global.u64 %rd7, %rd7;"]
    for h in range(2):
        lines += [f"    setp.lt.u32 %p3, %kr{h}, %Sk;",
                  "    // row ((b Sk + key) Hkv + hkv)",
                  f"    mad.lo.u32 %r22, %b, %Sk, %kr{h};", "    mov.u32 %r23, %nctaid.y;",
                  "    mad.lo.u32 %r22, %r22, %r23, %hkv;"]
        for name, width, base in (("dk", cfg.headdim, "%rd6"), ("dv", cfg.headdim_v, "%rd7")):
            lines += [f"    mul.wide.u32 %rd8, %r22, {width * 2};",
                      f"    add.s64 %rd8, {base}, %rd8;",
                      "    mul.wide.u32 %rd9, %col0, 2;", "    add.s64 %rd8, %rd8, %rd9;"]
            for i in _half(width // 2, h)[::2]:
                if name == "dk":
                    lines += [f"    mul.f32 %{name}{i}, %{name}{i}, %scale;",
                              f"    mul.f32 %{name}{i + 1}, %{name}{i + 1}, %scale;"]
                lines += [f"    cvt.rn.{cvt}.f32 %r24, %{name}{i + 1}, %{name}{i};",
                          f"    @%p3 st.global.b32 [%rd8+{2 * 8 * (i // 4)}], %r24;"]
    return lines
