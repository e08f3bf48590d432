"""Tensor-core instructions on hand-written PTX: mma.sync fragment layouts and numerics,
ldmatrix/stmatrix with and without .trans, wmma load/mma/store, and the faults.

The expected fragments are built here from the PTX ISA's per-form layout tables
("Matrix Fragments for mma.m16n8k*"), written out as documented, independently of the
generic formula the interpreter uses. Inputs are small multiples of powers of two, so
every product and sum is exact and results are compared bit for bit.
"""

import ml_dtypes
import numpy as np
import pytest

import isa

HEADER = ".version 8.7\n.target sm_90\n.address_size 64\n"
LANE_G_T = (np.arange(32) >> 2, np.arange(32) & 3)

# element i of a lane's fragment (low element of a register first) -> (row, col)
A_DOC = {
    ("m16n8k16", 16): (8, lambda i, g, t: (g + 8 * (i in (2, 3, 6, 7)), 2 * t + (i & 1)
                                           + 8 * (i >= 4))),
    ("m16n8k8", 16): (4, lambda i, g, t: (g + 8 * (i >= 2), 2 * t + (i & 1))),
    ("m16n8k8", 32): (4, lambda i, g, t: (g + 8 * (i in (1, 3)), t + 4 * (i >= 2))),
    ("m16n8k4", 32): (2, lambda i, g, t: (g + 8 * i, t)),
    ("m16n8k32", 8): (16, lambda i, g, t: (g + 8 * (4 <= i < 8 or i >= 12), 4 * t + (i & 3)
                                           + 16 * (i >= 8))),
    ("m16n8k16", 8): (8, lambda i, g, t: (g + 8 * (i >= 4), 4 * t + (i & 3))),
    ("m8n8k16", 8): (4, lambda i, g, t: (g, 4 * t + i)),
    ("m8n8k4", 64): (1, lambda i, g, t: (g, t)),
}
B_DOC = {
    ("m16n8k16", 16): (4, lambda i, g, t: (2 * t + (i & 1) + 8 * (i >= 2), g)),
    ("m16n8k8", 16): (2, lambda i, g, t: (2 * t + i, g)),
    ("m16n8k8", 32): (2, lambda i, g, t: (t + 4 * i, g)),
    ("m16n8k4", 32): (1, lambda i, g, t: (t, g)),
    ("m16n8k32", 8): (8, lambda i, g, t: (4 * t + (i & 3) + 16 * (i >= 4), g)),
    ("m16n8k16", 8): (4, lambda i, g, t: (4 * t + i, g)),
    ("m8n8k16", 8): (4, lambda i, g, t: (4 * t + i, g)),
    ("m8n8k4", 64): (1, lambda i, g, t: (t, g)),
}
C_DOC = {16: (4, lambda i, g, t: (g + 8 * (i >= 2), 2 * t + (i & 1))),
         8: (2, lambda i, g, t: (g, 2 * t + i))}

STORAGE = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "tf32": np.float32,
           "f32": np.float32, "f64": np.float64, "e4m3": ml_dtypes.float8_e4m3fn,
           "e5m2": ml_dtypes.float8_e5m2, "s8": np.int8, "u8": np.uint8, "s32": np.int32}
BITS = {"f16": 16, "bf16": 16, "tf32": 32, "f32": 32, "f64": 64, "e4m3": 8, "e5m2": 8,
        "s8": 8, "u8": 8, "s32": 32}
REG = {"f32": ("f32", np.float32), "f64": ("f64", np.float64), "b32": ("b32", np.uint32)}


