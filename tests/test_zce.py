"""Zero-compression engine: the format, sparsity sources, and the zero-skipping zmma."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

import isa
import models
import simulator
from isa.errors import InputError
from isa.semantics.zce import pack_detail, unpack_detail
from workloads.codesign import zce_format as Z
from workloads.codesign import zce_kernels as zk

SHAPE, DTYPE, CHAINS = "m16n8k16", "bf16", 8
BF16 = ml_dtypes.bfloat16


# -- format and sources ---------------------------------------------------------------------

@pytest.mark.parametrize("block", [1, 7, 64, 128])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16, np.int8])
def test_compress_decompress_round_trips_and_counts_bytes(block, dtype):
    """decompress(compress(x)) == x; bytes = blocks * ceil(block / 8) + non-zeros * itemsize."""
    x = Z.uniform((37, 19), 0.6, np.random.default_rng(1)).astype(dtype)
    z = Z.compress(x, block)
    assert np.array_equal(Z.decompress(z), x)
    blocks = math.ceil(x.size / block)
    assert z.nbytes == blocks * math.ceil(block / 8) + np.count_nonzero(x) * x.itemsize


def test_sources_are_seeded_and_hit_their_zero_ratios():
    """Same seed, same tensor; 2:4 and pruning are exact, the random ones within 1 %."""
    rng = lambda: np.random.default_rng(5)  # noqa: E731
    assert np.array_equal(Z.uniform((64, 64), 0.3, rng()), Z.uniform((64, 64), 0.3, rng()))
    tf = Z.two_four((32, 64), rng())
    assert (np.count_nonzero(tf.reshape(-1, 4), axis=1) == 2).all()
    w = rng().standard_normal((64, 64)).astype(np.float32)
    pruned = Z.magnitude_pruned(w, 0.75)
    assert np.count_nonzero(pruned) == 1024
    assert np.abs(w[pruned == 0]).max() <= np.abs(pruned[pruned != 0]).min()
    assert (Z.uniform((256, 256), 0.3, rng()) == 0).mean() == pytest.approx(0.3, abs=0.01)
    assert (Z.relu_activations((256, 256), 0.6, rng()) == 0).mean() == pytest.approx(0.6,
                                                                                  abs=0.01)
    bs = Z.block_sparse((64, 64), 0.5, 16, rng())
    tiles = (bs.reshape(4, 16, 4, 16) != 0).any(axis=(1, 3))
    assert np.array_equal((bs != 0).reshape(4, 16, 4, 16).all(axis=(1, 3)), tiles)
    with pytest.raises(InputError, match="ratio = 1.5"):
        Z.uniform((4, 4), 1.5, rng())


def test_active_fraction_closed_forms():
    """Element share = product of densities for independent masks; k-blocks need empty k."""
    a = np.ones((16, 16), np.float32)
    a[:, :8] = 0
    b = np.ones((16, 8), np.float32)
    assert Z.active_fraction(a, b, "element") == 0.5
    assert Z.active_fraction(a, b, "group") == 0.5
    assert Z.active_fraction(a, b, "kblock", kblock=8) == 0.5
    assert Z.active_fraction(a, b, "kblock", kblock=16) == 1.0
    with pytest.raises(InputError, match="granularity = 'row'"):
        Z.active_fraction(a, b, "row")


# -- zmma -----------------------------------------------------------------------------------

def _tiles(warps: int, seed: int = 0):
    """Per-warp bf16 A [16, 16] / B [16, 8] with zero ratios spread over the warps; some
    warps have empty k-columns so k-blocks can be skipped."""
    rng = np.random.default_rng(seed)
    a_list, b_list = [], []
    for w in range(warps):
        a = Z.uniform((16, 16), 0.9 * w / warps, rng)
        if w % 3 == 0:
            a[:, 8 * (w % 2):8 * (w % 2) + 8] = 0
        a_list.append(a.astype(BF16))
        b_list.append(Z.relu_activations((16, 8), 0.5 * (w % 2), rng).astype(BF16))
    return a_list, b_list


def _run(config, a_list, b_list, iters, op="zmma"):
    words = [zk.pack_tile(SHAPE, DTYPE, a, b) for a, b in zip(a_list, b_list, strict=True)]
    aw = np.stack([w[0] for w in words])
    bw = np.stack([w[1] for w in words])
    out = np.zeros((len(a_list), 32, 4), np.float32)
    res = simulator.simulate_kernel(zk.zmma_loop_kernel(SHAPE, DTYPE, CHAINS, op), "zmma_loop",
                                    1, 32 * len(a_list), [aw, bw, out, iters], config=config)
    return res, out


def _zce(granularity="element", **extra):
    return models.load_preset("h800_sxm", {"units.zce.enabled": True,
                                           "units.zce.granularity": granularity,
                                           "units.zce.kblock_elements": 8} | extra)


def test_zmma_results_equal_the_dense_mma_bit_for_bit():
    """Skipping zeros never changes D: zmma and mma of the same operands agree exactly."""
    a_list, b_list = _tiles(8)
    _, dense = _run(models.load_preset("h800_sxm"), a_list, b_list, 2, op="mma")
    _, skipped = _run(_zce(), a_list, b_list, 2)
    assert np.array_equal(dense.view(np.uint32), skipped.view(np.uint32))
    ref = 2 * (a_list[5].astype(np.float64) @ b_list[5].astype(np.float64))
    np.testing.assert_allclose(zk.unpack_accumulator(SHAPE, DTYPE, skipped[5]), ref,
                               rtol=1e-6)


@pytest.mark.parametrize("granularity", Z.GRANULARITIES)
def test_packed_detail_agrees_with_the_numpy_skip_fraction(granularity):
    """The trace's packed zero statistics give the share zce_format computes from arrays."""
    from models.zce import active_share
    for a, b in zip(*_tiles(12, seed=3), strict=True):
        detail = int(pack_detail((a != 0)[None], (b != 0)[None])[0])
        share = active_share(detail, 16, 8, 16, granularity, 8)
        assert share == Z.active_fraction(a.astype(np.float32), b.astype(np.float32),
                                          granularity, kblock=8)
    assert unpack_detail(int(pack_detail(np.ones((1, 16, 16), bool),
                                         np.ones((1, 16, 8), bool))[0])) == (2048, 512, 0xFFFF)


