"""PTX generator of the ex2 microbenchmark for the lookup-table exp (`units.lut_exp`).

`ex2_loop_kernel(unroll, chains)`: `ex2_loop(out, iters)`; each thread runs `chains`
independent chains x_k <- ex2.approx.ftz.f32(x_k), `unroll` steps of all chains per loop
iteration (chain-interleaved, so a step's ex2 do not wait on each other), `iters`
iterations, then stores x_k to `out[thread * chains + k]`. x_k starts at -(k + 1) / 16;
the values go to 1 and stay finite. With one chain it measures the ex2 latency (the steps
form one dependency chain), with several chains and several warps per sub-partition its
throughput. Units: instructions, threads.
"""

from __future__ import annotations

import struct


def ex2_loop_kernel(unroll: int, chains: int) -> str:
    """`ex2_loop(out, iters)` (see the module docstring)."""
    if unroll < 1 or chains < 1:
        raise ValueError(f"unroll={unroll}, chains={chains}: both must be >= 1")
    init = [f"    mov.f32 %x{k}, 0f{_f32_hex(-(k + 1) / 16)};" for k in range(chains)]
    body = [f"    ex2.approx.ftz.f32 %x{k}, %x{k};" for _ in range(unroll) for k in range(chains)]
    stores = [f"    st.global.f32 [%rd2+{4 * k}], %x{k};" for k in range(chains)]
    return "\n".join([
        ".version 8.0", ".target sm_90a", ".address_size 64", "",
        ".visible .entry ex2_loop(.param .u64 out, .param .u32 iters)", "{",
        f"    .reg .f32 %x<{chains}>;", "    .reg .b32 %r<5>;", "    .reg .b64 %rd<4>;",
        "    .reg .pred %p1;", *init,
        "    ld.param.u32 %r1, [iters];", "    mov.u32 %r2, 0;",
        "LOOP:", *body,
        "    add.u32 %r2, %r2, 1;", "    setp.lt.u32 %p1, %r2, %r1;", "    @%p1 bra LOOP;",
        "    mov.u32 %r3, %tid.x;", "    mov.u32 %r0, %ctaid.x;", "    mov.u32 %r4, %ntid.x;",
        "    mad.lo.u32 %r3, %r0, %r4, %r3;", f"    mul.wide.u32 %rd3, %r3, {4 * chains};",
        "    ld.param.u64 %rd1, [out];", "    add.s64 %rd2, %rd1, %rd3;", *stores,
        "    ret;", "}", ""])


def _f32_hex(value: float) -> str:
    return struct.pack(">f", value).hex().upper()
