"""Measured (H100) vs simulated (`h100_sxm`) time of the catalogued kernels at the harness sizes.

For each kernel and size of `workloads/reference/h100/own_kernels.csv` the case is rebuilt
(same builder, same sizes as `HW_SIZES`) and timed by `simulator.simulate_kernel` (sampled
fidelity by default; caches start cold, as under ncu's cache control and like the flushed
event rows). Printed per row: ncu's kernel duration, the median event time with L2 flushed
and warm, the simulated kernel time (no launch overhead; with the preset's launch overhead
beside it) and the kernel time's error against ncu's duration. No GPU needed; slow for the
larger sizes (use --size-index 0 and --only).

    python benchmarks/hardware/compare_sim.py [--size-index 0] [--only saxpy silu ...]
        [--fidelity sampled|full] [--csv OUT.csv] [--set KEY=VALUE ...]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

from fast_reference import patch_fma_exact  # noqa: E402

DATA = REPO / "workloads" / "reference" / "h100"


def measured() -> pd.DataFrame:
    ev = pd.read_csv(DATA / "own_kernels.csv")
    ev = ev.pivot_table(index=["kernel", "size_index", "sizes"], columns="l2_flush",
                        values="median_us").reset_index()
    ev = ev.rename(columns={True: "event_flushed_us", False: "event_warm_us"})
    ncu = pd.read_csv(DATA / "ncu_own_kernels.csv")[["kernel", "size_index", "duration_ns"]]
    ncu["ncu_us"] = ncu.pop("duration_ns") / 1e3
    return ev.merge(ncu, on=["kernel", "size_index"], how="left")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size-index", type=int, choices=(0, 1), default=None)
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--fidelity", default="sampled", choices=("sampled", "full"))
    ap.add_argument("--model", default="h100_sxm")
    ap.add_argument("--csv", type=Path)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="config override (e.g. launch.kernel_front_end_us=0 for the fit of "
                         "workloads.calibration.front_end_fit)")
    args = ap.parse_args(argv)

    import models
    from simulator import simulate_kernel
    from workloads.kernels.case import load_ptx
    from workloads.kernels.catalog import KERNELS

    patch_fma_exact()
    config = models.load_preset(args.model)
    if args.set:
        from simulator.framework.config import parse_overrides
        config = config.with_overrides(parse_overrides(args.set))
    table = measured()
    if args.size_index is not None:
        table = table[table["size_index"] == args.size_index]
    if args.only:
        table = table[table["kernel"].isin(args.only)]
    rows = []
    for _, m in table.iterrows():
        spec = KERNELS[m["kernel"]]
        sizes = json.loads(m["sizes"])
        case = spec.build(np.random.default_rng(int(m["size_index"])), **sizes)
        t0 = time.process_time()
        res = simulate_kernel(load_ptx(spec.file), spec.entry, case.grid, case.block, case.args,
                              config=config, shared_bytes=case.shared_bytes,
                              fidelity=args.fidelity)
        row = {"kernel": m["kernel"], "sizes": m["sizes"], "ncu_us": round(m["ncu_us"], 2),
               "event_flushed_us": m["event_flushed_us"], "event_warm_us": m["event_warm_us"],
               "sim_us": round(res.kernel_time_us, 2),
               "sim_with_launch_us": round(res.time_us, 2),
               "error_vs_ncu_pct": round(100 * (res.kernel_time_us / m["ncu_us"] - 1), 1),
               "cpu_s": round(time.process_time() - t0, 1)}
        rows.append(row)
        print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    df = pd.DataFrame(rows)
    if len(df):
        print(df.to_string(index=False))
        err = df["error_vs_ncu_pct"].abs()
        print(f"\n{len(df)} kernels on {args.model} ({args.fidelity}): MAPE vs ncu duration "
              f"{err.mean():.1f} %, median |error| {err.median():.1f} %")
    if args.csv:
        df.to_csv(args.csv, index=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
