"""The `attention` op: FlashAttention's FLOP/byte conventions, its launch choices (tiles,
packed GQA heads, split-KV), input checks, and op-level sampling that agrees with the
full simulation within 3 %."""

from __future__ import annotations

import math

import numpy as np
import pytest

import models
from isa.errors import InputError
from workloads.ops import attention_sampling as sampling
from workloads.ops import build_op, simulate_op

FA3 = {"kernels.decode_attention": "fa3"}
H100 = models.load_preset("h100_sxm", FA3)
SMALL = models.load_preset("h100_sxm", {"sm.count": 4, **FA3})
"""The FlashAttention-3-style template's decode choices are tested here, so decode runs it
(`kernels.decode_attention`); the XQA-style kernel's tests: `tests/test_xqa_decode.py`."""


def test_flops_and_bytes_follow_flashattention():
    """flops = 4 B H Sq Sk D, halved when causal; with Dv != D 2 B H Sq Sk (D + Dv);
    bytes = Q, K, V, O once."""
    p = build_op("attention", H100, batch=2, heads=8, seqlen=1024, headdim=128, causal=True,
                 shape_only=True)
    assert p.flops == 4 * 2 * 8 * 1024 * 1024 * 128 / 2
    assert p.bytes == 2 * (2 * 1024 * 8 * 128) * 4
    p = build_op("attention", H100, batch=1, heads=4, kv_heads=2, seqlen=256, seqlen_k=512,
                 headdim=192, headdim_v=128, shape_only=True)
    assert p.flops == 2 * 4 * 256 * 512 * (192 + 128)
    assert p.bytes == 2 * (256 * 4 * (192 + 128) + 512 * 2 * (192 + 128))
    assert p.peak == "tensor_bf16_tflops"


def test_fp8_forward_counts_one_byte_inputs_and_takes_fa3_tiles():
    """--dtype fp8: bytes = Q, K, V at 1 B and the bf16 O at 2 B; the fp8 tensor peak;
    FA3's fp8 tiles (128 x 224 for head dim 128, 128 x 128 for 256) and no split-KV."""
    p = build_op("attention", H100, batch=2, heads=8, seqlen=1024, headdim=128, causal=True,
                 dtype="fp8", shape_only=True)
    assert p.flops == 4 * 2 * 8 * 1024 * 1024 * 128 / 2
    assert p.bytes == 3 * (2 * 1024 * 8 * 128) + 2 * (2 * 1024 * 8 * 128)
    assert p.peak == "tensor_fp8_tflops"
    (fwd,) = p.launches
    assert fwd.detail["tiles"]["kv_block"] == 224 and fwd.detail["tiles"]["m_tile"] == 128
    few = build_op("attention", H100, batch=1, heads=2, seqlen=256, headdim=256, dtype="fp8",
                   shape_only=True)
    assert len(few.launches) == 1 and few.launches[0].detail["tiles"]["kv_block"] == 128
    assert few.launches[0].detail["tiles"]["splits"] == 1


@pytest.mark.parametrize("schedule", ["plain", "fa3"])
def test_fp8_forward_simulates_functionally_under_both_schedules(schedule):
    """A small fp8 prefill runs with real e4m3 data under either kernels.attention_schedule
    and takes at least its roofline time."""
    config = models.load_preset("h100_sxm", {"sm.count": 4, **FA3,
                                             "kernels.attention_schedule": schedule})
    p = build_op("attention", config, batch=1, heads=2, seqlen=200, seqlen_k=301,
                 headdim=128, dtype="fp8")
    assert not p.launches[0].timing_only and p.launches[0].detail["schedule"] == schedule
    r = simulate_op(p, config, "full")
    assert r["time_us"] >= r["roofline_us"] > 0


def test_fp8_is_refused_on_an_sm80_chip():
    """The sm_80 forward template has no fp8: --dtype fp8 on an A100 names --dtype."""
    with pytest.raises(InputError, match="--dtype fp8"):
        build_op("attention", models.load_preset("a100_sxm"), batch=1, heads=2, seqlen=256,
                 headdim=128, dtype="fp8", shape_only=True)


