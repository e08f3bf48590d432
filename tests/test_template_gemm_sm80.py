"""The multistage Ampere GEMM template: generated PTX has only sm_80 instructions, runs through
`isa.run_kernel` and matches numpy at odd sizes, assembles with `ptxas -arch=sm_80` with no
spill at the register counts the launch uses, and is what the gemm op runs on a100_sxm."""

from __future__ import annotations

import re
import shutil
import subprocess

import ml_dtypes
import numpy as np
import pytest

import isa
import models
from isa.errors import InputError
from isa.targets import verify_target
from workloads.kernels.templates.gemm_sm80 import (
    PTXAS_REGISTERS,
    REDUCE_REGISTERS,
    gemm_sm80_kernel,
    splitk_reduce_kernel,
)
from workloads.ops.gemm_sm80 import STAGES, choose_split_k, choose_tiles
from workloads.ops.registry import build_op, simulate_op

IN = {"bf16": ml_dtypes.bfloat16, "fp16": np.float16}
OUT = {"bf16": ml_dtypes.bfloat16, "f32": np.float32}
UNIT = {"bf16": 2.0 ** -8, "f32": 2.0 ** -24}     # unit roundoff of the output type

# (generator arguments, M, N, K): edge tiles in M and N, K tails that zero-fill a k-tile
VARIANTS = {
    "bf16-128x128-s4-edges": (dict(), 200, 136, 88),
    "bf16-64x64-s3-f32-odd": (dict(m_tile=64, n_tile=64, stages=3, out_dtype="f32"),
                              77, 45, 40),
    "fp16-128x128-s5-odd-n": (dict(dtype="fp16", stages=5), 130, 131, 96),
    "bf16-64x128-s2-one-ktile": (dict(m_tile=64, stages=2), 64, 257, 32),
    "bf16-128x64-s8-more-stages-than-ktiles": (dict(n_tile=64, stages=8), 129, 64, 64),
    # CTA rasterization: 7 and 3 n-tiles, so some CTAs of the last column group exit at once
    "bf16-64x64-s3-swizzle8-idle-ctas": (dict(m_tile=64, n_tile=64, stages=3, swizzle_log=3),
                                         130, 7 * 64 - 5, 40),
    "fp16-128x64-s4-swizzle2": (dict(dtype="fp16", n_tile=64, swizzle_log=1), 260, 150, 64),
    # 64-element k-tiles (128-byte rows, the r & 7 swizzle): K tails inside the second and
    # fourth k16 steps, edge tiles, more stages than k-tiles, rasterized idle CTAs
    "bf16-128x128-k64-s3-edges": (dict(k_tile=64, stages=3), 200, 136, 88),
    "bf16-64x64-k64-s3-f32-odd": (dict(k_tile=64, m_tile=64, n_tile=64, stages=3,
                                       out_dtype="f32"), 77, 45, 40),
    "fp16-128x128-k64-s3-odd-n": (dict(k_tile=64, dtype="fp16", stages=3), 130, 131, 168),
    "bf16-64x128-k64-s5-more-stages-than-ktiles": (dict(k_tile=64, m_tile=64, stages=5),
                                                   64, 257, 128),
    "bf16-128x64-k64-s2-swizzle8-idle-ctas": (dict(k_tile=64, n_tile=64, stages=2,
                                                   swizzle_log=3), 129, 7 * 64 - 5, 72),
}


def _check_product(a, b, c, out_dtype: str) -> None:
    """C within its rounding plus f32 accumulation error of the exact product."""
    exact = a.astype(np.float64) @ b.astype(np.float64).T
    bound = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)).T
    k = a.shape[1]
    err = np.abs(c.astype(np.float64) - exact)
    assert np.all(err <= UNIT[out_dtype] * np.abs(exact) + k * 2.0 ** -24 * bound)


@pytest.mark.parametrize("name", VARIANTS)
def test_generated_kernel_matches_numpy_on_sm80(name):
    """Every variant verifies on sm_80 and its C equals A B^T within rounding."""
    kwargs, m, n, k = VARIANTS[name]
    kernel = gemm_sm80_kernel(**kwargs)
    cfg = kernel.config
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(IN[cfg.dtype])
    b = rng.standard_normal((n, k)).astype(IN[cfg.dtype])
    c = np.zeros((m, n), OUT[cfg.out_dtype])
    isa.run_kernel(kernel.ptx, kernel.entry, kernel.grid(m, n), kernel.block,
                   kernel.args(a, b, c), kernel.shared_bytes, target="sm_80")
    _check_product(a, b, c, cfg.out_dtype)


