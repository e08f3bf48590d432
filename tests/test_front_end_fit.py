"""The front-end fit: declared split by kernel name, a constant recovered on the grid."""

import numpy as np
import pandas as pd

from workloads.calibration import front_end_fit as fit


def _rows():
    names = [f"k{i:02d}" for i in range(10)]
    span = np.linspace(3.0, 300.0, 20)
    return pd.DataFrame({"kernel": [n for n in names for _ in (0, 1)],
                         "sim_us": span, "ncu_us": span + 2.35})


def test_split_keeps_both_sizes_of_a_kernel_together_and_alternates_names():
    rows = fit.with_subsets(_rows())
    assert rows.groupby("kernel").subset.nunique().max() == 1
    order = sorted(rows.kernel.unique())
    subsets = rows.drop_duplicates("kernel").set_index("kernel").subset
    assert [subsets[k] for k in order] == ["fit", "held"] * 5


def test_a_constant_gap_is_recovered_and_removes_the_error():
    rows = _rows()
    front, mape = fit.best_front_end(rows.sim_us, rows.ncu_us)
    assert front == 2.35 and mape < 1e-9
    report = fit.report(rows, front)
    assert report[("held", "with")][1] < 1e-9 < report[("held", "without")][1]


def test_stored_spans_give_the_preset_value():
    """The stored spans of our kernels refit to the preset's front end."""
    import models

    rows = pd.read_csv(fit.HERE / "own_kernels_span.csv", comment="#")
    train = fit.with_subsets(rows).query("subset == 'fit'")
    front, _ = fit.best_front_end(train.sim_us, train.ncu_us)
    assert front == models.load_preset("h100_sxm").launch.kernel_front_end_us
