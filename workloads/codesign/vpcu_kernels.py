"""PTX generators for the variable-precision tensor unit (`vpcu.setprec`, `vmma`).

* `fragment_kernel(shape)`: one warp per 32 lanes; lane l loads its A/B fragment words
  (`a_words[warp][l][r]`, `b_words[...]`) and C (`c[warp][l][4]`, f32), sets the precision
  register from the `code` parameter and stores D (`d[warp][l][4]`). `pack_fragments` lays
  out row-major A [16, K] and B [K, 8] matrices of a precision as those words.
* `loop_kernel(shape, precisions, iters, chains)`: the timing microbenchmark. Per loop
  iteration, for each precision in `precisions` in turn: one `vpcu.setprec` with that
  code (an immediate), then `chains` independent `vmma` (own accumulators); with one
  precision the setprec sits before the loop, so the loop runs without switches. Operands
  are zero registers (timing does not depend on values); each thread stores the sum of its
  accumulators to `out[thread]`, so the epilogue stays small beside the loop.

Units: elements, 32-bit register words, counts.
"""

from __future__ import annotations

import numpy as np

from isa.semantics.tensor_frame import pack
from isa.semantics.tensor_mma import layouts
from isa.semantics.vpcu import NUMPY_DTYPES, PRECISION_BITS, PRECISION_CODES, SHAPES

WARP = 32


def shape_k(shape: str) -> int:
    if shape not in SHAPES:
        raise ValueError(f"vmma shape {shape!r} is not one of {SHAPES}")
    return int(shape[shape.index("k") + 1:])


def fragment_regs(shape: str) -> tuple[int, int]:
    la, lb, _ = layouts(shape, 32, 32)
    return la.regs, lb.regs


def _words(values: np.ndarray, lay, precision: str, width: int) -> np.ndarray:
    """Row-major matrix `[rows, cols]` -> fragment words `[32, width]` (zero padded)."""
    bits = PRECISION_BITS[precision]
    vals = np.asarray(values, dtype=NUMPY_DTYPES[precision]).reshape(-1)
    per_lane = vals[lay.forward].reshape(WARP, -1)
    if bits == 32:
        words = per_lane.view(np.uint32)
    else:
        words = pack(per_lane.view({8: np.uint8, 16: np.uint16}[bits]), bits)
    out = np.zeros((WARP, width), dtype=np.uint32)
    out[:, :words.shape[1]] = words
    return out


def pack_fragments(shape: str, precision: str, a: np.ndarray, b: np.ndarray):
    """(A words [32, ra], B words [32, rb]) of row-major A [16, K] and B [K, 8] values
    already representable in `precision` (round them with ml_dtypes first)."""
    ra, rb = fragment_regs(shape)
    la, lb, _ = layouts(shape, PRECISION_BITS[precision], 32)
    return _words(a, la, precision, ra), _words(b, lb, precision, rb)


def _regs(prefix: str, n: int, base: int = 0) -> str:
    return "{" + ", ".join(f"%{prefix}{base + k}" for k in range(n)) + "}"


