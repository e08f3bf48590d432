"""PTX text of the warp-specialized Hopper GEMM (the emitter behind `templates.gemm`).

`emit(cfg)` returns one `.entry` for a validated `templates.gemm.Config`. The pieces
(kernel head, producer, consumer main loop, DeepSeek promotion, epilogue) are separate
functions returning lists of lines; the layout they share is the `Config` properties:

    shared: stage s at s * stage_bytes: A atoms [k_atoms][m_tile rows][128 B], then
            B atoms [k_atoms][n_tile rows][128 B] (128B-swizzled by TMA, 1024-aligned);
            after the stages, with DeepSeek scaling, each stage's scale_a chunks
            (`sfa_bytes`: [chunks][m_tile] f32, at sfa_offset + s * sfa_bytes) and the
            tile's scale_b ([n_blocks][sfb_chunks] f32 at sfb_offset); then
            full[stages] and empty[stages] mbarriers (8 B each). With the TMA-store
            epilogue C's staging buffer sits between the stages and the scales
            (c_offset: [c_slots][m_tile rows][c_atom_bytes], swizzled as C's map).
    registers: %d<acc> the f32 accumulators, flat index sub * (n_tile / 2) + i for the
            64-row wgmma block `sub` of this warpgroup and fragment element i; %t<acc>
            the per-128-K chunk accumulators of the DeepSeek FP8 recipe.
"""

from __future__ import annotations

from workloads.kernels.templates.pipeline_ptx import (
    DESC_SWIZZLE128,
    WARPS_PER_GROUP,
    advance_stage,
    param_addresses,
    release_stage,
    smem_desc,
    warp_leader,
)

K_STEP_BYTES = 32                      # one wgmma consumes 32 bytes of K per row
K_LOOP_LABELS = ("C_K", "P_K")         # the k-loops' heads (consumers', producer's)


def emit(cfg) -> str:
    body = _head(cfg) + _consumer(cfg) + _producer(cfg)
    return "\n".join(body) + "\n"


def _head(cfg) -> list[str]:
    scale_params = ("    .param .u64 scale_a,\n    .param .u64 scale_b,\n"
                    "    .param .align 64 .b8 tmap_sfa[128],\n" if cfg.fp8_scaling else "")
    if cfg.grouped:
        scale_params += "    .param .u64 sched,\n"
    acc = cfg.acc_regs
    regs = [
        "    .reg .pred %p<8>;", f"    .reg .pred %pc<{cfg.n_tile // 4}>;",
        "    .reg .b32 %r<24>;", "    .reg .b64 %rd<16>;", "    .reg .b16 %h;",
        f"    .reg .f32 %d<{acc}>;",
        "    .reg .b32 %thr, %bars, %stage, %phase, %it, %kt, %ktiles, %tile, %tiles;",
        "    .reg .b32 %tiles_m, %m0, %n0, %M, %N, %K, %ksb;",
        "    .reg .b64 %desc_a, %desc_b, %desc_a0, %desc_b0;", "    .reg .b32 %prev_empty;",
        "    .reg .pred %ptrue, %pfalse, %pacc, %plead, %prel;", "    .reg .b32 %lane;",
    ]
    if cfg.multicast:
        regs += ["    .reg .b32 %rank, %peer, %remote;", "    .reg .b16 %mask;"]
    if cfg.l2_policy != "normal":
        regs += ["    .reg .b64 %pola, %polb;"]
    if cfg.epilogue == "tma":
        regs += ["    .reg .b32 %e<7>;", "    .reg .b64 %rdc;", "    .reg .pred %pst;"]
    if cfg.grouped:
        regs += ["    .reg .b32 %ent, %brow, %crow, %mrows, %k0, %sbrow, %kc0;",
                 "    .reg .b64 %rdsch, %rdent;"]
    if cfg.fp8_scaling:
        regs += [f"    .reg .f32 %t<{acc}>;", f"    .reg .f32 %sa<{2 * cfg.m_sub}>;",
                 f"    .reg .f32 %sb<{cfg.n_blocks}>;",
                 f"    .reg .f32 %s<{2 * cfg.m_sub * cfg.n_blocks}>;",
                 "    .reg .b32 %rsfa, %rsfb, %q<6>;", "    .reg .b64 %rdsfa;"]
    tm = cfg.m_tile - 1
    tn = cfg.n_tile - 1
    lines = [
        ".version 8.0", ".target sm_90a", ".address_size 64",
        ".extern .shared .align 1024 .b8 smem[];", "",
        f".visible .entry {cfg.entry}(",
        "    .param .align 64 .b8 tmap_a[128],", "    .param .align 64 .b8 tmap_b[128],",
        "    .param .u64 a,", "    .param .u64 b,", "    .param .u64 c,",
        scale_params + "    .param .u32 m,", "    .param .u32 n,",
        "    .param .u32 k" + (",\n    .param .u32 blocks" if cfg.grouped else "")
        + (",\n    .param .align 64 .b8 tmap_c[128]" if cfg.epilogue == "tma" else ""), ")",
        f".maxntid {cfg.threads}, 1, 1", ".minnctapersm 1",
        *([".reqnctapercluster 2, 1, 1"] if cfg.multicast else []), "{", *regs,
        "    mov.u32 %thr, %tid.x;",
        *(["    mov.u32 %rank, %cluster_ctarank;", "    xor.b32 %peer, %rank, 1;",
           "    mov.b16 %mask, 3;"] if cfg.multicast else []),
        f"    mov.u32 %bars, smem;\n    add.u32 %bars, %bars, {cfg.barrier_offset};",
        "    ld.param.u32 %M, [m];", "    ld.param.u32 %N, [n];", "    ld.param.u32 %K, [k];",
        *_tiles_m(cfg, tm),
        f"    add.u32 %tiles, %N, {tn};", f"    div.u32 %tiles, %tiles, {cfg.n_tile};",
        *_pair_count(cfg),
        "    mul.lo.u32 %tiles, %tiles, %tiles_m;",
        *([f"    min.u32 %tiles, %tiles, {cfg.work_limit};   // sampled: first tiles only"]
          if cfg.tile_limit else []),
        f"    add.u32 %ktiles, %K, {cfg.k_tile - 1};",
        f"    div.u32 %ktiles, %ktiles, {cfg.k_tile};",
        "    add.u32 %ksb, %K, 127;", "    shr.u32 %ksb, %ksb, 7;   // 128-K scale blocks",
        "    setp.eq.u32 %ptrue, %thr, %thr;", "    setp.ne.u32 %pfalse, %thr, %thr;",
        "    // thread 0 initialises full[s] (1 arrival + tx bytes), empty[s] (consumers)",
        "    setp.ne.u32 %p0, %thr, 0;", "    @%p0 bra INIT_DONE;",
    ]
    for s in range(cfg.stages):
        lines.append(f"    mbarrier.init.shared::cta.b64 [%bars+{8 * s}], 1;")
        lines.append(f"    mbarrier.init.shared::cta.b64 [%bars+{8 * (cfg.stages + s)}], "
                     f"{WARPS_PER_GROUP * cfg.consumers * cfg.cluster};")
    sync = (["    barrier.cluster.arrive.release.aligned;   // both CTAs' barriers are set",
             "    barrier.cluster.wait.acquire.aligned;"] if cfg.multicast
            else ["    bar.sync 0;"])
    lines += ["    fence.mbarrier_init.release.cluster;", "INIT_DONE:", *sync,
              f"    setp.ge.u32 %p0, %thr, {128 * cfg.consumers};", "    @%p0 bra PRODUCER;"]
    return lines


