"""Grouped GEMM for MoE: the grouped template matches numpy per group (contiguous, masked,
ragged K, DeepSeek scaling), assembles with ptxas, and the op's FLOPs and flags follow
DeepGEMM's conventions."""

from __future__ import annotations

import shutil
import subprocess

import ml_dtypes
import numpy as np
import pytest

import isa
import models
from isa.errors import InputError
from workloads.kernels.templates import gemm_kernel
from workloads.kernels.templates.gemm_groups import grouped_shape, split_even
from workloads.ops import build_op, simulate_op

IN = {"bf16": ml_dtypes.bfloat16, "fp8": ml_dtypes.float8_e4m3fn}

# (kernel arguments, groups, layout, ragged, m, n, k, totals)
CASES = {
    "contiguous-uneven-persistent": (dict(m_tile=64, n_tile=64, persistent=True, sm_count=3),
                                     3, "contiguous", "m", 40, 72, 128, dict(m_total=100)),
    "masked-partial-groups": (dict(m_tile=64, n_tile=64), 3, "masked", "m", 96, 64, 64,
                              dict(valid_m=130)),
    "ragged-k-wgrad": (dict(m_tile=64, n_tile=64, persistent=True, sm_count=2), 3,
                       "contiguous", "k", 64, 64, 128, dict(k_total=448)),
    "fp8-contiguous": (dict(m_tile=64, n_tile=64, k_tile=128, stages=2, dtype="fp8"), 2,
                       "contiguous", "m", 70, 64, 256, {}),
}


def reference(shape, a, b):
    """Each group's C_g = A_g B_g^T in float64, placed as the layout places it."""
    c = np.zeros(shape.c_shape)
    a, b = a.astype(np.float64), b.astype(np.float64)
    for row in shape.schedule(1 << 30):
        a0, b0, c0, valid, k0, _, _, g = (int(v) for v in row)
        rows = min(valid, shape.m_tile)
        kg = shape.k_sizes[g]
        nb = b[b0:b0 + shape.n, k0:k0 + kg]
        c[c0:c0 + rows] = a[a0:a0 + rows, k0:k0 + kg] @ nb.T
    return c


def run_grouped(kernel, shape, seed=0, scales=()):
    rng = np.random.default_rng(seed)
    dtype = IN[kernel.config.dtype]
    a = rng.standard_normal(shape.a_shape).astype(dtype)
    b = rng.standard_normal(shape.b_shape).astype(dtype)
    c = np.zeros(shape.c_shape, ml_dtypes.bfloat16)
    table = shape.schedule(kernel.config.k_tile)
    isa.run_kernel(kernel.ptx, kernel.entry, kernel.grid(0, shape.n, len(table)), kernel.block,
                   kernel.args(a, b, c, *scales, schedule=table),
                   shared_bytes=kernel.shared_bytes)
    return a, b, c


@pytest.mark.parametrize("name", sorted(CASES))
def test_grouped_gemm_matches_per_group_reference(name):
    """Every group's valid rows equal A_g B_g^T (within bf16 output rounding plus f32
    accumulation), padding and invalid rows stay zero."""
    params, groups, layout, ragged, m, n, k, totals = CASES[name]
    kernel = gemm_kernel(grouped=True, **params)
    shape = grouped_shape(groups, layout, ragged, m, n, k, kernel.config.m_tile,
                          kernel.config.k_tile, **totals)
    a, b, c = run_grouped(kernel, shape)
    want = reference(shape, a, b)
    got = c.astype(np.float64)
    bound = 2.0 ** -8 * np.abs(want) + 1e-5 * shape.k_cols
    assert np.all(np.abs(got - want) <= bound), np.max(np.abs(got - want) - bound)
    assert np.count_nonzero(got) > 0.9 * sum(shape.m_sizes) * n


def test_split_even_gives_first_groups_the_remainder():
    """The split is exact and differs by at most one unit, larger first."""
    assert split_even(10, 4) == [3, 3, 2, 2]
    assert sum(split_even(32768, 256)) == 32768


def test_grouped_op_flops_are_2_g_m_n_k():
    """The op's FLOPs are 2·G·M·N·K for equal groups, whatever the layout."""
    cfg = models.load_preset("h800_sxm")
    for layout in ("contiguous", "masked"):
        plan = build_op("gemm", cfg, m=128, n=256, k=512, dtype="e4m3", groups=4,
                        layout=layout, out_dtype="bf16")
        assert plan.flops == 2.0 * 4 * 128 * 256 * 512
        assert plan.sizes["dtype"] == "fp8"
    plan = build_op("gemm", cfg, m=128, n=256, k=512, dtype="bf16", groups=4, ragged="k")
    assert plan.flops == 2.0 * 4 * 128 * 256 * 512