# (generator arguments, M, N, K, slices, reduce output): uneven and empty slices, both vectors
SPLIT_VARIANTS = {
    "64x128-s3-3-slices-odd-bf16": (dict(m_tile=64, stages=3), 70, 130, 200, 3, "bf16"),
    "128x64-s4-4-slices-f32": (dict(n_tile=64, stages=4, swizzle_log=1), 129, 64, 520, 4, "f32"),
    # 3 k-tiles over 4 slices: the last slice is empty and writes zeros
    "64x64-s2-empty-slice": (dict(m_tile=64, n_tile=64, stages=2), 64, 48, 96, 4, "bf16"),
    "64x128-k64-s3-3-slices-odd-bf16": (dict(m_tile=64, stages=3, k_tile=64), 70, 130, 520, 3,
                                        "bf16"),
}


@pytest.mark.parametrize("name", SPLIT_VARIANTS)
def test_split_k_slices_and_reduction_match_numpy(name):
    """Each K slice writes its partial product to the f32 workspace, the slices sum to A B^T
    in f32, and the reduction writes that sum to C within C's rounding."""
    kwargs, m, n, k, splits, out = SPLIT_VARIANTS[name]
    kernel = gemm_sm80_kernel(out_dtype="f32", split_k=True, **kwargs)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((m, k)).astype(IN["bf16"])
    b = rng.standard_normal((n, k)).astype(IN["bf16"])
    workspace = np.full((splits, m, n), np.nan, np.float32)
    isa.run_kernel(kernel.ptx, kernel.entry, kernel.grid(m, n, splits), kernel.block,
                   kernel.args(a, b, workspace), kernel.shared_bytes, target="sm_80")
    _check_product(a, b, workspace.sum(axis=0), "f32")
    reduce = splitk_reduce_kernel(out, 4 if m * n % 4 == 0 else 1)
    c = np.zeros((m, n), OUT[out])
    isa.run_kernel(reduce.ptx, reduce.entry, reduce.grid(m, n), reduce.block,
                   reduce.args(workspace, c), 0, target="sm_80")
    _check_product(a, b, c, out)


def test_split_k_needs_an_f32_workspace_and_a_split_kernel():
    """A split kernel writes f32 partial sums only; an unsplit kernel takes no slices."""
    with pytest.raises(InputError, match="accepted f32"):
        gemm_sm80_kernel(split_k=True)
    with pytest.raises(InputError, match="has no K slices"):
        gemm_sm80_kernel().grid(128, 128, 2)


@pytest.mark.parametrize("k_tile", [32, 64])
def test_instructions_are_the_ampere_ones(k_tile):
    """cp.async ring, ldmatrix, mma.sync m16n8k16 and nothing of Hopper (.target sm_80); a
    64-element k-tile runs 4 k16 steps (128 mma a warp a k-tile), a 32-element one 2."""
    kernel = gemm_sm80_kernel(k_tile=k_tile)
    ptx = kernel.ptx
    assert ".target sm_80" in ptx and f"k{k_tile}_s4" in kernel.entry
    for needed in ("cp.async.cg.shared.global", "cp.async.wait_group 2",
                   "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
                   "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"):
        assert needed in ptx
    assert ptx.count("mma.sync") == 32 * k_tile // 16
    assert kernel.shared_bytes == 4 * 256 * 2 * k_tile
    for hopper in ("wgmma", "mbarrier", "cp.async.bulk", "setmaxnreg", "elect"):
        assert hopper not in ptx
    verify_target(isa.compile_kernel(ptx, kernel.entry), "sm_80")