def _pair_count(cfg) -> list[str]:
    """Clusters walk pairs of tiles (`templates.gemm.pairs`): %tiles_m x %tiles counts
    pairs, halving the n-blocks ("a") or the m-blocks ("b"), rounded up."""
    if cfg.multicast == "a":
        return ["    add.u32 %tiles, %tiles, 1;", "    shr.u32 %tiles, %tiles, 1;"]
    if cfg.multicast == "b":
        return ["    add.u32 %tiles_m, %tiles_m, 1;", "    shr.u32 %tiles_m, %tiles_m, 1;"]
    return []


def _tiles_m(cfg, tm: int) -> list[str]:
    """%tiles_m: m-blocks of the tile grid (a grouped kernel's schedule rows)."""
    if cfg.grouped:
        return ["    ld.param.u32 %tiles_m, [blocks];", "    ld.param.u64 %rdsch, [sched];",
                "    cvta.to.global.u64 %rdsch, %rdsch;"]
    return [f"    add.u32 %tiles_m, %M, {tm};", f"    div.u32 %tiles_m, %tiles_m, {cfg.m_tile};"]


def _schedule_row(cfg) -> list[str]:
    """Grouped: row %ent of the schedule -> a row m0, B row, C row, valid rows, k0, k-tiles,
    scale_b block row (layout of `templates.gemm_groups.schedule`)."""
    lines = ["    mul.wide.u32 %rdent, %ent, 32;", "    add.s64 %rdent, %rdsch, %rdent;",
             "    ld.global.v4.u32 {%m0, %brow, %crow, %mrows}, [%rdent];",
             "    ld.global.v4.u32 {%k0, %ktiles, %sbrow, %ent}, [%rdent+16];",
             "    add.u32 %brow, %brow, %n0;"]
    if cfg.fp8_scaling:
        lines.append("    shr.u32 %kc0, %k0, 7;")
    return lines


