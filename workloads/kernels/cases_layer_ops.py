"""Case builders for the transformer-layer kernels: SwiGLU, GELU, RoPE, n-input add,
DeepSeek 1x128 / 128x1 and per-tensor FP8 quantization, MoE top-k routing and the norm
backward passes.

Launch geometry lives here (`row_vector_launch`, `quantize_*_launch`, ...) and is shared
with the op builders of `workloads.ops.elementwise` / `workloads.ops.gating`, so the
tests check exactly the launches the ops time.

Tolerances: the kernels compute in f32 and round once to bf16 (8 significant bits), so a
result within ~1e-6 relative of the exact one can land one bf16 ulp away: rtol 2^-7, plus
a small atol where terms cancel (RoPE, the norm gradients). The FP8 quantizers reproduce
the f32 arithmetic exactly (div.rn, rcp.rn, one product), so they are checked bit for
bit with ml_dtypes' round-to-nearest-even after clipping to +-448 (`.satfinite`).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from .case import Expected, ceil_div, make_case

BF16 = ml_dtypes.bfloat16
E4M3 = ml_dtypes.float8_e4m3fn
E4M3_MAX = np.float32(448.0)
AMAX_FLOOR = np.float32(1e-4)
BF16_RTOL = 2.0**-7
VECTOR_ELEMS = 8      # bf16 elements per 16-byte vector access
STRIP_ELEMS = 128     # DeepSeek-V3 FP8 block: 1 x 128 activations, 128 x 1 transposed
STRIPS_PER_CTA = 8    # quantize_e4m3_1x128: block (32, 4), a half-warp per strip
TOKENS_PER_CTA = 4    # moe_topk_sigmoid: block (32, 4)
MAX_EXPERTS = 256     # moe_topk_sigmoid: 8 experts per lane


def row_vector_launch(rows: int, cols: int, threads: int = 256):
    """Grid and block of the vector kernels: x = row, y = chunks of at most `threads`
    vectors, the row split evenly over the chunks (whole warps)."""
    vectors = ceil_div(cols, VECTOR_ELEMS)
    chunks = ceil_div(vectors, threads)
    block = 32 * ceil_div(ceil_div(vectors, chunks), 32)
    return (rows, ceil_div(vectors, block), 1), (block, 1, 1)


def quantize_rows_launch(rows: int, cols: int):
    strips = ceil_div(cols, STRIP_ELEMS)
    return (rows, ceil_div(strips, STRIPS_PER_CTA), 1), (32, STRIPS_PER_CTA // 2, 1)


def quantize_tensor_launch(n: int, threads: int = 256):
    """quantize_e4m3_tensor: a 16-byte vector (8 elements) per thread, 1-D grid."""
    return (ceil_div(ceil_div(n, VECTOR_ELEMS), threads), 1, 1), (threads, 1, 1)


def quantize_cols_launch(rows: int, cols: int):
    """quantize_e4m3_128x1_t: a CTA per 128-row x 64-column tile (a column pair per lane)."""
    return (ceil_div(cols, 64), ceil_div(rows, STRIP_ELEMS), 1), (32, 8, 1)


def rows_launch(rows: int, rows_per_block: int = 4):
    """A warp per row (norm backward, top-k): block (32, rows_per_block)."""
    return (ceil_div(rows, rows_per_block), 1, 1), (32, rows_per_block, 1)


def rope_table(seqlen: int, rot_dim: int, theta: float = 10000.0) -> np.ndarray:
    """f32 (cos, sin) of pair i at position p: angle p * theta^(-2i / rot_dim)."""
    inv_freq = theta ** (-np.arange(0, rot_dim, 2, dtype=np.float64) / rot_dim)
    angle = np.arange(seqlen, dtype=np.float64)[:, None] * inv_freq[None, :]
    return np.stack([np.cos(angle), np.sin(angle)], axis=-1).astype(np.float32)


def _bf16(rng, shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(BF16)


def _f64(a):
    return np.asarray(a).astype(np.float64)


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


def swiglu_bf16(rng: np.random.Generator, rows: int, cols: int, threads: int):
    gu = _bf16(rng, (rows, 2 * cols), 2.0)
    g, u = _f64(gu[:, :cols]), _f64(gu[:, cols:])
    want = _f64((g * _sigmoid(g) * u).astype(BF16))
    grid, block = row_vector_launch(rows, cols, threads)
    return make_case("swiglu.cu", "swiglu_bf16", grid, block,
                     [gu, np.zeros((rows, cols), BF16), rows, cols],
                     {1: Expected(want, atol=1e-6, rtol=BF16_RTOL)})


def swiglu_bwd_bf16(rng: np.random.Generator, rows: int, cols: int, threads: int):
    gu = _bf16(rng, (rows, 2 * cols), 2.0)
    dout = _bf16(rng, (rows, cols))
    g, u, d = _f64(gu[:, :cols]), _f64(gu[:, cols:]), _f64(dout)
    s = _sigmoid(g)
    want = np.concatenate([d * u * s * (1 + g * (1 - s)), d * g * s], axis=1)
    want = _f64(want.astype(BF16))
    grid, block = row_vector_launch(rows, cols, threads)
    return make_case("swiglu.cu", "swiglu_bwd_bf16", grid, block,
                     [gu, dout, np.zeros((rows, 2 * cols), BF16), rows, cols],
                     {2: Expected(want, atol=1e-5, rtol=BF16_RTOL)})


def _gelu(v):
    return 0.5 * v * (1 + np.tanh(0.7978845608 * (v + 0.044715 * v**3)))


def _gelu_grad(v):
    t = np.tanh(0.7978845608 * (v + 0.044715 * v**3))
    return 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * 0.7978845608 * (1 + 3 * 0.044715 * v * v)


def gelu_bf16(rng: np.random.Generator, rows: int, cols: int, threads: int):
    x = _bf16(rng, (rows, cols), 2.0)
    want = _f64(_gelu(_f64(x)).astype(BF16))
    grid, block = row_vector_launch(rows, cols, threads)
    # tanhf's lowering is accurate to a few f32 ulps: far below one bf16 ulp.
    return make_case("gelu_bf16.cu", "gelu_bf16", grid, block,
                     [x, np.zeros_like(x), rows, cols],
                     {1: Expected(want, atol=1e-5, rtol=BF16_RTOL)})


def gelu_bwd_bf16(rng: np.random.Generator, rows: int, cols: int, threads: int):
    x, dy = _bf16(rng, (rows, cols), 2.0), _bf16(rng, (rows, cols))
    want = _f64((_f64(dy) * _gelu_grad(_f64(x))).astype(BF16))
    grid, block = row_vector_launch(rows, cols, threads)
    return make_case("gelu_bf16.cu", "gelu_bwd_bf16", grid, block,
                     [x, dy, np.zeros_like(x), rows, cols],
                     {2: Expected(want, atol=1e-5, rtol=BF16_RTOL)})


def rope_bf16(rng: np.random.Generator, rows: int, heads: int, rot_dim: int, seqlen: int,
              threads: int, sin_sign: float = 1.0):
    cols = heads * rot_dim
    x = _bf16(rng, (rows, cols))
    table = rope_table(seqlen, rot_dim)
    pos = np.arange(rows) % seqlen
    cs = _f64(table[pos])                                   # [rows, rot_dim/2, 2]
    c = np.tile(cs[..., 0], (1, heads))
    s = np.tile(cs[..., 1], (1, heads)) * sin_sign
    v = _f64(x)
    even, odd = v[:, 0::2], v[:, 1::2]
    out = np.empty_like(v)
    out[:, 0::2], out[:, 1::2] = even * c - odd * s, even * s + odd * c
    want = _f64(out.astype(BF16))
    grid, block = row_vector_launch(rows, cols, threads)
    return make_case("rope.cu", "rope_bf16", grid, block,
                     [x, table, np.zeros_like(x), rows, cols, rot_dim, seqlen,
                      np.float32(sin_sign)],
                     {2: Expected(want, atol=1e-3, rtol=BF16_RTOL)})


def add_n_bf16(rng: np.random.Generator, rows: int, cols: int, inputs: int, threads: int):
    x = _bf16(rng, (inputs, rows, cols))
    want = _f64(_f64(x).sum(axis=0).astype(BF16))
    grid, block = row_vector_launch(rows, cols, threads)
    return make_case("residual_add.cu", "add_n_bf16", grid, block,
                     [x, inputs, rows * cols, np.zeros((rows, cols), BF16), rows, cols],
                     {3: Expected(want, atol=1e-3, rtol=BF16_RTOL)})


def _quantize_strips(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Quantize the rows of `v` (f32 [n, 128]): e4m3 values and f32 scales, as the kernel."""
    amax = np.abs(v).max(axis=1, keepdims=True)
    scale = np.maximum(amax, AMAX_FLOOR) / E4M3_MAX
    inv = np.float32(1.0) / scale
    q = np.clip(v * inv, -E4M3_MAX, E4M3_MAX).astype(E4M3)
    return q, scale[:, 0]