def _ptxas_sm80(ptx: str, tmp_path) -> tuple[str, int]:
    """ptxas -arch=sm_80 -v of `ptx`: (its report, the registers it used)."""
    path = tmp_path / "kernel.ptx"
    path.write_text(ptx)
    out = subprocess.run(["ptxas", "-arch=sm_80", "-v", str(path), "-o", "/dev/null"],
                         capture_output=True, text=True, check=True, timeout=300).stderr
    return out, int(re.search(r"Used (\d+) registers", out).group(1))


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not on PATH")
@pytest.mark.parametrize("tiles", sorted(PTXAS_REGISTERS))
def test_ptxas_sm80_assembles_without_spills_at_the_listed_registers(tiles, tmp_path):
    """ptxas -arch=sm_80 -v at the op's stage count for the k-tile: no spill stores or loads,
    the register count PTXAS_REGISTERS gives the launch (k_tile 64: the most over stage
    counts, so within 2 of it), and the rasterized grid needs no more."""
    m_tile, n_tile, k_tile = tiles
    for swizzle in (0, 3):
        kernel = gemm_sm80_kernel(m_tile, n_tile, stages=STAGES[k_tile], k_tile=k_tile,
                                  swizzle_log=swizzle)
        out, used = _ptxas_sm80(kernel.ptx, tmp_path)
        assert "0 bytes spill stores, 0 bytes spill loads" in out
        assert used <= kernel.registers
        if swizzle == 0:
            assert used == kernel.registers if k_tile == 32 else used >= kernel.registers - 2


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not on PATH")
def test_ptxas_sm80_assembles_split_k_kernels_without_spills(tmp_path):
    """ptxas -arch=sm_80 -v: the split-K GEMMs spill nothing within the unsplit kernels'
    registers; the reductions spill nothing at REDUCE_REGISTERS."""
    kernels = [gemm_sm80_kernel(m, n, stages=STAGES[k], k_tile=k, out_dtype="f32",
                                swizzle_log=3, split_k=True)
               for m, n, k in sorted(PTXAS_REGISTERS)]
    kernels += [splitk_reduce_kernel(*key) for key in sorted(REDUCE_REGISTERS)]
    for kernel in kernels:
        out, used = _ptxas_sm80(kernel.ptx, tmp_path)
        assert "0 bytes spill stores, 0 bytes spill loads" in out
        assert used <= kernel.registers if hasattr(kernel, "config") else used == kernel.registers


def test_split_k_rule_fills_one_wave_of_cta_slots():
    """K slices = min(CTA slots // output tiles, k-tiles // (4 stages)), split from 2: on
    a100_sxm 96 tiles of 2-per-SM kernels against 216 slots give 2; 192 tiles, or a K under
    40 rings of 32, none."""
    a100 = models.load_preset("a100_sxm")
    assert choose_split_k(64, 12288, 12288, 64, 128, 5, a100) == 216 // 96
    assert choose_split_k(128, 12288, 12288, 128, 128, 5, a100) == 2
    assert choose_split_k(256, 12288, 12288, 128, 128, 5, a100) == 1
    assert choose_split_k(128, 12288, 1024, 128, 128, 5, a100) == 1      # 32 k-tiles < 40
    # one tile: the slices are bounded by K, 2048 / 32 / 20 = 3
    assert choose_split_k(50, 70, 2048, 64, 128, 5, a100) == 3


def test_gemm_op_splits_k_and_reduces_into_c():
    """A one-tile GEMM with a long K runs as 3 K slices of 32-element k-tiles (2048 / 32 / 20)
    and a reduction on a100_sxm, and the simulated launches write A B^T to C."""
    a100 = models.load_preset("a100_sxm")
    plan = build_op("gemm", a100, m=50, n=71, k=2048, k_tile=32)
    gemm, reduce = plan.launches
    assert gemm.grid[2] == 3 and gemm.entry.endswith("_splitk")
    assert reduce.entry == "gemm_sm80_splitk_reduce_f32_bf16_v1"      # 50 x 71: not 4-aligned
    simulate_op(plan, a100, "full")
    a, b = gemm.args[:2]
    _check_product(a, b, reduce.args[1], "bf16")


def test_swizzle_follows_cutlass_log_tile_and_grid_shape():
    """`swizzle_log` is CUTLASS's get_log_tile for Identity8 (3 from 6 n-tiles, 2 from 3, 1
    from 2); the grid holds every tile once, in runs of 2^s n-tiles per m-tile."""
    from workloads.kernels.templates.gemm_sm80 import swizzle_log
    assert [swizzle_log(n) for n in (1, 2, 3, 5, 6, 96)] == [0, 1, 2, 2, 3, 3]
    kernel = gemm_sm80_kernel(swizzle_log=3)
    assert kernel.grid(1000, 7 * 128) == (8 * 8, 1, 1)
    assert kernel.entry.endswith("_sw8") and "@%p0 exit;" in kernel.ptx


@pytest.mark.parametrize("kwargs, accepted", [
    (dict(dtype="fp8"), "bf16, fp16"), (dict(out_dtype="f16"), "bf16, f32"),
    (dict(m_tile=256), "64, 128"), (dict(stages=1), "2 .. 8"), (dict(k_tile=128), "32, 64")])
def test_bad_arguments_are_refused(kwargs, accepted):
    """A choice the template does not have names what it has."""
    with pytest.raises(InputError, match=accepted):
        gemm_sm80_kernel(**kwargs)