# -- a one-instruction kernel over fragments --------------------------------------------
def fragment_kernel(instr: str, frags: list[tuple[str, int, str, bool]]) -> str:
    """PTX running `instr` once per warp; `frags` = (name, regs, .reg type, is_output).

    Each fragment has its own pointer parameter holding `regs` words per thread
    (thread-major); inputs are loaded before `instr`, outputs stored after it.
    """
    params = ", ".join(f".param .u64 p_{name}" for name, *_ in frags)
    lines = [HEADER, f".visible .entry k({params})", "{", ".reg .b32 %tid_x;",
             ".reg .b64 %off, %ptr<8>;", "mov.u32 %tid_x, %tid.x;"]
    body_in, body_out = [], []
    for k, (name, regs, ty, out) in enumerate(frags):
        size = 8 if ty == "f64" else 4
        lines.append(f".reg .{ty} %{name}<{regs}>;")
        lines.append(f"ld.param.u64 %ptr{k}, [p_{name}];")
        lines.append(f"mul.wide.u32 %off, %tid_x, {regs * size};")
        lines.append(f"add.s64 %ptr{k}, %ptr{k}, %off;")
        for r in range(regs):
            move = (f"st.global.{ty} [%ptr{k}+{r * size}], %{name}{r};" if out else
                    f"ld.global.{ty} %{name}{r}, [%ptr{k}+{r * size}];")
            (body_out if out else body_in).append(move)
    vecs = {name: "{" + ", ".join(f"%{name}{r}" for r in range(regs)) + "}"
            for name, regs, *_ in frags}
    return "\n".join(lines + body_in + [instr.format(**vecs)] + body_out + ["ret;", "}"])


def run_fragments(instr, frags, inputs: dict, warps: int = 1) -> dict:
    """Run `fragment_kernel`; inputs/outputs are `[32 * warps, regs]` arrays by name."""
    args, outs = [], {}
    for name, regs, ty, out in frags:
        if out:
            outs[name] = np.zeros((32 * warps, regs), REG[ty][1])
            args.append(outs[name])
        else:
            args.append(np.ascontiguousarray(inputs[name]).view(REG[ty][1]))
    isa.run_kernel(fragment_kernel(instr, frags), "k", 1, 32 * warps, args)
    return outs


# -- mma -------------------------------------------------------------------------------
def doc_fragment(matrix: np.ndarray, count: int, where) -> np.ndarray:
    """`[32, count]` elements of `matrix` per lane, per a documented layout."""
    g, t = LANE_G_T
    out = np.empty((32, count), matrix.dtype)
    for i in range(count):
        rows, cols = zip(*(where(i, int(gg), int(tt)) for gg, tt in zip(g, t, strict=True)),
                         strict=True)
        out[:, i] = matrix[list(rows), list(cols)]
    return out


def words(elements: np.ndarray) -> np.ndarray:
    """Per-lane elements packed into 32-bit words, first element in the low bits."""
    raw = np.ascontiguousarray(elements)
    return raw.view(np.uint32) if raw.itemsize < 8 else raw


def small_values(rng, shape, name):
    """Values exact in `name` and whose products and sums are exact in f32/f16/s32."""
    if name in ("s8", "u8"):
        info = np.iinfo(STORAGE[name])
        return rng.integers(info.min, info.max + 1, shape).astype(STORAGE[name])
    scale = 0.5 if name in ("e4m3", "e5m2") else 0.25
    return (rng.integers(-4, 5, shape) * scale).astype(STORAGE[name])


MMA_FORMS = [
    "m16n8k16.row.col.f32.f16.f16.f32", "m16n8k16.row.col.f16.f16.f16.f16",
    "m16n8k8.row.col.f32.f16.f16.f32", "m16n8k8.row.col.f16.f16.f16.f16",
    "m16n8k16.row.col.f32.bf16.bf16.f32", "m16n8k8.row.col.f32.bf16.bf16.f32",
    "m16n8k8.row.col.f32.tf32.tf32.f32", "m16n8k4.row.col.f32.tf32.tf32.f32",
    "m16n8k32.row.col.f32.e4m3.e4m3.f32", "m16n8k32.row.col.f32.e5m2.e5m2.f32",
    "m16n8k32.row.col.f32.e4m3.e5m2.f32", "m16n8k32.row.col.f16.e4m3.e4m3.f16",
    "m16n8k16.row.col.f32.e4m3.e4m3.f32", "m8n8k4.row.col.f64.f64.f64.f64",
    "m16n8k32.row.col.s32.s8.s8.s32", "m16n8k32.row.col.s32.u8.s8.s32",
    "m16n8k16.row.col.s32.s8.u8.s32", "m8n8k16.row.col.s32.u8.u8.s32",
]


