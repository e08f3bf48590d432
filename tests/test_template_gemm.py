"""The warp-specialized Hopper GEMM template: generated PTX runs through `isa.run_kernel`
and matches numpy; every variant assembles with ptxas; bad arguments are refused."""

from __future__ import annotations

import math
import shutil
import subprocess

import ml_dtypes
import numpy as np
import pytest

import isa
from isa.errors import InputError
from workloads.kernels.templates import gemm_kernel

IN = {"bf16": ml_dtypes.bfloat16, "fp16": np.float16, "fp8": ml_dtypes.float8_e4m3fn,
      "tf32": np.float32}
OUT = {"bf16": ml_dtypes.bfloat16, "f32": np.float32}
UNIT = {"bf16": 2.0 ** -8, "f32": 2.0 ** -24}     # unit roundoff of the output type
K_STEP = {"bf16": 16, "fp16": 16, "fp8": 32, "tf32": 8}

# (generator arguments, M, N, K): edge tiles at M and N, a K with a zero-filled last tile
VARIANTS = {
    "bf16-default-edges": (dict(), 200, 136, 256),
    "bf16-f32-ktail": (dict(m_tile=64, n_tile=64, stages=3, out_dtype="f32"), 128, 72, 160),
    "bf16-2consumers-m256": (dict(m_tile=256, consumers=2), 200, 136, 128),
    "fp16-2consumers-k128": (dict(n_tile=64, k_tile=128, stages=2, dtype="fp16",
                                  consumers=2, out_dtype="f32"), 200, 136, 256),
    "fp8-k128": (dict(k_tile=128, stages=3, dtype="fp8"), 200, 136, 256),
    "tf32-f32": (dict(m_tile=64, n_tile=64, k_tile=32, stages=2, dtype="tf32",
                      out_dtype="f32"), 96, 80, 96),
    "bf16-persistent": (dict(m_tile=64, n_tile=64, persistent=True, sm_count=4),
                        200, 136, 128),
    # narrow tiles of rule "last_wave" at small M (workloads.ops.gemm): 32 and 56 columns
    "bf16-narrow-n32": (dict(m_tile=64, n_tile=32, stages=4), 16, 136, 256),
    "bf16-narrow-n56": (dict(m_tile=64, n_tile=56, stages=4), 16, 120, 128),
    # 2-CTA clusters sharing an A (B) box by multicast; 3 n-blocks (m-blocks): the last pair
    # has a tile outside C; 2 clusters walk the pairs
    "bf16-cluster-multicast-a": (dict(m_tile=64, n_tile=64, stages=3, persistent=True,
                                      sm_count=4, multicast="a"), 200, 136, 256),
    "bf16-cluster-multicast-b": (dict(m_tile=128, n_tile=64, consumers=2, persistent=True,
                                      sm_count=4, multicast="b", out_dtype="f32"),
                                 300, 200, 192),
    # the TMA-store epilogue (C staged in shared memory): edges clipped by the map; atoms
    # of 128 B (swizzle 128), 32 B (n_tile 16: swizzle 32) and 16 B (n_tile 56: none)
    "bf16-tma-edges": (dict(epilogue="tma"), 200, 136, 256),
    "bf16-tma-n16-swizzle32": (dict(m_tile=64, n_tile=16, stages=3, epilogue="tma"),
                               72, 40, 128),
    "bf16-tma-n56-persistent": (dict(m_tile=64, n_tile=56, persistent=True, sm_count=4,
                                     epilogue="tma"), 200, 120, 128),
    "f32-tma-cluster-multicast-b": (dict(m_tile=128, n_tile=64, consumers=2, persistent=True,
                                         sm_count=4, multicast="b", out_dtype="f32",
                                         epilogue="tma"), 300, 200, 192),
}
DEEPSEEK = dict(m_tile=128, n_tile=128, k_tile=128, stages=3, dtype="fp8", consumers=2,
                fp8_scaling="deepseek", out_dtype="f32")


