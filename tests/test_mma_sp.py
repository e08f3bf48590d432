"""`mma.sp` (2:4 structured sparsity): semantics against an H100 dump and numpy, errors,
and timing at the sparse rate (dense-equivalent FMAs x units.tensor.sparse_rate_multiplier)."""

from __future__ import annotations

import math
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import isa
import models
import simulator
from isa.semantics.tensor_frame import unpack
from isa.semantics.tensor_mma_sp import VALID_NIBBLES, expand, layouts, metadata_positions
from workloads.codesign.mma_sp_probe import FORMS
from workloads.codesign.sparse_kernels import mma_sp_loop_kernel

FIXTURE = Path(__file__).parent / "fixtures" / "mma_sp_h100.npz"
NUMPY = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "e4m3": ml_dtypes.float8_e4m3fn}
BITS = {"f16": 16, "bf16": 16, "e4m3": 8}


def _dump(name: str) -> dict:
    data = np.load(FIXTURE)
    return {k: data[f"{name}__{k}"] for k in ("a", "b", "e", "d")}


def _run(shape, dtype, selector, a, b, e, iters=1, chains=1, config=None, name=None):
    warps = a.shape[0]
    out = np.zeros((warps, 32, 4), np.float32)
    kwargs = {"name": name} if name else {}
    ptx = mma_sp_loop_kernel(shape, dtype, selector, chains, **kwargs)
    args = [np.ascontiguousarray(a), np.ascontiguousarray(b), np.ascontiguousarray(e), out,
            iters]
    if config is None:
        isa.run_kernel(ptx, "mma_sp_loop", 1, 32 * warps, args)
        return out
    return simulator.simulate_kernel(ptx, "mma_sp_loop", 1, 32 * warps, args, config=config)


def _numpy_reference(shape, dtype, selector, a, b, e) -> np.ndarray:
    """D [w, 16, 8] from the words, with the layouts of the module docstring, in numpy."""
    bits = BITS[dtype]
    la, lb, _ = layouts(shape, bits, 32)
    vals = lambda words: unpack(words, bits).view(NUMPY[dtype]).astype(np.float64)  # noqa: E731
    w = a.shape[0]
    ac = np.take(vals(a).reshape(w, -1), la.inverse, axis=1).reshape(w, la.rows, la.cols)
    bm = np.take(vals(b).reshape(w, -1), lb.inverse, axis=1).reshape(w, lb.rows, lb.cols)
    lane, bit = metadata_positions(shape, bits, selector)
    nibbles = (e.astype(np.int64)[:, lane] >> bit) & 0xF
    return expand(ac, nibbles) @ bm


@pytest.mark.parametrize(("name", "shape", "dtype", "selector"), FORMS)
def test_mma_sp_equals_the_h100_bit_for_bit(name, shape, dtype, selector):
    """D of every probed form and selector equals what an H100 computed from the same
    words (metadata in every lane, only the selector's lanes read)."""
    dump = _dump(name)
    got = _run(shape, dtype, selector, dump["a"], dump["b"], dump["e"])
    assert np.array_equal(got.view(np.uint32), dump["d"].view(np.uint32))


@pytest.mark.parametrize(("name", "shape", "dtype", "selector"), FORMS[::3])
def test_mma_sp_equals_the_numpy_product_of_the_expanded_matrix(name, shape, dtype,
                                                                selector):
    """Random non-integer operands: D = expand(A, metadata) @ B (float64, one rounding)."""
    rng = np.random.default_rng(7)
    dump = _dump(name)
    bits = BITS[dtype]
    per = 32 // bits
    vals = rng.uniform(-2, 2, dump["a"].shape + (per,)).astype(NUMPY[dtype])
    a = _pack(vals, bits)
    b = _pack(rng.uniform(-2, 2, dump["b"].shape + (per,)).astype(NUMPY[dtype]), bits)
    got = _run(shape, dtype, selector, a, b, dump["e"])
    ref = _numpy_reference(shape, dtype, selector, a, b, dump["e"])
    lc = layouts(shape, bits, 32)[2]
    d = np.empty((a.shape[0], 16 * 8), np.float32)
    d[:, lc.forward] = got.reshape(a.shape[0], -1)
    np.testing.assert_allclose(d.reshape(-1, 16, 8), ref, rtol=2e-7, atol=1e-6)


