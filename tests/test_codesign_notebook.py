"""notebooks/codesign_whatifs.ipynb runs top to bottom, shows its plots, and its key numbers
hold.

The checks are relations that must hold whatever the what-if values: exact zeros lose
nothing, more threshold means more zeros and (past the precision's rounding noise) more
error, the time side runs at the zero share the error side measured, fewer mantissa bits
cost more error and fewer operand bytes, the LUT's error stays under its closed-form bound,
error feedback beats none, the dependent-ex2 chain takes the configured latency.
"""

from __future__ import annotations

import math

import nbformat
import pytest
from notebook_run import code_cells, execute_notebook, key_numbers, shows_png

MODELS = ("bert-base", "deepseek-v3")
OPERAND_BYTES = {"e4m3": 1, "fp16": 2, "bf16": 2, "fp32": 4}


@pytest.fixture(scope="module")
def notebook() -> nbformat.NotebookNode:
    """The notebook run top to bottom."""
    return execute_notebook("codesign_whatifs", cell_timeout_s=600)


@pytest.fixture(scope="module")
def executed(notebook) -> list:
    """The notebook's code cells after running it top to bottom."""
    return code_cells(notebook)


@pytest.fixture(scope="module")
def numbers(notebook) -> dict:
    return key_numbers(notebook)


def test_every_plot_is_shown_inline(executed):
    """Each cell that calls plt.show() has an inline PNG among its outputs (VPCU, ZCE, LUT,
    compression)."""
    plots = [c for c in executed if "plt.show()" in c.source]
    assert len(plots) == 4
    for cell in plots:
        assert shows_png(cell), cell.source[:80]


def test_exact_zeros_lose_nothing(numbers):
    """At threshold 0 the ZCE gives the same output as no ZCE, to the last bit, while it
    skips the exact zeros a ReLU FFN makes."""
    for layer, rows in numbers["exact_zeros"].items():
        off, on = rows["ZCE off"], rows["ZCE, threshold 0"]
        assert on["rel_error"] == off["rel_error"], layer
        assert on["max_abs_error"] == off["max_abs_error"], layer
    assert numbers["exact_zeros"]["bert-base, ReLU FFN"]["ZCE, threshold 0"]["macs_skipped"] > 0.1


def test_zce_threshold_skips_more_and_errs_more(numbers):
    """Raising the threshold never skips fewer MACs; the fp16 BERT layer's error never falls;
    past the fp8 rounding noise (thresholds >= 0.1) both layers' errors rise."""
    for model in MODELS:
        s = numbers["zce_sweep"][model]
        assert s["macs_skipped"] == sorted(s["macs_skipped"])
        assert s["macs_skipped"][-1] > s["macs_skipped"][0]
        late = [e for t, e in zip(s["threshold"], s["rel_error"], strict=True) if t >= 0.1]
        assert late == sorted(late) and late[-1] > late[0]
        assert s["rel_error"][-1] > s["rel_error"][0]
    bert = numbers["zce_sweep"]["bert-base"]["rel_error"]
    assert bert == sorted(bert)


def test_time_side_runs_at_the_measured_zero_share(numbers):
    """The timed ZCE rows skip the share of MACs the error side measured at their threshold
    (the time model samples its zeros at that share: within 2 %); 2:4 skips half; with the
    ZCE off in the baseline nothing is skipped."""
    for model in MODELS:
        sweep = numbers["zce_sweep"][model]
        measured = dict(zip(sweep["threshold"], sweep["macs_skipped"], strict=True))
        timed = numbers["zce_time"][model]
        for label, row in timed.items():
            if label.startswith("codesign, threshold "):
                t = float(label.rsplit(" ", 1)[1])
                if t in measured and measured[t] > 0.01:
                    assert row["macs_skipped"] == pytest.approx(measured[t], rel=0.02)
        assert timed["h800_sxm + 2:4 (1.45x)"]["macs_skipped"] == pytest.approx(0.5)
        assert timed["h800_sxm"]["macs_skipped"] == 0


def test_vpcu_error_follows_mantissa_bits_and_bytes_follow_operand_width(numbers):
    """fp32 < fp16 < bf16 < e4m3 in error (23, 10, 7, 3 mantissa bits); HBM bytes and time
    never grow as the operands narrow; fp16 and bf16 (same rate, same width) take the same
    time."""
    for model in MODELS:
        v = numbers["vpcu"][model]
        errors = [v[p]["rel_error"] for p in ("fp32", "fp16", "bf16", "e4m3")]
        assert errors == sorted(errors) and errors[0] < errors[-1]
        by_width = sorted(("e4m3", "fp16", "fp32"), key=OPERAND_BYTES.get)
        hbm = [v[p]["hbm_bytes"] for p in by_width]
        assert hbm == sorted(hbm) and hbm[0] < hbm[-1]
        times = [v[p]["time_us"] for p in by_width]
        assert times == sorted(times)
        assert v["fp16"]["time_us"] == v["bf16"]["time_us"]