def test_gemm_op_on_a100_runs_the_ampere_template_and_computes_c():
    """On a100_sxm the gemm op launches the sm_80 template (4 output tiles, under the 108
    SMs: 64-element k-tiles by the default "one_wave"), and the simulated launch writes
    A B^T."""
    a100 = models.load_preset("a100_sxm")
    plan = build_op("gemm", a100, m=200, n=136, k=88)
    launch = plan.launches[0]
    assert launch.detail["template"] == "gemm_sm80_cpasync_mma"
    assert launch.entry == "gemm_sm80_bf16_bf16_m128n128k64_s3_sw2"     # 2 n-tiles
    res = simulate_op(plan, a100, "full")
    assert res["kernel"]["ptx_target"] == "sm_80"
    a, b, c = launch.args[:3]
    _check_product(a, b, c, "bf16")


@pytest.mark.parametrize("sizes, what", [
    ({"dtype": "fp8"}, "--dtype fp8"), ({"dtype": "tf32"}, "--dtype tf32"),
    ({"groups": 4}, "a grouped GEMM")])
def test_what_the_sm80_template_lacks_is_refused_naming_it(sizes, what):
    """fp8, tf32 and grouped GEMMs on a100_sxm: an InputError naming the op and target."""
    with pytest.raises(InputError, match=rf"op gemm on ISA target sm_80: {what} has no "
                       "kernel template there"):
        build_op("gemm", models.load_preset("a100_sxm"),
                 **{"m": 256, "n": 256, "k": 256, **sizes})


def test_sampled_gemm_cuts_k_and_reads_the_full_run():
    """Unsplit, a long K is cut to 12 and 48 k-tiles (two reduced launches, linear in the k-tiles):
    512x512x4096 on a100_sxm reads the full run's time within 1 % (measured 86.948 against
    87.009 µs) and its HBM bytes; a short K runs as it is."""
    config = models.load_preset("a100_sxm")
    plan = build_op("gemm", config, m=512, n=512, k=4096, dtype="bf16", split_k=1, k_tile=32)
    assert [launch.args[-1] for _, launch in plan.samples] == [12 * 32, 48 * 32]
    assert sum(w for w, _ in plan.samples) == pytest.approx(1.0)
    sampled = simulate_op(plan, config, "sampled")
    full = simulate_op(plan, config, "full")
    assert sampled["fidelity_method"] == "op_model" and full["fidelity_method"] == "full"
    assert sampled["time_us"] == pytest.approx(full["time_us"], rel=0.01)
    assert sampled["hbm_bytes"] == pytest.approx(full["hbm_bytes"], rel=0.01)
    assert not build_op("gemm", config, m=512, n=512, k=1024, dtype="bf16",
                        k_tile=32).samples


def test_sampled_split_k_gemm_cuts_each_slice_and_reads_the_full_run():
    """With 2 K slices of 96 k-tiles the reduced launches cut each slice to 12 and 48 k-tiles
    (K 768 and 3072) and the reduction runs as it is: 64x12288x6144 on a100_sxm reads the
    full run within 2 % (measured 171.42 against 168.66 µs)."""
    config = models.load_preset("a100_sxm")
    plan = build_op("gemm", config, m=64, n=12288, k=6144, dtype="bf16", k_tile=32)
    assert [launch.args[-1] for _, launch in plan.samples] == [768, 3072, 2]
    assert plan.samples[-1][1] is plan.launches[1]
    sampled = simulate_op(plan, config, "sampled")
    full = simulate_op(plan, config, "full")
    assert sampled["time_us"] == pytest.approx(full["time_us"], rel=0.02)


def test_k_tile_rule_takes_the_named_depth_or_64_where_one_cta_an_sm_holds_the_grid():
    """kernels.gemm_sm80_k_tile: "32" and "64" everywhere, with 5 and 3 stages; "one_wave" 64
    where the output tiles are at most the 108 compute SMs of a100_sxm (96 tiles of
    128 x 12288; 64 of 8192 x 128), 32 from 109 (16 x 12 = 192 tiles of 256 x 12288)."""
    def pick(rule, m, n, k):
        config = models.load_preset("a100_sxm", {"kernels.gemm_sm80_k_tile": rule})
        tiles = choose_tiles(m, n, k, config)
        return tiles["k_tile"], tiles["stages"]
    assert pick("32", 128, 12288, 12288) == (32, 5)
    assert pick("64", 4096, 12288, 12288) == (64, 3)
    assert pick("one_wave", 128, 12288, 12288) == (64, 3)
    assert pick("one_wave", 8192, 128, 128) == (64, 3)
    assert pick("one_wave", 256, 12288, 12288) == (32, 5)
    with pytest.raises(InputError, match="k_tile 48: the sm_80 GEMM template takes 32, 64"):
        choose_tiles(128, 128, 128, models.load_preset("a100_sxm"), 48)
