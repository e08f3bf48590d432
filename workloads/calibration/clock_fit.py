"""Fit of the sustained-clock model (`models.sustained_clock`) on our H100's in-kernel SM
clocks under cuBLAS GEMMs.

Data fitted: `workloads/reference/h100/gemm_ncu_l2.csv`, 14 launches (7 shapes x 2, bf16
`torch.matmul` and fp8 `torch._scaled_mm`), each with ncu's SM clock over the kernel
(`sm__cycles_elapsed.avg.per_second`, clocks as found) and its SM throughput
(`sm__throughput.avg.pct_of_peak_sustained_elapsed`), which for these GEMMs is the tensor
pipes' busy fraction: 2 m n k / (duration x clock x 132 x the dense FMA rate x 2) gives the
same figure within a point. No timing of any GEMM is fitted, only clocks; the aiconfigurator
rows of `gemm_accuracy` play no part.

Model: f = min(ceiling, f_cap / (u x ratio)^(1/3)), ratio 1 for bf16 and the fitted
`fp8_tensor_power_ratio` for fp8; the ceiling is the preset's `chip.clock_ghz` (1.83 GHz),
which the model never exceeds. Fitted: `power_cap_clock_ghz` and `fp8_tensor_power_ratio`,
by a deterministic grid search minimising the RMS clock error in MHz (ties to the first
grid point). The leave-one-shape-out RMS (each shape's two launches predicted by a fit on
the other six) is printed beside the in-sample one.

Not used, and why (the module prints the evidence):
* NVML clocks (`gemm.csv`, `microbench.csv`): sampled by a host thread every 10 ms, but the
  value NVML reports changes rarely; consecutive gemm.csv rows repeat one reading across
  shapes of very different load (e.g. 1095 MHz over the DeepSeek 2112x7168 rows from m = 64
  to 1024) and disagree with ncu on the shapes both have (512x4096x4096 bf16: NVML 1590,
  ncu 1721 MHz). The 1980 / 1830 MHz medians of the wgmma loops are such stale readings.
* ncu's clocks of our own `mma.sync` kernels (`ncu_own_kernels.csv`: 1787-1804 MHz) are
  printed as a check: launches below the cap, where the model gives the ceiling (1.83 GHz).

    python -m workloads.calibration.clock_fit      # data, fitted values, residuals (MHz)

Units: GHz, MHz (residuals), fractions.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from models.sustained_clock import CAP_EXPONENT

REFERENCE = Path(__file__).resolve().parents[1] / "reference" / "h100"
NCU_GEMM = REFERENCE / "gemm_ncu_l2.csv"
NVML_GEMM = REFERENCE / "gemm.csv"
NCU_OWN = REFERENCE / "ncu_own_kernels.csv"
CEILING_GHZ = 1.83          # h100_sxm chip.clock_ghz: the model never exceeds the preset clock
CAP_GRID_GHZ = np.round(np.arange(1.300, 1.800 + 1e-9, 0.001), 3)
RATIO_GRID = np.round(np.arange(1.000, 2.000 + 1e-9, 0.002), 3)


def fit_rows() -> pd.DataFrame:
    """The launches fitted: dtype, m, n, k, busy fraction `u`, measured clock `clock_ghz`."""
    d = pd.read_csv(NCU_GEMM)
    return pd.DataFrame({"dtype": d.dtype, "m": d.m, "n": d.n, "k": d.k,
                         "u": d.sm_throughput_pct / 100.0,
                         "clock_ghz": d.sm_clock_mhz / 1000.0})


def predict_ghz(rows: pd.DataFrame, cap_ghz, ratio, ceiling_ghz: float = CEILING_GHZ):
    """Model clocks of `rows` for one parameter pair or broadcastable arrays of them
    (`models.sustained_clock.sustained_clock_ghz` over arrays)."""
    ratios = np.where(rows.dtype.to_numpy() == "fp8", np.asarray(ratio)[..., None], 1.0)
    activity = rows.u.to_numpy() * ratios
    return np.minimum(ceiling_ghz, np.asarray(cap_ghz)[..., None] * activity ** -CAP_EXPONENT)


def fit(rows: pd.DataFrame) -> tuple[float, float, float]:
    """(power_cap_clock_ghz, fp8_tensor_power_ratio, rms_mhz) minimising the RMS error."""
    cap, ratio = np.meshgrid(CAP_GRID_GHZ, RATIO_GRID, indexing="ij")
    pred = predict_ghz(rows, cap.ravel(), ratio.ravel())
    rms = np.sqrt(np.mean((pred - rows.clock_ghz.to_numpy()) ** 2, axis=1)) * 1e3
    best = int(np.argmin(rms))
    return float(cap.ravel()[best]), float(ratio.ravel()[best]), float(rms[best])


def leave_one_shape_out_mhz(rows: pd.DataFrame) -> np.ndarray:
    """Residuals (MHz) of each launch predicted by a fit on the other shapes."""
    shape = rows.dtype + rows.m.astype(str) + "x" + rows.n.astype(str) + "x" + rows.k.astype(str)
    out = np.zeros(len(rows))
    for s in shape.unique():
        held = (shape == s).to_numpy()
        cap, ratio, _ = fit(rows[~held])
        out[held] = (predict_ghz(rows[held], cap, ratio) - rows[held].clock_ghz.to_numpy()) * 1e3
    return out


def nvml_staleness() -> tuple[float, list[str]]:
    """Share of gemm.csv rows whose NVML median repeats the previous row's, and the NVML vs
    ncu clocks of the shapes both tables hold."""
    g = pd.read_csv(NVML_GEMM)
    repeats = float((g.sm_clock_mhz_median.diff() == 0).mean())
    n = pd.read_csv(NCU_GEMM).groupby(["dtype", "m", "n", "k"]).sm_clock_mhz.mean()
    both = []
    for (dtype, m, nn, k), mhz in n.items():
        hit = g[(g.dtype == dtype) & (g.m == m) & (g.n == nn) & (g.k == k)]
        if len(hit):
            both.append(f"{dtype} {m}x{nn}x{k}: NVML {hit.sm_clock_mhz_median.iloc[0]:.0f}, "
                        f"ncu {mhz:.0f} MHz")
    return repeats, both


def own_tensor_kernels() -> pd.DataFrame:
    """ncu's SM clock of our own mma.sync / wmma GEMM launches (a check, not fitted)."""
    d = pd.read_csv(NCU_OWN)
    d = d[d.kernel.str.contains("mma")]
    return pd.DataFrame({"kernel": d.kernel, "size_index": d.size_index,
                         "duration_us": d.duration_ns / 1e3, "clock_mhz": d.sm_clock_hz / 1e6})


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    rows = fit_rows()
    cap, ratio, rms = fit(rows)
    pred = predict_ghz(rows, cap, ratio)
    loso = leave_one_shape_out_mhz(rows)
    print(f"data: {NCU_GEMM.name}, {len(rows)} launches; ceiling {CEILING_GHZ} GHz")
    print(f"{'dtype':5} {'m':>5} {'n':>5} {'k':>5} {'u':>6} {'measured_MHz':>12} "
          f"{'model_MHz':>9} {'resid_MHz':>9} {'loso_MHz':>8}")
    for r, p, lo in zip(rows.itertuples(), pred, loso, strict=True):
        print(f"{r.dtype:5} {r.m:5d} {r.n:5d} {r.k:5d} {r.u:6.3f} {r.clock_ghz * 1e3:12.1f} "
              f"{p * 1e3:9.1f} {(p - r.clock_ghz) * 1e3:9.1f} {lo:8.1f}")
    print(f"fit: power_cap_clock_ghz = {cap:.3f}, fp8_tensor_power_ratio = {ratio:.3f}; "
          f"RMS {rms:.1f} MHz, max |resid| {np.abs(pred - rows.clock_ghz).max() * 1e3:.1f} "
          f"MHz; leave-one-shape-out RMS {np.sqrt(np.mean(loso ** 2)):.1f} MHz")
    repeats, both = nvml_staleness()
    print(f"not fitted: NVML (gemm.csv) repeats the previous row's reading in "
          f"{100 * repeats:.0f} % of rows; " + "; ".join(both))
    own = own_tensor_kernels()
    print("check (not fitted), ncu on own mma kernels: " + ", ".join(
        f"{r.kernel}[{r.size_index}] {r.clock_mhz:.0f} MHz" for r in own.itertuples()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
