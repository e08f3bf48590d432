"""The A/B of the collectives' cache qualifiers on the DeepSeek-V3 prefill deployment.

Runs `ptxsim run` (the default job: one GPU of the EP32 prefill, two micro-batches, 20
communication SMs on `h800_sxm`) once per value of `kernels.comm_cache_hints` and prints,
per value, the layer time, the communication time and its hidden share, and for every
compute/collective pair the contention model measured (`simulator.runner.contention`): the
compute launch's L2 miss sectors alone and beside the collective, and its stretch.

    python benchmarks/comm_cache_hints_ab.py [--tokens N] [--out DIR] [--values a,b,...]

Each run bypasses the op cache (`--no-cache`), so the figures are measured, not served.
Figures only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

VALUES = ("plain", "deepep", "deepep_evict_first")


def run(value: str, out: Path, tokens: int | None) -> dict:
    cmd = [sys.executable, "-m", "simulator.app.cli", "run", "--set",
           f"kernels.comm_cache_hints={value}", "--no-cache", "--quiet", "--json",
           "--out", str(out / value)]
    if tokens:
        cmd += ["--tokens", str(tokens)]
    wall = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    run_json = json.loads((out / value / "run.json").read_text())
    return {"summary": json.loads(done.stdout), "run": run_json,
            "wall_s": time.perf_counter() - wall}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=None)
    parser.add_argument("--out", type=Path, default=Path("runs/comm_cache_hints_ab"))
    parser.add_argument("--values", default=",".join(VALUES))
    args = parser.parse_args()
    for value in args.values.split(","):
        res = run(value, args.out, args.tokens)
        s = res["summary"]
        print(f"== kernels.comm_cache_hints={value}  ({res['wall_s']:.0f} s wall)")
        print("   " + json.dumps({k: s[k] for k in s if not isinstance(s[k], (dict, list))}))
        for m in res["run"].get("micro_batches", []):
            print("   micro-batch " + json.dumps(m))
        pairs = res["run"]["layer"].get("contention") or []
        for p in pairs:
            print(f"   {p['compute_op'][:40]:40s} beside {p['comm_op'][:28]:28s} "
                  f"L2 miss sectors {p['compute_l2_miss_alone']:.0f} -> "
                  f"{p['compute_l2_miss_beside']:.0f}, compute "
                  f"{p['compute_alone_us']:.1f} -> {p['compute_beside_us']:.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