def fragment_kernel(shape: str) -> str:
    """`vmma_fragment(a_words, b_words, c, d, code)` (see the module docstring)."""
    k = shape_k(shape)
    ra, rb = fragment_regs(shape)
    loads = [f"    ld.global.b32 %a{r}, [%rd5+{4 * r}];" for r in range(ra)]
    loads += [f"    ld.global.b32 %b{r}, [%rd6+{4 * r}];" for r in range(rb)]
    loads += [f"    ld.global.f32 %c{r}, [%rd7+{4 * r}];" for r in range(4)]
    stores = [f"    st.global.f32 [%rd8+{4 * r}], %d{r};" for r in range(4)]
    return "\n".join([
        ".version 8.0", ".target sm_90a", ".address_size 64", "",
        ".visible .entry vmma_fragment(.param .u64 a_words, .param .u64 b_words,",
        "    .param .u64 c, .param .u64 d, .param .u32 code)", "{",
        f"    .reg .b32 %a<{ra}>;", f"    .reg .b32 %b<{rb}>;", "    .reg .f32 %c<4>;",
        "    .reg .f32 %d<4>;", "    .reg .b32 %r<4>;", "    .reg .b32 %prec;",
        "    .reg .b64 %rd<12>;",
        "    mov.u32 %r1, %ctaid.x;", "    mov.u32 %r2, %ntid.x;", "    mov.u32 %r3, %tid.x;",
        "    mad.lo.u32 %r0, %r1, %r2, %r3;",
        "    ld.param.u64 %rd1, [a_words];", "    ld.param.u64 %rd2, [b_words];",
        "    ld.param.u64 %rd3, [c];", "    ld.param.u64 %rd4, [d];",
        f"    mul.wide.u32 %rd9, %r0, {4 * ra};", "    add.s64 %rd5, %rd1, %rd9;",
        f"    mul.wide.u32 %rd9, %r0, {4 * rb};", "    add.s64 %rd6, %rd2, %rd9;",
        "    mul.wide.u32 %rd9, %r0, 16;", "    add.s64 %rd7, %rd3, %rd9;",
        "    add.s64 %rd8, %rd4, %rd9;",
        *loads,
        "    ld.param.u32 %r1, [code];", "    vpcu.setprec.b32 %prec, %r1;",
        f"    vmma.sync.aligned.m16n8k{k}.row.col.f32.dyn.dyn.f32 {_regs('d', 4)}, "
        f"{_regs('a', ra)}, {_regs('b', rb)}, {_regs('c', 4)}, %prec;",
        *stores, "    ret;", "}", ""])


def loop_kernel(shape: str, precisions: tuple[str, ...], chains: int = 8) -> str:
    """`vmma_loop(out, iters)`: the timing microbenchmark (see the module docstring)."""
    k = shape_k(shape)
    ra, rb = fragment_regs(shape)
    if not precisions:
        raise ValueError("loop_kernel needs at least one precision")
    codes = [PRECISION_CODES[p] for p in precisions]
    body = []

    def block(code: int) -> list[str]:
        lines = [f"    vpcu.setprec.b32 %prec, {code};"] if len(codes) > 1 else []
        for ch in range(chains):
            acc = _regs("c", 4, 4 * ch)
            lines.append(f"    vmma.sync.aligned.m16n8k{k}.row.col.f32.dyn.dyn.f32 {acc}, "
                         f"{_regs('a', ra)}, {_regs('b', rb)}, {acc}, %prec;")
        return lines

    for code in codes:
        body += block(code)
    head = [f"    vpcu.setprec.b32 %prec, {codes[0]};"] if len(codes) == 1 else []
    zero = [f"    mov.b32 %a{r}, 0;" for r in range(ra)] + \
        [f"    mov.b32 %b{r}, 0;" for r in range(rb)] + \
        [f"    mov.f32 %c{r}, 0f00000000;" for r in range(4 * chains)]
    n = 4 * chains
    fold = [f"    add.f32 %c{r}, %c{r}, %c{r + half};"
            for half in _halves(n) for r in range(half)]
    return "\n".join([
        ".version 8.0", ".target sm_90a", ".address_size 64", "",
        ".visible .entry vmma_loop(.param .u64 out, .param .u32 iters)", "{",
        f"    .reg .b32 %a<{ra}>;", f"    .reg .b32 %b<{rb}>;",
        f"    .reg .f32 %c<{4 * chains}>;", "    .reg .b32 %r<4>;", "    .reg .b32 %prec;",
        "    .reg .b64 %rd<4>;", "    .reg .pred %p1;",
        *zero, *head,
        "    ld.param.u32 %r1, [iters];", "    mov.u32 %r2, 0;",
        "LOOP:", *body,
        "    add.u32 %r2, %r2, 1;", "    setp.lt.u32 %p1, %r2, %r1;", "    @%p1 bra LOOP;",
        "    mov.u32 %r3, %tid.x;", "    mov.u32 %r0, %ctaid.x;", "    mov.u32 %r1, %ntid.x;",
        "    mad.lo.u32 %r3, %r0, %r1, %r3;",
        "    mul.wide.u32 %rd3, %r3, 4;", "    ld.param.u64 %rd1, [out];",
        "    add.s64 %rd2, %rd1, %rd3;", *fold, "    st.global.f32 [%rd2], %c0;", "    ret;",
        "}", ""])


def _halves(n: int) -> list[int]:
    """Sizes of a pairwise add tree folding n (a power of two) values into one."""
    out = []
    while n > 1:
        n //= 2
        out.append(n)
    return out
