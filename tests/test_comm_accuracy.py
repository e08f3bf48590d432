"""All-reduce calibration: the declared split, and a few rows against NCCL measurements."""

import pytest

from workloads.calibration import comm_accuracy


def test_declared_split_has_three_fit_rows_and_the_rest_held_back():
    """FIT is the three 8-GPU aiconfigurator rows; Vidur and every other size are held back."""
    rows = comm_accuracy.load_rows()
    fit = rows[rows.subset == "fit"]
    assert sorted(zip(fit.dataset, fit.ranks, fit.bytes, strict=True)) == \
        sorted(comm_accuracy.FIT_ROWS)
    assert (rows[rows.dataset == "vidur"].subset == "held").all()
    assert len(rows) - len(fit) == 45


def test_small_eight_gpu_rows_are_within_twenty_percent_of_nccl():
    """The fitted preset puts a fit row and two held-back 8-GPU rows within 20 %."""
    rows = comm_accuracy.load_rows()
    picked = rows[(rows.dataset == "aiconfigurator") & (rows.ranks == 8)
                  & rows.bytes.isin([2048, 8192, 131072])]
    table = comm_accuracy.accuracy_table(picked)
    assert len(table) == 3
    assert table.error_pct.abs().max() < 20.0, table[["bytes", "measured_us", "simulated_us"]]
    summary = comm_accuracy.mape_summary(table).set_index("rows")
    assert summary.loc["all", "n"] == 2
    assert summary.loc["all", "mape_pct"] == pytest.approx(
        table[table.subset == "held"].error_pct.abs().mean())
