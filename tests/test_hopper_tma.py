"""TMA copies (cp.async.bulk.tensor / cp.async.bulk) and the tensor-map stand-in."""

from __future__ import annotations

import pathlib
import shutil
import subprocess

import numpy as np
import pytest

import isa
from isa.tensor_map import make_tensor_map, read_tensor_map

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "hopper"
ROUNDTRIP = (FIXTURES / "tma_roundtrip.ptx").read_text()


def expected_box(a: np.ndarray, row0: int, col0: int, rows: int, cols: int) -> np.ndarray:
    """The box as TMA reads it: tensor values, zeros outside the tensor."""
    box = np.zeros((rows, cols), dtype=a.dtype)
    r = np.arange(row0, row0 + rows)
    c = np.arange(col0, col0 + cols)
    ok_r, ok_c = (r >= 0) & (r < a.shape[0]), (c >= 0) & (c < a.shape[1])
    box[np.ix_(ok_r, ok_c)] = a[np.ix_(r[ok_r], c[ok_c])]
    return box


def swizzled_bytes(box: np.ndarray, span: int) -> np.ndarray:
    """Dense box bytes with the 16-byte chunks of each `span`-byte row permuted: chunk
    c of row r goes to c ^ ((r // (8 // (span/16))) % (span/16)) (128B: c ^ r % 8)."""
    raw = np.ascontiguousarray(box).view(np.uint8).reshape(-1)
    if span == 0:
        return raw
    rows = raw.reshape(-1, span // 16, 16)
    n = span // 16
    r = np.arange(rows.shape[0])[:, None]
    c = np.arange(n)[None, :]
    out = np.empty_like(rows)
    out[r, c ^ ((r // (8 // n)) % n)] = rows
    return out.reshape(-1)


def run_roundtrip(a, out, box, swizzle, row0, col0):
    dump = np.zeros(8192, np.uint8)
    tin = make_tensor_map(a, box, swizzle=swizzle, arg=2)
    tout = make_tensor_map(out, box, swizzle=swizzle, arg=3)
    nbytes = box[0] * box[1] * a.itemsize
    isa.run_kernel(ROUNDTRIP, "tma_roundtrip", 1, 32,
                   [tin, tout, a, out, dump, col0 & 0xFFFFFFFF, row0 & 0xFFFFFFFF, nbytes])
    return dump[:nbytes]


@pytest.mark.parametrize("swizzle", [0, 32, 64, 128])
def test_tma_load_lays_box_out_with_the_swizzle_formula(swizzle):
    """The shared bytes of a loaded box are the dense box with 16B chunks XOR-permuted."""
    rng = np.random.default_rng(swizzle)
    a = rng.integers(1, 1 << 16, size=(48, 136), dtype=np.uint16)
    box = (16, (swizzle or 64) // 2)
    dump = run_roundtrip(a, np.zeros_like(a), box, swizzle, 8, 24)
    want = swizzled_bytes(expected_box(a, 8, 24, *box), swizzle)
    np.testing.assert_array_equal(dump, want)


def test_tma_load_zero_fills_out_of_bounds_elements():
    """Box elements past the tensor's edges (and before coordinate 0) read as zero."""
    a = np.arange(1, 40 * 72 + 1, dtype=np.uint16).reshape(40, 72)
    box = (16, 64)
    for row0, col0 in ((32, 40), (-4, -8)):
        dump = run_roundtrip(a, np.zeros_like(a), box, 128, row0, col0)
        want = expected_box(a, row0, col0, *box)
        assert (want == 0).any()
        np.testing.assert_array_equal(dump, swizzled_bytes(want, 128))


@pytest.mark.parametrize("swizzle", [0, 128])
def test_tma_store_writes_only_in_bounds_box_elements(swizzle):
    """A stored box lands at its coordinates; OOB elements and the rest stay untouched."""
    rng = np.random.default_rng(7)
    a = rng.integers(1, 1 << 16, size=(40, 72), dtype=np.uint16)
    out = np.full_like(a, 0xFFFF)
    run_roundtrip(a, out, (16, 64), swizzle, 30, 40)
    want = np.full_like(a, 0xFFFF)
    want[30:40, 40:72] = a[30:40, 40:72]
    np.testing.assert_array_equal(out, want)


def test_tensor_map_layout_round_trips():
    """The 128 bytes decode to the rank, dims, strides, box and swizzle they were built with."""
    a = np.zeros((3, 40, 64), dtype=np.float32)
    raw = make_tensor_map(a, (1, 8, 32), swizzle=128, arg=5)
    assert raw.size == 128 and raw[:4].tobytes() == b"PTXM"
    tm = read_tensor_map(raw)
    assert (tm.rank, tm.dims, tm.box, tm.swizzle_bytes, tm.base_arg) == \
        (3, (64, 40, 3), (32, 8, 1), 128, 5)
    assert tm.strides_bytes == (4, 256, 40 * 256)


@pytest.mark.parametrize("kwargs, words", [
    (dict(box=(8, 128), swizzle=128), "more than the 128B swizzle span"),
    (dict(box=(8, 4), swizzle=0), "multiple of 16"),
    (dict(box=(8, 32), swizzle=48), "accepted 0, 32, 64 or 128"),
])
def test_tensor_map_builder_rejects_what_the_driver_rejects(kwargs, words):
    """Oversized swizzled rows, short inner boxes and unknown swizzles are errors."""
    with pytest.raises(ValueError, match=words):
        make_tensor_map(np.zeros((16, 256), np.float16), arg=0, **kwargs)


def test_garbage_tensor_map_is_a_clear_fault():
    """Bytes that are no tensor map make the copy fault, naming the builder."""
    a = np.zeros((16, 64), np.uint16)
    bad = np.zeros(128, np.uint8)
    with pytest.raises(isa.PtxError, match="not a ptxsim tensor map"):
        isa.run_kernel(ROUNDTRIP, "tma_roundtrip", 1, 32,
                       [bad, bad, a, a, np.zeros(8192, np.uint8), 0, 0, 2048])


def test_unsupported_tensor_copy_form_lists_accepted_forms():
    """An im2col tensor copy is rejected with the accepted spellings."""
    bad = ROUNDTRIP.replace("global.tile.mbarrier", "global.im2col.mbarrier")
    a = np.zeros((16, 64), np.uint16)
    tm = make_tensor_map(a, (16, 64), arg=2)
    with pytest.raises(isa.PtxError, match="cp.async.bulk.tensor.<N>d"):
        isa.run_kernel(bad, "tma_roundtrip", 1, 32,
                       [tm, tm, a, a, np.zeros(8192, np.uint8), 0, 0, 2048])


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")
@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.ptx")), ids=lambda p: p.name)
def test_hopper_fixture_assembles_with_ptxas(path, tmp_path):
    """Every hand-written Hopper fixture is real PTX that ptxas -arch=sm_90a accepts."""
    r = subprocess.run(["ptxas", "-arch=sm_90a", str(path), "-o", str(tmp_path / "o.cubin")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def roundtrip_args(a, box, nbytes):
    tin = make_tensor_map(a, box, swizzle=128, arg=2)
    tout = make_tensor_map(a, box, swizzle=128, arg=3)
    return [tin, tout, a, np.zeros_like(a), np.zeros(8192, np.uint8), 8, 8, nbytes]


def test_timing_mode_tensor_copy_completes_like_the_functional_one():
    """Without moving bytes, timing mode runs the same warp-instructions to the end."""
    a = np.arange(48 * 136, dtype=np.uint16).reshape(48, 136)
    runs = [isa.run_kernel(ROUNDTRIP, "tma_roundtrip", 1, 32,
                           roundtrip_args(a, (16, 64), 2048), timing_only=timing)
            for timing in (False, True)]
    assert runs[0].warp_instructions == runs[1].warp_instructions > 0


@pytest.mark.parametrize("timing", [False, True])
def test_tensor_copy_past_its_buffer_faults_in_both_modes(timing):
    """A map whose tensor is larger than the buffer it names faults on the copy."""
    args = roundtrip_args(np.zeros((48, 136), np.uint16), (16, 64), 2048)
    args[2] = np.zeros((8, 136), np.uint16)
    with pytest.raises(isa.PtxError, match="out-of-bounds global access"):
        isa.run_kernel(ROUNDTRIP, "tma_roundtrip", 1, 32, args, timing_only=timing)
