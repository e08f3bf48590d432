"""Attention backward: the generated pre/main/post kernels run through `isa.run_kernel` on
the forward template's O and LSE and match a float64 numpy backward (dQ, dK, dV; causal,
GQA, 192/128, one or two consumer warpgroups, fp16); they assemble with ptxas; bad
arguments are refused."""

from __future__ import annotations

import json
import shutil
import subprocess

import ml_dtypes
import numpy as np
import pytest

import isa
import models
from isa.errors import InputError
from simulator.app.cli import main
from workloads.kernels.templates.attention import attention_kernel
from workloads.kernels.templates.attention_bwd import (
    attention_bwd_kernel,
    padded,
    reference_backward,
)
from workloads.ops import build_op, simulate_op
from workloads.ops.attention_backward import iterations_per_cta

DT = {"bf16": ml_dtypes.bfloat16, "fp16": np.float16}
UNIT = {"bf16": 2.0 ** -8, "fp16": 2.0 ** -11}

# name: (generator arguments, batch, seqlen_q, seqlen_k, heads, kv_heads)
VARIANTS = {
    "d64-noncausal": (dict(headdim=64), 1, 64, 128, 2, 2),
    "d64-causal-ragged": (dict(headdim=64, causal=True), 1, 100, 200, 1, 1),
    "d128-causal-gqa": (dict(headdim=128, causal=True), 1, 130, 130, 4, 2),
    "d192v128-causal": (dict(headdim=192, headdim_v=128, causal=True), 1, 128, 128, 1, 1),
    "d128-one-consumer": (dict(headdim=128, consumers=1), 2, 70, 150, 1, 1),
    "d64-fp16-gqa": (dict(headdim=64, dtype="fp16"), 1, 64, 64, 2, 1),
}


