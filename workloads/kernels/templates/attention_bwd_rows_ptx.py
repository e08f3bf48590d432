"""PTX text of the attention backward's row kernels (behind `templates.attention_bwd`).

`emit_pre(cfg)`: D = rowsum(dO o O), the LSE in the padded [B, H, Sq_pad] layout and the
zeroed f32 dQ accumulator; `emit_post(cfg)`: dQ = 16-bit(dQ_acc x scale). One warp per
row, four warps per CTA; lane l handles the column pairs 2 l + 64 t (coalesced 128-byte
rows per t). Units: elements and bytes.
"""

from __future__ import annotations

from workloads.kernels.templates.attention_ptx import ZERO


def _small_head(entry: str, params: list[tuple[str, str]], threads: int) -> list[str]:
    return [".version 8.0", ".target sm_90a", ".address_size 64", "",
            f".visible .entry {entry}(",
            ",\n".join(f"    .param .{t} {n}" for n, t in params), ")",
            f".maxntid {threads}, 1, 1", "{", "    .reg .pred %p<4>;", "    .reg .b32 %r<24>;",
            "    .reg .b64 %rd<16>;", "    .reg .f32 %f<12>;"]


def _row_of_warp(rows_reg: str) -> list[str]:
    """%r0 = this warp's row (4 warps per CTA), %r1 = lane; exits past `rows_reg`."""
    return ["    mov.u32 %r0, %ctaid.x;", "    mov.u32 %r2, %tid.x;", "    shr.u32 %r3, %r2, 5;",
            "    mad.lo.u32 %r0, %r0, 4, %r3;", "    and.b32 %r1, %r2, 31;",
            f"    setp.ge.u32 %p0, %r0, {rows_reg};", "    @%p0 bra EXIT;"]


