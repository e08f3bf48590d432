"""L2 -> SM read bandwidth, simulated against the H100 measurement (`l2_bandwidth.csv`).

The rows of `workloads/reference/h100/l2_bandwidth.csv` are re-run on the simulator with the
same kernels (`ld_read` and `bulk_read` of `l2_bandwidth_hw.ptx`, made by `nvcc -ptx -O3
-arch=sm_90a l2_bandwidth_hw.cu -o l2_bandwidth_hw.ptx`), L2 warm:

* `ld_cg`: 1, 33 and 132 CTAs of 1024 threads, each CTA reading its own 128 KiB with 16-byte
  `ld.global.cg`, four in flight per thread;
* `bulk`: one thread per CTA keeps 8 `cp.async.bulk` copies of 16 KiB in flight, each CTA
  its own 128 KiB (`distinct`) or all the same 128 KiB (`shared`).

Bytes per SM cycle come from launches of N and 2N passes, as the hardware run computed them
(the difference cancels the cold first pass). Prints measured and simulated B/clk per SM
(per CTA: one CTA per SM) and the aggregate TB/s. No GPU needed (~1-2 min).

    python benchmarks/hardware/l2_ld_sim.py [--model h100_sxm] [--rows ld_cg:1 ld_cg:132 ...]
        [--set KEY=VALUE ...]
    python benchmarks/hardware/l2_ld_sim.py --rows ld_stride128:132 ld_stride16:132
        [--set l2.slice_requests_per_clk=1]

Declared split of the L2 bandwidth calibration (written before any parameter was fitted
to these rows; issue 42). The mechanism fitted: each SM's crossbar port
(`noc.port_bandwidth_bytes_per_clk`) and one limit on the read data the crossbar returns to
all SMs together (`noc.read_return_gbps`, bytes per second: the crossbar and L2 run on their
own clock, not the SM's).

* FIT (2 rows, 2 parameters): `ld_cg` 1 CTA (one SM alone: the port, 89.7 B per SM cycle)
  and `ld_cg` 132 CTAs (every SM: the aggregate, 7837.5 GB/s). The port takes the measured
  B/clk; the aggregate starts at the measured GB/s and is moved until the simulated 132-CTA
  row is within 1 % of it.
* HELD BACK: `ld_cg` 33 CTAs (44.1 B/clk per SM); `bulk distinct` 132 CTAs (7842.0 GB/s, TMA
  copies: does the same limit hold for another engine?); `bulk shared` 132 CTAs (9166.1 GB/s:
  above the ld_cg aggregate on the GPU); `bulk distinct` 1 CTA (35.2 B/clk, the copy
  engine's per-thread rate, no L2 limit in play); and, outside this file, `template_ncu.csv`
  c17's L2 read rate (6.16 M sectors in 34.0 us, 5.8 TB/s) and the same-program GEMM and
  attention splits of `workloads.calibration.template_*_accuracy`, which stay as declared
  there. The cuBLAS rows of `gemm_ncu_l2.csv` are not used: other programs than ours.

Declared before they were measured: the `ld_stride` rows (`ld_stride<S>:<ctas>`, S = 16, 32,
64, 128 bytes between a warp's lanes, 1, 33 and 132 CTAs; one sector of each of 32 lines a
warp load at S = 128) are HELD BACK, all of them: they score the slices' request rate
(`l2.slice_requests_per_clk`, opt-in, docs/accuracy.md), which no row here was fitted to.
Until `benchmarks/hardware/l2_gemm_run.sh` has measured them on a GPU they print as not
measured, with the simulated figure.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

REGION = 131072
PASSES = (4, 8)
CHUNK = 16384
STAGES = 8
COPIES = (16, 32)
ROWS = ("ld_cg:1", "ld_cg:33", "ld_cg:132", "bulk_distinct:1", "bulk_distinct:132",
        "bulk_shared:132")
FIT_ROWS = ("ld_cg:1", "ld_cg:132")


def _ld_cycles(ctas: int, passes: int, config, ptx: str) -> int:
    import simulator

    src = np.zeros(ctas * REGION // 4, np.uint32)
    return simulator.simulate_kernel(
        ptx, "ld_read", (ctas, 1, 1), (1024, 1, 1),
        [src, np.int64(REGION), np.int32(passes), np.zeros(ctas, np.int64),
         np.zeros(4096, np.uint32)], config=config, fidelity="full").cycles


def _stride_cycles(ctas: int, stride: int, passes: int, config, ptx: str) -> int:
    import simulator

    src = np.zeros(ctas * REGION, np.uint8)
    return simulator.simulate_kernel(
        ptx, "ld_stride", (ctas, 1, 1), (1024, 1, 1),
        [src, np.int64(REGION), np.int32(stride), np.int32(passes), np.zeros(ctas, np.int64),
         np.zeros(4096, np.uint32)], config=config, fidelity="full").cycles


def stride_sectors(stride: int) -> int:
    """32-byte sectors one pass of `ld_stride` reads per CTA (as `l2_bandwidth_hw.cu` counts)."""
    return (REGION // 512) * (32 if stride >= 32 else 16)


def _bulk_cycles(ctas: int, mode: int, copies: int, config, ptx: str) -> int:
    import simulator

    src = np.zeros((ctas if mode == 0 else 1) * REGION, np.uint8)
    return simulator.simulate_kernel(
        ptx, "bulk_read", (ctas, 1, 1), (32, 1, 1),
        [src, np.int64(REGION), np.int32(mode), np.int32(CHUNK), np.int32(copies),
         np.int32(STAGES), np.zeros(ctas, np.int64)], config=config,
        shared_bytes=max(STAGES * CHUNK, REGION), fidelity="full").cycles


def simulated_bytes_per_clk(row: str, config) -> float:
    """Bytes per SM cycle of all CTAs of `row` ("kernel:ctas") together (N and 2N passes
    differenced)."""
    kernel, ctas = row.split(":")
    ctas = int(ctas)
    ptx = (HERE / "l2_bandwidth_hw.ptx").read_text()
    if kernel == "ld_cg":
        c = [_ld_cycles(ctas, p, config, ptx) for p in PASSES]
        return ctas * REGION * (PASSES[1] - PASSES[0]) / (c[1] - c[0])
    if kernel.startswith("ld_stride"):
        stride = int(kernel.removeprefix("ld_stride"))
        c = [_stride_cycles(ctas, stride, p, config, ptx) for p in PASSES]
        return ctas * stride_sectors(stride) * 32 * (PASSES[1] - PASSES[0]) / (c[1] - c[0])
    mode = {"bulk_distinct": 0, "bulk_shared": 1}[kernel]
    c = [_bulk_cycles(ctas, mode, n, config, ptx) for n in COPIES]
    return ctas * CHUNK * (COPIES[1] - COPIES[0]) / (c[1] - c[0])


def measured(row: str) -> pd.Series | None:
    """The `l2_bandwidth.csv` row of `row` (16 KiB chunks for the bulk kernel), None when the
    file has none (`ld_stride` rows before a GPU run)."""
    kernel, ctas = row.split(":")
    ref = pd.read_csv(HERE.parents[1] / "workloads/reference/h100/l2_bandwidth.csv")
    if kernel == "ld_cg":
        pick = ref[(ref.kernel == "ld_cg") & (ref.ctas == int(ctas))]
    elif kernel.startswith("ld_stride"):
        pick = ref[(ref.kernel == "ld_stride") & (ref.ctas == int(ctas))
                   & (ref.chunk_bytes == int(kernel.removeprefix("ld_stride")))]
    else:
        mode = kernel.split("_")[1]
        pick = ref[(ref.kernel == "bulk") & (ref["mode"] == mode) & (ref.ctas == int(ctas))
                   & (ref.chunk_bytes == CHUNK)]
    return pick.iloc[0] if len(pick) else None


def main(argv=None) -> int:
    import models

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="h100_sxm")
    ap.add_argument("--rows", nargs="*", default=list(ROWS),
                    help="kernel:ctas, of " + ", ".join(ROWS))
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE",
                    help="preset overrides, e.g. noc.read_return_gbps=7837.5")
    a = ap.parse_args(argv)
    overrides = {}
    for item in a.set:
        key, _, value = item.partition("=")
        overrides[key] = float(value) if "." in value else int(value)
    config = models.load_preset(a.model, overrides or None)
    for row in a.rows:
        kernel, ctas = row.split(":")
        sim = simulated_bytes_per_clk(row, config)
        tbs = sim * config.chip.clock_ghz / 1e3
        r = measured(row)
        split = "FIT " if row in FIT_ROWS else "HELD"
        if r is None:
            print(f"{split} {kernel:13s} {int(ctas):3d} CTAs: simulated {sim / int(ctas):6.1f} "
                  f"B/clk per SM, {tbs:5.2f} TB/s; not measured (needs a GPU: "
                  "benchmarks/hardware/l2_gemm_run.sh)", flush=True)
            continue
        print(f"{split} {kernel:13s} {int(ctas):3d} CTAs: simulated {sim / int(ctas):6.1f} B/clk "
              f"per SM, {tbs:5.2f} TB/s; measured {r.bytes_per_sm_clk_per_cta:6.1f} B/clk per SM, "
              f"{r.gb_per_s / 1e3:5.2f} TB/s at {r.sm_clock_mhz:.0f} MHz; "
              f"error {(sim / int(ctas) / r.bytes_per_sm_clk_per_cta - 1) * 100:+6.1f} % per "
              f"cycle, {(tbs * 1e3 / r.gb_per_s - 1) * 100:+6.1f} % per second", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