def _tile_start(cfg, side: str) -> list[str]:
    """Tile coordinates m0, n0 of tile %tile (persistent) or of this CTA's (x, y)."""
    if cfg.grouped and cfg.persistent:
        return [f"{side}_TILE:", "    setp.ge.u32 %p0, %tile, %tiles;",
                f"    @%p0 bra {side}_END;",
                "    rem.u32 %ent, %tile, %tiles_m;", "    div.u32 %n0, %tile, %tiles_m;",
                f"    mul.lo.u32 %n0, %n0, {cfg.n_tile};", *_schedule_row(cfg)]
    if cfg.grouped:
        return ["    mov.u32 %ent, %ctaid.x;", "    mov.u32 %n0, %ctaid.y;",
                f"    mul.lo.u32 %n0, %n0, {cfg.n_tile};", *_schedule_row(cfg)]
    if cfg.persistent:
        pair = {"a": ["    shl.b32 %n0, %n0, 1;", "    add.u32 %n0, %n0, %rank;"],
                "b": ["    shl.b32 %m0, %m0, 1;", "    add.u32 %m0, %m0, %rank;"]}
        return [f"{side}_TILE:", "    setp.ge.u32 %p0, %tile, %tiles;",
                f"    @%p0 bra {side}_END;",
                "    rem.u32 %m0, %tile, %tiles_m;", "    div.u32 %n0, %tile, %tiles_m;",
                *pair.get(cfg.multicast, []),
                f"    mul.lo.u32 %m0, %m0, {cfg.m_tile};",
                f"    mul.lo.u32 %n0, %n0, {cfg.n_tile};"]
    return ["    mov.u32 %m0, %ctaid.x;", "    mov.u32 %n0, %ctaid.y;",
            f"    mul.lo.u32 %m0, %m0, {cfg.m_tile};",
                f"    mul.lo.u32 %n0, %n0, {cfg.n_tile};"]


def _tile_end(cfg, side: str) -> list[str]:
    if not cfg.persistent:
        return []
    step = "%nclusterid.x" if cfg.multicast else "%nctaid.x"
    return [f"    mov.u32 %r0, {step};", "    add.u32 %tile, %tile, %r0;",
            f"    bra.uni {side}_TILE;", f"{side}_END:"]


def _first_tile(cfg) -> str:
    return "    mov.u32 %tile, %clusterid.x;" if cfg.multicast else "    mov.u32 %tile, %ctaid.x;"


def _release(cfg, empty: str, pred: str = "") -> list[str]:
    """Arrive on empty[s] at `empty` (and, in a cluster, on the partner's: its producer
    multicasts into this stage too), once per warp (`pipeline_ptx.release_stage`), only
    where `pred` holds. The remote arrival releases at CTA scope (the default, as
    CUTLASS's cluster pipelines): the stage was only read, by wgmma, which the wait
    before it finished; `.release.cluster` would add a cluster-scope fence per arrival
    (~650 SM cycles on an H100, `workloads/reference/h100/mbarrier_hw.csv`)."""
    lead = "%prel" if pred else "%plead"
    lines = ["    bar.warp.sync 0xffffffff;",
             *([f"    and.pred %prel, {pred}, %plead;"] if pred else []),
             *release_stage(empty, "%rd2", warp_sync=False, lead=lead)]
    if cfg.multicast:
        lines += [f"    mapa.shared::cluster.u32 %remote, {empty}, %peer;",
                  f"    @{lead} mbarrier.arrive.shared::cluster.b64 _, [%remote];"]
    return lines


POLICY_REGS = {"a": "%pola", "b": "%polb"}
"""The .b64 registers holding each operand's L2 cache policy (`l2_policy` not "normal")."""
OPERAND_PRIORITY = {"stream_weights": {"a": "L2::evict_last", "b": "L2::evict_first"}}
"""Per `l2_policy`, the primary eviction priority of each operand's loads."""


def _policies(cfg) -> list[str]:
    """The producer's `createpolicy` per operand (fraction 1.0: every line), once."""
    priority = OPERAND_PRIORITY.get(cfg.l2_policy, {})
    return [f"    createpolicy.fractional.{priority[op]}.b64 {POLICY_REGS[op]}, 1.0;"
            for op in sorted(priority)]


def _hinted(cfg, copy: str, operand: str) -> str:
    """A TMA load line `copy` (ending in `;`) with `operand`'s `.L2::cache_hint` policy,
    or unchanged under "normal"."""
    if cfg.l2_policy == "normal":
        return copy
    head, tail = copy.split(" [", 1)
    return f"{head}.L2::cache_hint [{tail[:-1]}, {POLICY_REGS[operand]};"


