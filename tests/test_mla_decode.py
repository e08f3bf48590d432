"""The `mla-decode` op: DeepSeek-V3 absorbed MLA over a shared latent cache (FlashMLA's
shape: 64 heads per CTA, V = the first 512 columns of the cache, split-KV + combine);
its launches compute attention as numpy does, and its conventions and checks."""

from __future__ import annotations

import math
import shutil
import subprocess

import numpy as np
import pytest

import isa
import models
from isa.errors import InputError
from workloads.kernels.templates.attention import reference
from workloads.kernels.templates.mla import mla_decode_kernel
from workloads.ops import build_op, simulate_op

H100 = models.load_preset("h100_sxm")
SMALL = models.load_preset("h100_sxm", {"sm.count": 4})


def test_bytes_are_the_cache_once_plus_q_and_out():
    """Memory-bound convention: bytes = kv_len x 576 per request + q (576) and out (512)
    per head and token; flops = 2 rows kv_len (576 + 512)."""
    p = build_op("mla-decode", H100, batch=4, heads=128, kv_len=4096, shape_only=True)
    rows = 4 * 128
    assert p.bytes == 2 * (4 * 4096 * 576 + rows * (576 + 512))
    assert p.flops == 2 * rows * 4096 * (576 + 512)


def test_heads_are_packed_64_per_cta_and_kv_split_when_ctas_are_few():
    """128 heads of one request: 2 CTAs of 64 heads; the KV length is split to fill the
    SMs, evened so that every split has the same number of 64-token blocks."""
    p = build_op("mla-decode", H100, batch=1, heads=128, kv_len=8192, shape_only=True)
    fwd, combine = p.launches
    tiles = fwd.detail["tiles"]
    assert tiles["m_tile"] == 64 and tiles["pack"] == 128 and tiles["kv_block"] == 64
    blocks = 8192 // 64
    per_split = math.ceil(blocks / (H100.sm.count // 2))       # no split left empty
    assert tiles["splits"] == math.ceil(blocks / per_split) == 64
    assert fwd.grid == (2, 1, 64)
    assert combine.grid == (128, 1, 1) and combine.block == (512, 1, 1)


def test_op_launches_compute_absorbed_mla():
    """Running the op's launches (forward with 4 KV splits, then combine) on its random
    data gives softmax(q c^T / sqrt(192)) c[:, :512] within the 16-bit rounding bound."""
    p = build_op("mla-decode", H100, batch=1, heads=16, kv_len=200, seqlen_q=2)
    fwd, combine = p.launches
    assert fwd.detail["tiles"]["splits"] == 4
    for launch in p.launches:
        isa.run_kernel(launch.ptx, launch.entry, launch.grid, launch.block, list(launch.args),
                       shared_bytes=launch.shared_bytes)
    q, cache, out = fwd.args[3], fwd.args[4], combine.args[2]
    scale = 1 / math.sqrt(192)
    want = reference(q, cache, cache[..., :512], False, scale)
    absv = reference(q, cache, np.abs(cache[..., :512].astype(np.float64)), False, scale)
    u = 2.0 ** -8
    assert np.all(np.abs(out.astype(np.float64) - want) <= 2 * u * absv + u * np.abs(want))


@pytest.mark.parametrize("sizes, flag", [(dict(heads=48), "--heads"),
                                         (dict(kv_lora_rank=100), "kv_lora_rank"),
                                         (dict(kv_len=0), "--kv-len"),
                                         (dict(dtype="fp8"), "--dtype")])
def test_bad_sizes_are_refused(sizes, flag):
    """Invalid sizes raise InputError naming the flag or key."""
    with pytest.raises(InputError, match=flag):
        build_op("mla-decode", H100, **{**dict(batch=1, heads=16, kv_len=128), **sizes})


def test_sampled_agrees_with_full_within_3_percent():
    """Split-KV MLA decode on 4 SMs: op-level sampling within 3 % of the full run."""
    plan = build_op("mla-decode", SMALL, batch=2, heads=16, kv_len=4096, shape_only=True)
    assert plan.samples
    sampled = simulate_op(plan, SMALL, "sampled")["time_us"]
    full = simulate_op(plan, SMALL, "full")["time_us"]
    assert abs(sampled / full - 1) < 0.03, (sampled, full)


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")
def test_mla_kernels_assemble_with_ptxas(tmp_path):
    """The MLA forward (with register spills, see templates.mla) and combine assemble."""
    kern = mla_decode_kernel(heads=128)
    for name, text in (("fwd", kern.ptx), ("combine", kern.combine_ptx)):
        src = tmp_path / f"{name}.ptx"
        src.write_text(text)
        r = subprocess.run(["ptxas", "-arch=sm_90a", str(src), "-o", str(tmp_path / "k.cubin")],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-2000:]

