"""The fused attention template: generated PTX runs through `isa.run_kernel` and matches a
float64 numpy attention (causal, GQA, packed heads, split-KV + combine, MLA's V = K[:Dv],
head dim 96, fp8 with descales); every variant assembles with ptxas without spills; bad
arguments are refused."""

from __future__ import annotations

import shutil
import subprocess

import ml_dtypes
import numpy as np
import pytest

import isa
from isa.errors import InputError
from workloads.kernels.templates.attention import attention_kernel, reference

DT = {"bf16": ml_dtypes.bfloat16, "fp16": np.float16}
UNIT = {"bf16": 2.0 ** -8, "fp16": 2.0 ** -11}

# name: (generator arguments, batch, seqlen_q, seqlen_k, heads, kv_heads, splits)
VARIANTS = {
    "d64-noncausal-ktail": (dict(headdim=64, kv_block=64), 1, 128, 200, 2, 2, 1),
    "d128-causal-gqa": (dict(headdim=128, causal=True), 1, 160, 256, 4, 2, 1),
    "d192v128-causal-m64": (dict(headdim=192, headdim_v=128, m_tile=64, kv_block=64,
                                 causal=True), 2, 130, 130, 2, 1, 1),
    "d64-fp16-3stages": (dict(headdim=64, kv_block=32, stages=3, dtype="fp16"), 1, 64, 144,
                         1, 1, 1),
    "decode-pack4-split3": (dict(headdim=128, m_tile=64, kv_block=64, pack=4, split=True),
                            2, 1, 300, 8, 2, 3),
    "decode-pack12-two-blocks": (dict(headdim=64, m_tile=64, kv_block=64, pack=12,
                                      consumer_regs=232), 1, 7, 150, 24, 2, 1),
    "pack6-causal": (dict(headdim=64, m_tile=64, kv_block=32, pack=6, causal=True),
                     1, 13, 80, 6, 1, 1),
    "mla-pack16-split2": (dict(headdim=576, headdim_v=512, m_tile=64, kv_block=64, pack=16,
                               split=True, v_from_k=True), 1, 2, 150, 16, 1, 2),
    "decode-pack4-split3-inline": (dict(headdim=128, m_tile=64, kv_block=64, pack=4,
                                        split=True, inline_combine=True), 2, 1, 300, 8, 2, 3),
    "mha-split4-inline-m128": (dict(headdim=64, kv_block=32, split=True, inline_combine=True),
                               1, 3, 250, 2, 2, 4),
    "decode-pack4-paged64": (dict(headdim=128, m_tile=64, kv_block=32, pack=4, page=64),
                             3, 1, 150, 8, 2, 1),
    "mha-paged32-split3-inline": (dict(headdim=64, m_tile=64, kv_block=16, page=32,
                                       split=True, inline_combine=True), 2, 1, 100, 2, 2, 3),
    "d96-m192n144-ktail": (dict(headdim=96, m_tile=192, kv_block=144), 1, 200, 301, 2, 1, 1),
    "d96-m192n144-causal-gqa": (dict(headdim=96, m_tile=192, kv_block=144, causal=True),
                                1, 389, 389, 4, 2, 1),
    "d96-fp16-m128": (dict(headdim=96, kv_block=48, dtype="fp16"), 1, 100, 150, 2, 2, 1),
    "d96v64-decode-pack4-paged64": (dict(headdim=96, headdim_v=64, m_tile=64, kv_block=32,
                                         pack=4, page=64), 2, 1, 150, 8, 2, 1),
}