def test_seqlen_q_is_accepted_for_seqlen():
    """Workload graphs pass seqlen_q / seqlen_k; the plan is the same as with --seqlen."""
    a = build_op("attention", H100, batch=1, heads=2, seqlen=128, shape_only=True)
    b = build_op("attention", H100, batch=1, heads=2, seqlen_q=128, seqlen_k=128,
                 shape_only=True)
    assert a.sizes == b.sizes and a.launches[0].grid == b.launches[0].grid
    with pytest.raises(InputError, match="seqlen"):
        build_op("attention", H100, batch=1, heads=2, seqlen=128, seqlen_q=64)


@pytest.mark.parametrize("sizes, flag", [
    (dict(batch=0), "--batch"), (dict(kv_heads=3), "--kv-heads"),
    (dict(headdim=80), "--headdim"), (dict(headdim_v=100), "--headdim-v"),
    (dict(headdim_v=320), "--headdim-v"), (dict(headdim=96, backward=True), "--headdim"),
    (dict(dtype="e5m2"), "--dtype"), (dict(causal=True, seqlen_k=64), "--causal"),
    (dict(dtype="fp8"), "--headdim"), (dict(dtype="fp8", headdim=128, headdim_v=256),
                                       "--headdim-v"),
    (dict(dtype="fp8", headdim=128, backward=True), "--backward"),
    (dict(dtype="fp8", headdim=128, seqlen=1, seqlen_k=1024), "--seqlen"),
])
def test_bad_sizes_name_their_flag(sizes, flag):
    """Each invalid size raises InputError naming the flag."""
    base = dict(batch=1, heads=4, seqlen=128, headdim=64)
    with pytest.raises(InputError, match=flag):
        build_op("attention", H100, **{**base, **sizes})


def test_prefill_uses_two_consumers_and_fa3_kv_blocks():
    """Long queries: 128-row CTAs, no split; kv_block 128 up to D 192 / Dv 128, 80 at 256."""
    p = build_op("attention", H100, batch=1, heads=128, seqlen=4096, headdim=192,
                 headdim_v=128, causal=True)
    assert len(p.launches) == 1 and p.launches[0].grid == (32, 128, 1)
    assert p.launches[0].block == (384, 1, 1)
    assert p.launches[0].detail["tiles"]["kv_block"] == 128
    p = build_op("attention", H100, batch=1, heads=16, seqlen=2048, headdim=256)
    assert p.launches[0].detail["tiles"]["kv_block"] == 80


def test_head_dim_96_takes_fa3_192_by_144_tiles_and_runs():
    """Head dim 96 prefill: FA3's 192 x 144 tile (three consumer warpgroups, 512 threads,
    128 launch registers); a small one simulates functionally."""
    p = build_op("attention", H100, batch=1, heads=16, seqlen=4096, headdim=96, causal=True)
    (fwd,) = p.launches
    assert fwd.grid == (math.ceil(4096 / 192), 16, 1) and fwd.block == (512, 1, 1)
    assert fwd.detail["tiles"]["kv_block"] == 144 and fwd.regs_per_thread == 128
    small = build_op("attention", SMALL, batch=1, heads=2, seqlen=200, headdim=96, causal=True)
    assert not small.launches[0].timing_only
    r = simulate_op(small, SMALL, "full")
    assert r["time_us"] >= r["roofline_us"] > 0


def test_prefill_runs_the_configured_schedule_and_decode_plain():
    """kernels.attention_schedule picks prefill's mainloop (default fa3); decode and head
    dim 96's 192-row tiles run plain."""
    def schedule(config, **sizes):
        return build_op("attention", config, shape_only=True, **sizes).launches[0] \
            .detail["schedule"]
    prefill = dict(batch=1, heads=16, seqlen=1024, headdim=128, causal=True)
    assert schedule(H100, **prefill) == "fa3"
    plain = models.load_preset("h100_sxm", {**FA3, "kernels.attention_schedule": "plain"})
    assert schedule(plain, **prefill) == "plain"
    assert schedule(H100, batch=4, heads=16, seqlen=1, seqlen_k=1024) == "plain"
    assert schedule(H100, batch=1, heads=16, seqlen=1024, headdim=96) == "plain"