@pytest.mark.parametrize("bad, flag", [
    (dict(layout="padded"), "--layout"), (dict(ragged="n"), "ragged"),
    (dict(layout="masked", valid_m=10 ** 6), "valid_m"),
    (dict(ragged="k", k_total=100), "k_total"), (dict(groups=0), "--groups"),
    (dict(out_dtype="f16"), "out_dtype"),
])
def test_grouped_op_rejects_bad_arguments_by_name(bad, flag):
    """Bad grouped arguments raise InputError naming the flag or key."""
    cfg = models.load_preset("h800_sxm")
    kwargs = {"m": 128, "n": 256, "k": 512, "groups": 2, **bad}
    with pytest.raises(InputError, match=flag):
        build_op("gemm", cfg, **kwargs)


def test_grouped_op_times_more_groups_longer():
    """Four rounds of group tiles on a 4-SM chip take at least three rounds of tensor work
    longer than one round (kernel time alone: no launch overhead; a persistent kernel
    overlaps the next tile's loads with this one's math, so only the math must add up)."""
    cfg = models.load_preset("h800_sxm", {"sm.count": 4, "launch.kernel_overhead_us": 0.0})
    r = [simulate_op(build_op("gemm", cfg, m=128, n=128, k=256, groups=g, shape_only=True),
                     cfg, "full") for g in (4, 16)]
    flop_per_clk = 2 * cfg.units.tensor.bf16_fma_per_clk_per_sm
    tile_us = 2 * 128 * 128 * 256 / flop_per_clk / (r[0]["sm_clock_ghz"] * 1e3)
    assert r[1]["time_us"] - r[0]["time_us"] >= 3 * tile_us
    assert r[1]["time_us"] < 4 * r[0]["time_us"]


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")
@pytest.mark.parametrize("params", [dict(persistent=True), dict(),
                                    dict(dtype="fp8", k_tile=128, fp8_scaling="deepseek",
                                         consumers=2, stages=3, persistent=True,
                                         tile_limit=7)])
def test_grouped_kernel_assembles_with_ptxas(tmp_path, params):
    """The grouped (and tile-limited) variants are PTX that ptxas accepts for sm_90a."""
    kernel = gemm_kernel(grouped=True, **params)
    path = tmp_path / "g.ptx"
    path.write_text(kernel.ptx)
    done = subprocess.run(["ptxas", "-arch=sm_90a", str(path), "-o", str(tmp_path / "g.o")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_grouped_deepseek_scaling_uses_each_groups_scale_blocks():
    """With DeepSeek scaling, group g's tiles read scale_b rows g·ceil(N/128) .. and
    scale_a rows of their own A rows: C_g = Σ_kc (A_g,kc B_g,kcᵀ) · sa[row, kc] · sb[g, n, kc]."""
    kernel = gemm_kernel(grouped=True, m_tile=64, n_tile=128, k_tile=128, stages=2,
                         dtype="fp8", fp8_scaling="deepseek", out_dtype="bf16")
    shape = grouped_shape(2, "contiguous", "m", 64, 128, 256, 64, 128, m_total=100)
    rng = np.random.default_rng(1)
    ks = 2
    sa = rng.uniform(0.5, 2, (shape.a_rows, ks)).astype(np.float32)
    sb = rng.uniform(0.5, 2, (2, ks)).astype(np.float32)
    a, b, c = run_grouped(kernel, shape, seed=2, scales=(sa, sb))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = np.zeros(shape.c_shape)
    for row in shape.schedule(128):
        a0, b0, c0, valid, _, _, sbrow, _ = (int(v) for v in row)
        rows = slice(a0, a0 + min(valid, 64))
        for kc in range(ks):
            cols = slice(128 * kc, 128 * (kc + 1))
            part = a64[rows, cols] @ b64[b0:b0 + 128, cols].T
            want[rows] += part * sa[rows, kc:kc + 1] * sb[sbrow, kc]
    got = c.astype(np.float64)
    bound = 2.0 ** -7 * np.abs(want) + 1e-3
    assert np.all(np.abs(got - want) <= bound), np.max(np.abs(got - want) - bound)