def inputs(dtype: str, m: int, n: int, k: int, seed: int = 0):
    """Random operands exactly representable in `dtype` (tf32: f32 with 13 low bits 0)."""
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((m, k)), rng.standard_normal((n, k))
    if dtype == "tf32":
        cut = lambda x: (x.astype(np.float32).view(np.uint32)  # noqa: E731
                         & np.uint32(0xFFFFE000)).view(np.float32)
        return cut(a), cut(b)
    return a.astype(IN[dtype]), b.astype(IN[dtype])


def run(kernel, a, b, scale_a=None, scale_b=None):
    m, n = a.shape[0], b.shape[0]
    c = np.zeros((m, n), OUT[kernel.config.out_dtype])
    isa.run_kernel(kernel.ptx, kernel.entry, kernel.grid(m, n), kernel.block,
                   kernel.args(a, b, c, scale_a, scale_b), shared_bytes=kernel.shared_bytes)
    return c


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_gemm_matches_float64_reference(name):
    """C = A B^T within a bound that follows from the arithmetic: products of the
    low-precision inputs are exact, each wgmma rounds the f32 running sum once (at most
    K / k_step roundings, each off by <= 2^-24 x the partial sum, bounded by sum |a b|),
    then one rounding to the output type (unit roundoff u of bf16 or f32)."""
    params, m, n, k = VARIANTS[name]
    kernel = gemm_kernel(**params)
    a, b = inputs(kernel.config.dtype, m, n, k)
    got = run(kernel, a, b).astype(np.float64)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    exact = a64 @ b64.T
    acc_err = (k / K_STEP[kernel.config.dtype]) * 2.0 ** -24 * (np.abs(a64) @ np.abs(b64).T)
    tol = acc_err + UNIT[kernel.config.out_dtype] * (np.abs(exact) + acc_err)
    assert np.all(np.abs(got - exact) <= tol), np.max(np.abs(got - exact) - tol)


