"""Wall seconds of a first and a second `ptxsim run` of one layer sharing an empty op result
cache (`workloads.op_result_cache`): the first simulates every op and saves it, the second
reads them all back into another folder, a third re-runs the first into its own folder (which
holds the same report already, so it is kept: `reports.output_unchanged`); then a
`--no-cache` run for comparison.

    python benchmarks/op_cache_speed.py [--workload bert-base --batch 1 --seqlen 128
        --model h800_sxm] [-- more ptxsim run flags]

Each run is its own `python -m simulator.app.cli run ... --json --quiet` process of this
tree (Python start-up, imports, building the graph, simulating or reading the ops, writing
the run directory with its plots and trace), into a fresh temp folder; the cache is a temp
folder given with `--cache-dir`. Before them a tiny `ptxsim op` loads (or compiles) the
numba kernels, so no run pays for compilation. Prints per run: the wall seconds, the CPU
seconds of the child process, the layer time it reported, and the cache's entries read and
simulated; then the import time of the CLI alone, the floor of any run. Figures only: this
script asserts nothing about time.
Units: wall and CPU seconds, simulated microseconds.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _child_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str]) -> tuple[float, float, str]:
    """(wall s, CPU s, stdout) of `python -m simulator.app.cli ARGV` run in this tree."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cpu, start = _child_cpu_s(), time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "simulator.app.cli", *argv], cwd=ROOT,
                          env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"ptxsim {' '.join(argv)} failed ({done.returncode}):\n"
                         f"{done.stderr}")
    return wall, _child_cpu_s() - cpu, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", default="bert-base")
    parser.add_argument("--batch", default="1")
    parser.add_argument("--seqlen", default="128")
    parser.add_argument("--model", default="h800_sxm")
    parser.add_argument("extra", nargs="*", help="more `ptxsim run` flags (after --)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ptxsim-op-cache-speed-") as tmp:
        cache = Path(tmp) / "op-cache"
        layer = ["run", "--workload", args.workload, "--batch", args.batch, "--seqlen",
                 args.seqlen, "--model", args.model, "--json", "--quiet", *args.extra]
        timed(["op", "residual-add", "--rows", "8", "--cols", "64", "--model", args.model,
               "--no-cache", "--quiet"])
        print(f"ptxsim {' '.join(layer)} (cache {cache})")
        print(f"{'run':<22} {'wall_s':>7} {'cpu_s':>7} {'layer_us':>10} {'read':>5} "
              f"{'simulated':>9}")
        for label, folder, flags in (
                ("first (empty cache)", "first", ["--cache-dir", str(cache)]),
                ("second (from cache)", "second", ["--cache-dir", str(cache)]),
                ("re-run, same folder", "first", ["--cache-dir", str(cache)]),
                ("--no-cache", "no-cache", ["--no-cache"])):
            wall, cpu, text = timed([*layer, *flags, "--out", str(Path(tmp) / folder)])
            report = json.loads(text)
            c = report.get("op_cache") or {"read": "-", "missed": "all"}
            kept = " (folder kept)" if report.get("out_unchanged") else ""
            print(f"{label:<22} {wall:7.2f} {cpu:7.2f} {report['time_us']:10.1f} "
                  f"{c['read']:>5} {c['missed']:>9}{kept}", flush=True)
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import simulator.app.cli"], cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)}, check=True)
        print(f"{'import the CLI alone':<22} {time.perf_counter() - start:7.2f}")


if __name__ == "__main__":
    main()