def test_decode_packs_gqa_heads_and_splits_kv():
    """One query, 8 q heads per kv head, few CTAs: heads packed into one CTA's rows, one CTA per
    SM with 64-key blocks (packed GQA decode, chosen on the attention FIT rows), the KV length
    split over CTAs to fill the SMs, merged inline by the last CTA of each row block
    (`kernels.attention_split_combine`, chosen on the FIT rows): one launch with the output and
    a counter per row block; K/V read from 64-key pages through an identity block table
    (`kernels.attention_kv_page_keys`, chosen on the FIT rows)."""
    p = build_op("attention", H100, batch=2, heads=32, kv_heads=4, seqlen=1, seqlen_k=8192)
    (fwd,) = p.launches
    tiles = fwd.detail["tiles"]
    assert tiles["pack"] == 8 and tiles["m_tile"] == 64
    assert tiles["kv_block"] == 64 and tiles["ctas_per_sm"] == 1
    assert fwd.regs_per_thread == min(255, H100.sm.registers_per_sm // fwd.block[0] // 8 * 8)
    blocks = 8192 // 64
    per_split = math.ceil(blocks / (H100.sm.count // (4 * 2)))
    assert tiles["splits"] == math.ceil(blocks / per_split)
    assert fwd.grid == (1, 4, 2 * tiles["splits"])
    assert fwd.entry.endswith("_split_ic_pg64") and fwd.args[-1].shape == (1 * 4 * 2,)
    assert tiles["page"] == 64 and fwd.args[4].shape == (2 * 8192 // 64, 64, 4, 128)
    table = fwd.args[-4]
    assert table.dtype == np.int32 and table.tolist() == np.arange(256).reshape(2, 128).tolist()


def test_kv_page_flag_sets_decode_paging_and_refuses_bad_sizes():
    """--kv-page 0 reads contiguous K/V, 16 pages of 16 keys (the block cut to divide the
    page); prefill ignores it; bad values are refused naming the flag."""
    def tiles(**kw):
        return build_op("attention", H100, batch=4, heads=32, kv_heads=8, seqlen=1,
                        seqlen_k=1000, **kw).launches[0].detail["tiles"]

    assert tiles()["page"] == 64 and tiles(kv_page=0)["page"] == 0
    assert tiles(kv_page=16) == {**tiles(), "page": 16, "kv_block": 16}
    prefill = build_op("attention", H100, batch=1, heads=4, seqlen=256, kv_page=16)
    assert prefill.launches[0].detail["tiles"]["page"] == 0
    for bad in (24, -16):
        with pytest.raises(InputError, match="--kv-page"):
            build_op("attention", H100, batch=1, heads=4, seqlen=1, kv_page=bad)


def test_split_combine_kernel_setting_keeps_the_fa3_combine_launch():
    """`kernels.attention_split_combine = "kernel"`: the forward, then a combine kernel per
    output row."""
    config = H100.with_overrides({"kernels.attention_split_combine": "kernel"})
    p = build_op("attention", config, batch=2, heads=32, kv_heads=4, seqlen=1, seqlen_k=8192)
    fwd, combine = p.launches
    assert fwd.entry.endswith("_split_pg64") and combine.grid == (2 * 32, 1, 1)


def test_short_cache_decode_reads_no_padding_block():
    """A decode step over 4 cached keys uses a 16-key block (no 128-key padding block) and
    two CTAs per SM (MHA: no packed heads); a prefill tile of two warpgroups keeps one CTA
    per SM."""
    tiles = build_op("attention", H100, batch=64, heads=32, kv_heads=32, seqlen=1,
                     seqlen_k=4).launches[0].detail["tiles"]
    assert tiles["kv_block"] == 16 and tiles["ctas_per_sm"] == 2
    prefill = build_op("attention", H100, batch=1, heads=4, seqlen=1024, headdim=128)
    assert prefill.launches[0].detail["tiles"]["ctas_per_sm"] == 1
    assert prefill.launches[0].detail["tiles"]["kv_block"] == 128


def test_packed_gqa_decode_computes_whole_pages():
    """Packed GQA decode over 4 cached keys computes one whole 64-key page block
    (`kernels.attention_packed_decode_whole_pages`, on in the preset), not a 16-key block,
    and reads whole page boxes (more HBM bytes than the cut block); with the key off, or
    with MHA, the block is cut to 16 keys."""
    cut = H100.with_overrides({"kernels.attention_packed_decode_whole_pages": False})

    def tiles(kv_heads, config=H100):
        return build_op("attention", config, batch=16, heads=32, kv_heads=kv_heads, seqlen=1,
                        seqlen_k=4).launches[0].detail["tiles"]

    def hbm_bytes(config):
        plan = build_op("attention", config, batch=16, heads=32, kv_heads=8, seqlen=1,
                        seqlen_k=4, shape_only=True)
        return simulate_op(plan, config, "full")["hbm_bytes"]

    assert tiles(8)["kv_block"] == H100.kernels.attention_kv_page_keys == 64
    assert tiles(8)["page"] == 64 and tiles(32)["kv_block"] == 16
    assert tiles(8, cut)["kv_block"] == 16
    assert hbm_bytes(H100) > hbm_bytes(cut)


def test_simulated_time_is_not_below_the_roofline():
    """A small functional attention takes at least its roofline time."""
    p = build_op("attention", SMALL, batch=1, heads=2, seqlen=256, headdim=64, causal=True)
    assert not p.launches[0].timing_only
    r = simulate_op(p, SMALL, "full")
    assert r["time_us"] >= r["roofline_us"] > 0
    assert r["bound"] == "compute"


def test_sample_weights_reproduce_the_linear_model():
    """For samples of k waves of n-block CTAs (critical slot k CTAs, k n blocks),
    sum w_i (o + A_i a + B_i b) == o + A a + B b for any o, a, b."""
    rng = np.random.default_rng(1)
    basis = [(k, k * n) for k, n in sampling.SAMPLE_POINTS]
    for _ in range(5):
        o, a, b = rng.uniform(1, 100, 3)
        big_a, big_b = int(rng.integers(1, 40)), int(rng.integers(40, 400))
        w = sampling.sample_weights(basis, (big_a, big_b))
        got = sum(wi * (o + ka * a + kb * b) for wi, (ka, kb) in zip(w, basis, strict=True))
        assert got == pytest.approx(o + big_a * a + big_b * b)


def test_causal_blocks_per_cta_form_the_triangle():
    """Causal, Sq = Sk = 1024, 128-row CTAs, 128-key blocks: CTA m does m + 1 blocks; with
    Sk = Sq + 256 each CTA does two more."""
    per = sampling.blocks_per_cta(8, 128, 0, 1024, 1024, 128, True, 1, 8)
    assert per.tolist() == [[1, 2, 3, 4, 5, 6, 7, 8]]
    per = sampling.blocks_per_cta(8, 128, 0, 1024, 1280, 128, True, 1, 10)
    assert per.tolist() == [[3, 4, 5, 6, 7, 8, 9, 10]]
    assert sampling.cta_blocks(per, 2, 3).sum() == 6 * 52


def test_split_blocks_and_critical_slot_of_equal_ctas():
    """Splits take consecutive block ranges (the last one shorter); 12 equal CTAs on 4
    slots put 3 CTAs on every slot."""
    per = sampling.blocks_per_cta(1, 64, 8, 1, 1000, 64, False, 3, 6)
    assert per.tolist() == [[6], [6], [4]]
    assert sampling.critical_slot(np.full(12, 5), 4) == (3, 15)


SUITE = {
    "causal-d64": dict(batch=1, heads=4, seqlen=1024, headdim=64, causal=True),
    "noncausal-d128": dict(batch=1, heads=2, seqlen=1024, headdim=128),
    "decode-gqa": dict(batch=8, heads=8, kv_heads=2, seqlen=1, seqlen_k=2048),
    "causal-d192v128": dict(batch=1, heads=4, seqlen=1024, headdim=192, headdim_v=128,
                            causal=True),
    "decode-gqa-5-keys": dict(batch=48, heads=8, kv_heads=2, seqlen=1, seqlen_k=5),
    "decode-gqa-tail-block": dict(batch=16, heads=16, kv_heads=4, seqlen=1, seqlen_k=129),
    "decode-mha-300-keys": dict(batch=24, heads=8, seqlen=1, seqlen_k=300),
    "decode-mha-9-keys": dict(batch=32, heads=8, seqlen=1, seqlen_k=9),
}


SAMPLING_GAPS = {
    "decode-gqa-tail-block": "sampled 85.76 against full 82.11 us (+4.4 %) with kernel "
                             "parameters read from the constant bank: the three reduced "
                             "launches' extrapolation overstates the one-key tail block",
    "decode-mha-300-keys": "sampled 175.12 against full 167.81 us (+4.4 %) with integer ops on "
                           "two pipes (`sm.int_pipe_model` alu_fma; 171.25 / 168.16, +1.8 %, "
                           "on one int32 unit): the reduced launches' extrapolation overstates "
                           "the whole grid",
}
"""Suite cases whose op-level sampling misses the 3 % bound, with the figures: strict
expected failures, so a fix shows as a pass to claim."""


@pytest.mark.parametrize("sizes", [
    pytest.param(v, id=k, marks=[pytest.mark.xfail(strict=True, reason=SAMPLING_GAPS[k])]
                 if k in SAMPLING_GAPS else []) for k, v in SUITE.items()])
def test_sampled_agrees_with_full_within_3_percent(sizes):
    """Op-level sampling (three one/two-wave reduced launches) is within 3 % of
    simulating every CTA, on 4 SMs so that the full run stays short."""
    plan = build_op("attention", SMALL, shape_only=True, **sizes)
    assert plan.samples, "the suite's shapes are large enough to be sampled"
    sampled = simulate_op(plan, SMALL, "sampled")["time_us"]
    full = simulate_op(plan, SMALL, "full")["time_us"]
    assert abs(sampled / full - 1) < 0.03, (sampled, full)


def test_decode_accuracy_is_not_worse_than_the_baseline():
    """The three cheapest held-back rows of the stored calibration run: each row's
    absolute error against the measured H100 latency grows by at most 2 points."""
    from workloads.calibration import attention_accuracy as acc

    if not acc.BASELINE.exists():
        pytest.skip("no baseline: python -m workloads.calibration.attention_accuracy "
                    "--limit 3 --write-baseline")
    baseline = acc.load_baseline()
    config = models.load_preset(acc.PRESET,
                                {"kernels.decode_attention": baseline.get("kernel", "fa3")})
    rows = sorted(baseline["rows"], key=lambda r: r["batch"] * r["heads"] * r["kv_len"])[:3]
    for r in rows:
        sim = acc.simulate_row(r["batch"], r["heads"], r["kv_heads"], r["kv_len"],
                               config=config)
        err = 100 * abs(sim - r["measured_us"]) / r["measured_us"]
        assert err <= abs(r["error_pct"]) + 2, (r, sim)


def test_packed_decode_occupancy_is_the_declared_setting():
    """`kernels.attention_packed_decode_ctas_per_sm` decides packed GQA decode's CTAs per SM
    (2 where two fit); MHA decode keeps two whatever it says."""
    two = H100.with_overrides({"kernels.attention_packed_decode_ctas_per_sm": 2})

    def per_sm(config=H100, **kw):
        return build_op("attention", config, batch=4, seqlen=1, seqlen_k=256,
                        **kw).launches[0].detail["tiles"]["ctas_per_sm"]

    assert per_sm(heads=32, kv_heads=8) == 1 and per_sm(heads=32, kv_heads=32) == 2
    assert per_sm(two, heads=32, kv_heads=8) == 2


def test_inline_split_combine_is_one_launch_with_zeroed_counters():
    """`kernels.attention_split_combine = "inline"`: a split decode is one launch of the
    `_ic` kernel with the output and int32 counters (no combine kernel); MLA keeps its
    combine kernel (its numbers: `tests/test_template_attention.py`, the inline variants)."""
    config = H100.with_overrides({"kernels.attention_split_combine": "inline"})
    p = build_op("attention", config, batch=2, heads=8, kv_heads=2, seqlen=1, seqlen_k=1000)
    (fwd,) = p.launches
    assert fwd.entry.endswith("_split_ic_pg64")
    counters = fwd.args[-1]
    assert counters.dtype == np.int32 and not counters.any()
    mla = build_op("mla-decode", config, batch=2, heads=16, kv_len=600)
    assert any("combine" in lau.entry for lau in mla.launches)