def mma_case(form: str, rng, warps: int):
    """Fragments for `warps` warps, the PTX frags spec and the expected D per warp."""
    shape, _, _, dt, at, bt, ct = form.split(".")
    m_rows, k = int(shape[1:shape.index("n")]), int(shape[shape.index("k") + 1:])
    a_count, a_where = A_DOC[(shape, BITS[at])]
    b_count, b_where = B_DOC[(shape, BITS[bt])]
    c_count, c_where = C_DOC[m_rows]
    frag_in = {"a": [], "b": [], "c": []}
    want = []
    for _ in range(warps):
        a = small_values(rng, (m_rows, k), at)
        b = small_values(rng, (k, 8), bt)
        c = small_values(rng, (m_rows, 8), "s8" if ct == "s32" else ct).astype(STORAGE[ct])
        exact = a.astype(np.float64) @ b.astype(np.float64) + c.astype(np.float64)
        want.append(exact.astype(STORAGE[dt]))
        frag_in["a"].append(words(doc_fragment(a, a_count, a_where)))
        frag_in["b"].append(words(doc_fragment(b, b_count, b_where)))
        frag_in["c"].append(words(doc_fragment(c, c_count, c_where)))
    inputs = {n: np.concatenate(v) for n, v in frag_in.items()}
    reg_of = {"f32": "f32", "f64": "f64", "s32": "b32", "f16": "b32"}
    in_reg = "f64" if at == "f64" else "b32"
    frags = [("a", inputs["a"].shape[1], in_reg, False),
             ("b", inputs["b"].shape[1], in_reg, False),
             ("c", inputs["c"].shape[1], reg_of[ct], False),
             ("d", c_count * BITS[dt] // 32 if dt == "f16" else c_count, reg_of[dt], True)]
    return frags, inputs, want, (c_count, c_where)


def d_matrices(d_words: np.ndarray, dt: str, c_layout, warps: int) -> list[np.ndarray]:
    count, where = c_layout
    elements = np.ascontiguousarray(d_words).view(STORAGE[dt]).reshape(warps, 32, count)
    g, t = LANE_G_T
    out = []
    for w in range(warps):
        mat = np.zeros((16 if count == 4 else 8, 8), STORAGE[dt])
        for i in range(count):
            for lane in range(32):
                mat[where(i, int(g[lane]), int(t[lane]))] = elements[w, lane, i]
        out.append(mat)
    return out


@pytest.mark.parametrize("form", MMA_FORMS)
def test_mma_follows_documented_fragment_layout_for_every_warp(form):
    """D fragments equal A @ B + C built from the PTX ISA layout tables, per warp."""
    warps = 3
    frags, inputs, want, c_layout = mma_case(form, np.random.default_rng(7), warps)
    out = run_fragments(f"mma.sync.aligned.{form} {{d}}, {{a}}, {{b}}, {{c}};", frags, inputs,
                        warps)
    got = d_matrices(out["d"], form.split(".")[3], c_layout, warps)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g.view(np.uint8), w.view(np.uint8))


def test_mma_tf32_ignores_low_13_mantissa_bits():
    """tf32 operands use only the top 19 bits of each f32 register."""
    form = "m16n8k8.row.col.f32.tf32.tf32.f32"
    frags, inputs, want, c_layout = mma_case(form, np.random.default_rng(8), 1)
    noise = np.random.default_rng(9).integers(0, 1 << 13, inputs["a"].shape, dtype=np.uint32)
    inputs["a"] = inputs["a"] | noise
    out = run_fragments(f"mma.sync.aligned.{form} {{d}}, {{a}}, {{b}}, {{c}};", frags, inputs)
    np.testing.assert_array_equal(d_matrices(out["d"], "f32", c_layout, 1)[0], want[0])


def test_mma_f32_accumulation_rounds_once():
    """1 + 2^-24 + 2^-24 (exact 1 + 2^-23) comes out as 1 + 2^-23, not 1 by two roundings."""
    form = "m16n8k16.row.col.f32.f16.f16.f32"
    frags, inputs, _, c_layout = mma_case(form, np.random.default_rng(1), 1)
    a = np.zeros((16, 16), np.float16)
    b = np.zeros((16, 8), np.float16)
    a[0, 0] = a[0, 1] = np.float16(2.0**-12)
    b[0, 0] = b[1, 0] = np.float16(2.0**-12)
    c = np.zeros((16, 8), np.float32)
    c[0, 0] = 1.0
    inputs = {"a": words(doc_fragment(a, *A_DOC[("m16n8k16", 16)])),
              "b": words(doc_fragment(b, *B_DOC[("m16n8k16", 16)])),
              "c": doc_fragment(c, *C_DOC[16])}
    out = run_fragments(f"mma.sync.aligned.{form} {{d}}, {{a}}, {{b}}, {{c}};", frags, inputs)
    assert d_matrices(out["d"], "f32", c_layout, 1)[0][0, 0] == np.float32(1 + 2.0**-23)


@pytest.mark.parametrize("saturate", [False, True])
def test_mma_s32_wraps_or_saturates(saturate):
    """s32 accumulation wraps modulo 2^32, or clamps to INT32_MAX with .satfinite."""
    form = "m16n8k32.row.col.s32.s8.s8.s32"
    frags, inputs, _, c_layout = mma_case(form, np.random.default_rng(2), 1)
    a = np.full((16, 32), 100, np.int8)
    b = np.full((32, 8), 100, np.int8)
    c = np.full((16, 8), 2**31 - 1000, np.int32)
    inputs = {"a": words(doc_fragment(a, *A_DOC[("m16n8k32", 8)])),
              "b": words(doc_fragment(b, *B_DOC[("m16n8k32", 8)])),
              "c": doc_fragment(c, *C_DOC[16]).view(np.uint32)}
    sat = ".satfinite" if saturate else ""
    out = run_fragments(f"mma.sync.aligned.m16n8k32.row.col{sat}.s32.s8.s8.s32 "
                        "{d}, {a}, {b}, {c};", frags, inputs)
    d = d_matrices(out["d"], "s32", c_layout, 1)[0]
    exact = 2**31 - 1000 + 32 * 100 * 100
    want = 2**31 - 1 if saturate else exact - 2**32
    assert (d == want).all()


# -- ldmatrix / stmatrix --------------------------------------------------------------
def ldmatrix_kernel(instr: str, count: int) -> str:
    """Stage `src` (16 bytes per thread) in shared memory, run `instr` with each thread's
    row address tile + rowoff[tid] and its `count` fragment registers (moved from / to
    `regs`), then dump the shared tile to `dump`."""
    regs = "{" + ", ".join(f"%x{i}" for i in range(count)) + "}"
    if instr.startswith("ldmatrix"):
        middle = [f"{instr} {regs}, [%r10];",
                  *(f"st.global.b32 [%rd8+{4 * i}], %x{i};" for i in range(count))]
    else:
        middle = [*(f"ld.global.b32 %x{i}, [%rd8+{4 * i}];" for i in range(count)),
                  f"{instr} [%r10], {regs};", "bar.sync 0;"]
    return "\n".join([
        HEADER, ".visible .entry k(.param .u64 src, .param .u64 rowoff, .param .u64 regs,"
        " .param .u64 dump)", "{", ".reg .b32 %r<12>, %x<4>;", ".reg .b64 %rd<12>;",
        ".shared .align 16 .b8 tile[512];",
        "ld.param.u64 %rd1, [src];", "ld.param.u64 %rd2, [rowoff];",
        "ld.param.u64 %rd3, [regs];", "ld.param.u64 %rd10, [dump];",
        "mov.u32 %r1, %tid.x;", "mul.wide.u32 %rd4, %r1, 16;", "add.s64 %rd5, %rd1, %rd4;",
        "ld.global.v4.b32 {%r2, %r3, %r4, %r5}, [%rd5];", "mov.u32 %r6, tile;",
        "shl.b32 %r7, %r1, 4;", "add.u32 %r8, %r6, %r7;",
        "st.shared.v4.b32 [%r8], {%r2, %r3, %r4, %r5};", "bar.sync 0;",
        "mul.wide.u32 %rd6, %r1, 4;", "add.s64 %rd7, %rd2, %rd6;", "ld.global.u32 %r9, [%rd7];",
        "add.u32 %r10, %r6, %r9;", f"mul.wide.u32 %rd9, %r1, {4 * count};",
        "add.s64 %rd8, %rd3, %rd9;", *middle,
        "ld.shared.v4.b32 {%r2, %r3, %r4, %r5}, [%r8];", "add.s64 %rd11, %rd10, %rd4;",
        "st.global.v4.b32 [%rd11], {%r2, %r3, %r4, %r5};", "ret;", "}"])


def row_offsets(rng, count: int) -> np.ndarray:
    """Byte offsets of 32 distinct 16-byte rows; lanes past 8 * count point far outside."""
    off = (rng.permutation(32) * 16).astype(np.uint32)
    off[8 * count:] = 0x7FFF0
    return off


def spec_fragment(mats: np.ndarray) -> np.ndarray:
    """`[32, N]` words: for matrix i, lane l holds row l/4, columns 2(l%4) and +1."""
    lane = np.arange(32)
    lo = mats[:, lane >> 2, 2 * (lane & 3)].astype(np.uint32)
    hi = mats[:, lane >> 2, 2 * (lane & 3) + 1].astype(np.uint32)
    return (lo | hi << 16).T


@pytest.mark.parametrize("trans", ["", ".trans"])
@pytest.mark.parametrize("count", [1, 2, 4])
def test_ldmatrix_gives_each_lane_its_row_pair(count, trans):
    """Matrix i comes from the rows addressed by lanes 8i..8i+7; unused lanes' rows ignored."""
    rng = np.random.default_rng(count)
    src = rng.integers(0, 1 << 16, (32, 8), dtype=np.uint16)
    rowoff = row_offsets(rng, count)
    regs = np.zeros((32, count), np.uint32)
    kernel = ldmatrix_kernel(f"ldmatrix.sync.aligned.m8n8.x{count}{trans}.shared.b16", count)
    isa.run_kernel(kernel, "k", 1, 32, [src, rowoff, regs, np.zeros_like(src)])
    mats = src[rowoff[:8 * count] // 16].reshape(count, 8, 8)
    if trans:
        mats = mats.transpose(0, 2, 1)
    np.testing.assert_array_equal(regs, spec_fragment(mats))


@pytest.mark.parametrize("trans", ["", ".trans"])
@pytest.mark.parametrize("count", [1, 4])
def test_stmatrix_writes_the_rows_ldmatrix_would_read(count, trans):
    """stmatrix stores lane fragments as the rows that ldmatrix with the same form reads."""
    rng = np.random.default_rng(10 + count)
    rowoff = row_offsets(rng, count)
    regs = rng.integers(0, 1 << 32, (32, count), dtype=np.uint32)
    src = np.zeros((32, 8), np.uint16)
    dump = np.zeros_like(src)
    kernel = ldmatrix_kernel(f"stmatrix.sync.aligned.m8n8.x{count}{trans}.shared.b16", count)
    isa.run_kernel(kernel, "k", 1, 32, [src, rowoff, regs, dump])
    mats = dump[rowoff[:8 * count] // 16].reshape(count, 8, 8)
    if trans:
        mats = mats.transpose(0, 2, 1)
    np.testing.assert_array_equal(spec_fragment(mats), regs)


def test_ldmatrix_misaligned_row_address_faults():
    """A row address that is not 16-byte aligned is a fault naming the instruction."""
    rowoff = (np.arange(32) * 16).astype(np.uint32)
    rowoff[3] += 4
    kernel = ldmatrix_kernel("ldmatrix.sync.aligned.m8n8.x4.shared.b16", 4)
    src = np.zeros((32, 8), np.uint16)
    with pytest.raises(isa.PtxError, match="misaligned 16-byte access.*ldmatrix"):
        isa.run_kernel(kernel, "k", 1, 32, [src, rowoff, np.zeros((32, 4), np.uint32), src])


# -- wmma ----------------------------------------------------------------------------
WMMA_SHAPES = {"m16n16k16": (16, 16, 16), "m8n32k16": (8, 32, 16), "m32n8k16": (32, 8, 16)}


def stored(mat: np.ndarray, layout: str, pad: int) -> tuple[np.ndarray, int]:
    """`mat` in `layout` memory order with leading dimension padded by `pad` elements."""
    body = mat if layout == "row" else mat.T
    buf = np.zeros((body.shape[0], body.shape[1] + pad), mat.dtype)
    buf[:, :body.shape[1]] = body
    return buf, body.shape[1] + pad


def wmma_kernel(shape, la, lb, lc, ld, ct, dt, strides, space="global", post=()) -> str:
    frag = {"a": 8, "b": 8, "c": 4 if ct == "f16" else 8, "d": 4 if dt == "f16" else 8}
    reg = {"a": "b32", "b": "b32", "c": "b32" if ct == "f16" else "f32",
           "d": "b32" if dt == "f16" else "f32"}
    v = {n: "{" + ", ".join(f"%{n}{i}" for i in range(k)) + "}" for n, k in frag.items()}
    sp = f".{space}" if space else ""
    return "\n".join([
        HEADER, ".visible .entry k(.param .u64 pa, .param .u64 pb, .param .u64 pc,"
        " .param .u64 pd)", "{", ".reg .b64 %rd<5>;", ".reg .b32 %lda;",
        *(f".reg .{reg[n]} %{n}<{k}>;" for n, k in frag.items()),
        "ld.param.u64 %rd1, [pa];", "ld.param.u64 %rd2, [pb];", "ld.param.u64 %rd3, [pc];",
        "ld.param.u64 %rd4, [pd];", f"mov.u32 %lda, {strides[0]};",
        f"wmma.load.a.sync.aligned.{la}.{shape}{sp}.f16 {v['a']}, [%rd1], %lda;",
        f"wmma.load.b.sync.aligned.{lb}.{shape}{sp}.f16 {v['b']}, [%rd2], {strides[1]};",
        f"wmma.load.c.sync.aligned.{lc}.{shape}{sp}.{ct} {v['c']}, [%rd3], {strides[2]};",
        f"wmma.mma.sync.aligned.{la}.{lb}.{shape}.{dt}.{ct} {v['d']}, {v['a']}, {v['b']}, "
        f"{v['c']};", *post,
        f"wmma.store.d.sync.aligned.{ld}.{shape}{sp}.{dt} [%rd4], {v['d']}, {strides[3]};",
        "ret;", "}"])


def wmma_run(shape, layouts, ct, dt, rng, post=()):
    """Run one wmma load/mma/store kernel; return (A, B, C, D read back)."""
    mm, nn, kk = WMMA_SHAPES[shape]
    a = (rng.integers(-4, 5, (mm, kk)) * 0.25).astype(np.float16)
    b = (rng.integers(-4, 5, (kk, nn)) * 0.25).astype(np.float16)
    c = (rng.integers(-8, 9, (mm, nn)) * 0.5).astype(STORAGE[ct])
    pads = (8, 0, 4, 8)
    bufs = [stored(x, lay, pad) for x, lay, pad in zip((a, b, c), layouts, pads, strict=False)]
    d_buf, ldd = stored(np.zeros((mm, nn), STORAGE[dt]), layouts[3], pads[3])
    strides = [s for _, s in bufs] + [ldd]
    kernel = wmma_kernel(shape, *layouts, ct, dt, strides, post=post)
    isa.run_kernel(kernel, "k", 1, 32, [bufs[0][0], bufs[1][0], bufs[2][0], d_buf])
    body = d_buf[:, :ldd - pads[3]]
    return a, b, c, (body if layouts[3] == "row" else body.T)


@pytest.mark.parametrize("shape", list(WMMA_SHAPES))
@pytest.mark.parametrize("layouts", [("row", "row", "row", "row"), ("col", "col", "col", "row"),
                                     ("row", "col", "row", "col")], ids="-".join)
@pytest.mark.parametrize("types", [("f32", "f32"), ("f16", "f16"), ("f32", "f16"), ("f16", "f32")],
                         ids="-".join)
def test_wmma_load_mma_store_computes_a_times_b_plus_c(shape, layouts, types):
    """Fragments loaded in any layout and stride multiply to the exact A @ B + C."""
    ct, dt = types
    a, b, c, d = wmma_run(shape, layouts, ct, dt, np.random.default_rng(3))
    want = (a.astype(np.float64) @ b.astype(np.float64) + c.astype(np.float64))
    np.testing.assert_array_equal(d, want.astype(STORAGE[dt]))


def test_wmma_fragments_survive_element_wise_register_code():
    """Scaling every accumulator register by 2 after wmma.mma doubles every element of D."""
    post = [f"mul.f32 %d{i}, %d{i}, 0f40000000;" for i in range(8)]
    a, b, c, d = wmma_run("m16n16k16", ("row", "row", "row", "row"), "f32", "f32",
                          np.random.default_rng(4), post)
    want = 2 * (a.astype(np.float64) @ b.astype(np.float64) + c)
    np.testing.assert_array_equal(d, want.astype(np.float32))


def test_wmma_load_and_store_through_shared_and_generic_addresses():
    """A C tile staged in shared memory round-trips; a generic store lands in global."""
    c = np.arange(256, dtype=np.float32).reshape(16, 16)
    out = np.zeros_like(c)
    regs = "{" + ", ".join(f"%f{i}" for i in range(8)) + "}"
    kernel = "\n".join([
        HEADER, ".visible .entry k(.param .u64 src, .param .u64 dst)", "{",
        ".reg .f32 %f<8>;", ".reg .f32 %v<4>;", ".reg .b32 %r<6>;", ".reg .b64 %rd<6>;",
        ".shared .align 32 .f32 tile[256];",
        "ld.param.u64 %rd1, [src];", "ld.param.u64 %rd2, [dst];", "mov.u32 %r1, %tid.x;",
        "mul.wide.u32 %rd3, %r1, 32;", "add.s64 %rd4, %rd1, %rd3;", "mov.u32 %r2, tile;",
        "shl.b32 %r3, %r1, 5;", "add.u32 %r4, %r2, %r3;",
        "ld.global.v4.f32 {%v0, %v1, %v2, %v3}, [%rd4];",
        "st.shared.v4.f32 [%r4], {%v0, %v1, %v2, %v3};",
        "ld.global.v4.f32 {%v0, %v1, %v2, %v3}, [%rd4+16];",
        "st.shared.v4.f32 [%r4+16], {%v0, %v1, %v2, %v3};", "bar.sync 0;",
        f"wmma.load.c.sync.aligned.col.m16n16k16.shared.f32 {regs}, [%r2], 16;",
        f"wmma.store.d.sync.aligned.row.m16n16k16.f32 [%rd2], {regs}, 16;", "ret;", "}"])
    isa.run_kernel(kernel, "k", 1, 32, [c, out])
    np.testing.assert_array_equal(out, c.T)


# -- faults and verification -----------------------------------------------------------
def test_mma_in_diverged_warp_faults_naming_the_instruction():
    """An .aligned mma reached by half a warp is a fault, not a silent partial result."""
    form = "m16n8k16.row.col.f32.f16.f16.f32"
    frags, inputs, _, _ = mma_case(form, np.random.default_rng(5), 1)
    instr = ("setp.lt.u32 %p1, %tid_x, 16;\n@%p1 bra SKIP;\n"
             f"mma.sync.aligned.{form} {{d}}, {{a}}, {{b}}, {{c}};\nSKIP:")
    kernel = fragment_kernel(instr, frags).replace(".reg .b32 %tid_x;",
                                                   ".reg .b32 %tid_x;\n.reg .pred %p1;")
    args = [inputs["a"], inputs["b"], inputs["c"], np.zeros((32, 4), np.float32)]
    with pytest.raises(isa.PtxError, match=r"16 of 32 lanes.*0xffff0000.*mma\.sync"):
        isa.run_kernel(kernel, "k", 1, 32, args)


def test_wmma_in_partial_warp_faults():
    """A CTA of 48 threads leaves its second warp short; wmma there is a fault."""
    c = np.zeros((16, 16), np.float32)
    regs = "{" + ", ".join(f"%f{i}" for i in range(8)) + "}"
    kernel = "\n".join([
        HEADER, ".visible .entry k(.param .u64 src)", "{", ".reg .f32 %f<8>;",
        ".reg .b64 %rd1;", "ld.param.u64 %rd1, [src];",
        f"wmma.load.c.sync.aligned.row.m16n16k16.global.f32 {regs}, [%rd1], 16;", "ret;", "}"])
    with pytest.raises(isa.PtxError, match="16 of 32 lanes.*wmma.load"):
        isa.run_kernel(kernel, "k", 1, 48, [c])


@pytest.mark.parametrize("instr, expected", [
    ("mma.sync.aligned.m16n8k16.row.col.f32.tf32.tf32.f32 {d}, {a}, {b}, {c};",
     "f32.bf16.bf16.f32"),
    ("mma.sync.aligned.m16n8k64.row.col.f32.f16.f16.f32 {d}, {a}, {b}, {c};",
     "m16n8k16, m16n8k32"),
    ("mma.sync.aligned.m16n8k16.col.row.f32.f16.f16.f32 {d}, {a}, {b}, {c};", "row.col"),
    ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f16 {d}, {a}, {b}, {c};",
     "f16.f16.f16.f16"),
])
def test_unsupported_mma_form_is_rejected_before_running_with_the_accepted_forms(instr,
                                                                                 expected):
    """The verifier rejects an mma form the interpreter cannot run, listing accepted forms."""
    frags = [("a", 4, "b32", False), ("b", 2, "b32", False), ("c", 4, "f32", False),
             ("d", 4, "f32", True)]
    with pytest.raises(isa.PtxError, match=expected) as err:
        isa.compile_kernel(fragment_kernel(instr, frags), "k")
    assert err.value.line > 0


def test_ldmatrix_with_wrong_register_count_is_rejected_before_running():
    """ldmatrix .x4 with two destination registers fails verification."""
    kernel = ldmatrix_kernel("ldmatrix.sync.aligned.m8n8.x4.shared.b16", 2)
    with pytest.raises(isa.PtxError, match="needs 4 registers"):
        isa.compile_kernel(kernel, "k")


def test_wmma_load_of_f32_a_fragment_is_rejected_before_running():
    """wmma.load.a with .f32 elements is not a supported form; the error lists the forms."""
    kernel = wmma_kernel("m16n16k16", "row", "row", "row", "row", "f32", "f32",
                         [16, 16, 16, 16]).replace("row.m16n16k16.global.f16",
                                                   "row.m16n16k16.global.f32", 1)
    with pytest.raises(isa.PtxError, match="unsupported wmma form.*wmma.load"):
        isa.compile_kernel(kernel, "k")
