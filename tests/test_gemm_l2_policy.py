"""L2 cache policies on the Hopper GEMM template's TMA loads (`kernels.gemm_l2_policy`):
"stream_weights" changes no result, assembles with ptxas, reaches the op from the config,
and keeps the re-read activations in a small L2 while the weights stream past."""

from __future__ import annotations

import shutil
import subprocess

import ml_dtypes
import numpy as np
import pytest

import isa
import models
import simulator
from isa.errors import InputError
from workloads.kernels.templates import gemm_kernel
from workloads.kernels.templates.gemm_groups import grouped_shape
from workloads.ops import build_op

DEEPSEEK = dict(m_tile=128, n_tile=128, k_tile=128, stages=3, dtype="fp8", consumers=2,
                fp8_scaling="deepseek", out_dtype="f32")
VARIANTS = {   # (generator arguments, M, N, K): edge tiles, clusters, both epilogues
    "bf16-edges": (dict(), 200, 136, 256),
    "bf16-tma-persistent": (dict(m_tile=64, n_tile=56, persistent=True, sm_count=4,
                                 epilogue="tma"), 200, 120, 128),
    "bf16-cluster-multicast-a": (dict(m_tile=64, n_tile=64, stages=3, persistent=True,
                                      sm_count=4, multicast="a"), 200, 136, 256),
    "f32-cluster-multicast-b": (dict(m_tile=128, n_tile=64, consumers=2, persistent=True,
                                     sm_count=4, multicast="b", out_dtype="f32",
                                     epilogue="tma"), 300, 200, 192),
    "fp8-deepseek-persistent": ({**DEEPSEEK, "persistent": True, "sm_count": 3},
                                200, 136, 256),
}
# the effect test's chip: 16 compute SMs (116 of h800_sxm's 132 reserved) and an L2 of
# 4,096,000 B (80 slices x 20 ways x 20 sets of 128-byte lines)
SMALL_CHIP = {"sm.comm_count": 116, "l2.size_bytes": 4096000}
SECTOR_BYTES = 32


