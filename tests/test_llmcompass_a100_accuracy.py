"""The LLMCompass A100 scorer: its declared split, its harness fit, the programs it times, and
the stored figures.

The split (even file positions FIT, odd HELD-BACK, per family) and the harness rule are
checked on the reference files; the two shortest held-back rows of each family are
simulated again on a100_sxm and must stay within 2 points of the error stored in the baseline.
"""

import json

import pandas as pd
import pytest

import models
from workloads.calibration import llmcompass_a100_accuracy as acc
from workloads.ops import build_op
from workloads.shared_reference import SHARED_REFERENCE

HAVE_REFERENCE = all((SHARED_REFERENCE / f).is_file() for f in acc.FILES.values())
needs_reference = pytest.mark.skipif(not HAVE_REFERENCE,
                                     reason="../shared/reference LLMCompass files absent")


@needs_reference
def test_split_is_even_positions_fit_odd_held_per_family():
    """Every family alternates fit/held from its first row; both halves are non-empty."""
    rows = acc.load_rows()
    for family, g in rows.groupby("family"):
        assert list(g.subset) == ["fit" if p % 2 == 0 else "held" for p in g.position]
        assert (g.subset == "held").sum() >= 10, family


def test_harness_is_the_median_gap_of_fit_rows_where_the_kernel_is_small():
    """Only rows simulated under a quarter of the measured time set harness_us."""
    fit = pd.DataFrame({"measured_us": [40.0, 50.0, 1000.0], "simulated_us": [5.0, 8.0, 900.0]})
    assert acc.harness_us(fit) == pytest.approx((35.0 + 42.0) / 2)
    assert acc.harness_us(fit.iloc[2:]) == 0.0


@pytest.mark.parametrize("family, n, entry", [
    ("softmax", 64, "softmax_warp_forward_f16_6"),
    ("softmax", 4096, "cunn_softmax_forward_f16"),
    ("layernorm", 4096, "vectorized_layer_norm_f16")])
def test_softmax_and_layernorm_rows_run_pytorchs_fp16_kernels(family, n, entry):
    """The reference ran torch.softmax / torch.layer_norm on fp16 tensors: a row's plan
    launches ATen's fp16 kernel for its width (N <= 1024: the persistent warp softmax)."""
    config = models.load_preset(acc.PRESET)
    kind, sizes = acc.op_of(family, 4096, n, 0)
    assert [lau.entry for lau in build_op(kind, config, **sizes).launches] == [entry]


def test_family_baseline_keeps_the_other_families_as_stored(tmp_path, monkeypatch):
    """--family F --write-baseline: F's rows, metrics and harness_us are the run's, every other
    family's are the stored ones, rows in family order."""
    stored = {"harness_us": dict.fromkeys(acc.FAMILIES, 1.0),
              "metrics": dict.fromkeys(acc.FAMILIES, "stored"),
              "rows": [{"family": f, "position": 0, "subset": "fit", "M": 1, "N": 1, "K": 0,
                        "measured_us": 10.0, "simulated_us": 9.0, "error_pct": -10.0}
                       for f in acc.FAMILIES]}
    path = tmp_path / "baseline.json"
    path.write_text(json.dumps(stored))
    monkeypatch.setattr(acc, "BASELINE", path)
    run = pd.DataFrame([{**stored["rows"][1], "simulated_us": 12.0, "error_pct": 20.0,
                         "kernel_us": 12.0, "raw_error_pct": 20.0}])
    rows, metrics, harness = acc.with_stored_families(
        run, dict.fromkeys(acc.FAMILIES, "run"), dict.fromkeys(acc.FAMILIES, 2.0),
        ("softmax",))
    assert list(rows.family) == list(acc.FAMILIES)
    assert list(rows.simulated_us) == [9.0, 12.0, 9.0, 9.0]
    assert metrics == {"gemm": "stored", "softmax": "run", "layernorm": "stored",
                       "gelu": "stored"}
    assert harness == {"gemm": 1.0, "softmax": 2.0, "layernorm": 1.0, "gelu": 1.0}


BASELINE = json.loads(acc.BASELINE.read_text()) if acc.BASELINE.is_file() else None
CHEAP = [(r["family"], r["M"], r["N"], r["K"]) for family in acc.FAMILIES
         for r in sorted((r for r in (BASELINE or {"rows": []})["rows"]
                          if r["family"] == family and r["subset"] == "held"),
                         key=lambda r: r["measured_us"])[:2]]
"""The two shortest held-back rows of each family (seconds to simulate)."""


@needs_reference
@pytest.mark.skipif(BASELINE is None, reason="no stored baseline")
@pytest.mark.parametrize("family, m, n, k", CHEAP, ids=lambda v: str(v))
def test_cheap_held_back_rows_keep_their_stored_error(family, m, n, k):
    """A held-back row simulated again lands within 2 points of its stored error."""
    stored = next(r for r in BASELINE["rows"] if (r["family"], r["M"], r["N"], r["K"])
                  == (family, m, n, k))
    simulated = acc.simulate_row(family, m, n, k, BASELINE["fidelity"])
    error = 100.0 * (simulated + BASELINE["harness_us"][family] - stored["measured_us"]) \
        / stored["measured_us"]
    assert abs(error) <= abs(stored["error_pct"]) + 2.0, (error, stored["error_pct"])
