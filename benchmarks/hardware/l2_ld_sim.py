"""L2 -> SM read bandwidth of `ld.global.cg` loads, simulated against the H100 measurement.

The `ld_cg` rows of `workloads/reference/h100/l2_bandwidth.csv` (1, 33 and 132 CTAs of 1024
threads, each CTA reading its own 128 KiB with 16-byte `ld.global.cg`, four in flight per
thread, L2 warm) are re-run on the simulator with the same kernel (`ld_read` of
`l2_bandwidth_hw.ptx`, made by `nvcc -ptx -O3 -arch=sm_90a l2_bandwidth_hw.cu -o
l2_bandwidth_hw.ptx`): bytes per SM cycle from launches of N and 2N passes, as the hardware
run computed them (the difference cancels the cold first pass). Prints measured and
simulated B/clk per SM and the aggregate TB/s. No GPU needed (~1 min).

    python benchmarks/hardware/l2_ld_sim.py [--model h100_sxm] [--ctas 1 33 132]
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


def simulated_bytes_per_clk(ctas: int, config) -> float:
    """Bytes per SM cycle of all `ctas` CTAs together (N and 2N passes differenced)."""
    import simulator

    ptx = (HERE / "l2_bandwidth_hw.ptx").read_text()
    cycles = []
    for passes in PASSES:
        src = np.zeros(ctas * REGION // 4, np.uint32)
        res = simulator.simulate_kernel(
            ptx, "ld_read", (ctas, 1, 1), (1024, 1, 1),
            [src, np.int64(REGION), np.int32(passes), np.zeros(ctas, np.int64),
             np.zeros(4096, np.uint32)], config=config, fidelity="full")
        cycles.append(res.cycles)
    return ctas * REGION * (PASSES[1] - PASSES[0]) / (cycles[1] - cycles[0])


def main(argv=None) -> int:
    import models

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="h100_sxm")
    ap.add_argument("--ctas", type=int, nargs="*", default=[1, 33, 132])
    a = ap.parse_args(argv)
    config = models.load_preset(a.model)
    ref = pd.read_csv(HERE.parents[1] / "workloads/reference/h100/l2_bandwidth.csv")
    ref = ref[ref.kernel == "ld_cg"].set_index("ctas")
    for ctas in a.ctas:
        sim = simulated_bytes_per_clk(ctas, config)
        tbs = sim * config.chip.clock_ghz / 1e3
        line = (f"ld.global.cg, {ctas:3d} CTAs: simulated {sim / ctas:6.1f} B/clk per SM, "
                f"{tbs:5.2f} TB/s")
        if ctas in ref.index:
            r = ref.loc[ctas]
            line += (f"; measured {r.bytes_per_sm_clk_per_cta:6.1f} B/clk per SM, "
                     f"{r.gb_per_s / 1e3:5.2f} TB/s at {r.sm_clock_mhz:.0f} MHz")
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