def _cycles_per_iteration(config, a_list, b_list):
    few, _ = _run(config, a_list, b_list, 8)
    many, _ = _run(config, a_list, b_list, 24)
    return (many.cycles - few.cycles) / 16


def _closed_form(config, a_list, b_list) -> float:
    """Busiest sub-partition: sum over its warps of chains * ceil(dense * max(floor, share))."""
    zce, subs = config.units.zce, config.sm.subpartitions
    dense = math.ceil(16 * 8 * 16 / (config.units.tensor.bf16_fma_per_clk_per_sm / subs))
    busy = [0] * subs
    for w, (a, b) in enumerate(zip(a_list, b_list, strict=True)):
        share = Z.active_fraction(a.astype(np.float32), b.astype(np.float32), zce.granularity,
                                  kblock=zce.kblock_elements)
        busy[w % subs] += CHAINS * max(1, math.ceil(dense * max(zce.min_issue_fraction, share)))
    return max(busy)


@pytest.mark.parametrize(("granularity", "floor"), [("element", 0.0), ("group", 0.0),
                                                    ("kblock", 0.0), ("element", 0.5)])
def test_zmma_loop_time_matches_the_closed_form(granularity, floor):
    """Per-iteration cycles = the busiest sub-partition's skipped-issue sum (within 1 %); the
    dense bf16 rate is cut to 512 FMA/clk/SM (interval 16) so that the tensor pipe, not the
    scheduler's issue slots, bounds the loop and the shares are resolved finely."""
    config = _zce(granularity, **{"units.zce.min_issue_fraction": floor,
                                  "units.tensor.bf16_fma_per_clk_per_sm": 512})
    a_list, b_list = _tiles(32)
    expected = _closed_form(config, a_list, b_list)
    assert _cycles_per_iteration(config, a_list, b_list) == pytest.approx(expected, rel=0.01)


def test_zmma_on_dense_operands_times_like_the_stock_mma():
    """With no zeros nothing is skipped: zmma takes exactly the cycles of mma."""
    rng = np.random.default_rng(2)
    a_list = [(rng.random((16, 16)) + 0.5).astype(BF16) for _ in range(8)]
    b_list = [(rng.random((16, 8)) + 0.5).astype(BF16) for _ in range(8)]
    stock, _ = _run(models.load_preset("h800_sxm"), a_list, b_list, 4, op="mma")
    skipping, _ = _run(_zce(), a_list, b_list, 4)
    assert skipping.cycles == stock.cycles


def test_timing_a_zmma_without_the_zce_is_an_input_error():
    """units.zce.enabled false: the error names the key."""
    a_list, b_list = _tiles(4)
    with pytest.raises(InputError, match="units.zce.enabled"):
        _run(models.load_preset("h800_sxm"), a_list, b_list, 1)


def test_verifier_rejects_an_f64_zmma():
    """zmma has every mma form but .f64: the error names the accepted inputs."""
    ptx = zk.zmma_loop_kernel(SHAPE, DTYPE).replace(
        f"zmma.sync.aligned.{SHAPE}.row.col.f32.bf16.bf16.f32",
        "zmma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64")
    with pytest.raises(isa.PtxError, match="zmma has no .f64 form"):
        isa.compile_kernel(ptx, "zmma_loop")
