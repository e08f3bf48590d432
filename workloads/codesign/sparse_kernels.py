"""PTX generator of the `mma.sp` (2:4 structured sparsity) microbenchmark.

`mma_sp_loop_kernel(shape, dtype, selector, chains)`: `mma_sp_loop(a_words, b_words,
e_words, out, iters)`. Thread i (warp w, lane l) loads its compressed-A words
`a_words[i][0..ra)`, B words `b_words[i][0..rb)` and metadata word `e_words[i]`, runs
`iters` loop iterations of `chains` independent
`mma.sp::ordered_metadata.sync.aligned.<shape>.row.col.f32.<dtype>.<dtype>.f32` with the
immediate `selector` (own f32 accumulators, zero at start; chain c ends at
iters x expand(A) @ B), and stores chain 0's 4 accumulator registers to `out[i][0..4)`.
Register counts per lane: ra = rb = 2 (m16n8k16) or 4 (m16n8k32, m16n8k64 8-bit).
Units: 32-bit register words.
"""

from __future__ import annotations

from isa.semantics.tensor_mma_sp import _BITS, FORMS, layouts


def registers(shape: str, dtype: str) -> tuple[int, int]:
    """(A, B) registers per lane of an `mma.sp` of `shape` and input `dtype`."""
    if (shape, "f32", dtype, dtype, "f32") not in FORMS:
        raise ValueError(f"mma.sp {shape} with {dtype}: not a supported f32-accumulating form")
    la, lb, _ = layouts(shape, _BITS[dtype], 32)
    return la.regs, lb.regs


def _regs(prefix: str, n: int, base: int = 0) -> str:
    return "{" + ", ".join(f"%{prefix}{base + k}" for k in range(n)) + "}"


def mma_sp_loop_kernel(shape: str, dtype: str, selector: int = 0, chains: int = 1,
                       name: str = "mma.sp::ordered_metadata") -> str:
    """`mma_sp_loop(a_words, b_words, e_words, out, iters)` (see the module docstring)."""
    ra, rb = registers(shape, dtype)
    form = f"{name}.sync.aligned.{shape}.row.col.f32.{dtype}.{dtype}.f32"
    body = [f"    {form} {_regs('c', 4, 4 * k)}, {_regs('a', ra)}, {_regs('b', rb)}, "
            f"{_regs('c', 4, 4 * k)}, %e, {selector};" for k in range(chains)]
    loads = [f"    ld.global.b32 %a{r}, [%rd5+{4 * r}];" for r in range(ra)]
    loads += [f"    ld.global.b32 %b{r}, [%rd6+{4 * r}];" for r in range(rb)]
    zero = [f"    mov.f32 %c{r}, 0f00000000;" for r in range(4 * chains)]
    stores = [f"    st.global.f32 [%rd7+{4 * r}], %c{r};" for r in range(4)]
    return "\n".join([
        ".version 8.5", ".target sm_90a", ".address_size 64", "",
        ".visible .entry mma_sp_loop(.param .u64 a_words, .param .u64 b_words,",
        "    .param .u64 e_words, .param .u64 out, .param .u32 iters)", "{",
        f"    .reg .b32 %a<{ra}>;", f"    .reg .b32 %b<{rb}>;", "    .reg .b32 %e;",
        f"    .reg .f32 %c<{4 * chains}>;", "    .reg .b32 %r<8>;", "    .reg .b64 %rd<12>;",
        "    .reg .pred %p1;",
        "    mov.u32 %r1, %ctaid.x;", "    mov.u32 %r2, %ntid.x;", "    mov.u32 %r3, %tid.x;",
        "    mad.lo.u32 %r0, %r1, %r2, %r3;",
        "    ld.param.u64 %rd1, [a_words];", "    ld.param.u64 %rd2, [b_words];",
        "    ld.param.u64 %rd3, [out];", "    ld.param.u64 %rd4, [e_words];",
        f"    mul.wide.u32 %rd9, %r0, {4 * ra};", "    add.s64 %rd5, %rd1, %rd9;",
        f"    mul.wide.u32 %rd9, %r0, {4 * rb};", "    add.s64 %rd6, %rd2, %rd9;",
        "    mul.wide.u32 %rd9, %r0, 16;", "    add.s64 %rd7, %rd3, %rd9;",
        "    mul.wide.u32 %rd9, %r0, 4;", "    add.s64 %rd8, %rd4, %rd9;",
        "    ld.global.b32 %e, [%rd8];", *loads, *zero,
        "    ld.param.u32 %r6, [iters];", "    mov.u32 %r7, 0;",
        "LOOP:", *body,
        "    add.u32 %r7, %r7, 1;", "    setp.lt.u32 %p1, %r7, %r6;", "    @%p1 bra LOOP;",
        *stores, "    ret;", "}", ""])
