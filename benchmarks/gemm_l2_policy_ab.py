"""The A/B of the GEMM template's L2 cache policy on DeepSeek-V3 prefill GEMMs, alone.

Builds each GEMM with the `gemm` op on `h800_sxm` once per value of
`kernels.gemm_l2_policy` (the config key, as `ptxsim op gemm --set
kernels.gemm_l2_policy=VALUE` sets it) and prints per value the op's time, its simulated
HBM bytes and the L2's miss and hit sectors of the simulated launches (weighted by their
sample weights when the op is sampled, `workloads.ops.registry.simulate_op`). Nothing runs
beside the GEMM.

    python benchmarks/gemm_l2_policy_ab.py [--fidelity sampled|full] [--gemms q_a,o_proj]

Shapes (tokens x out x in, fp8 with DeepSeek's block scaling): q_a_proj 4096 x 1536 x 7168
and o_proj 4096 x 7168 x 16384 (hidden 7168, q_lora_rank 1536, 128 heads x 128 value
dims; 4096 tokens, the layer's GEMMs in docs/fidelity.md). No op cache: every figure is
simulated. Figures only; nothing is asserted. Units: µs, bytes, 32-byte sectors.
"""

from __future__ import annotations

import argparse
import sys
import time

import models
from simulator.framework.policy_spec import GEMM_L2_POLICIES
from workloads.ops import build_op, simulate_op

GEMMS = {"q_a": (4096, 1536, 7168), "o_proj": (4096, 7168, 16384)}


def measure(value: str, m: int, n: int, k: int, fidelity: str) -> dict:
    """Time, HBM bytes and weighted L2 sector counts of one GEMM under `value`."""
    config = models.load_preset("h800_sxm", {"kernels.gemm_l2_policy": value})
    plan = build_op("gemm", config, m=m, n=n, k=k, dtype="fp8", scaling="deepseek")
    stats: list = []
    res = simulate_op(plan, config, fidelity, stats=stats)
    sectors = {"miss_sectors": 0.0, "hit_sectors": 0.0}
    for weight, _, table in stats:
        l2 = table[table.component.str.startswith("memory.l2")]
        for stat in sectors:
            sectors[stat] += weight * float(l2[l2.stat == stat].value.sum())
    return {"time_us": res["time_us"], "hbm_bytes": res["hbm_bytes"], **sectors,
            "kernel": plan.launches[0].entry}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fidelity", default="sampled", choices=("sampled", "full"))
    parser.add_argument("--gemms", default=",".join(GEMMS))
    args = parser.parse_args()
    print("| GEMM (M x N x K) | kernels.gemm_l2_policy | µs | HBM MB | L2 miss sectors "
          "| L2 hit rate |")
    print("|---|---|---|---|---|---|")
    for name in args.gemms.split(","):
        m, n, k = GEMMS[name]
        for value in GEMM_L2_POLICIES:
            wall = time.perf_counter()
            r = measure(value, m, n, k, args.fidelity)
            hit = r["hit_sectors"] / max(1.0, r["hit_sectors"] + r["miss_sectors"])
            print(f"| {name} {m}x{n}x{k} | {value} | {r['time_us']:.2f} | "
                  f"{r['hbm_bytes'] / 1e6:.1f} | {r['miss_sectors']:.0f} | {hit:.3f} |",
                  flush=True)
            print(f"  {r['kernel']}: {time.perf_counter() - wall:.0f} s wall", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
