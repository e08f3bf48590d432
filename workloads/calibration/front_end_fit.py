"""Fit of `launch.kernel_front_end_us` on ncu durations of our own kernels on an H100.

What is fitted: one number, the fixed time of every launch inside the kernel's duration as
ncu measures it (`gpu__time_duration`) that the SMs' simulated span leaves out: the grid's
launch and CTA rasterization, the end-of-kernel drain (`models.chip_spec.LaunchSpec`). Its
signature: without it, the simulated spans of most catalogued kernels read ncu's duration
less a near-constant 1.5 to 2.9 us, whatever their size.

Rows: `workloads/reference/h100/ncu_own_kernels.csv` (ncu `--clock-control none`, caches
flushed per pass; 39 kernels x 2 sizes). Declared split: kernel names in sorted order,
even positions FIT (both sizes), odd positions HELD BACK. The simulated spans come from
`benchmarks/hardware/compare_sim.py` run with the front end at 0; the fitted value is the
one on a `STEP_US` grid that minimizes the MAPE of (span + front end) against ncu over the
FIT rows (deterministic; ties to the smaller value). MAPE and median error are reported on
the held-back rows with and without it. `own_kernels_span.csv` (beside this module) holds
stored spans of 77 of the 78 launches (`sgemm_tiled` at 2048^3 ran out of 24 GiB in its
functional run); the fitted value and its errors are in docs/accuracy.md.
`launch.kernel_overhead_us` (`launch_fit`) is fitted with the front end in place, so the
two together make the time per launch.

Left out: a front end that grows with the grid (one constant per launch).

    python benchmarks/hardware/compare_sim.py --set launch.kernel_front_end_us=0 \
        --csv runs/own_sim.csv
    python -m workloads.calibration.front_end_fit runs/own_sim.csv
    python -m workloads.calibration.front_end_fit workloads/calibration/own_kernels_span.csv

Units: microseconds, percent.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
STEP_US = 0.05
MAX_US = 10.0


def with_subsets(sim: pd.DataFrame) -> pd.DataFrame:
    """`sim` (compare_sim's CSV: kernel, ncu_us, sim_us, ...) with `subset` fit / held."""
    names = sorted(sim["kernel"].unique())
    fit = set(names[0::2])
    return sim.assign(subset=["fit" if k in fit else "held" for k in sim["kernel"]])


def errors_pct(sim_us, ncu_us, front_us: float) -> np.ndarray:
    sim_us, ncu_us = np.asarray(sim_us, float), np.asarray(ncu_us, float)
    return 100.0 * (sim_us + front_us - ncu_us) / ncu_us


def best_front_end(sim_us, ncu_us) -> tuple[float, float]:
    """(front end on the grid minimizing MAPE, that MAPE in percent)."""
    grid = np.arange(0.0, MAX_US + STEP_US / 2, STEP_US)
    mape = [float(np.abs(errors_pct(sim_us, ncu_us, g)).mean()) for g in grid]
    i = int(np.argmin(mape))
    return round(float(grid[i]), 2), mape[i]


def report(sim: pd.DataFrame, front_us: float) -> dict:
    """MAPE and median |error| per subset with the front end at 0 and at `front_us`."""
    out = {}
    for subset, g in with_subsets(sim).groupby("subset"):
        for label, f in (("without", 0.0), ("with", front_us)):
            err = np.abs(errors_pct(g.sim_us, g.ncu_us, f))
            out[(subset, label)] = (len(g), float(err.mean()), float(np.median(err)))
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("csv", type=Path, help="compare_sim.py --csv output, front end at 0")
    a = p.parse_args(argv)
    sim = with_subsets(pd.read_csv(a.csv, comment="#"))
    fit = sim[sim.subset == "fit"]
    front, mape = best_front_end(fit.sim_us, fit.ncu_us)
    print(f"launch.kernel_front_end_us = {front} (fit rows: {len(fit)}, MAPE {mape:.1f}%)")
    for (subset, label), (n, m, med) in report(sim, front).items():
        print(f"  {subset:4} {label:7} front end: {n} rows, MAPE {m:.1f}%, "
              f"median |error| {med:.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
