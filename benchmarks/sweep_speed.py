"""Wall and CPU seconds of a layer sweep run as a user runs it (`ptxsim sweep`), and what it
found: by default the 16-point DeepSeek-V3 sweep (4 values of `sm.comm_count` x 4 of
`l2.size_bytes` on one GPU of the EP32 prefill,
`workloads/sweeps/large/layer_deepseek_comm_l2.toml`) with 2 local workers.

    python benchmarks/sweep_speed.py [--sweep FILE] [--workers 2 | --dask local:4]
        [--out DIR]

Runs `python -m simulator.app.cli sweep FILE --out DIR --no-cache` in a child process (op
cache off, so every point simulates its ops; the points differ in config, so they would
share none anyway) and prints the wall seconds, the CPU seconds of the child and its worker
processes (`resource.getrusage(RUSAGE_CHILDREN)`: local workers only, a Dask cluster's are
its own processes and are not counted), and the point table (`reports.load_sweep`: the axes,
the layer time and the communication hidden). DIR defaults to a new folder under the system's
temporary directory, kept afterwards. Units: seconds, microseconds.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SWEEP = ROOT / "workloads" / "sweeps" / "large" / "layer_deepseek_comm_l2.toml"
GOAL_WALL_S = 600.0
"""The 16-point sweep's goal on a 2-core machine with 2 workers."""


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sweep", type=Path, default=DEFAULT_SWEEP)
    runner = p.add_mutually_exclusive_group()
    runner.add_argument("--workers", type=int, default=2)
    runner.add_argument("--dask", default=None, metavar="ADDRESS")
    p.add_argument("--out", type=Path, default=None,
                   help="sweep folder (default: a new temporary folder, kept)")
    a = p.parse_args(argv)
    out = a.out or Path(tempfile.mkdtemp(prefix="ptxsim-sweep-speed-"))
    how = ["--dask", a.dask] if a.dask else ["--workers", str(a.workers)]
    cmd = [sys.executable, "-m", "simulator.app.cli", "sweep", str(a.sweep), "--out",
           str(out), "--no-cache", *how]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=ROOT)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode:
        print(f"ptxsim sweep exited {done.returncode}", file=sys.stderr)
        return done.returncode
    sys.path.insert(0, str(ROOT))
    from reports import load_sweep

    points = load_sweep(out)
    axes = [c for c in points.columns if "." in c and c not in ("config_json",)]
    cols = [c for c in (*axes, "status", "time_us", "comm_hidden_us", "comm_exposed_us")
            if c in points.columns]
    print(points[cols].to_string(index=False))
    runner_text = f"Dask {a.dask}" if a.dask else f"{a.workers} local workers"
    cpu_text = "" if a.dask else f", {cpu:.1f} s CPU (children)"
    print(f"{len(points)} points with {runner_text}: {wall:.1f} s wall{cpu_text}; "
          f"goal <= {GOAL_WALL_S:.0f} s wall for 16 points on 2 cores with 2 workers; "
          f"parts in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
