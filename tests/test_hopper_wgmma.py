"""wgmma.mma_async against numpy, with 128B-swizzled shared-memory descriptors."""

from __future__ import annotations

import pathlib
import shutil
import subprocess

import ml_dtypes
import numpy as np
import pytest

import isa
from isa.tensor_map import make_tensor_map

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "hopper"
ROW_BYTES = 128          # one 128B-swizzle row of K per matrix row
STEPS = 4                # wgmmas per kernel, 32 bytes of K each


def wgmma_kernel(n: int, dtype: str, atype: str, k: int) -> str:
    """PTX: copy pre-swizzled A and B images to shared memory, run 4 wgmmas advancing the
    descriptors by 32 bytes of K, store each lane's accumulators to out[tid, :]."""
    regs = n // 2
    d = ", ".join(f"%f{i}" for i in range(regs))
    op = f"wgmma.mma_async.sync.aligned.m64n{n}k{k}.{dtype}.{atype}.{atype}"
    trans = ", 0, 0" if atype in ("bf16", "f16") else ""
    stores = "\n".join(f"    st.global.f32 [%rd9+{4 * i}], %f{i};" for i in range(regs))
    return f"""
.version 8.0
.target sm_90a
.address_size 64

.visible .entry wgmma_test(.param .u64 img, .param .u64 out, .param .u32 img_bytes,
                           .param .u64 desc_a, .param .u64 desc_b)
{{
    .reg .pred %p<4>;
    .reg .b32 %r<16>;
    .reg .b64 %rd<16>;
    .reg .f32 %f<{regs}>;
    .shared .align 1024 .b8 smem[{64 * ROW_BYTES + n * ROW_BYTES}];

    mov.u32 %r1, %tid.x;
    ld.param.u64 %rd1, [img];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u32 %r2, [img_bytes];
    mov.u32 %r3, smem;
    shl.b32 %r4, %r1, 4;
COPY:
    setp.ge.u32 %p1, %r4, %r2;
    @%p1 bra COPIED;
    cvt.u64.u32 %rd2, %r4;
    add.s64 %rd3, %rd1, %rd2;
    ld.global.v4.u32 {{%r5, %r6, %r7, %r8}}, [%rd3];
    add.u32 %r9, %r3, %r4;
    st.shared.v4.u32 [%r9], {{%r5, %r6, %r7, %r8}};
    add.u32 %r4, %r4, 2048;
    bra.uni COPY;
COPIED:
    fence.proxy.async.shared::cta;
    bar.sync 0;
    ld.param.u64 %rd4, [desc_a];
    ld.param.u64 %rd5, [desc_b];
    mov.u32 %r10, 0;
    wgmma.fence.sync.aligned;
STEP:
    setp.ne.u32 %p2, %r10, 0;
    {op} {{{d}}}, %rd4, %rd5, %p2, 1, 1{trans};
    add.s64 %rd4, %rd4, 2;
    add.s64 %rd5, %rd5, 2;
    add.u32 %r10, %r10, 1;
    setp.lt.u32 %p3, %r10, {STEPS};
    @%p3 bra STEP;
    wgmma.commit_group.sync.aligned;
    wgmma.wait_group.sync.aligned 0;
    ld.param.u64 %rd6, [out];
    cvta.to.global.u64 %rd6, %rd6;
    mul.wide.u32 %rd7, %r1, {4 * regs};
    add.s64 %rd9, %rd6, %rd7;
{stores}
    ret;
}}
"""


def swizzle128(rows: np.ndarray) -> np.ndarray:
    """Rows of 128 bytes, 16-byte chunk c of row r stored at chunk c ^ (r % 8)."""
    chunks = rows.reshape(rows.shape[0], 8, 16)
    r = np.arange(rows.shape[0])[:, None]
    out = np.empty_like(chunks)
    out[r, np.arange(8)[None, :] ^ (r % 8)] = chunks
    return out.reshape(-1)


def descriptor(start: int, lbo: int, sbo: int, swizzle_code: int = 1) -> int:
    return (start >> 4) | ((lbo >> 4) << 16) | ((sbo >> 4) << 32) | (swizzle_code << 62)


