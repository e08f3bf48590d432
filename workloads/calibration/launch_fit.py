"""Fit of `launch.kernel_overhead_us` on the launch-dominated FIT rows of the GEMM and
decode-attention references.

What is fitted: one number, the fixed time per kernel launch that CUDA events around a
graph-replayed operator see beyond the kernel itself (`models.chip_spec.LaunchSpec`).
Rows used (all from the FIT subsets declared in `gemm_accuracy` and `attention_accuracy`,
so every held-back row stays out of the fit): GEMM fit rows with m <= `GEMM_MAX_M` and
decode-attention fit rows with batch <= `ATTN_MAX_BATCH` and kv_len <= `ATTN_MAX_KV`,
where the kernel itself is a few microseconds and the launch cost is most of what was
measured. Each row is simulated once with the overhead at 0; the fitted value is the one
on a `STEP_US` grid that minimizes the MAPE of (simulated kernels + launches x overhead)
over those rows (deterministic; ties to the smaller value). An fp8 row whose operator
quantizes its activation first (`gemm_accuracy.INPUT_QUANT`) counts two launches.

    python -m workloads.calibration.launch_fit       # prints the rows and the fitted value

Units: microseconds, percent.
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

import models
from workloads.calibration import attention_accuracy, gemm_accuracy

GEMM_MAX_M = 16
ATTN_MAX_BATCH = 2
ATTN_MAX_KV = 16
STEP_US = 0.05
MAX_US = 20.0


def fit_rows() -> pd.DataFrame:
    """The fit rows used: `family` ("gemm" or "attention"), `label`, `measured_us`."""
    g = gemm_accuracy.load_rows().query("subset == 'fit' and m <= @GEMM_MAX_M")
    g = g[g.dtype.isin(gemm_accuracy.LAUNCH_FIT_FAMILIES)]
    a = attention_accuracy.load_rows().query(
        "subset == 'fit' and batch_size <= @ATTN_MAX_BATCH and kv_len <= @ATTN_MAX_KV")
    rows = [{"family": "gemm", "label": f"{r.dtype} {r.m}x{r.n}x{r.k}",
             "args": (int(r.m), int(r.n), int(r.k), r.dtype), "measured_us": r.measured_us,
             "launches": gemm_accuracy.launches_of(r.dtype)}
            for r in g.itertuples()]
    rows += [{"family": "attention", "label": f"{r.family} b{r.batch_size} kv{r.kv_len}",
              "args": (int(r.batch_size), int(r.num_heads), int(r.num_key_value_heads),
                       int(r.kv_len)), "measured_us": r.measured_us, "launches": 1}
             for r in a.itertuples()]
    return pd.DataFrame(rows)


def kernel_times(rows: pd.DataFrame, fidelity: str | None = None,
                 progress: bool = False) -> list[float]:
    """Simulated microseconds of each row with `launch.kernel_overhead_us` = 0."""

    config = models.load_preset(gemm_accuracy.PRESET).with_overrides(
        {"launch.kernel_overhead_us": 0.0})
    out = []
    for r in rows.itertuples():
        if r.family == "gemm":
            us = gemm_accuracy.simulate_row(*r.args, fidelity=fidelity, config=config)
        else:
            us = attention_accuracy.simulate_row(*r.args, fidelity=fidelity, config=config)
        out.append(us)
        if progress:
            print(f"  {r.family:9} {r.label:22} kernel {us:8.2f} us  measured "
                  f"{r.measured_us:8.2f}", flush=True)
    return out


def best_overhead(kernel_us, measured_us, launches=None) -> tuple[float, float]:
    """(overhead per launch on the grid minimizing MAPE, that MAPE in percent); `launches`:
    each row's kernel launches (default one)."""
    kernel, measured = np.asarray(kernel_us, float), np.asarray(measured_us, float)
    count = np.ones_like(kernel) if launches is None else np.asarray(launches, float)
    grid = np.arange(0.0, MAX_US + STEP_US / 2, STEP_US)
    mape = (np.abs(kernel[None, :] + grid[:, None] * count[None, :] - measured[None, :])
            / measured[None, :])
    mape = 100.0 * mape.mean(axis=1)
    i = int(np.argmin(mape))
    return round(float(grid[i]), 2), float(mape[i])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fidelity", default="sampled")
    a = p.parse_args(argv)
    rows = fit_rows()
    print(f"{len(rows)} fit rows (GEMM m <= {GEMM_MAX_M}; attention batch <= "
          f"{ATTN_MAX_BATCH}, kv_len <= {ATTN_MAX_KV})")
    kernel = kernel_times(rows, a.fidelity, progress=True)
    overhead, mape = best_overhead(kernel, rows.measured_us, rows.launches)
    print(f"launch.kernel_overhead_us = {overhead} (fit-row MAPE {mape:.1f}%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
