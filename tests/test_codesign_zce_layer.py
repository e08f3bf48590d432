"""ZCE layer what-if: skipped MACs, bytes and roofline times against dense and 2:4."""

from __future__ import annotations

import numpy as np
import pytest

import models
import workloads
from isa.errors import InputError
from workloads.codesign.train_step import gemm_peak_tflops
from workloads.codesign.zce_layer import zce_layer

CONFIG = models.load_preset("deepseek_codesign", {"units.zce.min_issue_fraction": 0.0})


@pytest.fixture(scope="module")
def bert():
    return workloads.layer("bert-base", "prefill", batch=8, seqlen=512)


def test_dense_operands_skip_nothing_and_pay_the_bitmap(bert):
    """At zero sparsity no MAC is skipped and compressed operands are bigger than dense."""
    table, totals = zce_layer(bert, CONFIG, 0.0, 0.0)
    assert totals["macs_skipped"] == 0 and totals["share"] == 1.0
    assert totals["zce_hbm_bytes"] > totals["dense_hbm_bytes"]
    assert (table.zce_us >= table.dense_us).all()


def test_element_share_is_the_product_of_densities(bert):
    """Independent activation and weight zeros: share ~ (1 - s_a)(1 - s_w) (within 3 %)."""
    _, totals = zce_layer(bert, CONFIG, 0.5, 0.75)
    assert totals["share"] == pytest.approx(0.5 * 0.25, rel=0.03)
    assert totals["macs_skipped"] == pytest.approx(totals["macs"] * (1 - totals["share"]))


def test_more_sparsity_is_never_slower_and_same_seed_same_numbers(bert):
    """Time and bytes fall with sparsity; the sample is seeded."""
    runs = [zce_layer(bert, CONFIG, s, s)[1] for s in (0.25, 0.5, 0.75)]
    assert [r["zce_us"] for r in runs] == sorted((r["zce_us"] for r in runs), reverse=True)
    assert runs[0]["zce_hbm_bytes"] > runs[2]["zce_hbm_bytes"]
    assert zce_layer(bert, CONFIG, 0.5, 0.5, seed=1)[1] == zce_layer(bert, CONFIG, 0.5, 0.5,
                                                                       seed=1)[1]


def test_two_four_halves_compute_bound_gemms(bert):
    """2:4 at the stock rate multiplier 2: a compute-bound GEMM takes half its dense time."""
    graph = workloads.layer("bert-base", "prefill", batch=64, seqlen=512)
    table, _ = zce_layer(graph, CONFIG, 0.0, 0.0)
    multiplier = CONFIG.units.tensor.sparse_rate_multiplier
    flop_per_us = gemm_peak_tflops(CONFIG, "bf16") * 1e6
    hbm = CONFIG.hbm.peak_bandwidth_gbps * 1e3
    bound = table[table.flops / (flop_per_us * multiplier) > table.two_four_bytes / hbm]
    assert len(bound) > 0
    assert (bound.two_four_us * multiplier).tolist() == pytest.approx(bound.dense_us.tolist())


def test_needs_the_zce(bert):
    """On the stock part the what-if refuses, naming the key."""
    with pytest.raises(InputError, match="units.zce.enabled"):
        zce_layer(bert, models.load_preset("h800_sxm"), 0.5, 0.5)


def test_real_tensors_can_be_bound(bert):
    """Operands given as arrays decide the share: an all-zero half of K skips half the MACs."""
    a = np.ones((64, 64), np.float32)
    a[:, 32:] = 0
    w = np.ones((64, 64), np.float32)
    _, totals = zce_layer(bert, CONFIG, 0.0, 0.0, operands=(a, w))
    assert totals["share"] == 0.5
    assert totals["macs_skipped"] == totals["macs"] / 2
