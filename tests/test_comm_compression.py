"""Gradient compression for the all-reduce: the top-k + 4-bit kernels against their numpy
reference, and the compressed all-reduce op (compress, all-gather, decompress)."""

import numpy as np
import pytest

import isa
import models
from isa.errors import InputError
from workloads.kernels.comm import compression as c
from workloads.ops import build_op


def _run(entry, grid, args):
    program = isa.compile_kernel(c._ptx(), entry)
    isa.run_kernel(program, entry, (grid, 1, 1), (c.THREADS, 1, 1), args)


def test_compress_kernel_writes_the_reference_bytes():
    """grad_compress on 3 normal blocks (one all zero) equals compress_reference byte for
    byte; at least KEEP values are kept in a non-zero block, none in the zero one."""
    grad = c.synthetic_gradients(2 * c.BLOCK, seed=3)
    grad = np.concatenate([grad, np.zeros(c.BLOCK, np.float32)])
    out = np.zeros(3 * c.BLOCK_BYTES, np.uint8)
    _run("grad_compress", 3, [grad, out, np.int32(c.KEEP)])
    ref = c.compress_reference(grad)
    assert np.array_equal(out, ref)
    counts = out.reshape(3, c.BLOCK_BYTES)[:, :4].copy().view(np.uint32).ravel()
    assert counts[0] >= c.KEEP and counts[1] >= c.KEEP and counts[2] == 0


def test_decompress_kernel_sums_the_ranks_blocks():
    """grad_decompress of 3 ranks' buffers equals the reference sum, and the kept values
    come back within half a 4-bit step of the gradients."""
    grad = c.synthetic_gradients(2 * c.BLOCK, seed=5)
    one = c.compress_reference(grad)
    gathered = np.tile(one, 3)
    dense = np.zeros(2 * c.BLOCK, np.float32)
    _run("grad_decompress", 2, [gathered, dense, np.int32(2), np.int32(3)])
    assert np.array_equal(dense, c.decompress_reference(gathered, 2, 3))
    kept = dense != 0
    step = np.abs(grad.reshape(2, -1)).max(axis=1) / 7
    err = np.abs(dense / 3 - grad).reshape(2, -1)
    assert (err[kept.reshape(2, -1)] <= np.repeat(step, c.BLOCK).reshape(2, -1)[
        kept.reshape(2, -1)] / 2 + 1e-6).all()
    assert 0.09 < kept.mean() < 0.13


def test_compressed_allreduce_moves_the_compressed_bytes():
    """--compress topk4bit: compress, an all-gather of 7.9 % of the bytes, decompress; the
    counted bytes stay the uncompressed bus bytes."""
    cfg = models.load_preset("h800_sxm")
    nbytes = 4 * 64 * c.BLOCK
    plan = build_op("allreduce", cfg, ranks=8, bytes=nbytes, compress="topk4bit", comm_sms=4)
    assert [launch.name for launch in plan.launches] == ["grad_compress", "allgather",
                                                         "grad_decompress"]
    assert plan.sizes["compressed_bytes"] == 64 * c.BLOCK_BYTES
    assert plan.sizes["compressed_bytes"] / nbytes == pytest.approx(648 / 8192)
    assert plan.bytes == pytest.approx(2 * 7 / 8 * nbytes)
    with pytest.raises(InputError, match="multiple of 4"):
        build_op("allreduce", cfg, ranks=8, bytes=nbytes + 2, compress="topk4bit")
    with pytest.raises(InputError, match="--compress"):
        build_op("allreduce", cfg, ranks=8, bytes=nbytes, compress="zip")
