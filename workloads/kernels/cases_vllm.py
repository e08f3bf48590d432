"""Case builders for the vLLM-style fp16 layer kernels (`vllm_layer_ops.cu`): RMSNorm, SiLU
and multiply, GPT-NeoX rotary embedding, one CTA per token with scalar accesses.

Launch geometry (`vllm_launch`) is shared with `workloads.ops` (`--kernel vllm`), so the
tests check the launches the ops time. Tolerances: the kernels compute in f32 and round to
fp16 (11 significant bits) once before a last fp16 product (RMSNorm's weight, SiLU's up),
so results may differ from the numpy reference by an ulp of each rounding: rtol 2^-9;
RoPE's four fp16 products and two sums round separately: rtol 2^-8 plus an atol for the
sums that cancel.
"""

from __future__ import annotations

import numpy as np

from .case import Expected, make_case

F16 = np.float16
MAX_THREADS = 1024     # rms_norm / silu_and_mul: min(width, 1024) threads
ROPE_MAX_THREADS = 512
RMS_EPS = np.float32(1e-6)


def vllm_launch(kind: str, tokens: int, width: int):
    """Grid and block of a vLLM-style kernel: a CTA per token; `width` is the row width
    for rms_norm, d for silu_and_mul, heads x rot_dim / 2 for the rotary kernel."""
    cap = ROPE_MAX_THREADS if kind == "rope" else MAX_THREADS
    return (tokens, 1, 1), (min(width, cap), 1, 1)


def rope_cache(max_position: int, rot_dim: int, theta: float = 10000.0) -> np.ndarray:
    """fp16 cos | sin halves per position: [max_position, rot_dim]."""
    inv = theta ** (-np.arange(0, rot_dim, 2, dtype=np.float64) / rot_dim)
    ang = np.arange(max_position, dtype=np.float64)[:, None] * inv[None, :]
    return np.concatenate([np.cos(ang), np.sin(ang)], axis=1).astype(F16)


def rms_norm_f16(rng: np.random.Generator, tokens: int, hidden: int):
    x = (rng.standard_normal((tokens, hidden)) * 2.0).astype(F16)
    w = (rng.standard_normal(hidden) * 0.5 + 1.0).astype(F16)
    x32 = x.astype(np.float32)
    s = 1.0 / np.sqrt((x32 * x32).sum(axis=1, keepdims=True) / hidden + RMS_EPS)
    want = ((x32 * s).astype(F16).astype(np.float32) * w.astype(np.float32)).astype(F16)
    grid, block = vllm_launch("rmsnorm", tokens, hidden)
    return make_case("vllm_layer_ops.cu", "rms_norm_f16", grid, block,
                     [np.zeros_like(x), x, w, RMS_EPS, tokens, hidden],
                     {0: Expected(want.astype(np.float64), atol=1e-3, rtol=2.0**-9)})


def silu_and_mul_f16(rng: np.random.Generator, tokens: int, d: int):
    x = (rng.standard_normal((tokens, 2 * d)) * 3.0).astype(F16)
    gate, up = x[:, :d].astype(np.float32), x[:, d:].astype(np.float32)
    silu = (gate / (1.0 + np.exp(-gate))).astype(F16).astype(np.float32)
    want = (silu * up).astype(F16)
    grid, block = vllm_launch("swiglu", tokens, d)
    return make_case("vllm_layer_ops.cu", "silu_and_mul_f16", grid, block,
                     [np.zeros((tokens, d), F16), x, d],
                     {0: Expected(want.astype(np.float64), atol=1e-3, rtol=2.0**-9)})


def _rotate(arr: np.ndarray, cos: np.ndarray, sin: np.ndarray, embed: int) -> None:
    """In place, fp16 rounding after each product and sum as the kernel: arr [..., heads,
    head_size], cos/sin [tokens, embed] broadcast over heads."""
    x, y = arr[..., :embed].copy(), arr[..., embed:2 * embed].copy()
    c, s = cos[:, None, :], sin[:, None, :]
    xc, ys = (x * c).astype(F16), (y * s).astype(F16)
    yc, xs = (y * c).astype(F16), (x * s).astype(F16)
    arr[..., :embed] = (xc.astype(np.float32) - ys).astype(F16)
    arr[..., embed:2 * embed] = (yc.astype(np.float32) + xs).astype(F16)


def rotary_neox_f16(rng: np.random.Generator, tokens: int, heads: int, kv_heads: int,
                    head_size: int, rot_dim: int):
    q = rng.standard_normal((tokens, heads, head_size)).astype(F16)
    k = rng.standard_normal((tokens, kv_heads, head_size)).astype(F16)
    positions = rng.permutation(tokens).astype(np.int32)
    cache = rope_cache(tokens, rot_dim)
    embed = rot_dim // 2
    cs = cache[positions].astype(np.float32)
    want_q, want_k = q.copy(), k.copy()
    _rotate(want_q, cs[:, :embed], cs[:, embed:], embed)
    _rotate(want_k, cs[:, :embed], cs[:, embed:], embed)
    grid, block = vllm_launch("rope", tokens, heads * embed)
    return make_case("vllm_layer_ops.cu", "rotary_neox_f16", grid, block,
                     [positions, q, k, cache, rot_dim, heads * head_size,
                      kv_heads * head_size, heads, kv_heads, head_size],
                     {1: Expected(want_q.astype(np.float64), atol=2e-3, rtol=2.0**-8),
                      2: Expected(want_k.astype(np.float64), atol=2e-3, rtol=2.0**-8)})

