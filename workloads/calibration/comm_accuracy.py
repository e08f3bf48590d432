"""All-reduce accuracy of `ptxsim op allreduce` against NCCL all-reduce measured on H100 SXM.

Reference: `nccl_allreduce_h100_subset.csv` (beside this module; its `#` lines name the two
sources, NVIDIA aiconfigurator and Microsoft Vidur, and how bytes were read from each):
fp16 all-reduce on one node of 2, 4 and 8 H100 SXM GPUs, 2 KiB to 16 MiB per rank.

Declared split (fixed before any simulated number was looked at): the FIT subset is the
three aiconfigurator rows with 8 ranks at 2 KiB, 512 KiB and 8 MiB (a latency-bound, a
middle and a bandwidth-bound point); every other row is HELD back. The fit chooses the
three NVLink parameters of the `h100_sxm` preset that the ring all-reduce depends on,
`links.nvlink_latency_ns`, `links.nvlink_message_overhead_ns` and
`links.nvlink_achieved_gbps` (bounded by the 450 GB/s peak), one per FIT row by secant
steps on the log of the simulated time, two passes (`fit`). There are no per-row or
per-size factors. The program is the ring with plain loads and stores (`PROGRAM`: NCCL
uses none of DeepEP's cache qualifiers). MAPE is reported on the held-back rows, per
dataset, and for rows of 1 MiB and more. Simulated times include the preset's
`launch.kernel_overhead_us` (once per launch); the preset's NVLink values were fitted with
it in place.

    python -m workloads.calibration.comm_accuracy          # held-back table, preset values
    python -m workloads.calibration.comm_accuracy --fit    # fit on the FIT rows first

Units: microseconds, percent, bytes.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pandas as pd

import models
from workloads.ops import build_op, simulate_op

HERE = Path(__file__).resolve().parent
DATA = HERE / "nccl_allreduce_h100_subset.csv"
PRESET = "h100_sxm"
FIT_ROWS = (("aiconfigurator", 8, 2048), ("aiconfigurator", 8, 524288),
            ("aiconfigurator", 8, 8388608))
PARAMS = ("links.nvlink_latency_ns", "links.nvlink_message_overhead_ns",
          "links.nvlink_achieved_gbps")
BOUNDS = {"links.nvlink_latency_ns": (0.0, 5000.0),
          "links.nvlink_message_overhead_ns": (0.0, 500.0),
          "links.nvlink_achieved_gbps": (50.0, 450.0)}
LARGE_BYTES = 1 << 20
PROGRAM = {"kernels.comm_cache_hints": "plain"}
"""NCCL's ring kernels carry none of DeepEP's cache qualifiers (`.L2::256B` fetches, L1
no-allocate), so the rows are simulated with the plain entries of the collectives."""


def load_rows() -> pd.DataFrame:
    """The reference rows with `measured_us` and `subset` ("fit" or "held")."""
    df = pd.read_csv(DATA, comment="#")
    df["measured_us"] = df.measured_ms * 1e3
    keys = set(FIT_ROWS)
    df["subset"] = ["fit" if (d, r, b) in keys else "held"
                    for d, r, b in zip(df.dataset, df.ranks, df.bytes, strict=True)]
    return df


def simulate_row(ranks: int, nbytes: int, overrides: dict | None = None) -> float:
    """Simulated microseconds of a ring all-reduce on the `PRESET` hardware, with the
    collectives' plain loads and stores (`PROGRAM`)."""
    config = models.load_preset(PRESET, {**PROGRAM, **(overrides or {})})
    plan = build_op("allreduce", config, ranks=int(ranks), bytes=int(nbytes), algo="ring")
    return float(simulate_op(plan, config, "sampled")["time_us"])


def preset_params() -> dict:
    """The current values of `PARAMS` in the preset."""
    config = models.load_preset(PRESET)
    return {key: float(getattr(config.links, key.split(".")[1])) for key in PARAMS}


def _clamp(params: dict) -> dict:
    return {k: min(max(v, BOUNDS[k][0]), BOUNDS[k][1]) for k, v in params.items()}


def fit(rows: pd.DataFrame, start: dict, sweeps: int = 2, tol: float = 0.02) -> dict:
    """Coordinate secant fit (module doc): each parameter of `PARAMS` in turn is solved on
    its own FIT row (in `FIT_ROWS` order: latency on the smallest, per-message overhead on
    the middle, bandwidth on the largest) so that log(simulated / measured) = 0, within the
    bounds; `sweeps` passes over the three."""
    params = dict(start)
    for _ in range(sweeps):
        for key, (_, ranks, nbytes) in zip(PARAMS, FIT_ROWS, strict=True):
            row = rows[(rows.ranks == ranks) & (rows.bytes == nbytes)]
            target = float(np.log(row.measured_us.iloc[0]))

            def error(value, key=key, ranks=ranks, nbytes=nbytes, target=target):
                return float(np.log(simulate_row(ranks, nbytes, {**params, key: value}))) - target

            params[key] = _secant(error, params[key], *BOUNDS[key], tol)
    return params


def _secant(error, x0: float, low: float, high: float, tol: float, steps: int = 6) -> float:
    """A root of `error` in [low, high] by secant steps from x0 (kept inside the bounds)."""
    x1 = min(max(x0 * 1.3 + 10.0, low), high)
    if x1 == x0:
        x1 = max(x0 * 0.7, low)
    e0, e1 = error(x0), error(x1)
    for _ in range(steps):
        if abs(e1) < tol or e1 == e0:
            break
        x2 = min(max(x1 - e1 * (x1 - x0) / (e1 - e0), low), high)
        x0, e0 = x1, e1
        x1, e1 = x2, error(x2)
    return x1 if abs(e1) <= abs(e0) else x0


def accuracy_table(rows: pd.DataFrame, params: dict | None = None) -> pd.DataFrame:
    """`rows` with `simulated_us` and `error_pct` (signed, vs measured)."""
    out = rows.copy()
    out["simulated_us"] = [simulate_row(r, b, params) for r, b in
                           zip(out.ranks, out.bytes, strict=True)]
    out["error_pct"] = 100.0 * (out.simulated_us / out.measured_us - 1.0)
    return out


def mape_summary(table: pd.DataFrame) -> pd.DataFrame:
    """MAPE (%) of the held-back rows: per dataset, all sizes and >= 1 MiB."""
    held = table[table.subset == "held"]
    out = []
    for name, part in [("all", held), *held.groupby("dataset")]:
        large = part[part.bytes >= LARGE_BYTES]
        out.append({"rows": name, "n": len(part), "mape_pct": part.error_pct.abs().mean(),
                    "n_large": len(large),
                    "mape_large_pct": large.error_pct.abs().mean() if len(large) else math.nan})
    return pd.DataFrame(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fit", action="store_true", help="fit PARAMS on the FIT rows first")
    args = parser.parse_args(argv)
    rows = load_rows()
    params = preset_params()
    if args.fit:
        params = fit(rows[rows.subset == "fit"], params)
    print("parameters:", {k: round(v, 1) for k, v in params.items()})
    table = accuracy_table(rows, params)
    cols = ["dataset", "ranks", "bytes", "subset", "measured_us", "simulated_us", "error_pct"]
    print(table[cols].to_string(index=False, float_format=lambda x: f"{x:.1f}"))
    print(mape_summary(table).to_string(index=False, float_format=lambda x: f"{x:.1f}"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