def _producer(cfg) -> list[str]:
    lines = ["", "    // ---- producer warpgroup: warp 0, one elected lane, issues TMA ----",
             "PRODUCER:", "    setmaxnreg.dec.sync.aligned.u32 40;",
             f"    sub.u32 %r0, %thr, {128 * cfg.consumers};",
             "    setp.ge.u32 %p0, %r0, 32;", "    @%p0 bra DONE;",
             "    elect.sync %r1|%p0, 0xffffffff;", "    @!%p0 bra DONE;",
             *param_addresses({"%rd0": "tmap_a", "%rd1": "tmap_b"}), *_policies(cfg),
             "    mov.u32 %stage, 0;", "    mov.u32 %phase, 0;", "    mov.u32 %it, 0;",
             _first_tile(cfg), *_tile_start(cfg, "P"),
             f"    mov.u32 %kt, {cfg.k_start};", "P_K:",
             "    shl.b32 %r2, %stage, 3;", "    add.u32 %r3, %bars, %r2;          // full[s]",
             f"    add.u32 %r4, %r3, {8 * cfg.stages};          // empty[s]",
             f"    setp.lt.u32 %p0, %it, {cfg.stages};", "    @%p0 bra P_ISSUE;",
             "    xor.b32 %r5, %phase, 1;", "P_WAIT:",
             "    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r4], %r5;",
             "    @!%p1 bra P_WAIT;", "P_ISSUE:",
             "    mbarrier.arrive.expect_tx.shared::cta.b64 %rd2, [%r3], "
             f"{cfg.stage_bytes + cfg.sfa_bytes};",
             "    mov.u32 %r6, smem;", f"    mad.lo.u32 %r6, %stage, {cfg.stage_bytes}, %r6;",
             (f"    mad.lo.u32 %r7, %kt, {cfg.k_tile}, %k0;" if cfg.grouped else
              f"    mul.lo.u32 %r7, %kt, {cfg.k_tile};")]
    tma = ("    cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx"
           "::bytes [%r8], [{map}, {{%r9, {row}}}], [%r3];")
    mtma = ("    cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx"
            "::bytes.multicast::cluster [%r8], [{map}, {{%r9, {row}}}], [%r3], %mask;")
    if cfg.multicast:          # this CTA's half of the shared box, into both CTAs
        rows = cfg.a_box_rows if cfg.multicast == "a" else cfg.b_box_rows
        base = "%m0" if cfg.multicast == "a" else "%n0"
        lines += [f"    mul.lo.u32 %r10, %rank, {rows};", f"    add.u32 %r10, {base}, %r10;",
                  f"    mul.lo.u32 %r11, %rank, {rows * 128};"]
    for j in range(cfg.k_atoms):
        lines.append(f"    add.u32 %r9, %r7, {j * cfg.atom};")
        for operand, off, mp, row in (
                ("a", j * cfg.m_tile * 128, "%rd0", "%m0"),
                ("b", cfg.a_bytes + j * cfg.n_tile * 128, "%rd1",
                 "%brow" if cfg.grouped else "%n0")):
            lines.append(f"    add.u32 %r8, %r6, {off};")
            if cfg.multicast == operand:
                lines += ["    add.u32 %r8, %r8, %r11;",
                          _hinted(cfg, mtma.format(map=mp, row="%r10"), operand)]
            else:
                lines.append(_hinted(cfg, tma.format(map=mp, row=row), operand))
    if cfg.fp8_scaling:      # the stage's scale_a chunks: rows m0.., chunks kt * cpt (+ kc0)
        lines += [*param_addresses({"%rdsfa": "tmap_sfa"}),
                  "    mov.u32 %r8, smem;", f"    add.u32 %r8, %r8, {cfg.sfa_offset};",
                  f"    mad.lo.u32 %r8, %stage, {cfg.sfa_bytes}, %r8;",
                  f"    mul.lo.u32 %r9, %kt, {cfg.chunks_per_tile};",
                  *(["    add.u32 %r9, %r9, %kc0;"] if cfg.grouped else []),
                  _hinted(cfg, "    cp.async.bulk.tensor.2d.shared::cluster.global.tile."
                          "mbarrier::complete_tx::bytes [%r8], [%rdsfa, {%m0, %r9}], [%r3];",
                          "a")]
    lines += [*advance_stage(cfg), "    add.u32 %it, %it, 1;", "    add.u32 %kt, %kt, 1;",
              "    setp.lt.u32 %p0, %kt, %ktiles;", "    @%p0 bra P_K;",
              *_tile_end(cfg, "P"), "DONE:",
              *(["    barrier.cluster.arrive.release;   // the partner is done with this CTA",
                 "    barrier.cluster.wait.acquire;"] if cfg.multicast else []),
              "    ret;", "}"]
    return lines


