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


def test_fp8_operator_quantizes_its_activation_then_runs_the_gemm():
    """An fp8 row is timed as TensorRT-LLM's FP8 linear layer: the per-tensor quantization
    of the bf16 m x k activation, then the GEMM (two launches); bf16 and fp8_block rows are
    the GEMM alone."""
    assert acc.INPUT_QUANT == {"fp8": "tensor"}
    assert [acc.launches_of(d) for d in ("bf16", "fp8", "fp8_block")] == [1, 2, 1]
    m, n, k = 16, 256, 512
    gemm = acc.gemm_us(m, n, k, "fp8", fidelity="full")
    quant = acc.quantize_us(m, k, "tensor", fidelity="full")
    assert quant > 0
    assert acc.simulate_row(m, n, k, "fp8", fidelity="full") == pytest.approx(gemm + quant)
    assert acc.simulate_row(m, n, k, "fp8", fidelity="full", quant={}) == pytest.approx(gemm)


def test_reference_fp8_gap_over_our_own_scaled_mm_grows_with_the_activation():
    """The evidence for the quantization (module docstring): on the shapes our H100's
    `torch._scaled_mm` shares with the reference, the reference's extra time grows with
    m at n = k = 4096, while its bf16 rows run faster than our `torch.matmul`."""
    fp8 = acc.own_vs_reference("fp8").query("n == 4096 and k == 4096 and m >= 512")
    assert len(fp8) >= 4 and fp8.gap_us.is_monotonic_increasing
    assert (acc.own_vs_reference("bf16").query("m <= 512").gap_us < 0).all()


def test_launch_fit_counts_each_launch_of_a_row():
    """`best_overhead` adds the overhead once per launch: a two-launch row needs half the
    per-launch overhead of a one-launch row with the same gap."""
    from workloads.calibration.launch_fit import best_overhead

    assert best_overhead([10.0, 10.0], [14.0, 14.0], [1, 1])[0] == pytest.approx(4.0)
    assert best_overhead([10.0, 10.0], [14.0, 14.0], [2, 2])[0] == pytest.approx(2.0)
    assert best_overhead([10.0, 10.0], [14.0, 14.0])[0] == pytest.approx(4.0)
