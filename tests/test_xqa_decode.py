"""The XQA-style decode attention template (`workloads.kernels.templates.xqa`): generated
PTX runs through `isa.run_kernel` over a paged bf16 cache and matches float64 numpy."""

from __future__ import annotations

import math
import shutil
import subprocess

import ml_dtypes
import numpy as np
import pytest

import isa
from isa.errors import InputError
from workloads.kernels.templates.xqa import reference, sub_sequences, xqa_kernel

TOL = 1e-2    # bf16 output, bf16 X (P) and exp2 approximations


def run(group: int, kv_heads: int, seqlens: list[int], sub_seqs: int = 1, seed: int = 0):
    """(kernel output, float64 reference) for a shuffled page pool with spare pages."""
    rng = np.random.default_rng(seed)
    b, h = len(seqlens), kv_heads * group
    pps = max(math.ceil(s / 64) for s in seqlens)
    pages = b * pps + 3
    bf = ml_dtypes.bfloat16
    q = rng.standard_normal((b, h, 128)).astype(bf)
    k = rng.standard_normal((pages, kv_heads, 64, 128)).astype(bf)
    v = rng.standard_normal((pages, kv_heads, 64, 128)).astype(bf)
    table = rng.permutation(pages)[:b * pps].reshape(b, pps).astype(np.int32)
    lens = np.array(seqlens, np.int32)
    out = np.zeros((b, h, 128), bf)
    kern = xqa_kernel(group, multi_block=sub_seqs > 1)
    scratch = {}
    if sub_seqs > 1:
        n = kern.config.n
        scratch = {"part_o": np.zeros((b, kv_heads, sub_seqs, n, 128), np.float32),
                   "part_ml": np.zeros((b, kv_heads, sub_seqs, n, 2), np.float32),
                   "semaphores": np.zeros(b * kv_heads, np.uint32)}
    args = kern.args(q, k, v, out, table, lens, sub_seqs=sub_seqs, **scratch)
    isa.run_kernel(kern.ptx, kern.entry, kern.grid(b, kv_heads, sub_seqs), kern.block, args,
                   kern.shared_bytes)
    if sub_seqs > 1:
        assert not scratch["semaphores"].any()        # the last CTA's inc wrapped to zero
    return out.astype(np.float64), reference(q, k, v, table, lens)


@pytest.mark.parametrize("group, kv_heads, seqlens", [
    (1, 3, [5, 64, 130]),      # MHA: shorter than a page, one page, not a multiple
    (4, 2, [37, 200]),         # GQA 4 (N padded to 8)
    (8, 1, [129, 1]),          # GQA 8: a one-token cache
    (12, 1, [70]),             # 12 heads: N = 16, two 8-row groups
])
def test_xqa_decode_matches_numpy(group, kv_heads, seqlens):
    """One CTA per (request, kv head) computes softmax(q K^T / sqrt(d)) V over its pages."""
    got, want = run(group, kv_heads, seqlens)
    np.testing.assert_allclose(got, want, atol=TOL, rtol=0)


@pytest.mark.parametrize("group, kv_heads, seqlens, sub_seqs", [
    (4, 2, [37, 300], 3),      # one request with fewer tiles than sub-sequences
    (8, 1, [1, 200, 64], 4),   # idle sub-sequence CTAs exit; round-robin tiles
    (1, 2, [130, 3], 2),
])
def test_xqa_multi_block_merges_partials(group, kv_heads, seqlens, sub_seqs):
    """Sub-sequence CTAs' partials merged by the last one equal the single-CTA result."""
    got, want = run(group, kv_heads, seqlens, sub_seqs, seed=1)
    np.testing.assert_allclose(got, want, atol=TOL, rtol=0)


def test_xqa_sub_sequences_follow_launch_heuristic():
    """nbSubSeq = min(max(1, round(floor(3 SMs / (B Hkv)) / 4)), tiles) with C rounding."""
    assert sub_sequences(132, 1, 8, 65536) == 12       # floor(396 / 8) = 49 -> 12.25 -> 12
    assert sub_sequences(132, 1, 8, 100) == 2          # capped by the 2 tiles
    assert sub_sequences(132, 66, 3, 4096) == 1        # floor(2) / 4 = 0.5 -> 1 (half up)
    assert sub_sequences(132, 512, 8, 4096) == 1


def test_xqa_kernel_refuses_unsupported_page():
    """The template reads one 64-token page per tile; other pages are refused."""
    with pytest.raises(InputError, match="page"):
        xqa_kernel(4, page=32)


def test_decode_attention_key_routes_decode_to_xqa():
    """kernels.decode_attention = "xqa" plans decode through the XQA launch; "fa3" and
    non-decode shapes keep the FlashAttention-3-style template."""
    import models
    from workloads.ops import build_op

    sizes = {"batch": 2, "heads": 32, "kv_heads": 8, "seqlen": 1, "seqlen_k": 300,
             "headdim": 128, "shape_only": True}
    xqa = models.load_preset("h100_sxm")
    assert xqa.kernels.decode_attention == "xqa", "the preset's default"
    launch = build_op("attention", xqa, **sizes).launches[0]
    assert launch.entry.startswith("xqa_decode_bf16_g4")
    assert launch.grid == (1, sub_sequences(132, 2, 8, 300), 16)
    assert launch.block == (128, 1, 3)
    prefill = build_op("attention", xqa, **{**sizes, "seqlen": 64, "seqlen_k": 64})
    assert prefill.launches[0].entry.startswith("attn_fwd")
    fa3 = build_op("attention", models.load_preset("h100_sxm", {"kernels.decode_attention":
                                                                "fa3"}), **sizes)
    assert fa3.launches[0].entry.startswith("attn_fwd")


def test_decode_attention_xqa_leaves_mha_decode_to_fa3():
    """With kernels.decode_attention = "xqa", MHA decode (kv_heads == heads) keeps the
    FlashAttention-3-style template (TensorRT-LLM runs MMHA there); MQA goes to XQA."""
    import models
    from workloads.ops import build_op

    xqa = models.load_preset("h100_sxm", {"kernels.decode_attention": "xqa"})
    sizes = {"batch": 2, "seqlen": 1, "seqlen_k": 300, "headdim": 128, "shape_only": True}
    mha = build_op("attention", xqa, heads=32, kv_heads=32, **sizes)
    assert mha.launches[0].entry.startswith("attn_fwd")
    mqa = build_op("attention", xqa, heads=32, kv_heads=1, **sizes)
    assert mqa.launches[0].entry.startswith("xqa_decode_bf16_g32")


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")
@pytest.mark.parametrize("group, multi_block", [(1, False), (4, True), (8, False), (12, True),
                                                (16, True)])
def test_xqa_kernel_assembles_with_ptxas_without_spills(group, multi_block, tmp_path):
    """The generated PTX (with the multi-block merge, two sub-sequences' partials loaded
    a step) assembles for sm_90a without spilling registers."""
    src = tmp_path / "xqa.ptx"
    src.write_text(xqa_kernel(group, multi_block=multi_block).ptx)
    r = subprocess.run(["ptxas", "-arch=sm_90a", "-v", str(src), "-o",
                        str(tmp_path / "xqa.cubin")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "0 bytes spill stores, 0 bytes spill loads" in r.stdout + r.stderr, \
        (r.stdout + r.stderr)[-2000:]