def test_gradient_norms_fall_with_training_and_the_policy_narrows(numbers):
    """The backward pass's norms fall with SGD steps; the gradient_norm policy then never
    picks wider operands, and the 12-layer GEMM time and bytes never grow."""
    p = numbers["policy"]
    assert p["norm_max"] == sorted(p["norm_max"], reverse=True)
    widths = []
    for text in p["precisions"]:
        counts = {name: int(n) for name, n in (part.split(" x") for part in text.split(", "))}
        assert sum(counts.values()) == 12
        widths.append(sum(OPERAND_BYTES[k] * n for k, n in counts.items()))
    assert widths == sorted(widths, reverse=True)
    assert p["gemm_us_12_layers"] == sorted(p["gemm_us_12_layers"], reverse=True)
    assert p["hbm_mb_12_layers"] == sorted(p["hbm_mb_12_layers"], reverse=True)


def test_lut_exp_latency_error_bound_and_time(numbers):
    """A dependent ex2 chain takes the stock SFU latency, and with the LUT max(latency,
    128 / rate) (a warp's 32 results on a quarter of the SM); linear interpolation stays under
    h^2/8 max|f''| and beats nearest; error falls with entries; attention is never slower."""
    lut = numbers["lut"]
    assert lut["ex2_cycles"]["h800_sxm"] == lut["stock_sfu_latency"]
    assert lut["ex2_cycles"]["h800_sxm + LUT exp"] == max(lut["lut_latency"],
                                                          128 / lut["lut_rate"])
    entries = lut["entries_list"]
    for model in MODELS:
        linear, nearest = lut["entries"][f"{model}|linear"], lut["entries"][f"{model}|nearest"]
        for e, err in zip(entries, linear, strict=True):
            assert err <= (1 / e) ** 2 / 8 * 2 * math.log(2) ** 2
        assert linear == sorted(linear, reverse=True)
        assert nearest == sorted(nearest, reverse=True)
        assert all(n > lin for n, lin in zip(nearest, linear, strict=True))
        t = lut["attention_us"]
        assert t[f"{model}|h800_sxm + LUT exp"] <= t[f"{model}|h800_sxm"]


def test_error_feedback_beats_none_and_converges(numbers):
    """With error feedback the running sum's error falls step after step checkpoint and stays
    below the error without it (whose dropped mass adds up)."""
    c = numbers["compress"]
    ef, none = c["ef_error"], c["no_ef_error"]
    assert ef[0] == pytest.approx(none[0])
    assert ef[49] < ef[9] < ef[0]
    assert all(e < n for e, n in zip(ef[1:], none[1:], strict=True))


def test_compressed_allreduce_sends_its_format_and_gains_with_size(numbers):
    """Each rank's compressed payload is the format's share of its f32 buffer; the
    compressed/plain time ratio falls as the buffer grows (fixed costs amortized)."""
    c = numbers["compress"]
    sizes = sorted({int(k.split("|")[0]) for k in c["time_us"]})
    for mib in sizes:
        assert c["payload_bytes"][f"{mib}|topk4bit"] == pytest.approx(
            c["wire_share"] * c["payload_bytes"][f"{mib}|none"])
    ratios = [c["time_us"][f"{m}|topk4bit"] / c["time_us"][f"{m}|none"] for m in sizes]
    assert ratios == sorted(ratios, reverse=True) and ratios[-1] < ratios[0]


def test_zmma_gains_with_zeros_up_to_the_issue_floor(numbers):
    """No zeros: same cycles as mma.sync; the speedup never falls with more zeros and stays
    within the engine's 1/8 issue floor."""
    speedup = numbers["zmma"]["speedup"]
    assert speedup[0] == 1.0
    assert speedup == sorted(speedup) and speedup[-1] > 1
    assert max(speedup) <= 8


def test_l3_hits_and_cuts_hbm_traffic(numbers):
    """With the L2 cut small, the co-design L3 hits and the GEMM reads fewer HBM bytes."""
    l3 = numbers["l3"]
    assert l3["h800_sxm"]["l3_hit_rate"] is None
    assert 0 < l3["deepseek_codesign"]["l3_hit_rate"] <= 1
    assert l3["deepseek_codesign"]["hbm_bytes"] < l3["h800_sxm"]["hbm_bytes"]