def _strips(x32: np.ndarray) -> tuple[np.ndarray, int]:
    rows, cols = x32.shape
    strips = ceil_div(cols, STRIP_ELEMS)
    padded = np.zeros((rows, strips * STRIP_ELEMS), np.float32)
    padded[:, :cols] = x32
    return padded.reshape(rows * strips, STRIP_ELEMS), strips


def quantize_e4m3_1x128(rng: np.random.Generator, rows: int, cols: int):
    x = _bf16(rng, (rows, cols), 3.0)
    x[0, :min(cols, 128)] = 0          # an all-zero strip takes the 1e-4 amax floor
    blocks, strips = _strips(x.astype(np.float32))
    q, scale = _quantize_strips(blocks)
    want_q = q.reshape(rows, strips * STRIP_ELEMS)[:, :cols]
    grid, block = quantize_rows_launch(rows, cols)
    return make_case("quantize_block.cu", "quantize_e4m3_1x128", grid, block,
                     [x, np.zeros((rows, cols), E4M3), np.zeros((rows, strips), np.float32),
                      rows, cols],
                     {1: Expected(_f64(want_q)), 2: Expected(scale.reshape(rows, strips))})


def quantize_e4m3_128x1_t(rng: np.random.Generator, rows: int, cols: int):
    x = _bf16(rng, (rows, cols), 3.0)
    blocks, strips = _strips(x.astype(np.float32).T.copy())   # strips of columns
    q, scale = _quantize_strips(blocks)
    want_q = q.reshape(cols, strips * STRIP_ELEMS)[:, :rows]
    grid, block = quantize_cols_launch(rows, cols)
    return make_case("quantize_block.cu", "quantize_e4m3_128x1_t", grid, block,
                     [x, np.zeros((cols, rows), E4M3), np.zeros((cols, strips), np.float32),
                      rows, cols],
                     {1: Expected(_f64(want_q)), 2: Expected(scale.reshape(cols, strips))})