def fragment_to_matrix(out: np.ndarray, n: int) -> np.ndarray:
    """out[thread, i] -> D[64, n] by the wgmma accumulator layout."""
    d = np.zeros((64, n), np.float32)
    for t in range(128):
        w, lane = divmod(t, 32)
        for i in range(n // 2):
            row = 16 * w + lane // 4 + 8 * (i % 4 >= 2)
            col = 2 * (lane % 4) + (i & 1) + 8 * (i // 4)
            d[row, col] = out[t, i]
    return d


CASES = {
    "m64n64k16.f32.bf16": (64, "bf16", 16, ml_dtypes.bfloat16),
    "m64n128k32.f32.e4m3": (128, "e4m3", 32, ml_dtypes.float8_e4m3fn),
    "m64n32k8.f32.tf32": (32, "tf32", 8, np.float32),
}


def run_case(name, rng):
    n, atype, k, dt = CASES[name]
    kt = ROW_BYTES // np.dtype(dt).itemsize        # K elements per 128-byte row
    a = rng.integers(-8, 9, size=(64, kt)).astype(np.float64) / 4
    b = rng.integers(-8, 9, size=(n, kt)).astype(np.float64) / 4   # B stored N x K
    a_img = np.ascontiguousarray(a.astype(dt)).view(np.uint8).reshape(64, ROW_BYTES)
    b_img = np.ascontiguousarray(b.astype(dt)).view(np.uint8).reshape(n, ROW_BYTES)
    img = np.concatenate([swizzle128(a_img), swizzle128(b_img)])
    out = np.zeros((128, n // 2), np.float32)
    ptx = wgmma_kernel(n, "f32", atype, k)
    args = [img, out, img.size, descriptor(0, 16, 1024), descriptor(64 * ROW_BYTES, 16, 1024)]
    isa.run_kernel(ptx, "wgmma_test", 1, 128, args)
    want = np.zeros((64, n), np.float32)
    for s in range(STEPS):
        ks = slice(s * k, (s + 1) * k)
        want = (want.astype(np.float64) + a[:, ks] @ b[:, ks].T).astype(np.float32)
    return fragment_to_matrix(out, n), want, ptx


@pytest.mark.parametrize("name", sorted(CASES))
def test_wgmma_matches_numpy_with_128b_swizzled_descriptors(name):
    """Four K-steps through 128B-swizzled descriptors give A @ B^T, rounded per step."""
    got, want, _ = run_case(name, np.random.default_rng(1))
    np.testing.assert_array_equal(got, want)


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")
@pytest.mark.parametrize("name", sorted(CASES))
def test_generated_wgmma_kernel_assembles_with_ptxas(name, tmp_path):
    """The generated test kernels are real sm_90a PTX."""
    n, atype, k, _ = CASES[name]
    path = tmp_path / "k.ptx"
    path.write_text(wgmma_kernel(n, "f32", atype, k))
    r = subprocess.run(["ptxas", "-arch=sm_90a", str(path), "-o", str(tmp_path / "k.cubin")],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_wgmma_rejects_unsupported_shape_with_accepted_forms():
    """N = 12 is no wgmma shape; the error lists the accepted forms."""
    ptx = wgmma_kernel(64, "f32", "bf16", 16).replace("m64n64k16", "m64n12k16")
    img = np.zeros(16384, np.uint8)
    with pytest.raises(isa.PtxError, match="N = 8..256 step 8"):
        isa.run_kernel(ptx, "wgmma_test", 1, 128,
                       [img, np.zeros(128 * 32, np.float32), 16, 0, 0])


def test_wgmma_needs_a_whole_warpgroup():
    """Two warps cannot run a warpgroup instruction."""
    ptx = wgmma_kernel(64, "f32", "bf16", 16)
    img = np.zeros(16384, np.uint8)
    with pytest.raises(isa.PtxError, match="all 4 warps of each warpgroup"):
        isa.run_kernel(ptx, "wgmma_test", 1, 64,
                       [img, np.zeros(128 * 32, np.float32), 16, 0, 0])


def test_warp_specialized_tma_wgmma_gemm_tile():
    """A producer warp (elect.sync, TMA, mbarriers) feeds a consumer warpgroup (wgmma)
    through 2 stages; C = A @ Bt^T exactly for small-integer bf16 inputs."""
    rng = np.random.default_rng(3)
    a = (rng.integers(-8, 9, (64, 256)) / 4).astype(ml_dtypes.bfloat16)
    bt = (rng.integers(-8, 9, (64, 256)) / 4).astype(ml_dtypes.bfloat16)
    c = np.zeros((64, 64), np.float32)
    ta = make_tensor_map(a, (64, 64), swizzle=128, arg=2)
    tb = make_tensor_map(bt, (64, 64), swizzle=128, arg=3)
    isa.run_kernel((FIXTURES / "ws_gemm.ptx").read_text(), "ws_gemm", 1, 160,
                   [ta, tb, a, bt, c])
    np.testing.assert_array_equal(c, a.astype(np.float64) @ bt.astype(np.float64).T)
