"""The microbenchmark kernels compute what their sources say (numpy references, small sizes),
and their committed PTX is what nvcc makes from the committed CUDA source."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import isa
from workloads import microbench as mb
from workloads.kernels.microbench import KERNEL_DIR, KERNEL_FILES, load_ptx

SOURCES = sorted(KERNEL_DIR.glob("*.cu"))
COMMAND = re.compile(r"^// ptx: (nvcc -ptx -O3 -arch=sm_(?:80|90a?) (\S+)\.cu -o (\S+)\.ptx)$",
                     re.M)


def _run(entry: str, grid, block, args: list) -> None:
    isa.run_kernel(load_ptx(entry), entry, grid, block, args)


def _follow(chain: np.ndarray, base: int, hops: int) -> int:
    p = base
    for _ in range(hops):
        p = int(chain[(p - base) // 8])
    return p


def test_pointer_chase_follows_the_chain_and_streams_the_warm_footprint():
    """out[0] is the address after `hops` links; out[2 + t] the XOR of pairs t, t + block..."""
    block, n_words, hops = 64, 4096, 37
    base = mb.chase_base_address(n_words, block)
    visit = np.concatenate(([0], 2 * np.random.default_rng(3).permutation(np.arange(1, 900))))
    chain = mb.build_chain(base, n_words, visit)
    warm_pairs = 1000
    out = np.zeros(2 + block, np.uint64)
    _run("pointer_chase", 1, block, [chain, warm_pairs, hops, out])
    assert int(out[0]) == _follow(chain, base, hops)
    assert int(out[1]) == base
    pairs = chain[:2 * warm_pairs].reshape(-1, 2)
    words = pairs[:, 0] ^ pairs[:, 1]
    for t in range(block):
        assert out[2 + t] == np.bitwise_xor.reduce(words[t::block], initial=np.uint64(0))


def test_chain_must_start_at_word_zero():
    """A visit order not starting at element 0 is refused (the kernel starts there)."""
    with pytest.raises(ValueError, match="word 0"):
        mb.build_chain(0x1000, 64, np.array([8, 16]))


def test_stream_copy_read_and_write_move_the_data():
    """copy: dst == src; read: count of element sums below the threshold; write: dst == v."""
    n = 3 * 256
    rng = np.random.default_rng(5)
    src = rng.standard_normal((n, 4)).astype(np.float32)
    dst = np.zeros_like(src)
    _run("stream_copy", n // 256, 256, [src, dst, n])
    assert np.array_equal(dst, src)
    count = np.zeros(1, np.uint32)
    threshold = np.float32(0.25)
    _run("stream_read", n // 256, 256, [src, threshold, count, n])
    sums = (src[:, 0] + src[:, 1]) + (src[:, 2] + src[:, 3])
    assert int(count[0]) == int(np.sum(sums < threshold))
    _run("stream_write", n // 256, 256, [dst, np.float32(2.5), n])
    assert np.all(dst == np.float32(2.5))


@pytest.mark.parametrize("stride", [1, 32])
def test_shared_bandwidth_sums_the_last_loads_of_its_word(stride):
    """Each thread returns 16 x word (lane * stride) % 1024, whose value is its index."""
    grid, block, iters = 2, 64, 3
    out = np.zeros(grid * block, np.uint32)
    _run("shared_bandwidth", grid, block, [out, stride, iters])
    lane = np.arange(grid * block) % 32
    assert np.array_equal(out, (16 * ((lane * stride) % 1024)).astype(np.uint32))


def test_fma_throughput_iterates_x_half_plus_one():
    """Each chain is x <- fma(x, 0.5, 1) 32 times per iteration from thread index + k."""
    grid, block, iters = 2, 64, 2
    out = np.zeros(grid * block * mb.CHAINS, np.float32)
    _run("fma_throughput", grid, block, [out, iters])
    x = (np.arange(grid * block) % block)[:, None] + np.arange(mb.CHAINS)[None, :]
    x = x.astype(np.float32)
    for _ in range(iters * mb.FMA_UNROLL):
        x = x * np.float32(0.5) + np.float32(1.0)  # x * 0.5 is exact: one rounding, as fma
    assert np.array_equal(out.reshape(-1, mb.CHAINS), x)


def test_sfu_throughput_iterates_minus_exp2():
    """Each chain is x <- -2**x, 8 steps per iteration, from -(k + 1) / 16."""
    grid, block, iters = 1, 32, 2
    out = np.zeros(grid * block * mb.CHAINS, np.float32)
    _run("sfu_throughput", grid, block, [out, iters])
    x = np.broadcast_to(-(np.arange(mb.CHAINS) + 1) / 16, (grid * block, mb.CHAINS))
    x = x.astype(np.float32)
    for _ in range(iters * mb.SFU_UNROLL):
        x = (-np.exp2(x.astype(np.float64))).astype(np.float32)
    np.testing.assert_allclose(out.reshape(-1, mb.CHAINS), x, rtol=2.0**-21)


def test_pack_throughput_keeps_the_bf16_pair_of_each_chain():
    """Each chain is x <- bits of (bf16(x), bf16(x)) 16 times per iteration from k + 1: after
    one step the high half is bf16(k + 1) and the low half repeats it, and it stays there."""
    grid, block, iters = 1, 32, 2
    out = np.zeros(grid * block * mb.CHAINS, np.float32)
    _run("pack_throughput", grid, block, [out, iters])
    half = (np.arange(mb.CHAINS) + 1).astype(ml_dtypes.bfloat16).view(np.uint16)
    bits = (half.astype(np.uint32) << 16) | half
    assert np.array_equal(out.reshape(-1, mb.CHAINS).view(np.uint32),
                          np.broadcast_to(bits, (grid * block, mb.CHAINS)))


def test_int_mix_throughput_runs_imad_and_lop3_chains():
    """Even chains x <- 3x + 1, odd chains x <- x ^ 0x5bd1e995 ^ 0x2545f491 (lop3 0x96 is a
    three-way XOR), 16 steps an iteration from thread index + k, in u32."""
    grid, block, iters = 1, 32, 2
    out = np.zeros(grid * block * mb.CHAINS, np.uint32)
    _run("int_mix_throughput", grid, block, [out, iters])
    x = (np.arange(block)[:, None] + np.arange(mb.CHAINS)[None, :]).astype(np.uint64)
    for _ in range(iters * mb.INT_UNROLL):
        x[:, 0::2] = (3 * x[:, 0::2] + 1) & 0xFFFFFFFF
        x[:, 1::2] ^= 0x5bd1e995 ^ 0x2545f491
    assert np.array_equal(out.reshape(-1, mb.CHAINS), x.astype(np.uint32))


@pytest.mark.parametrize("model, rate", [("alu_fma", 128.0), ("int32_unit", 64.0)])
def test_int_mix_rate_is_two_pipes_or_one(model, rate):
    """Half IMADs, half LOP3s: with the ALU and FMA pipes apart both run at the int32 rate
    (64/clk/SM on h100_sxm), 128 in all; on one int32 unit 64 in all."""
    import models

    config = models.load_preset("h100_sxm", {"sm.int_pipe_model": model})
    got = mb.int_mix_throughput(config).work_per_cycle_per_sm
    assert got == pytest.approx(rate, rel=0.05)


def test_mma_throughput_accumulates_iters_products_on_each_chain():
    """Accumulator k of every warp ends at k + iters * (A @ B), exactly (small integers)."""
    grid, block, iters = 1, 64, 3
    rng = np.random.default_rng(7)
    a = rng.integers(-3, 4, (16, 16)).astype(np.float32)
    b = rng.integers(-3, 4, (16, 8)).astype(np.float32)
    warps = grid * block // 32
    out = np.zeros(warps * mb.CHAINS * 128, np.float32)
    _run("mma_throughput", grid, block, [a.astype(ml_dtypes.bfloat16),
                                         np.ascontiguousarray(b.T).astype(ml_dtypes.bfloat16),
                                         out, iters])
    tiles = out.reshape(warps, mb.CHAINS, 16, 8)
    want = np.arange(mb.CHAINS)[:, None, None] + iters * (a @ b)[None]
    assert np.array_equal(tiles, np.broadcast_to(want, tiles.shape))


def test_every_catalogued_entry_is_in_its_committed_ptx():
    """Each KERNEL_FILES entry is a .entry of the PTX beside its source."""
    for entry in KERNEL_FILES:
        assert re.search(rf"\.entry {entry}\(", load_ptx(entry)), entry


def _header_command(source: Path) -> list[str]:
    match = COMMAND.search(source.read_text())
    assert match, f"{source.name}: no '// ptx: nvcc -ptx -O3 -arch=sm_80 ...' header line"
    assert match.group(2) == match.group(3) == source.stem, f"{source.name}: names differ"
    return match.group(1).split()


def test_every_microbench_source_has_a_header_command_and_committed_ptx():
    """Each .cu names its nvcc command and has its .ptx beside it."""
    assert len(SOURCES) == len(set(KERNEL_FILES.values()))
    for source in SOURCES:
        _header_command(source)
        assert source.with_suffix(".ptx").is_file(), f"{source.name}: no committed .ptx"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("source", SOURCES, ids=lambda p: p.name)
def test_committed_microbench_ptx_matches_fresh_nvcc_output(source, tmp_path):
    """Recompiling X.cu with its header command reproduces the committed X.ptx exactly."""
    argv = _header_command(source)
    argv[-1] = str(tmp_path / argv[-1])
    subprocess.run(argv, cwd=KERNEL_DIR, check=True, capture_output=True, timeout=300)
    fresh = (tmp_path / source.with_suffix(".ptx").name).read_text()
    assert fresh == source.with_suffix(".ptx").read_text(), (
        f"{source.name}: committed PTX is stale; run "
        "workloads/kernels/regenerate_ptx.sh")