def _pack(vals: np.ndarray, bits: int) -> np.ndarray:
    raw = vals.view({8: np.uint8, 16: np.uint16}[bits]).astype(np.uint32)
    return (raw << (bits * np.arange(raw.shape[-1], dtype=np.uint32))).sum(
        axis=-1, dtype=np.uint32)


def test_ordered_and_plain_spellings_agree():
    """`mma.sp` and `mma.sp::ordered_metadata` compute the same (increasing indices)."""
    dump = _dump("bf16_k32_s1")
    plain = _run("m16n8k32", "bf16", 1, dump["a"], dump["b"], dump["e"], name="mma.sp")
    assert np.array_equal(plain, dump["d"])


def test_a_bad_metadata_nibble_faults_with_its_row_and_lane():
    """A nibble with no two increasing positions (0x0, 0x5, ...) is a fault naming them."""
    dump = _dump("f16_k16_s0")
    e = dump["e"].copy()
    e[0, 0] &= ~np.uint32(0xF)                  # lane 0 (selector 0): row 0, group 0 -> 0x0
    assert 0 not in VALID_NIBBLES
    with pytest.raises(isa.PtxError, match=r"metadata nibble 0x0 of row 0, K group 0 "
                       r"\(lane 0.*0xE"):
        _run("m16n8k16", "f16", 0, dump["a"], dump["b"], e)


@pytest.mark.parametrize(("shape", "dtype", "selector", "message"), [
    ("m16n8k32", "bf16", 2, r"selector 2 for m16n8k32.*0\.\.1"),
    ("m16n8k64", "e4m3", 1, r"selector 1 for m16n8k64.*0\.\.0"),
])
def test_verifier_rejects_selectors_outside_the_form(shape, dtype, selector, message):
    """The selectors ptxas rejects (bf16 k32 >= 2, 8-bit k64 >= 1) are rejected before run."""
    with pytest.raises(isa.PtxError, match=message):
        isa.compile_kernel(mma_sp_loop_kernel(shape, dtype, selector), "mma_sp_loop")


def test_verifier_rejects_a_dense_shape_and_names_the_forms():
    ptx = mma_sp_loop_kernel("m16n8k16", "f16").replace("m16n8k16.row.col.f32.f16.f16.f32",
                                                        "m16n8k8.row.col.f32.f16.f16.f32")
    with pytest.raises(isa.PtxError, match="unsupported mma.sp form.*m16n8k64"):
        isa.compile_kernel(ptx, "mma_sp_loop")


CHAINS = 8


@pytest.mark.parametrize(("shape", "dtype", "key"), [("m16n8k32", "bf16", "bf16"),
                                                     ("m16n8k64", "e4m3", "fp8")])
def test_mma_sp_issue_interval_is_the_dense_one_over_the_sparse_multiplier(shape, dtype, key):
    """One warp per sub-partition, 8 independent chains: cycles per loop iteration = chains x
    ceil(M N K / (sparse_rate_multiplier x dense FMA/clk/SM / 4)) (tensor-bound; the dense
    rates are cut 4x so the tensor pipe, not issue slots, bounds the loop)."""
    dump = _dump({"bf16": "bf16_k32_s1", "e4m3": "e4m3_k64_s0"}[dtype])
    a, b, e = (np.concatenate([dump[k][:4]] * 1) for k in ("a", "b", "e"))
    base = models.load_preset("h800_sxm")
    rate = base.units.tensor.fma_per_clk_per_sm(key) // 4
    config = base.with_overrides({f"units.tensor.{key}_fma_per_clk_per_sm": rate})
    m, n, k = (int(v) for v in shape[1:].replace("n", " ").replace("k", " ").split())
    mult = config.units.tensor.sparse_rate_multiplier
    interval = math.ceil(m * n * k / (mult * rate / config.sm.subpartitions))
    selector = 1 if dtype == "bf16" else 0
    few = _run(shape, dtype, selector, a, b, e, iters=8, chains=CHAINS, config=config)
    many = _run(shape, dtype, selector, a, b, e, iters=24, chains=CHAINS, config=config)
    per_iteration = (many.cycles - few.cycles) / 16
    assert per_iteration == pytest.approx(CHAINS * interval, rel=0.01)
    dense = config.with_overrides({"units.tensor.sparse_rate_multiplier": 1.0})
    slow = _run(shape, dtype, selector, a, b, e, iters=24, chains=CHAINS, config=dense)
    dense_interval = math.ceil(m * n * k / (rate / config.sm.subpartitions))
    assert slow.cycles - many.cycles == pytest.approx(
        24 * CHAINS * (dense_interval - interval), rel=0.05)