def deepseek_reference(a, b, scale_a, scale_b):
    """DeepSeek-V3's recipe in numpy, f32 as the kernel does it: per 128-K chunk a fresh
    accumulator (rounded to f32 after each k32 wgmma), then acc = fma(chunk,
    f32(scale_a[row, kc] * scale_b[col // 128, kc]), acc)."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    m, k = a.shape
    n = b.shape[0]
    acc = np.zeros((m, n), np.float32)
    for kc in range(math.ceil(k / 128)):
        chunk = np.zeros((m, n), np.float32)
        for k0 in range(128 * kc, min(128 * kc + 128, k), 32):
            ks = slice(k0, k0 + 32)
            chunk = (chunk.astype(np.float64) + a64[:, ks] @ b64[:, ks].T).astype(np.float32)
        s = scale_a[:, kc][:, None] * np.repeat(scale_b[:, kc], 128)[None, :n]
        acc = (chunk.astype(np.float64) * s.astype(np.float32).astype(np.float64)
               + acc.astype(np.float64)).astype(np.float32)
    return acc


def scaled_fp8(m, n, k, seed=1):
    """Quantize like DeepSeek-V3: A per 1x128 tile, B per 128x128 block, max |x| -> 448."""
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)) * rng.uniform(0.1, 10, (m, 1))
    b = rng.standard_normal((n, k)) * 3
    ks, nb = math.ceil(k / 128), math.ceil(n / 128)
    sa = np.array([[np.abs(a[i, 128 * c:128 * c + 128]).max() / 448 for c in range(ks)]
                   for i in range(m)], np.float32)
    sb = np.array([[np.abs(b[128 * j:128 * j + 128, 128 * c:128 * c + 128]).max() / 448
                    for c in range(ks)] for j in range(nb)], np.float32)
    qa = (a / np.repeat(sa, 128, axis=1)[:, :k]).astype(ml_dtypes.float8_e4m3fn)
    qb = (b / np.repeat(np.repeat(sb, 128, axis=0), 128, axis=1)[:n, :k]).astype(
        ml_dtypes.float8_e4m3fn)
    return qa, qb, sa, sb, a, b


@pytest.mark.parametrize("shape, n_tile", [((200, 136, 384), 128), ((128, 264, 256), 128),
                                          ((64, 200, 256), 64), ((16, 200, 256), 32)])
def test_fp8_deepseek_scaling_matches_the_recipe(shape, n_tile):
    """The promoted f32 result equals the numpy recipe (to a few f32 ulps: the fma of
    the model and of numpy may round differently once in a while), and approximates the
    unquantized product as well as e4m3 allows. N = 264 takes three B scale blocks,
    n_tile 64 half of one, n_tile 32 a quarter (n_tile 256 does not fit the registers,
    `fits_registers`)."""
    m, n, k = shape
    qa, qb, sa, sb, a, b = scaled_fp8(m, n, k)
    got = run(gemm_kernel(**{**DEEPSEEK, "n_tile": n_tile}), qa, qb, sa, sb)
    want = deepseek_reference(qa, qb, sa, sb)
    np.testing.assert_allclose(got, want, rtol=2.0 ** -21, atol=1e-6)
    exact = a @ b.T
    assert np.abs(got - exact).max() < 0.1 * np.abs(exact).max()


def test_fp8_deepseek_scaling_with_two_consumers_and_persistent_tiles():
    """Cooperative consumers and a persistent tile loop give the same promoted result."""
    qa, qb, sa, sb, _, _ = scaled_fp8(200, 136, 256, seed=2)
    base = run(gemm_kernel(**DEEPSEEK), qa, qb, sa, sb)
    other = run(gemm_kernel(**{**DEEPSEEK, "consumers": 2, "persistent": True,
                               "sm_count": 3}), qa, qb, sa, sb)
    np.testing.assert_array_equal(base, other)


@pytest.mark.parametrize("multicast", ["a", "b"])
def test_fp8_deepseek_scaling_in_clusters_gives_identical_c(multicast):
    """Pairs of CTAs sharing a box by multicast promote exactly as one CTA per tile."""
    qa, qb, sa, sb, _, _ = scaled_fp8(200, 328, 256, seed=4)
    base = run(gemm_kernel(**DEEPSEEK), qa, qb, sa, sb)
    pair = run(gemm_kernel(**{**DEEPSEEK, "consumers": 2, "persistent": True, "sm_count": 4,
                              "multicast": multicast}), qa, qb, sa, sb)
    np.testing.assert_array_equal(base, pair)


def test_cluster_kernel_grid_and_directive():
    """A cluster kernel launches pairs of CTAs (at most sm_count // 2 clusters) and says
    so in `.reqnctapercluster`."""
    k = gemm_kernel(m_tile=64, n_tile=32, persistent=True, multicast="a")
    assert k.grid(128, 4096) == (132, 1, 1)      # 2 x 128 tiles: 128 pairs > 66 clusters
    assert k.grid(64, 4096) == (128, 1, 1)       # 64 pairs
    assert k.grid(64, 96) == (4, 1, 1)           # 3 n-blocks: 2 pairs
    limited = gemm_kernel(m_tile=64, n_tile=32, persistent=True, multicast="a", tile_limit=7)
    assert limited.grid(128, 4096) == (8, 1, 1)  # the first ceil(7 / 2) pairs
    assert ".reqnctapercluster 2, 1, 1" in k.ptx and ".multicast::cluster" in k.ptx


def test_fp8_deepseek_scaling_with_k_tiles_of_two_chunks_and_a_k_bound():
    """k_tile 256 (two scale chunks per stage, a partial last k-tile) matches the recipe;
    a kernel generated for a smaller k_max refuses the K (its staged scale_b would not
    fit) and names the bound."""
    qa, qb, sa, sb, _, _ = scaled_fp8(136, 200, 384, seed=3)
    got = run(gemm_kernel(**{**DEEPSEEK, "k_tile": 256, "persistent": True, "sm_count": 2,
                             "k_max": 384}), qa, qb, sa, sb)
    np.testing.assert_allclose(got, deepseek_reference(qa, qb, sa, sb), rtol=2.0 ** -21,
                               atol=1e-6)
    small = gemm_kernel(**{**DEEPSEEK, "k_max": 256})
    with pytest.raises(InputError, match="K = 384.*up to 256"):
        small.args(qa, qb, np.zeros((136, 200), np.float32), sa, sb)


@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_persistent_and_one_cta_per_tile_give_identical_c(dtype):
    """3 CTAs walking 12 tiles (the stage ring carried across tiles) == 12 CTAs."""
    params = dict(m_tile=64, n_tile=64, k_tile=128 if dtype == "fp8" else 64, stages=3,
                  dtype=dtype, out_dtype="f32")
    a, b = inputs(dtype, 200, 136, 256, seed=5)
    one = gemm_kernel(**params)
    per = gemm_kernel(**params, persistent=True, sm_count=3)
    assert one.grid(200, 136) == (4, 3, 1) and per.grid(200, 136) == (3, 1, 1)
    np.testing.assert_array_equal(run(one, a, b), run(per, a, b))


def test_kernel_shape_and_shared_memory_layout():
    """block = 128 x (consumers + 1); shared = stages x (A + B boxes) + 2 x 8 B barriers."""
    k = gemm_kernel(m_tile=128, n_tile=128, k_tile=64, stages=4, consumers=2)
    assert k.block == (384, 1, 1)
    assert k.shared_bytes == 4 * (128 * 64 * 2 + 128 * 64 * 2) + 4 * 16
    assert gemm_kernel(persistent=True).grid(4096, 4096) == (132, 1, 1)
    assert ".target sm_90a" in k.ptx and "setmaxnreg.dec" in k.ptx and "elect.sync" in k.ptx


ALL_VARIANTS = [p for p, *_ in VARIANTS.values()] + [
    DEEPSEEK, {**DEEPSEEK, "persistent": True},
    {**DEEPSEEK, "m_tile": 64, "n_tile": 32, "consumers": 1},
    dict(m_tile=128, n_tile=256, k_tile=64, stages=3, consumers=2),
    dict(n_tile=256, k_tile=128, stages=4, dtype="fp8", consumers=2, persistent=True),
    {**DEEPSEEK, "consumers": 2, "persistent": True, "multicast": "a"},
    dict(m_tile=64, n_tile=32, stages=6, persistent=True, multicast="a"),
    {**DEEPSEEK, "consumers": 2, "persistent": True, "multicast": "a", "epilogue": "tma",
     "out_dtype": "bf16"},
    dict(n_tile=256, k_tile=128, stages=3, dtype="fp8", consumers=2, persistent=True,
         epilogue="tma"),
    dict(m_tile=128, n_tile=256, k_tile=64, stages=4, consumers=2, persistent=True,
         epilogue="tma"),
    dict(m_tile=128, n_tile=256, k_tile=64, stages=3, consumers=2, persistent=True,
         epilogue="tma", c_buffers=3),
]


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")
@pytest.mark.parametrize("params", ALL_VARIANTS, ids=lambda p: gemm_kernel(**p).entry)
def test_generated_kernel_assembles_with_ptxas(params, tmp_path):
    """Every generated variant is real sm_90a PTX, with no spills."""
    path = tmp_path / "gemm.ptx"
    path.write_text(gemm_kernel(**params).ptx)
    r = subprocess.run(["ptxas", "-arch=sm_90a", "-v", str(path), "-o", str(tmp_path / "k")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "setmaxnreg' ignored" not in r.stderr
    assert " 0 bytes spill stores" in r.stderr, r.stderr


@pytest.mark.parametrize("params, names", [
    (dict(m_tile=96), ["m_tile", "multiple of 64"]),
    (dict(m_tile=64, consumers=2), ["m_tile", "multiple of 128"]),
    (dict(n_tile=100), ["n_tile", "multiple of 8"]),
    (dict(n_tile=264), ["n_tile", "8 to 256"]),
    (dict(k_tile=48), ["k_tile", "multiple of 64"]),
    (dict(k_tile=64, dtype="fp8"), ["k_tile", "multiple of 128"]),
    (dict(stages=1), ["stages", ">= 2"]),
    (dict(m_tile=256, n_tile=128, consumers=2, stages=5), ["stages", "232448 bytes"]),
    (dict(dtype="int8"), ["dtype", "bf16, fp16, fp8, tf32"]),
    (dict(out_dtype="f16"), ["out_dtype", "bf16, f32"]),
    (dict(consumers=3), ["consumers", "1 or 2"]),
    (dict(fp8_scaling="deepseek"), ["fp8_scaling", "dtype='fp8'"]),
    (dict(fp8_scaling="mx"), ["fp8_scaling", "'deepseek'"]),
    (dict(dtype="fp8", k_tile=128, fp8_scaling="deepseek", n_tile=256, consumers=2),
     ["n_tile", "at most 200", "spill"]),
    (dict(multicast="c", persistent=True), ["multicast", "'a' or 'b'"]),
    (dict(multicast="a"), ["multicast", "persistent=True"]),
    (dict(multicast="b", n_tile=24, persistent=True), ["n_tile", "multiple of 16"]),
    (dict(epilogue="smem"), ["epilogue", "'registers' or 'tma'"]),
    (dict(epilogue="tma", grouped=True, persistent=True), ["epilogue", "grouped=True"]),
    (dict(epilogue="tma", stages=7), ["stages", "C staging 16384 B"]),
    (dict(epilogue="tma", c_buffers=-1), ["c_buffers", ">= 1"]),
])
def test_generator_rejects_bad_arguments_naming_accepted_values(params, names):
    with pytest.raises(InputError) as err:
        gemm_kernel(**params)
    for word in names:
        assert word in str(err.value)


def test_args_rejects_mismatched_arrays():
    k = gemm_kernel(m_tile=64, n_tile=64)
    a, b = inputs("bf16", 64, 64, 128)
    with pytest.raises(InputError, match="c \\[M, N\\]"):
        k.args(a, b, np.zeros((64, 32), ml_dtypes.bfloat16))
    with pytest.raises(InputError, match="bfloat16"):
        k.args(a.astype(np.float32), b, np.zeros((64, 64), ml_dtypes.bfloat16))
    ds = gemm_kernel(**DEEPSEEK)
    qa, qb, *_ = scaled_fp8(64, 64, 128)
    with pytest.raises(InputError, match="scale_a"):
        ds.args(qa, qb, np.zeros((64, 64), np.float32))


def test_tma_store_epilogue_writes_what_the_register_epilogue_writes():
    """DeepSeek scaling, persistent 2-CTA clusters: C through shared memory and TMA stores is
    bit for bit C from the fragments, and the kernel's last map argument covers C."""
    qa, qb, sa, sb, *_ = scaled_fp8(200, 136, 384)
    params = {**DEEPSEEK, "persistent": True, "sm_count": 4, "multicast": "a"}
    base = run(gemm_kernel(**params), qa, qb, sa, sb)
    tma = run(gemm_kernel(**params, epilogue="tma"), qa, qb, sa, sb)
    assert np.array_equal(base, tma)


@pytest.mark.parametrize("params", [
    dict(m_tile=64, n_tile=128, persistent=True, sm_count=4, c_buffers=2),
    dict(m_tile=64, n_tile=128, persistent=True, sm_count=4, c_buffers=3),
    dict(m_tile=64, n_tile=128, persistent=True, sm_count=4, c_buffers=0),
    dict(m_tile=128, n_tile=256, consumers=2, stages=4),
], ids=["4-atoms-2-slots", "4-atoms-3-slots", "whole-tile", "n256-4-stages"])
def test_tma_store_sub_tiles_write_what_the_register_epilogue_writes(params):
    """C staged in sub-tiles (one-atom slots reused round-robin, across a persistent CTA's
    tiles too; with slots that the atoms do not fill evenly) or whole is bit for bit C from
    the fragments; a 128 x 256 bf16 tile keeps 4 stages beside two 32-column slots."""
    a, b = inputs("bf16", 200, 136, 192)
    regs = {k: v for k, v in params.items() if k != "c_buffers"}
    tma = gemm_kernel(**params, epilogue="tma")
    assert np.array_equal(run(gemm_kernel(**regs), a, b), run(tma, a, b))
    if "c_buffers" not in params:
        assert tma.config.c_bytes == 2 * 128 * 64 and "_sub2x32" in tma.entry


def test_tma_store_epilogue_refuses_rows_of_c_that_tma_cannot_stride():
    """C rows must be 16-byte multiples for a tensor map: N = 36 bf16 is refused by name."""
    k = gemm_kernel(m_tile=64, n_tile=64, epilogue="tma")
    a, b = inputs("bf16", 64, 36, 128)
    with pytest.raises(InputError, match="16 bytes"):
        k.args(a, b, np.zeros((64, 36), ml_dtypes.bfloat16))
