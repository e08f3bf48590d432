"""GEMM accuracy against measured H100 SXM latencies stays within the stored baseline + 2 points.

The split is declared in `workloads.calibration.gemm_accuracy` (even rows fit, odd rows
held back, per dtype). The fast test recomputes the two cheapest held-back rows of each
dtype (`gemm_accuracy.cheapest_held`) and compares their MAPE with the baseline's errors
on the same rows; the slow test (run with PTXSIM_SLOW=1) recomputes every held-back row
against the baseline's MAPE per dtype.
"""

import os

import pytest

from workloads.calibration import gemm_accuracy as acc

TOLERANCE_POINTS = 2.0
FAST_ROWS = 2


def _skip_reason() -> str | None:
    if not acc.BASELINE.exists():
        return ("no GEMM accuracy baseline stored yet: run `python -m "
                "workloads.calibration.gemm_accuracy --fit --write-baseline`")
    return None


needs_baseline = pytest.mark.skipif(_skip_reason() is not None, reason=str(_skip_reason()))


def test_split_is_declared_and_disjoint():
    """Fit and held-back rows alternate within each dtype and never share a shape."""
    rows = acc.load_rows()
    fit, held = rows[rows.subset == "fit"], rows[rows.subset == "held"]
    key = ["dtype", "m", "n", "k"]
    assert len(fit) == len(held) == 3 * 14
    assert set(rows.dtype) == set(acc.FAMILY_OP)
    assert not set(map(tuple, fit[key].values)) & set(map(tuple, held[key].values))


def _baseline_mape(baseline: dict, df) -> dict:
    stored = {(r["dtype"], r["m"], r["n"], r["k"]): abs(r["error_pct"]) for r in baseline["rows"]}
    out = {}
    for dtype, g in df.groupby("dtype"):
        errs = [stored[(dtype, int(r.m), int(r.n), int(r.k))] for r in g.itertuples()]
        out[dtype] = sum(errs) / len(errs)
    return out


@needs_baseline
def test_fast_held_back_rows_within_baseline():
    """The cheapest held-back rows per dtype: MAPE <= baseline MAPE of the same rows + 2."""
    base = acc.load_baseline()
    df = acc.simulate(acc.cheapest_held(FAST_ROWS), base["rule"], base["fidelity"])
    want = _baseline_mape(base, df)
    for dtype, m in acc.metrics(df).items():
        assert m["mape_pct"] <= want[dtype] + TOLERANCE_POINTS, (dtype, m, want[dtype])


@needs_baseline
@pytest.mark.skipif(os.environ.get("PTXSIM_SLOW") != "1", reason="slow: set PTXSIM_SLOW=1")
def test_all_held_back_rows_within_baseline():
    """Every held-back row: MAPE per dtype <= stored baseline MAPE + 2 points."""
    base = acc.load_baseline()
    df = acc.held_back(base["rule"], base["fidelity"])
    for dtype, m in acc.metrics(df).items():
        stored = base["metrics"][dtype]["mape_pct"]
        assert m["mape_pct"] <= stored + TOLERANCE_POINTS, (dtype, m, stored)
