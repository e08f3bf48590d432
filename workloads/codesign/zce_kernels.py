"""PTX generator and operand packing for the zero-skipping MMA (`zmma`) microbenchmark.

`zmma_loop_kernel(shape, dtype, chains, op)`: `zmma_loop(a_words, b_words, out, iters)`.
Warp w loads its own A and B fragments (`a_words[w][lane][r]`, `b_words[w][lane][r]`, laid
out by `pack_tile`), then runs `iters` loop iterations of `chains` independent `zmma` (own
f32 accumulators, zero at start; every chain ends at iters * (A_w @ B_w)) and stores chain 0
to `out[w][lane][4]` in fragment order (one store per register keeps the epilogue small).
`op="mma"` emits the stock `mma.sync` of the same form (the dense baseline). Forms:
`.row.col.f32.<dtype>.<dtype>.f32` with dtype bf16 or f16 (m16n8k16) or e4m3/e5m2
(m16n8k32).

Units: elements, 32-bit register words.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from isa.semantics.tensor_frame import pack
from isa.semantics.tensor_mma import layouts

WARP = 32
DTYPES = {"bf16": (16, np.dtype(ml_dtypes.bfloat16)), "f16": (16, np.dtype(np.float16)),
          "e4m3": (8, np.dtype(ml_dtypes.float8_e4m3fn)),
          "e5m2": (8, np.dtype(ml_dtypes.float8_e5m2))}


def _layouts(shape: str, dtype: str):
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r} is not one of {sorted(DTYPES)}")
    return layouts(shape, DTYPES[dtype][0], 32)


def pack_tile(shape: str, dtype: str, a: np.ndarray, b: np.ndarray):
    """(A words [32, ra], B words [32, rb]) of row-major A [M, K] and B [K, N] values."""
    bits, np_dtype = DTYPES[dtype]
    la, lb, _ = _layouts(shape, dtype)
    words = []
    for values, lay in ((a, la), (b, lb)):
        vals = np.asarray(values, dtype=np_dtype).reshape(-1)[lay.forward].reshape(WARP, -1)
        words.append(pack(vals.view({8: np.uint8, 16: np.uint16}[bits]), bits))
    return words[0], words[1]


def unpack_accumulator(shape: str, dtype: str, d: np.ndarray) -> np.ndarray:
    """Fragment-order accumulators `[32, 4]` back to the row-major `[M, N]` tile."""
    lc = _layouts(shape, dtype)[2]
    out = np.empty(lc.rows * lc.cols, np.float32)
    out[lc.forward] = np.asarray(d, np.float32).reshape(-1)
    return out.reshape(lc.rows, lc.cols)


def _regs(prefix: str, n: int, base: int = 0) -> str:
    return "{" + ", ".join(f"%{prefix}{base + k}" for k in range(n)) + "}"


def zmma_loop_kernel(shape: str, dtype: str, chains: int = 8, op: str = "zmma") -> str:
    """`zmma_loop(a_words, b_words, out, iters)` (see the module docstring)."""
    la, lb, _ = _layouts(shape, dtype)
    ra, rb = la.regs, lb.regs
    if op not in ("zmma", "mma"):
        raise ValueError(f"op {op!r} is not 'zmma' or 'mma'")
    form = f"{op}.sync.aligned.{shape}.row.col.f32.{dtype}.{dtype}.f32"
    body = [f"    {form} {_regs('c', 4, 4 * k)}, {_regs('a', ra)}, {_regs('b', rb)}, "
            f"{_regs('c', 4, 4 * k)};" for k in range(chains)]
    loads = [f"    ld.global.b32 %a{r}, [%rd5+{4 * r}];" for r in range(ra)]
    loads += [f"    ld.global.b32 %b{r}, [%rd6+{4 * r}];" for r in range(rb)]
    zero = [f"    mov.f32 %c{r}, 0f00000000;" for r in range(4 * chains)]
    stores = [f"    st.global.f32 [%rd7+{4 * r}], %c{r};" for r in range(4)]
    return "\n".join([
        ".version 8.0", ".target sm_90a", ".address_size 64", "",
        ".visible .entry zmma_loop(.param .u64 a_words, .param .u64 b_words, .param .u64 out,",
        "    .param .u32 iters)", "{",
        f"    .reg .b32 %a<{ra}>;", f"    .reg .b32 %b<{rb}>;", f"    .reg .f32 %c<{4 * chains}>;",
        "    .reg .b32 %r<8>;", "    .reg .b64 %rd<12>;", "    .reg .pred %p1;",
        "    mov.u32 %r1, %ctaid.x;", "    mov.u32 %r2, %ntid.x;", "    mov.u32 %r3, %tid.x;",
        "    mad.lo.u32 %r0, %r1, %r2, %r3;",
        "    ld.param.u64 %rd1, [a_words];", "    ld.param.u64 %rd2, [b_words];",
        "    ld.param.u64 %rd3, [out];",
        f"    mul.wide.u32 %rd9, %r0, {4 * ra};", "    add.s64 %rd5, %rd1, %rd9;",
        f"    mul.wide.u32 %rd9, %r0, {4 * rb};", "    add.s64 %rd6, %rd2, %rd9;",
        "    mul.wide.u32 %rd9, %r0, 16;", "    add.s64 %rd7, %rd3, %rd9;",
        *loads, *zero,
        "    ld.param.u32 %r6, [iters];", "    mov.u32 %r7, 0;",
        "LOOP:", *body,
        "    add.u32 %r7, %r7, 1;", "    setp.lt.u32 %p1, %r7, %r6;", "    @%p1 bra LOOP;",
        *stores, "    ret;", "}", ""])


def store_stream_kernel() -> str:
    """`store_stream(out)`: thread t of the grid stores 16 bytes (four zero words) at
    `out + 16 t` (the streaming store microbenchmark of compressed stores: one warp
    instruction writes 512 contiguous bytes; the grid covers the output once)."""
    return "\n".join([
        ".version 8.0", ".target sm_90a", ".address_size 64", "",
        ".visible .entry store_stream(.param .u64 out)", "{",
        "    .reg .b32 %r<6>;", "    .reg .b64 %rd<4>;",
        "    mov.u32 %r1, %ctaid.x;", "    mov.u32 %r2, %ntid.x;", "    mov.u32 %r3, %tid.x;",
        "    mad.lo.u32 %r0, %r1, %r2, %r3;", "    mov.u32 %r4, 0;",
        "    ld.param.u64 %rd1, [out];", "    mul.wide.u32 %rd2, %r0, 16;",
        "    add.s64 %rd3, %rd1, %rd2;",
        "    st.global.v4.b32 [%rd3], {%r4, %r4, %r4, %r4};", "    ret;", "}", ""])