def emit_pre(cfg) -> str:
    """D = rowsum(dO o O) and LSE into [B, H, Sq_pad] (padding rows: D 0, LSE +inf, so
    their P is 0), and dQ_acc [B, H, Sq_pad, D] zeroed; one warp per (b, h, s) row."""
    dv, d = cfg.headdim_v, cfg.headdim
    lines = _small_head(cfg.pre_entry, [("o", "u64"), ("do", "u64"), ("lse", "u64"),
                                        ("lse_pad", "u64"), ("dsum", "u64"), ("dq_acc", "u64"),
                                        ("batch", "u32"), ("seqlen_q", "u32"), ("heads", "u32"),
                                        ("seqlen_q_pad", "u32")], 128)
    lines += ["    .reg .b16 %hh<4>;"]
    lines += ["    ld.param.u32 %r4, [batch];", "    ld.param.u32 %r5, [seqlen_q];",
              "    ld.param.u32 %r6, [heads];", "    ld.param.u32 %r7, [seqlen_q_pad];",
              "    mul.lo.u32 %r8, %r4, %r6;", "    mul.lo.u32 %r8, %r8, %r7;   // rows",
              *_row_of_warp("%r8"),
              "    rem.u32 %r9, %r0, %r7;               // s",
              "    div.u32 %r10, %r0, %r7;", "    rem.u32 %r11, %r10, %r6;   // h",
              "    div.u32 %r12, %r10, %r6;                // b",
              "    ld.param.u64 %rd0, [dq_acc];", "    cvta.to.global.u64 %rd0, %rd0;",
              f"    mul.wide.u32 %rd1, %r0, {4 * d};", "    add.s64 %rd1, %rd0, %rd1;",
              "    mul.wide.u32 %rd2, %r1, 8;", "    add.s64 %rd1, %rd1, %rd2;",
              f"    mov.f32 %f0, {ZERO};"]
    lines += [f"    st.global.v2.f32 [%rd1+{256 * t}], {{%f0, %f0}};" for t in range(d // 64)]
    lines += ["    mov.f32 %f1, 0f7F800000;   // padding row: LSE +inf, D 0",
              "    setp.ge.u32 %p1, %r9, %r5;", "    @%p1 bra STORE;",
              "    // row of O / dO: (b Sq + s) H + h",
              "    mad.lo.u32 %r13, %r12, %r5, %r9;", "    mad.lo.u32 %r13, %r13, %r6, %r11;",
              "    ld.param.u64 %rd3, [o];", "    cvta.to.global.u64 %rd3, %rd3;",
              "    ld.param.u64 %rd4, [do];", "    cvta.to.global.u64 %rd4, %rd4;",
              f"    mul.wide.u32 %rd5, %r13, {2 * dv};", "    mul.wide.u32 %rd6, %r1, 4;",
              "    add.s64 %rd5, %rd5, %rd6;", "    add.s64 %rd3, %rd3, %rd5;",
              "    add.s64 %rd4, %rd4, %rd5;"]
    for t in range(dv // 64):
        lines += [f"    ld.global.b32 %r14, [%rd3+{128 * t}];",
                  f"    ld.global.b32 %r15, [%rd4+{128 * t}];",
                  "    mov.b32 {%hh0, %hh1}, %r14;", "    mov.b32 {%hh2, %hh3}, %r15;"]
        ty = cfg.ptx_type
        lines += [f"    cvt.f32.{ty} %f2, %hh0;", f"    cvt.f32.{ty} %f3, %hh1;",
                  f"    cvt.f32.{ty} %f4, %hh2;", f"    cvt.f32.{ty} %f5, %hh3;",
                  "    fma.rn.f32 %f0, %f2, %f4, %f0;", "    fma.rn.f32 %f0, %f3, %f5, %f0;"]
    for dist in (16, 8, 4, 2, 1):
        lines += [f"    shfl.sync.bfly.b32 %f6, %f0, {dist}, 31, 0xffffffff;",
                  "    add.f32 %f0, %f0, %f6;"]
    lines += ["    ld.param.u64 %rd7, [lse];", "    cvta.to.global.u64 %rd7, %rd7;",
              "    mul.wide.u32 %rd8, %r13, 4;", "    add.s64 %rd7, %rd7, %rd8;",
              "    ld.global.f32 %f1, [%rd7];",
              "STORE:", "    setp.ne.u32 %p2, %r1, 0;", "    @%p2 bra EXIT;",
              "    mul.wide.u32 %rd9, %r0, 4;",
              "    ld.param.u64 %rd10, [lse_pad];", "    cvta.to.global.u64 %rd10, %rd10;",
              "    add.s64 %rd10, %rd10, %rd9;", "    st.global.f32 [%rd10], %f1;",
              "    ld.param.u64 %rd11, [dsum];", "    cvta.to.global.u64 %rd11, %rd11;",
              "    add.s64 %rd11, %rd11, %rd9;", "    st.global.f32 [%rd11], %f0;",
              "EXIT:", "    ret;", "}"]
    return "\n".join(lines) + "\n"


def emit_post(cfg) -> str:
    """dQ[b, s, h] = 16-bit(dQ_acc[b, h, s] x softmax_scale); one warp per row."""
    d = cfg.headdim
    cvt = "bf16x2" if cfg.dtype == "bf16" else "f16x2"
    lines = _small_head(cfg.post_entry, [("dq_acc", "u64"), ("dq", "u64"), ("batch", "u32"),
                                         ("seqlen_q", "u32"), ("heads", "u32"),
                                         ("seqlen_q_pad", "u32"), ("softmax_scale", "f32")], 128)
    lines += ["    ld.param.u32 %r4, [batch];", "    ld.param.u32 %r5, [seqlen_q];",
              "    ld.param.u32 %r6, [heads];", "    ld.param.u32 %r7, [seqlen_q_pad];",
              "    ld.param.f32 %f8, [softmax_scale];",
              "    mul.lo.u32 %r8, %r4, %r5;", "    mul.lo.u32 %r8, %r8, %r6;   // rows of dQ",
              *_row_of_warp("%r8"),
              "    // dQ row R = (b Sq + s) H + h",
              "    rem.u32 %r11, %r0, %r6;", "    div.u32 %r10, %r0, %r6;",
              "    rem.u32 %r9, %r10, %r5;", "    div.u32 %r12, %r10, %r5;",
              "    mad.lo.u32 %r13, %r12, %r6, %r11;", "    mad.lo.u32 %r13, %r13, %r7, %r9;",
              "    ld.param.u64 %rd0, [dq_acc];", "    cvta.to.global.u64 %rd0, %rd0;",
              f"    mul.wide.u32 %rd1, %r13, {4 * d};", "    add.s64 %rd0, %rd0, %rd1;",
              "    mul.wide.u32 %rd2, %r1, 8;", "    add.s64 %rd0, %rd0, %rd2;",
              "    ld.param.u64 %rd3, [dq];", "    cvta.to.global.u64 %rd3, %rd3;",
              f"    mul.wide.u32 %rd4, %r0, {2 * d};", "    add.s64 %rd3, %rd3, %rd4;",
              "    mul.wide.u32 %rd5, %r1, 4;", "    add.s64 %rd3, %rd3, %rd5;"]
    for t in range(d // 64):
        lines += [f"    ld.global.v2.f32 {{%f0, %f1}}, [%rd0+{256 * t}];",
                  "    mul.f32 %f0, %f0, %f8;", "    mul.f32 %f1, %f1, %f8;",
                  f"    cvt.rn.{cvt}.f32 %r14, %f1, %f0;",
                  f"    st.global.b32 [%rd3+{128 * t}], %r14;"]
    return "\n".join(lines + ["EXIT:", "    ret;", "}"]) + "\n"
