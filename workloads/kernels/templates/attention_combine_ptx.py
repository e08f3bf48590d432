"""PTX text of the split-KV combine kernel of the fused attention forward (launched after
it when the splits are not merged inline, `templates.attention`): one CTA per (b, s, head)
row, one thread per output column."""

from __future__ import annotations

from workloads.kernels.templates.attention_ptx import NEG_INF, ZERO


def emit_combine(cfg) -> str:
    """Split-KV combine: O[row, c] = sum_z 2^(lse_z - max) O_z[row, c] / sum_z 2^(lse_z - max),
    one CTA per (b, s, head) row, one thread per output column."""
    dv = cfg.headdim_v
    cvt = "bf16" if cfg.dtype == "bf16" else "f16"
    lines = [
        ".version 8.0", ".target sm_90a", ".address_size 64", "",
        f".visible .entry {cfg.combine_entry}(", "    .param .u64 opart,", "    .param .u64 lse,",
        "    .param .u64 o,", "    .param .u32 splits,", "    .param .u32 rows", ")",
        f".maxntid {dv}, 1, 1", "{", "    .reg .pred %p<2>;", "    .reg .b32 %r<8>;",
        "    .reg .b64 %rd<8>;", "    .reg .f32 %f<8>;", "    .reg .b16 %h;",
        "    ld.param.u64 %rd0, [opart];", "    cvta.to.global.u64 %rd0, %rd0;",
        "    ld.param.u64 %rd1, [lse];", "    cvta.to.global.u64 %rd1, %rd1;",
        "    ld.param.u64 %rd2, [o];", "    cvta.to.global.u64 %rd2, %rd2;",
        "    ld.param.u32 %r0, [splits];", "    ld.param.u32 %r1, [rows];",
        "    mov.u32 %r2, %ctaid.x;", "    mov.u32 %r3, %tid.x;",
        f"    mov.f32 %f0, {NEG_INF};", "    mov.u32 %r4, 0;",
        "MAX:", "    mad.lo.u32 %r5, %r4, %r1, %r2;", "    mul.wide.u32 %rd3, %r5, 4;",
        "    add.s64 %rd3, %rd1, %rd3;", "    ld.global.f32 %f1, [%rd3];",
        "    max.f32 %f0, %f0, %f1;", "    add.u32 %r4, %r4, 1;",
        "    setp.lt.u32 %p0, %r4, %r0;", "    @%p0 bra MAX;",
        f"    mov.f32 %f2, {ZERO};", f"    mov.f32 %f3, {ZERO};", "    mov.u32 %r4, 0;",
        "SUM:", "    mad.lo.u32 %r5, %r4, %r1, %r2;", "    mul.wide.u32 %rd3, %r5, 4;",
        "    add.s64 %rd3, %rd1, %rd3;", "    ld.global.f32 %f1, [%rd3];",
        "    sub.f32 %f1, %f1, %f0;", "    ex2.approx.ftz.f32 %f1, %f1;",
        "    add.f32 %f2, %f2, %f1;", f"    mul.wide.u32 %rd4, %r5, {4 * dv};",
        "    add.s64 %rd4, %rd0, %rd4;", "    mul.wide.u32 %rd5, %r3, 4;",
        "    add.s64 %rd4, %rd4, %rd5;", "    ld.global.f32 %f4, [%rd4];",
        "    fma.rn.f32 %f3, %f1, %f4, %f3;", "    add.u32 %r4, %r4, 1;",
        "    setp.lt.u32 %p0, %r4, %r0;", "    @%p0 bra SUM;",
        "    rcp.approx.ftz.f32 %f2, %f2;", "    mul.f32 %f3, %f3, %f2;",
        f"    cvt.rn.{cvt}.f32 %h, %f3;", f"    mad.lo.u32 %r6, %r2, {dv}, %r3;",
        "    mul.wide.u32 %rd6, %r6, 2;", "    add.s64 %rd6, %rd2, %rd6;",
        "    st.global.b16 [%rd6], %h;", "    ret;", "}"]
    return "\n".join(lines) + "\n"