def _run(kernel, m, n, k, seed=0):
    """C of `kernel` on random operands (DeepSeek: with random block scales), and A, B."""
    rng = np.random.default_rng(seed)
    dtype = {"fp8": ml_dtypes.float8_e4m3fn}.get(kernel.config.dtype, ml_dtypes.bfloat16)
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((n, k)).astype(dtype)
    scales = ()
    if kernel.config.fp8_scaling:
        ks = -(-k // 128)
        scales = (rng.uniform(0.5, 2, (m, ks)).astype(np.float32),
                  rng.uniform(0.5, 2, (-(-n // 128), ks)).astype(np.float32))
    out = {"bf16": ml_dtypes.bfloat16, "f32": np.float32}[kernel.config.out_dtype]
    c = np.zeros((m, n), out)
    isa.run_kernel(kernel.ptx, kernel.entry, kernel.grid(m, n), kernel.block,
                   kernel.args(a, b, c, *scales), shared_bytes=kernel.shared_bytes)
    return c, a, b


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_stream_weights_writes_the_same_c_bit_for_bit(name):
    """A cache policy only steers the L2: C equals the unhinted kernel's exactly."""
    params, m, n, k = VARIANTS[name]
    plain, _, _ = _run(gemm_kernel(**params), m, n, k)
    hinted, _, _ = _run(gemm_kernel(**params, l2_policy="stream_weights"), m, n, k)
    np.testing.assert_array_equal(plain, hinted)


def test_stream_weights_matches_numpy():
    """C = A B^T within bf16 output rounding plus f32 accumulation (K / 16 wgmma sums)."""
    c, a, b = _run(gemm_kernel(l2_policy="stream_weights"), 200, 136, 256)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    exact = a64 @ b64.T
    acc = (256 / 16) * 2.0 ** -24 * (np.abs(a64) @ np.abs(b64).T)
    assert np.all(np.abs(c.astype(np.float64) - exact) <= acc + 2.0 ** -8 * (np.abs(exact) + acc))


def test_grouped_stream_weights_writes_the_same_c_bit_for_bit():
    """The grouped (MoE) template under "stream_weights" writes every group's C as without."""
    params = dict(m_tile=64, n_tile=64, persistent=True, sm_count=3, grouped=True)
    shape = grouped_shape(3, "contiguous", "m", 40, 72, 128, 64, 64, m_total=100)
    rng = np.random.default_rng(0)
    a = rng.standard_normal(shape.a_shape).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal(shape.b_shape).astype(ml_dtypes.bfloat16)
    outs = []
    for policy in ("normal", "stream_weights"):
        kernel = gemm_kernel(**params, l2_policy=policy)
        c = np.zeros(shape.c_shape, ml_dtypes.bfloat16)
        table = shape.schedule(kernel.config.k_tile)
        isa.run_kernel(kernel.ptx, kernel.entry, kernel.grid(0, shape.n, len(table)),
                       kernel.block, kernel.args(a, b, c, schedule=table),
                       shared_bytes=kernel.shared_bytes)
        outs.append(c)
    np.testing.assert_array_equal(*outs)
    assert np.count_nonzero(outs[1]) > 0


def test_stream_weights_hints_every_operand_load_once_built():
    """Two createpolicy (A evict_last, B evict_first) before the k-loop; every global ->
    shared TMA load carries .L2::cache_hint with its operand's policy last; "normal"
    emits neither."""
    params = {**DEEPSEEK, "persistent": True, "multicast": "b"}
    hinted = gemm_kernel(**params, l2_policy="stream_weights").ptx
    body = hinted.split("PRODUCER:")[1]
    head, loop = body.split("P_K:")
    assert sorted(line.split()[0] for line in head.splitlines() if "createpolicy" in line) \
        == ["createpolicy.fractional.L2::evict_first.b64",
            "createpolicy.fractional.L2::evict_last.b64"]
    loads = [line for line in loop.splitlines() if ".shared::cluster.global." in line]
    assert len(loads) == 3 and all(".L2::cache_hint" in line for line in loads)
    assert [line.rstrip(";").split(", ")[-1] for line in loads] == ["%pola", "%polb", "%pola"]
    plain = gemm_kernel(**params).ptx
    assert "createpolicy" not in plain and "cache_hint" not in plain


def test_bad_l2_policy_is_refused_naming_the_accepted_values():
    with pytest.raises(InputError, match="l2_policy.*'normal', 'stream_weights'"):
        gemm_kernel(l2_policy="evict_first")


PTXAS_VARIANTS = [
    dict(m_tile=128, n_tile=256, consumers=2, persistent=True, epilogue="tma"),
    dict(m_tile=128, n_tile=128, consumers=2, persistent=True, multicast="a",
         epilogue="tma"),
    dict(m_tile=128, n_tile=64, consumers=2, persistent=True, multicast="b"),
    {**DEEPSEEK, "persistent": True},
    dict(m_tile=128, n_tile=128, consumers=2, persistent=True, grouped=True),
    {**DEEPSEEK, "out_dtype": "bf16", "persistent": True, "grouped": True},
]


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")
@pytest.mark.parametrize("params", PTXAS_VARIANTS,
                         ids=lambda p: gemm_kernel(**p, l2_policy="stream_weights").entry)
def test_stream_weights_kernel_assembles_with_ptxas(params, tmp_path):
    """The hinted TMA loads and createpolicy are real sm_90a PTX, with no spills (the
    producer's two extra .b64 registers fit its setmaxnreg 40)."""
    path = tmp_path / "gemm.ptx"
    path.write_text(gemm_kernel(**params, l2_policy="stream_weights").ptx)
    r = subprocess.run(["ptxas", "-arch=sm_90a", "-v", str(path), "-o", str(tmp_path / "k")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert " 0 bytes spill stores" in r.stderr, r.stderr


def test_config_key_reaches_the_op_kernel():
    """`kernels.gemm_l2_policy` picks the op's kernel (its name and detail say which); the
    op's `l2_policy` wins over the config."""
    config = models.load_preset("h800_sxm", {"kernels.gemm_l2_policy": "stream_weights"})
    hinted = build_op("gemm", config, m=256, n=256, k=256).launches[0]
    assert hinted.entry.endswith("_l2sw") and ".L2::cache_hint" in hinted.ptx
    assert hinted.detail["l2_policy"] == "stream_weights"
    plain = build_op("gemm", config, m=256, n=256, k=256, l2_policy="normal").launches[0]
    assert plain.detail["l2_policy"] == "normal" and "cache_hint" not in plain.ptx


def _l2_miss_sectors(config, policy: str, m: int, n: int, k: int) -> float:
    launch = build_op("gemm", config, m=m, n=n, k=k, dtype="bf16", rule="n128",
                      l2_policy=policy).launches[0]
    result = simulator.simulate_kernel(
        launch.ptx, launch.entry, launch.grid, launch.block, list(launch.args), config=config,
        shared_bytes=launch.shared_bytes, timing_only=True,
        regs_per_thread=launch.regs_per_thread, **launch.options)
    s = result.stats
    return float(s[(s.stat == "miss_sectors") & s.component.str.startswith("memory.l2")]
                 .value.sum())


def test_stream_weights_keeps_the_reread_activations_in_a_small_l2():
    """M = 128 (one m-block), N = 3 waves of 16 SMs x 128 columns, K = 2048, bf16, on 16
    SMs and a 4,096,000-byte L2. B (12 MiB) is read once; A (512 KiB) is read by every
    tile, so again by each of the 3 waves. Between one wave's read of an A line and the
    next's, a whole wave of B (16 x 128 x 2048 x 2 B = 8 MiB of distinct lines) passes a
    4 MB L2, so under LRU ("normal") A misses in every wave: B + 3 A sectors. Under
    "stream_weights" A is evict_last (about 5 lines a set, under the 15 of 20 ways the
    set-aside allows) and B evict_first, the victims: A misses only cold, B + A sectors.
    The TMA stores of C miss no sector."""
    config = models.load_preset("h800_sxm", SMALL_CHIP)
    m, n, k = 128, 3 * 16 * 128, 2048
    a_sectors = m * k * 2 // SECTOR_BYTES
    b_sectors = n * k * 2 // SECTOR_BYTES
    normal = _l2_miss_sectors(config, "normal", m, n, k)
    streamed = _l2_miss_sectors(config, "stream_weights", m, n, k)
    assert normal == pytest.approx(b_sectors + 3 * a_sectors, rel=0.01)
    assert streamed == pytest.approx(b_sectors + a_sectors, rel=0.01)


def test_a_sampled_op_under_an_l2_policy_says_to_time_it_in_full():
    """The op model's reduced launches do not follow `stream_weights` (docs/communication.md):
    a sampled plan under it says so in its note; under `normal` it does not."""
    config = models.load_preset("h800_sxm")
    for policy, warned in (("stream_weights", True), ("normal", False)):
        plan = build_op("gemm", config, m=4096, n=7168, k=16384, dtype="fp8",
                        scaling="deepseek", l2_policy=policy)
        assert plan.samples
        assert ("time this policy at full fidelity" in plan.sample_note) is warned