def paged(kv, page: int, rng, table=None):
    """`kv` [B, Sk, Hkv, D] scattered over a pool of pages [P, page, Hkv, D] in a random
    order (a spare page among them, the tail of each last page random too) and the int32
    block table [B, pages per sequence] that finds them (`table` given: that order)."""
    b, sk, hkv, d = kv.shape
    pps = -(-sk // page)
    if table is None:
        table = rng.permutation(b * pps + 1)[:b * pps].reshape(b, pps).astype(np.int32)
    pool = rng.standard_normal((b * pps + 1, page, hkv, d)).astype(kv.dtype)
    for i in range(b):
        for j in range(pps):
            keys = kv[i, j * page:(j + 1) * page]
            pool[table[i, j], :keys.shape[0]] = keys
    return pool, table


def run(params, b, sq, sk, h, hkv, splits, seed=0):
    kern = attention_kernel(**params)
    cfg = kern.config
    dt = DT[cfg.dtype]
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((b, sq, h, cfg.headdim)).astype(dt)
    k = rng.standard_normal((b, sk, hkv, cfg.headdim)).astype(dt)
    v = None if cfg.v_from_k else rng.standard_normal((b, sk, hkv, cfg.headdim_v)).astype(dt)
    out = np.zeros((b, sq, h, cfg.headdim_v), dt)
    lse = np.zeros((splits, b, sq, h), np.float32)
    o = np.zeros((splits, *out.shape), np.float32) if cfg.split else out
    extra = {}
    if cfg.inline_combine:
        extra = {"out": out, "counters": np.zeros(kern.counter_count(b, h, sq, h // hkv),
                                                  np.int32)}
    kk, vk = k, v
    if cfg.page:
        kk, table = paged(k, cfg.page, rng)
        vk, _ = paged(v, cfg.page, rng, table)
        extra |= {"block_table": table, "seqlen_k": sk}
    isa.run_kernel(kern.ptx, kern.entry, kern.grid(b, h, sq, splits, h // hkv), kern.block,
                   kern.args(q, kk, vk, o, lse, splits=splits, **extra),
                   shared_bytes=kern.shared_bytes)
    if cfg.inline_combine:
        assert not extra["counters"].any()          # the last CTA of each block reset it
    elif cfg.split:
        isa.run_kernel(kern.combine_ptx, cfg.combine_entry, kern.combine_grid(b, h, sq),
                       (cfg.headdim_v, 1, 1), [o, lse, out, splits, b * sq * h])
    vv = k[..., :cfg.headdim_v] if cfg.v_from_k else v
    return q, k, vv, out, lse


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_attention_matches_float64_reference(name):
    """O within the error the arithmetic allows: P rounded to the 16-bit type before P.V
    (relative u per term of sum p |v|), ex2/rcp approximations (2^-20 relative, bounded by
    the same sum), then one rounding of O to the output type."""
    params, b, sq, sk, h, hkv, splits = VARIANTS[name]
    q, k, v, got, _ = run(params, b, sq, sk, h, hkv, splits)
    cfg = attention_kernel(**params).config
    want = reference(q, k, v, cfg.causal)
    absv = reference(q, k, np.abs(v.astype(np.float64)), cfg.causal)   # sum_j p_j |v_j|
    u = UNIT[cfg.dtype]
    tol = 2 * u * absv + u * np.abs(want) + 1e-6
    err = np.abs(got.astype(np.float64) - want)
    assert np.all(err <= tol), float((err - tol).max())


FA3_VARIANTS = sorted(n for n, v in VARIANTS.items()
                      if not v[0].get("v_from_k") and v[0].get("m_tile") != 192)


@pytest.mark.parametrize("name", FA3_VARIANTS)
def test_fa3_schedule_matches_float64_reference(name):
    """The fa3 schedule (intra-warpgroup overlap, ping-pong, split K/V barriers) computes
    the same attention within the same error bound as the plain one."""
    params, b, sq, sk, h, hkv, splits = VARIANTS[name]
    params = {**params, "schedule": "fa3"}
    q, k, v, got, _ = run(params, b, sq, sk, h, hkv, splits)
    cfg = attention_kernel(**params).config
    want = reference(q, k, v, cfg.causal)
    absv = reference(q, k, np.abs(v.astype(np.float64)), cfg.causal)
    u = UNIT[cfg.dtype]
    tol = 2 * u * absv + u * np.abs(want) + 1e-6
    err = np.abs(got.astype(np.float64) - want)
    assert np.all(err <= tol), float((err - tol).max())


def test_fa3_schedule_overlaps_and_ping_pongs():
    """fa3: S_n = Q K_n^T and the previous P.V are committed as two groups and only S is
    waited for before the softmax; V has its own full/empty mbarrier per stage; two or
    more consumer warpgroups pass a token (one mbarrier each, 4 warp arrivals); one
    warpgroup has no token."""
    two = attention_kernel(headdim=128, schedule="fa3")
    assert "wgmma.wait_group.sync.aligned 1;" in two.ptx
    assert two.config.flag_offset - two.config.barrier_offset == 8 * (1 + 4 * 2 + 2)
    assert two.ptx.count(f"[%bars+{two.config.token_bar(1)}], 4;") == 1
    assert two.entry.endswith("_fa3")
    one = attention_kernel(headdim=64, m_tile=64, schedule="fa3")
    assert not one.config.pingpong and "%tnext]" not in one.ptx
    plain = attention_kernel(headdim=128)
    assert "wait_group.sync.aligned 1;" not in plain.ptx and not plain.config.split_kv_bars


def test_log_sum_exp_is_written_per_row():
    """Without split the kernel writes lse = log2 sum_j exp2(scale log2(e) q.k_j)."""
    params, b, sq, sk, h, hkv, _ = VARIANTS["d128-causal-gqa"]
    q, k, _, _, lse = run(params, b, sq, sk, h, hkv, 1, seed=3)
    g = h // hkv
    s = np.einsum("bqhd,bkhd->bhqk", q.astype(np.float64),
                  np.repeat(k.astype(np.float64), g, axis=2)) / np.sqrt(q.shape[-1])
    allowed = np.arange(sk)[None, :] <= np.arange(sq)[:, None] + (sk - sq)
    s = np.where(allowed, s, -np.inf)
    want = np.log2(np.exp(s).sum(-1)).transpose(0, 2, 1)        # [b, sq, h]
    np.testing.assert_allclose(lse[0], want, rtol=1e-4, atol=1e-3)


def test_split_kv_equals_one_pass():
    """Three KV splits combined give the one-pass result (to the f32 partials' rounding)."""
    params = dict(headdim=64, m_tile=64, kv_block=32, pack=2, split=True)
    one = run(params, 1, 3, 200, 4, 2, 1, seed=5)[3].astype(np.float64)
    three = run(params, 1, 3, 200, 4, 2, 3, seed=5)[3].astype(np.float64)
    np.testing.assert_allclose(three, one, atol=2 * 2.0 ** -8 * np.abs(one).max())


def test_shared_memory_layout_and_block():
    """shared = Q + stages x (K + V) + barriers; block = 128 x (m_tile / 64 + 1)."""
    k = attention_kernel(headdim=192, headdim_v=128, causal=True)
    assert k.block == (384, 1, 1)
    assert k.shared_bytes == 3 * 128 * 128 + 2 * (3 + 2) * 128 * 128 + 8 * 5
    mla = attention_kernel(headdim=576, headdim_v=512, m_tile=64, kv_block=64, pack=128,
                           split=True, v_from_k=True)
    assert mla.shared_bytes == 9 * 64 * 128 * 3 + 8 * 5      # V read from the K tile


def test_head_dim_96_uses_64_byte_swizzled_atoms():
    """Head dim 96: Q/K/V in 32-column atoms of 64-byte rows (three per row), the same bytes
    as dense tiles; FA3's 192-row tile takes 512 threads and 160 consumer registers."""
    cfg = attention_kernel(headdim=96, m_tile=192, kv_block=144).config
    assert (cfg.k_cols, cfg.d_atoms, cfg.v_atoms, cfg.k_span) == (32, 3, 3, 64)
    assert cfg.q_bytes == 192 * 96 * 2 and cfg.stage_bytes == 2 * 144 * 96 * 2
    assert cfg.threads == 512 and cfg.consumer_regs == 160
    assert attention_kernel(headdim=128).config.k_cols == 64


@pytest.mark.parametrize("arg, value", [("headdim", 80), ("headdim_v", 100),
                                        ("headdim_v", 320), ("m_tile", 256),
                                        ("kv_block", 72), ("dtype", "e5m2"), ("stages", 0),
                                        ("pack", 192), ("consumer_regs", 200),
                                        ("consumer_regs", 160),
                                        ("page", 100)])
def test_bad_arguments_are_refused_with_the_accepted_values(arg, value):
    """Each invalid generator argument raises InputError naming it."""
    with pytest.raises(InputError, match=arg):
        attention_kernel(**{arg: value})


def test_inline_combine_needs_split_and_its_buffers():
    """inline_combine only with split, and the launch must pass out and enough counters."""
    with pytest.raises(InputError, match="inline_combine"):
        attention_kernel(headdim=64, inline_combine=True)
    kern = attention_kernel(headdim=64, m_tile=64, pack=2, split=True, inline_combine=True)
    assert not kern.combine_ptx and kern.config.entry.endswith("_ic")
    q = np.zeros((1, 1, 4, 64), np.float16)
    k = np.zeros((1, 64, 2, 64), np.float16)
    o, lse = np.zeros((2, 1, 1, 4, 64), np.float32), np.zeros((2, 1, 1, 4), np.float32)
    with pytest.raises(InputError, match="counters"):
        kern.args(q, k, k, o, lse, splits=2, out=np.zeros((1, 1, 4, 64), np.float16))


def test_paged_launch_needs_its_block_table_and_length():
    """A paged kernel refuses a missing or out-of-pool block table, a pool of another page
    size and a seqlen_k its pages cannot hold, naming what it accepts."""
    kern = attention_kernel(headdim=64, m_tile=64, kv_block=32, pack=2, page=64)
    q = np.zeros((2, 1, 4, 64), np.float16)
    pool = np.zeros((5, 64, 2, 64), np.float16)
    o, lse = np.zeros((2, 1, 4, 64), np.float16), np.zeros((1, 2, 1, 4), np.float32)
    table = np.array([[0, 3], [4, 1]], np.int32)
    assert kern.args(q, pool, pool, o, lse, block_table=table, seqlen_k=100)[-2] is table
    for bad, match in ((dict(block_table=None, seqlen_k=100), "block_table"),
                       (dict(block_table=table + 1, seqlen_k=100), r"\[0, 5\)"),
                       (dict(block_table=table, seqlen_k=129), "1 .. 128")):
        with pytest.raises(InputError, match=match):
            kern.args(q, pool, pool, o, lse, **bad)
    with pytest.raises(InputError, match="accepted 64"):
        kern.args(q, pool[:, :32], pool[:, :32], o, lse, block_table=table, seqlen_k=10)


F8 = ml_dtypes.float8_e4m3fn
DESCALE = (0.5, 2.0, 0.25)      # q_descale, k_descale, v_descale
# name: (generator arguments, batch, seqlen_q, seqlen_k, heads, kv_heads)
FP8_VARIANTS = {
    "fp8-d128-n224-ktail": (dict(headdim=128, kv_block=224), 1, 200, 301, 2, 1),
    "fp8-d128-n224-causal-gqa": (dict(headdim=128, kv_block=224, causal=True), 1, 389, 389,
                                 4, 2),
    "fp8-d256-n128-causal": (dict(headdim=256, kv_block=128, causal=True), 1, 150, 200, 1, 1),
    "fp8-d128-m64-n160": (dict(headdim=128, m_tile=64, kv_block=160), 2, 70, 100, 1, 1),
}


def run_fp8(params, b, sq, sk, h, hkv, seed=0):
    """An fp8 launch on e4m3 inputs (standard normal x 2, then rounded) with `DESCALE`;
    the real-valued inputs (descaled, float64), O (bf16) and lse."""
    kern = attention_kernel(dtype="fp8", **params)
    d = kern.config.headdim
    rng = np.random.default_rng(seed)
    q, k, v = ((2 * rng.standard_normal((b, s, n, d))).astype(F8)
               for s, n in ((sq, h), (sk, hkv), (sk, hkv)))
    out = np.zeros((b, sq, h, d), ml_dtypes.bfloat16)
    lse = np.zeros((1, b, sq, h), np.float32)
    qd, kd, vd = DESCALE
    isa.run_kernel(kern.ptx, kern.entry, kern.grid(b, h, sq, 1, h // hkv), kern.block,
                   kern.args(q, k, v, out, lse, q_descale=qd, k_descale=kd, v_descale=vd),
                   shared_bytes=kern.shared_bytes)
    real = [x.astype(np.float64) * f for x, f in zip((q, k, v), DESCALE, strict=True)]
    return *real, out, lse


@pytest.mark.parametrize("schedule", ["plain", "fa3"])
@pytest.mark.parametrize("name", sorted(FP8_VARIANTS))
def test_fp8_matches_float64_reference_with_descales(name, schedule):
    """fp8 O within what P's rounding to e4m3 allows: each P_j (scaled into [0, 256]) is
    rounded once with relative error at most 2^-4 (3 mantissa bits) while the row sum
    keeps the f32 P, so |O - O_ref| <= 2^-4 sum_j p_j |v_j| (+ 2^-18 |v_j| per key for
    P below e4m3's normal range, 2^-10 absolute after the 2^8 offset), plus the bf16
    rounding of O and the 16-bit-path terms; the reference is float64 attention on the
    e4m3 inputs times their descales."""
    params, b, sq, sk, h, hkv = FP8_VARIANTS[name]
    q, k, v, got, _ = run_fp8({**params, "schedule": schedule}, b, sq, sk, h, hkv)
    causal = params.get("causal", False)
    want = reference(q, k, v, causal)
    absv = reference(q, k, np.abs(v), causal)
    tol = (2.0 ** -4 + 2 * UNIT["bf16"]) * absv + UNIT["bf16"] * np.abs(want) \
        + 2.0 ** -18 * sk * np.abs(v).max() + 1e-6
    err = np.abs(got.astype(np.float64) - want)
    assert np.all(err <= tol), float((err - tol).max())
    assert err.max() > 2.0 ** -12 * np.abs(want).max()     # P really went through e4m3


def test_fp8_log_sum_exp_takes_out_the_max_offset():
    """fp8 lse = log2 sum_j exp2(scale log2(e) q_descale k_descale q.k_j): the 2^8 of
    FA3's Max_offset carried by P and the row sums is taken out."""
    params, b, sq, sk, h, hkv = FP8_VARIANTS["fp8-d128-n224-ktail"]
    q, k, _, _, lse = run_fp8({**params, "schedule": "fa3"}, b, sq, sk, h, hkv, seed=2)
    s = np.einsum("bqhd,bkhd->bhqk", q, np.repeat(k, h // hkv, axis=2)) / np.sqrt(128)
    want = np.log2(np.exp(s).sum(-1)).transpose(0, 2, 1)
    np.testing.assert_allclose(lse[0], want, rtol=1e-4, atol=1e-3)


def test_fp8_kernel_transposes_v_in_its_producer_warpgroup():
    """fp8: QK^T and P.V are e4m3 k32 wgmmas (P.V with P from registers); the whole
    producer warpgroup stays (setmaxnreg 32) and transposes each V tile with
    ldmatrix.trans + prmt + stmatrix, fenced for the async proxy; per stage K, the
    transposed V (atoms of 128 keys) and V as loaded, each with full/empty mbarriers."""
    kern = attention_kernel(headdim=128, kv_block=224, dtype="fp8", schedule="fa3")
    cfg, ptx = kern.config, kern.ptx
    assert "m64n224k32.f32.e4m3.e4m3" in ptx and "m64n128k32.f32.e4m3.e4m3" in ptx
    assert ptx.count("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16") == 224 // 16
    assert ptx.count("stmatrix.sync.aligned.m8n8.x4.shared.b16") == 224 // 16
    assert "setmaxnreg.dec.sync.aligned.u32 32;" in ptx and "fence.proxy.async" in ptx
    assert cfg.stage_bytes == 224 * 128 + 2 * 128 * 128 + 224 * 128
    assert cfg.ring_bars == 6 * 2 and kern.entry.startswith("attn_fwd_fp8_")


@pytest.mark.parametrize("params, arg", [
    (dict(headdim=64), "headdim"), (dict(headdim=128, headdim_v=256), "headdim"),
    (dict(headdim=128, kv_block=48), "kv_block"), (dict(headdim=128, m_tile=192), "m_tile"),
    (dict(headdim=128, m_tile=64, pack=4), "pack"), (dict(headdim=128, split=True), "split"),
    (dict(headdim=128, m_tile=64, kv_block=64, page=64), "page")])
def test_fp8_outside_its_prefill_tiles_is_refused(params, arg):
    """fp8 takes head dims 128/256 (Dv = D), kv_block in 32-key steps, one q head per CTA
    and no split or paging; anything else raises InputError naming the argument."""
    with pytest.raises(InputError, match=arg):
        attention_kernel(dtype="fp8", **params)


def test_descales_are_refused_for_16_bit_kernels():
    """Descale factors other than 1 are an fp8 argument."""
    kern = attention_kernel(headdim=64, kv_block=64)
    q = np.zeros((1, 64, 1, 64), np.float16)
    o, lse = np.zeros_like(q), np.zeros((1, 1, 64, 1), np.float32)
    with pytest.raises(InputError, match="descale"):
        kern.args(q, q, q, o, lse, v_descale=0.5)


@pytest.mark.parametrize("params", [dict(schedule="fa2"),
                                    dict(schedule="fa3", headdim=576, headdim_v=512, m_tile=64,
                                         kv_block=64, pack=16, v_from_k=True),
                                    dict(schedule="fa3", headdim=96, m_tile=192, kv_block=144)])
def test_fa3_schedule_is_refused_where_it_does_not_fit(params):
    """An unknown schedule, and fa3 with V read from K (MLA) or three warpgroups of 160
    registers, raise InputError naming `schedule`."""
    with pytest.raises(InputError, match="schedule"):
        attention_kernel(**params)


def test_layout_that_does_not_fit_is_refused():
    """Q + stages that exceed 227 KiB are refused with the sizes."""
    with pytest.raises(InputError, match="shared memory"):
        attention_kernel(headdim=256, kv_block=128, stages=2)


PTXAS = [dict(headdim=128), dict(headdim=192, headdim_v=128, causal=True),
         dict(headdim=256, kv_block=80), dict(headdim=64, m_tile=64, pack=8, split=True),
         dict(headdim=128, dtype="fp16", causal=True),
         dict(headdim=128, m_tile=64, kv_block=96, pack=12, consumer_regs=232),
         dict(headdim=128, m_tile=64, pack=4, split=True, inline_combine=True),
         dict(headdim=128, m_tile=64, kv_block=64, pack=4, page=64),
         dict(headdim=128, m_tile=64, kv_block=32, page=64, split=True, inline_combine=True),
         dict(headdim=96, m_tile=192, kv_block=144, causal=True),
         dict(headdim=96, kv_block=128, dtype="fp16"),
         dict(headdim=96, m_tile=64, kv_block=64, pack=8, page=64, split=True,
              inline_combine=True),
         dict(headdim=128, schedule="fa3"), dict(headdim=128, causal=True, schedule="fa3"),
         dict(headdim=64, schedule="fa3"), dict(headdim=256, kv_block=80, schedule="fa3"),
         dict(headdim=192, headdim_v=128, causal=True, schedule="fa3"),
         dict(headdim=96, kv_block=128, schedule="fa3"),
         dict(headdim=128, m_tile=64, kv_block=64, pack=4, page=64, schedule="fa3"),
         dict(headdim=128, kv_block=224, dtype="fp8"),
         dict(headdim=128, kv_block=224, dtype="fp8", causal=True, schedule="fa3"),
         dict(headdim=256, kv_block=128, dtype="fp8", schedule="fa3"),
         dict(headdim=256, kv_block=128, dtype="fp8", causal=True),
         dict(headdim=128, m_tile=64, kv_block=160, dtype="fp8", schedule="fa3")]


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas not installed")
@pytest.mark.parametrize("params", PTXAS, ids=lambda p: "-".join(f"{k}{v}" for k, v in p.items()))
def test_generated_ptx_assembles_with_ptxas(params, tmp_path):
    """The kernel (and the combine kernel of split variants) assemble for sm_90a without
    spilling registers."""
    kern = attention_kernel(**params)
    for name, text in (("fwd", kern.ptx), ("combine", kern.combine_ptx)):
        if not text:
            continue
        src = tmp_path / f"{name}.ptx"
        src.write_text(text)
        r = subprocess.run(["ptxas", "-arch=sm_90a", "-v", str(src), "-o",
                            str(tmp_path / "k.cubin")], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr[-2000:]
        assert "0 bytes spill stores, 0 bytes spill loads" in r.stdout + r.stderr, \
            (r.stdout + r.stderr)[-2000:]