def _wgmma(cfg, regs: str, sub: int, a_off: int, b_off: int, pred: str) -> list[str]:
    half = cfg.n_tile // 2
    frag = ", ".join(f"%{regs}{sub * half + i}" for i in range(half))
    trans = ", 0, 0" if cfg.elem_bytes == 2 else ""
    return [f"    add.s64 %rd4, %desc_a, {a_off >> 4};",
            f"    add.s64 %rd5, %desc_b, {b_off >> 4};",
            f"    wgmma.mma_async.sync.aligned.m64n{cfg.n_tile}{cfg.kshape}.f32."
            f"{cfg.ptx_type}.{cfg.ptx_type} {{{frag}}}, %rd4, %rd5, {pred}, 1, 1{trans};"]


def _consumer(cfg) -> list[str]:
    rows_wg = cfg.m_tile // cfg.consumers
    lines = ["", "    // ---- consumer warpgroups: wgmma over the stage ring ----",
             f"    setmaxnreg.inc.sync.aligned.u32 {cfg.consumer_regs};", *warp_leader(),
             "    shr.u32 %r10, %thr, 7;                // consumer warpgroup",
             "    and.b32 %r11, %thr, 127;", "    shr.u32 %r12, %r11, 5;                // warp",
             "    and.b32 %r13, %r11, 31;               // lane",
             "    shr.u32 %r14, %r13, 2;", "    shl.b32 %r15, %r12, 4;",
             "    add.u32 %r14, %r14, %r15;",
             f"    mad.lo.u32 %r14, %r10, {rows_wg}, %r14;  // row of fragment element 0",
             "    and.b32 %r15, %r13, 3;", "    shl.b32 %r15, %r15, 1;    // column of element 0",
             f"    mul.lo.u32 %r16, %r10, {rows_wg * 128};     // A byte offset of this group",
             "    // stage-0 descriptors; stage s adds s * stage_bytes / 16 to the address field",
             "    mov.u32 %r6, smem;", f"    add.u32 %r7, %r6, {cfg.a_bytes};",
             "    add.u32 %r6, %r6, %r16;",
             *smem_desc("%desc_a0", "%r6", DESC_SWIZZLE128),
             *smem_desc("%desc_b0", "%r7", DESC_SWIZZLE128),
             "    mov.u32 %stage, 0;", "    mov.u32 %phase, 0;",
             *(["    setp.eq.u32 %pst, %thr, 0;   // issues the C tile's TMA stores"]
               if cfg.epilogue == "tma" else []),
             _first_tile(cfg), *_tile_start(cfg, "C")]
    if cfg.fp8_scaling:
        lines += [f"    mov.f32 %d{i}, 0f00000000;" for i in range(cfg.acc_regs)]
        lines += _scale_rows(cfg)
    lines += [f"    mov.u32 %kt, {cfg.k_start};", "C_K:",
              "    shl.b32 %r2, %stage, 3;", "    add.u32 %r3, %bars, %r2;          // full[s]",
              "C_WAIT:", "    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r3], %phase;",
              "    @!%p1 bra C_WAIT;",
              f"    mul.wide.u32 %rd3, %stage, {cfg.stage_bytes >> 4};",
              "    add.s64 %desc_a, %desc_a0, %rd3;", "    add.s64 %desc_b, %desc_b0, %rd3;",
              f"    setp.ne.u32 %pacc, %kt, {cfg.k_start};   // first k-step of a tile "
              "overwrites D"]
    steps = [(j, q) for j in range(cfg.k_atoms) for q in range(128 // K_STEP_BYTES)]
    per_chunk = len(steps) // cfg.chunks_per_tile if cfg.fp8_scaling else len(steps)
    for c0 in range(0, len(steps), per_chunk):
        lines.append("    wgmma.fence.sync.aligned;")
        for n, (j, q) in enumerate(steps[c0:c0 + per_chunk]):
            for sub in range(cfg.m_sub):
                a_off = j * cfg.m_tile * 128 + sub * 64 * 128 + q * K_STEP_BYTES
                b_off = j * cfg.n_tile * 128 + q * K_STEP_BYTES
                if cfg.fp8_scaling:
                    pred = "%pfalse" if n == 0 else "%ptrue"
                else:
                    pred = "%pacc" if c0 + n == 0 else "%ptrue"
                lines += _wgmma(cfg, "t" if cfg.fp8_scaling else "d", sub, a_off, b_off, pred)
        # DeepSeek promotion reads the chunk accumulator: wait for all; otherwise keep
        # this k-tile's batch in flight and release the previous k-tile's stage
        keep = 0 if cfg.fp8_scaling else 1
        lines += ["    wgmma.commit_group.sync.aligned;",
                  f"    wgmma.wait_group.sync.aligned {keep};"]
        if cfg.fp8_scaling:
            lines += _promote(cfg, c0 // per_chunk)
    if cfg.fp8_scaling:
        lines += [f"    add.u32 %r4, %r3, {8 * cfg.stages};   // release the stage",
                  *_release(cfg, "%r4")]
    else:
        lines += ["    // release the previous k-tile's stage",
                  *_release(cfg, "%prev_empty", "%pacc"),
                  f"    add.u32 %prev_empty, %r3, {8 * cfg.stages};   // empty[s]"]
    lines += [*advance_stage(cfg), "    add.u32 %kt, %kt, 1;",
              "    setp.lt.u32 %p0, %kt, %ktiles;", "    @%p0 bra C_K;"]
    if not cfg.fp8_scaling:
        lines += ["    wgmma.wait_group.sync.aligned 0;   // release the last stage",
                  *_release(cfg, "%prev_empty")]
    if cfg.epilogue == "tma":
        lines += [*_epilogue_tma(cfg), *_tile_end(cfg, "C"),
                  "    @!%pst bra DONE;",
                  "    cp.async.bulk.wait_group.read 0;   // the stores have read the buffer",
                  "    bra.uni DONE;"]
    else:
        lines += [*_epilogue(cfg), *_tile_end(cfg, "C"), "    bra.uni DONE;"]
    return lines


def _scale_rows(cfg) -> list[str]:
    """Per tile: %rsfa = the shared address of this thread's first scale_a row in stage 0;
    the consumers stage the tile's scale_b chunks at %rsfb (DeepGEMM's sfb): entry
    i < n_blocks x L (L = k-tiles x chunks per k-tile) is b = i / L, chunk c = i % L,
    from scale_b[min(n0 / 128 + b, last) (+ sbrow), min(kc0 + c, ksb - 1)]."""
    threads = 128 * cfg.consumers
    kc0 = "%kc0" if cfg.grouped else "0"
    lines = ["    mov.u32 %rsfa, smem;", f"    add.u32 %rsfa, %rsfa, {cfg.sfa_offset};",
             "    shl.b32 %r19, %r14, 2;", "    add.u32 %rsfa, %rsfa, %r19;",
             "    mov.u32 %rsfb, smem;", f"    add.u32 %rsfb, %rsfb, {cfg.sfb_offset};",
             f"    bar.sync 1, {threads};          // the last tile's scale_b reads are done",
             "    ld.param.u64 %rd10, [scale_b];", "    cvta.to.global.u64 %rd10, %rd10;",
             "    add.u32 %r20, %N, 127;", "    shr.u32 %r20, %r20, 7;",
             "    sub.u32 %r20, %r20, 1;            // last n block",
             "    sub.u32 %q5, %ksb, 1;             // last chunk",
             f"    mul.lo.u32 %q0, %ktiles, {cfg.chunks_per_tile};   // L",
             f"    mul.lo.u32 %q1, %q0, {cfg.n_blocks};", "    mov.u32 %q2, %thr;", "C_SFB:",
             "    setp.ge.u32 %p2, %q2, %q1;", "    @%p2 bra C_SFB_DONE;",
             "    div.u32 %q3, %q2, %q0;", "    rem.u32 %q4, %q2, %q0;",
             "    shr.u32 %r21, %n0, 7;", "    add.u32 %r21, %r21, %q3;",
             "    min.u32 %r21, %r21, %r20;",
             *(["    add.u32 %r21, %r21, %sbrow;"] if cfg.grouped else []),
             f"    add.u32 %r19, %q4, {kc0};", "    min.u32 %r19, %r19, %q5;",
             "    mad.lo.u32 %r21, %r21, %ksb, %r19;",
             "    mul.wide.u32 %rd11, %r21, 4;", "    add.s64 %rd11, %rd10, %rd11;",
             "    ld.global.f32 %sb0, [%rd11];",
             f"    mad.lo.u32 %r21, %q3, {cfg.sfb_chunks}, %q4;", "    shl.b32 %r21, %r21, 2;",
             "    add.u32 %r21, %r21, %rsfb;", "    st.shared.f32 [%r21], %sb0;",
             f"    add.u32 %q2, %q2, {threads};", "    bra.uni C_SFB;", "C_SFB_DONE:",
             f"    bar.sync 1, {threads};          // this tile's scale_b is staged"]
    return lines


def _promote(cfg, chunk: int) -> list[str]:
    """DeepSeek-V3 promotion: d += t * scale_a[row, kc] * scale_b[n_block, kc] (CUDA cores)."""
    lines = [f"    mad.lo.u32 %r19, %stage, {cfg.sfa_bytes}, %rsfa;   // stage's scale_a rows"]
    for sub in range(cfg.m_sub):
        for h in range(2):
            off = 4 * (chunk * cfg.m_tile + 64 * sub + 8 * h)
            lines.append(f"    ld.shared.f32 %sa{2 * sub + h}, [%r19+{off}];")
    lines += [f"    mad.lo.u32 %r19, %kt, {cfg.chunks_per_tile}, {chunk};   // tile chunk c",
              "    shl.b32 %r19, %r19, 2;", "    add.u32 %r19, %r19, %rsfb;"]
    for b in range(cfg.n_blocks):
        lines.append(f"    ld.shared.f32 %sb{b}, [%r19+{4 * b * cfg.sfb_chunks}];")
        for r in range(2 * cfg.m_sub):
            lines.append(f"    mul.f32 %s{r * cfg.n_blocks + b}, %sa{r}, %sb{b};")
    half = cfg.n_tile // 2
    for sub in range(cfg.m_sub):
        for i in range(half):
            r = 2 * sub + (1 if i % 4 >= 2 else 0)
            b = (8 * (i // 4)) // 128
            x = sub * half + i
            lines.append(f"    fma.rn.f32 %d{x}, %t{x}, %s{r * cfg.n_blocks + b}, %d{x};")
    return lines


def _epilogue(cfg) -> list[str]:
    """Masked stores of the accumulator fragments to C[M, N] (row-major)."""
    ob = cfg.out_bytes
    lines = ["    // ---- epilogue: fragment -> C, masked at the M and N edges ----",
             "    ld.param.u64 %rd12, [c];", "    cvta.to.global.u64 %rd12, %rd12;",
             "    add.u32 %r17, %{}, %r14;             // row of element 0".format(
                 "crow" if cfg.grouped else "m0"),
             "    add.u32 %r18, %n0, %r15;             // column of element 0",
             "    sub.s32 %r19, %mrows, %r14;" if cfg.grouped else "    sub.s32 %r19, %M, %r17;",
             "    sub.s32 %r20, %N, %r18;",
             "    mul.wide.u32 %rd13, %r17, %N;", "    cvt.u64.u32 %rd14, %r18;",
             "    add.s64 %rd13, %rd13, %rd14;", f"    mul.lo.u64 %rd13, %rd13, {ob};",
             "    add.s64 %rd13, %rd12, %rd13;"]
    lines += _epilogue_packed(cfg)
    half = cfg.n_tile // 2
    for jj in range(cfg.n_tile // 8):
        for e in range(2):
            lines.append(f"    setp.gt.s32 %pc{2 * jj + e}, %r20, {8 * jj + e};")
    for sub in range(cfg.m_sub):
        for h in range(2):
            dr = 64 * sub + 8 * h
            lines += [f"    setp.gt.s32 %p2, %r19, {dr};",
                      f"    mul.wide.u32 %rd15, %N, {dr * ob};", "    add.s64 %rd15, %rd13, %rd15;"]
            for jj in range(cfg.n_tile // 8):
                for e in range(2):
                    i = 4 * jj + 2 * h + e
                    x = sub * half + i
                    off = (8 * jj + e) * ob
                    lines.append(f"    and.pred %p3, %p2, %pc{2 * jj + e};")
                    if cfg.out_dtype == "bf16":
                        lines += [f"    cvt.rn.bf16.f32 %h, %d{x};",
                                  f"    @%p3 st.global.b16 [%rd15+{off}], %h;"]
                    else:
                        lines.append(f"    @%p3 st.global.f32 [%rd15+{off}], %d{x};")
    return lines + ["C_EPI_DONE:"]


def _epilogue_packed(cfg) -> list[str]:
    """Threads whose fragment lies inside C (and N even, so pairs are aligned) store each
    pair of neighbouring columns with one unpredicated 4-byte (bf16x2) or 8-byte (f32 x2)
    store, as nvcc's vectorized epilogues do; the others take the masked path after it."""
    ob = cfg.out_bytes
    half = cfg.n_tile // 2
    lines = [f"    setp.gt.s32 %p4, %r19, {64 * (cfg.m_sub - 1) + 8};   // all rows inside",
             f"    setp.gt.s32 %p5, %r20, {cfg.n_tile - 7};   // all columns inside",
             "    and.pred %p4, %p4, %p5;", "    and.b32 %r21, %N, 1;",
             "    setp.eq.u32 %p5, %r21, 0;", "    and.pred %p4, %p4, %p5;",
             "    @!%p4 bra C_EPI_EDGE;"]
    for sub in range(cfg.m_sub):
        for h in range(2):
            dr = 64 * sub + 8 * h
            lines += [f"    mul.wide.u32 %rd15, %N, {dr * ob};",
                      "    add.s64 %rd15, %rd13, %rd15;"]
            for jj in range(cfg.n_tile // 8):
                x = sub * half + 4 * jj + 2 * h
                off = 8 * jj * ob
                if cfg.out_dtype == "bf16":
                    lines += [f"    cvt.rn.bf16x2.f32 %r22, %d{x + 1}, %d{x};",
                              f"    st.global.b32 [%rd15+{off}], %r22;"]
                else:
                    lines.append(f"    st.global.v2.f32 [%rd15+{off}], {{%d{x}, %d{x + 1}}};")
    return lines + ["    bra.uni C_EPI_DONE;", "C_EPI_EDGE:"]


def _epilogue_tma(cfg) -> list[str]:
    """The accumulator fragments, converted, into C's staging buffer (swizzled column
    atoms), then one TMA store per atom by consumer thread 0 (CUTLASS's and DeepGEMM's
    sm90 epilogue). Element (row r, column c) of the tile belongs to atom a = c * out_bytes
    / W and sits in slot a (whole tile) or a % c_slots (sub-tiles), byte r * W + (c *
    out_bytes) % W of it (W = `c_atom_bytes`), with the 16-byte chunk bits XORed by the
    map's swizzle (`isa.tensor_map.swizzle_offsets`): each thread's row address gives the
    XOR key, every column pair adds its constant. Staged whole, the tile is one group
    (wait, write, fence, store every atom, commit); in sub-tiles each atom is one."""
    ob, w = cfg.out_bytes, cfg.c_atom_bytes
    threads = 128 * cfg.consumers
    mask = cfg.c_swizzle // 16 - 1 if cfg.c_swizzle else 0
    atoms = range(cfg.c_atoms)
    groups = [[a] for a in atoms] if cfg.c_buffers else [list(atoms)]
    lines = ["    // ---- epilogue: fragment -> shared (C map's layout) -> TMA store ----",
             "    mov.u32 %e0, smem;", f"    add.u32 %e0, %e0, {cfg.c_offset};   // C buffer",
             f"    mad.lo.u32 %e1, %r14, {w}, %e0;        // row of element 0, slot 0",
             f"    mad.lo.u32 %e1, %r15, {ob}, %e1;       // + its column's bytes"]
    for g, group in enumerate(groups):
        wait = _slot_wait(cfg, g)
        if wait is not None:
            lines += [f"    @!%pst bra C_EPI_FREE{g};",
                      f"    cp.async.bulk.wait_group.read {wait};   // the slot has been read",
                      f"C_EPI_FREE{g}:", f"    bar.sync 2, {threads};"]
        lines += _stage_atoms(cfg, group, mask)
        lines += ["    fence.proxy.async.shared::cta;   // visible to the TMA (async proxy)",
                  f"    bar.sync 2, {threads};", f"    @!%pst bra C_EPI_STORED{g};",
                  *param_addresses({"%rdc": "tmap_c"})]
        for a in group:
            lines += [f"    add.u32 %e6, %n0, {a * cfg.c_atom_cols};",
                      f"    add.u32 %e2, %e0, {a % cfg.c_slots * cfg.m_tile * w};",
                      "    cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group "
                      "[%rdc, {%e6, %m0}], [%e2];"]
        lines += ["    cp.async.bulk.commit_group;", f"C_EPI_STORED{g}:"]
    return lines


def _slot_wait(cfg, g: int) -> int | None:
    """N of the `wait_group.read N` before group g writes its slots, None for no wait.
    Whole tile: 0 (the previous tile's stores). Sub-tiles (one group per atom, slot g %
    c_slots): the group that last used the slot is c_slots groups back, across tiles too
    when the atoms fill the slots evenly; otherwise the tile's first group waits for all
    and its next c_slots - 1 groups find their slots free."""
    slots = cfg.c_slots
    if not cfg.c_buffers:
        return 0
    if cfg.c_atoms % slots == 0:
        return slots - 1
    if g == 0:
        return 0
    return slots - 1 if g >= slots else None


def _stage_atoms(cfg, group: list[int], mask: int) -> list[str]:
    """`st.shared` of the fragment columns of atoms `group` into their slots."""
    ob, w = cfg.out_bytes, cfg.c_atom_bytes
    half = cfg.n_tile // 2
    per_atom = cfg.c_atom_cols // 8                  # 8-column fragment groups per atom
    lines = []
    for sub in range(cfg.m_sub):
        for h in range(2):
            lines.append(f"    add.u32 %e3, %e1, {(64 * sub + 8 * h) * w};")
            if mask:
                lines += ["    shr.u32 %e4, %e3, 7;", f"    and.b32 %e4, %e4, {mask};",
                          "    shl.b32 %e4, %e4, 4;              // swizzle key of the row"]
            for a in group:
                for jj in range(a * per_atom, (a + 1) * per_atom):
                    cb = 8 * jj * ob
                    const = a % cfg.c_slots * cfg.m_tile * w + cb % w
                    x = sub * half + 4 * jj + 2 * h
                    lines.append(f"    add.u32 %e5, %e3, {const};")
                    if mask:
                        lines.append("    xor.b32 %e5, %e5, %e4;")
                    if cfg.out_dtype == "bf16":
                        lines += [f"    cvt.rn.bf16x2.f32 %r22, %d{x + 1}, %d{x};",
                                  "    st.shared.b32 [%e5], %r22;"]
                    else:
                        lines.append(f"    st.shared.v2.f32 [%e5], {{%d{x}, %d{x + 1}}};")
    return lines