def quantize_e4m3_tensor(rng: np.random.Generator, n: int, threads: int = 256):
    x = _bf16(rng, (n,), 3.0)
    x[:3] = np.array([1e4, -1e4, 0.0], np.float32).astype(BF16)   # saturate both ways
    scale = np.array([0.0173], np.float32)
    inv = np.float32(1.0) / scale[0]
    want = np.clip(x.astype(np.float32) * inv, -E4M3_MAX, E4M3_MAX).astype(E4M3)
    grid, block = quantize_tensor_launch(n, threads)
    return make_case("quantize_block.cu", "quantize_e4m3_tensor", grid, block,
                     [x, np.zeros(n, E4M3), scale, n], {1: Expected(_f64(want))})


def moe_topk_sigmoid(rng: np.random.Generator, tokens: int, experts: int, topk: int,
                     rows_per_block: int = TOKENS_PER_CTA):
    # Distinct logits (a permutation per token) so the selection has no ties.
    logits = np.stack([rng.permutation(experts) for _ in range(tokens)]) / (experts / 8) - 4
    logits = logits.astype(BF16)
    bias = (rng.standard_normal(experts) * 0.01).astype(np.float32)
    score = _sigmoid(_f64(logits))
    choice = score + bias
    ids = np.argsort(-choice, axis=1, kind="stable")[:, :topk]
    picked = np.take_along_axis(score, ids, axis=1)
    route_scale = np.float32(2.5)
    weights = picked / picked.sum(axis=1, keepdims=True) * float(route_scale)
    grid, block = rows_launch(tokens, rows_per_block)
    return make_case("moe_topk.cu", "moe_topk_sigmoid", grid, block,
                     [logits, bias, np.zeros((tokens, topk), np.int32),
                      np.zeros((tokens, topk), np.float32), tokens, experts, topk,
                      route_scale],
                     {2: Expected(ids), 3: Expected(weights, atol=0.0, rtol=1e-5)})


def rmsnorm_bwd_bf16(rng: np.random.Generator, rows: int, cols: int, rows_per_block: int):
    x, dy = _bf16(rng, (rows, cols)), _bf16(rng, (rows, cols))
    w = rng.uniform(0.5, 1.5, cols).astype(BF16)
    eps = np.float32(1e-6)
    v, g = _f64(x), _f64(dy) * _f64(w)
    rstd = 1.0 / np.sqrt((v * v).mean(axis=1, keepdims=True) + float(eps))
    exact = rstd * g - v * rstd**3 * (g * v).mean(axis=1, keepdims=True)
    grid, block = rows_launch(rows, rows_per_block)
    # Two f32 terms that may cancel: an atol of a few f32 ulps of the larger term.
    atol = 1e-5 * np.abs(rstd * g).max()
    return make_case("norm_backward.cu", "rmsnorm_bwd_bf16", grid, block,
                     [x, w, dy, np.zeros_like(x), rows, cols, eps],
                     {3: Expected(_f64(exact.astype(BF16)), atol=atol, rtol=BF16_RTOL)})


def layernorm_bwd_bf16(rng: np.random.Generator, rows: int, cols: int, rows_per_block: int):
    x, dy = _bf16(rng, (rows, cols)), _bf16(rng, (rows, cols))
    gamma = rng.uniform(0.5, 1.5, cols).astype(BF16)
    eps = np.float32(1e-5)
    v, g = _f64(x), _f64(dy) * _f64(gamma)
    mean = v.mean(axis=1, keepdims=True)
    rstd = 1.0 / np.sqrt(((v - mean) ** 2).mean(axis=1, keepdims=True) + float(eps))
    xhat = (v - mean) * rstd
    exact = rstd * (g - g.mean(axis=1, keepdims=True)
                    - xhat * (g * xhat).mean(axis=1, keepdims=True))
    grid, block = rows_launch(rows, rows_per_block)
    atol = 1e-4 * np.abs(rstd * g).max()   # one-pass variance: a few f32 ulps more
    return make_case("norm_backward.cu", "layernorm_bwd_bf16", grid, block,
                     [x, gamma, dy, np.zeros_like(x), rows, cols, eps],
                     {3: Expected(_f64(exact.astype(BF16)), atol=atol, rtol=BF16_RTOL)})