def run(params, b, sq, sk, h, hkv, seed=0):
    """Forward (O, LSE) then the three backward kernels; returns inputs and dQ, dK, dV."""
    kern = attention_bwd_kernel(**params)
    cfg = kern.config
    d, dv, dt = cfg.headdim, cfg.headdim_v, DT[cfg.dtype]
    rng = np.random.default_rng(seed)
    q, k = (rng.standard_normal(s).astype(dt) for s in ((b, sq, h, d), (b, sk, hkv, d)))
    v, do = (rng.standard_normal(s).astype(dt) for s in ((b, sk, hkv, dv), (b, sq, h, dv)))
    fwd = attention_kernel(headdim=d, headdim_v=dv, m_tile=64, kv_block=64, causal=cfg.causal,
                           dtype=cfg.dtype)
    o, lse = np.zeros((b, sq, h, dv), dt), np.zeros((1, b, sq, h), np.float32)
    isa.run_kernel(fwd.ptx, fwd.entry, fwd.grid(b, h, sq, 1, h // hkv), fwd.block,
                   fwd.args(q, k, v, o, lse), shared_bytes=fwd.shared_bytes)
    lse_pad, dsum = np.zeros((b, h, padded(sq)), np.float32), np.zeros((b, h, padded(sq)),
                                                                       np.float32)
    dq_acc = np.full((b, h, padded(sq), d), 7.0, np.float32)     # the preprocess zeroes it
    isa.run_kernel(kern.pre_ptx, kern.pre_entry, kern.pre_grid(b, h, sq), kern.row_block,
                   kern.pre_args(o, do, lse, lse_pad, dsum, dq_acc))
    dk, dvv, dq = np.zeros(k.shape, dt), np.zeros(v.shape, dt), np.zeros(q.shape, dt)
    isa.run_kernel(kern.ptx, kern.entry, kern.grid(b, hkv, sk), kern.block,
                   kern.args(q, k, v, do, lse_pad, dsum, dq_acc, dk, dvv),
                   shared_bytes=kern.shared_bytes)
    isa.run_kernel(kern.post_ptx, kern.post_entry, kern.post_grid(b, h, sq), kern.row_block,
                   kern.post_args(dq_acc, dq))
    return (q, k, v, do, o), (dq, dk, dvv), (lse_pad, dsum, dq_acc)


def bounds(q, k, v, do, o, causal, u):
    """Error bounds per gradient: P rounded to 16 bits before dV (u per term of sum P |dO|);
    dS rounded (u |dS|) and D = rowsum(dO o O) read from the 16-bit O (u sum |dO| |O| per
    row, times P); then one rounding of the output (u |grad|)."""
    q64, k64, v64, do64, o64 = (np.asarray(x, np.float64) for x in (q, k, v, do, o))
    b, sq, h, d = q64.shape
    g = h // k64.shape[2]
    kk, vv = np.repeat(k64, g, axis=2), np.repeat(v64, g, axis=2)
    scale = 1 / np.sqrt(d)
    s = np.einsum("bqhd,bkhd->bhqk", q64, kk) * scale
    if causal:
        sk = k64.shape[1]
        s = np.where(np.arange(sk)[None, :] <= np.arange(sq)[:, None] + sk - sq, s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    dp = np.einsum("bqhd,bkhd->bhqk", do64, vv)
    ds = np.abs(p * (dp - (p * dp).sum(-1, keepdims=True)))
    d_err = np.einsum("bqhd,bqhd->bhq", np.abs(do64), np.abs(o64))[..., None]
    ds_err = u * (ds + p * d_err)
    fold = lambda x: x.reshape(*x.shape[:2], k64.shape[2], g, x.shape[-1]).sum(3)  # noqa: E731
    return (np.einsum("bhqk,bkhd->bqhd", ds_err, np.abs(kk)) * scale,
            fold(np.einsum("bhqk,bqhd->bkhd", ds_err, np.abs(q64)) * scale),
            fold(np.einsum("bhqk,bqhd->bkhd", u * p, np.abs(do64))))


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_backward_matches_float64_reference(name):
    """dQ, dK, dV within twice the bounds of `bounds` plus one output rounding."""
    params, b, sq, sk, h, hkv = VARIANTS[name]
    (q, k, v, do, o), got, _ = run(params, b, sq, sk, h, hkv)
    cfg = attention_bwd_kernel(**params).config
    u = UNIT[cfg.dtype]
    want = reference_backward(q, k, v, do, cfg.causal)
    for label, g, w, bound in zip(("dq", "dk", "dv"), got, want,
                                  bounds(q, k, v, do, o, cfg.causal, u), strict=True):
        err = np.abs(g.astype(np.float64) - w)
        tol = 2 * bound + u * np.abs(w) + 1e-6
        assert np.all(err <= tol), (label, float((err - tol).max()))


def test_preprocess_pads_rows_and_zeroes_the_dq_accumulator():
    """D = rowsum(dO o O) per (b, h, s); padding rows get LSE +inf and D 0; the forward's
    LSE is carried over; dq_acc (filled with 7 before) holds 0 in the padding rows (their
    P is 0) and scale x dq_acc = dQ elsewhere."""
    params, b, sq, sk, h, hkv = VARIANTS["d64-causal-ragged"]
    (q, k, v, do, o), (dq, _, _), (lse_pad, dsum, dq_acc) = run(params, b, sq, sk, h, hkv)
    want = np.einsum("bqhd,bqhd->bhq", do.astype(np.float64), o.astype(np.float64))
    np.testing.assert_allclose(dsum[:, :, :sq], want, rtol=1e-5, atol=1e-5)
    assert np.all(dsum[:, :, sq:] == 0) and np.all(np.isposinf(lse_pad[:, :, sq:]))
    assert np.all(np.isfinite(lse_pad[:, :, :sq]))
    assert np.all(dq_acc[:, :, sq:] == 0)
    scaled = dq_acc[:, :, :sq].transpose(0, 2, 1, 3) / np.sqrt(q.shape[-1])
    np.testing.assert_array_equal(scaled.astype(dq.dtype), dq)


def test_shared_memory_layout_and_blocks():
    """shared = K + V + stages x (Q_i + dO_i) + dS^T + stages x (LSE_i, D_i) + barriers;
    block = 128 x (consumers + 1); dQ's D columns split at 64-column edges."""
    k = attention_bwd_kernel(headdim=192, headdim_v=128, causal=True)
    assert k.block == (384, 1, 1)
    assert k.shared_bytes == (3 + 2) * 128 * 128 + 2 * (3 + 2) * 64 * 128 + 128 * 64 * 2 \
        + 2 * 512 + 8 * 7
    assert k.config.dq_pieces == [[(0, 64), (64, 32)], [(96, 32), (128, 64)]]
    assert attention_bwd_kernel(headdim=64).config.dq_pieces == [[(0, 32)], [(32, 32)]]
    assert k.grid(2, 8, 1000) == (8, 8, 2)


@pytest.mark.parametrize("arg, value", [("headdim", 96), ("headdim_v", 320), ("consumers", 3),
                                        ("dtype", "fp8"), ("stages", 0),
                                        ("consumer_regs", 200)])
def test_bad_arguments_are_refused_with_the_accepted_values(arg, value):
    """Each invalid generator argument raises InputError naming it."""
    with pytest.raises(InputError, match=arg):
        attention_bwd_kernel(**{arg: value})


def test_layout_that_does_not_fit_is_refused():
    """Head dim 256 with 128 keys and two stages exceeds 227 KiB: refused with the sizes."""
    with pytest.raises(InputError, match="shared memory"):
        attention_bwd_kernel(headdim=256, consumers=2, stages=2)


def test_wrong_tensor_shapes_are_refused():
    """A dk of the wrong shape names the argument and the accepted shape."""
    kern = attention_bwd_kernel(headdim=64)
    q = np.zeros((1, 64, 2, 64), DT["bf16"])
    k = np.zeros((1, 128, 2, 64), DT["bf16"])
    f32 = np.float32
    with pytest.raises(InputError, match="dk has shape"):
        kern.args(q, k, k, q, np.zeros((1, 2, 64), f32), np.zeros((1, 2, 64), f32),
                  np.zeros((1, 2, 64, 64), f32), np.zeros((1, 64, 2, 64), DT["bf16"]), k)


PTXAS = [dict(headdim=64), dict(headdim=128, causal=True),
         dict(headdim=192, headdim_v=128, causal=True), dict(headdim=256, consumers=1),
         dict(headdim=128, dtype="fp16")]


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")
@pytest.mark.parametrize("params", PTXAS, ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()))
def test_generated_ptx_assembles_with_ptxas(params, tmp_path):
    """The preprocess, main and postprocess kernels assemble for sm_90a."""
    kern = attention_bwd_kernel(**params)
    for name, text in (("pre", kern.pre_ptx), ("main", kern.ptx), ("post", kern.post_ptx)):
        src = tmp_path / f"{name}.ptx"
        src.write_text(text)
        r = subprocess.run(["ptxas", "-arch=sm_90a", str(src), "-o", str(tmp_path / "k.cubin")],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-2000:]


# ------------------------------------------------------------------ the op ----------
H100 = models.load_preset("h100_sxm")
SMALL = models.load_preset("h100_sxm", {"sm.count": 4})


def test_op_flops_are_2_5_times_the_forward_and_bytes_read_and_written_once():
    """flops = 2.5 x forward (10 B H Sq Sk D, halved when causal, for D = Dv; 2.5 x 2 B H
    Sq Sk (D + Dv) otherwise); bytes = Q, K, V, O, dO read and dQ, dK, dV written."""
    p = build_op("attention", H100, batch=2, heads=8, seqlen=1024, headdim=128, causal=True,
                 backward=True, shape_only=True)
    assert p.flops == 10 * 2 * 8 * 1024 * 1024 * 128 / 2
    assert p.bytes == 2 * (2 * 2 * 1024 * 8 * 128) * 4
    fwd = build_op("attention", H100, batch=1, heads=4, kv_heads=2, seqlen=256, seqlen_k=512,
                   headdim=192, headdim_v=128, shape_only=True)
    bwd = build_op("attention", H100, batch=1, heads=4, kv_heads=2, seqlen=256, seqlen_k=512,
                   headdim=192, headdim_v=128, shape_only=True, backward=True)
    assert bwd.flops == 2.5 * fwd.flops and bwd.bytes == 2 * fwd.bytes
    assert bwd.sizes["backward"] and bwd.peak == "tensor_bf16_tflops"


def test_op_launches_preprocess_main_postprocess_with_fa3_tiles():
    """Three launches; 128 keys per CTA (two consumers) up to head dim 192, 64 at 256;
    grid = key blocks x kv heads x batch (GQA: the CTA loops over the group)."""
    p = build_op("attention", H100, batch=1, heads=128, seqlen=4096, headdim=192,
                 headdim_v=128, causal=True, backward=True)
    pre, main, post = p.launches
    assert "pre" in pre.entry and "post" in post.entry and main.timing_only
    assert main.grid == (32, 128, 1) and main.block == (384, 1, 1)
    assert main.detail["tiles"]["kv_block"] == 128
    p = build_op("attention", H100, batch=2, heads=16, kv_heads=4, seqlen=1000, headdim=256,
                 backward=True, shape_only=True)
    assert p.launches[1].grid == (16, 4, 2) and p.launches[1].block == (256, 1, 1)


def test_iterations_per_cta_follow_the_causal_diagonal():
    """Non-causal: every key block iterates over all query blocks of every group head;
    causal: key block j starts at the query block of its first visible query."""
    assert list(iterations_per_cta(256, 256, 128, 2, False)) == [8, 8]
    assert list(iterations_per_cta(512, 512, 128, 1, True)) == [8, 6, 4, 2]
    assert list(iterations_per_cta(64, 256, 128, 1, True)) == [1, 1]     # bottom-right


@pytest.mark.parametrize("sizes", [
    dict(batch=1, heads=4, seqlen=1024, headdim=64),
    dict(batch=1, heads=4, kv_heads=2, seqlen=768, headdim=192, headdim_v=128, causal=True),
], ids=["d64-noncausal", "d192v128-causal-gqa"])
def test_sampled_backward_is_within_3_percent_of_full(sizes):
    """Three reduced main launches fitted per CTA (plus pre/post whole) give the full
    simulation's time within 3 % (4 SMs, 8 waves of 16 / 3 waves of up to 24 blocks)."""
    p = build_op("attention", SMALL, **sizes, backward=True, shape_only=True)
    assert len(p.samples) == 5
    full = simulate_op(p, SMALL, "full")["time_us"]
    sampled = simulate_op(p, SMALL, "sampled")["time_us"]
    assert abs(sampled - full) <= 0.03 * full, (sampled, full)


def test_cli_backward_flag_prints_the_json(capsys):
    """`ptxsim op attention ... --backward --json` times the three kernels."""
    assert main(["op", "attention", "--batch", "1", "--heads", "2", "--seqlen", "128",
                 "--headdim", "64", "--backward", "--fidelity", "full", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["backward"] is True and out["time_us"] > 0
    assert out["flops"] == 2.5 * 4 * 2 * 128 * 128 * 64
    assert [k["name"][:12] for k in out["kernel"]] == ["attn_bwd_pre", "attn_bwd_bf1",
                                                        "attn_bwd_pos"]


def test_train_graph_attention_backward_node_plans_the_backward_kernels():
    """A train layer's attention.bwd node maps to the attention op with backward=True,
    whose plan is the three backward launches at the node's flops."""
    import workloads
    from workloads.node_ops import node_op

    graph = workloads.layer("bert-base", "train", tokens=256)
    node = next(n for n in graph.nodes if n.name == "attention.bwd")
    op = node_op(node, graph.meta)
    plan = build_op(op.kind, H100, **op.kwargs)
    assert op.kwargs["backward"] and len(plan.launches) == 3
    assert plan.flops == node.flops
