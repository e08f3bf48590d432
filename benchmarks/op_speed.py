"""Wall seconds of `ptxsim op gemm` on the DeepSeek-V3-sized FP8 GEMM, per fidelity.

    python benchmarks/op_speed.py [--m 4096 --n 7168 --k 16384 --dtype fp8 --model h800_sxm]
                                  [--fidelity sampled full]

Runs the command in-process (`simulator.cli.main`) once per fidelity this simulator build
offers and prints the wall seconds beside the goal (sampled <= 10 s, full <= 120 s) and
the simulated time. A fidelity that this build does not offer, or a GEMM that cannot be
timed yet (no wgmma timing), is printed as "not available" with the reason.
Units: wall seconds, simulated microseconds.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import time

from simulator.cli import main as ptxsim

GOALS_S = {"sampled": 10.0, "full": 120.0}


def time_op(argv: list[str]) -> tuple[float, dict | str]:
    """(wall seconds, JSON result or the error line) of one `ptxsim op` run."""
    out, err = io.StringIO(), io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = ptxsim(["op", *argv, "--json"])
    wall = time.perf_counter() - start
    return wall, (json.loads(out.getvalue()) if rc == 0 else err.getvalue().strip())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--m", default="4096")
    p.add_argument("--n", default="7168")
    p.add_argument("--k", default="16384")
    p.add_argument("--dtype", default="fp8")
    p.add_argument("--model", default="h800_sxm")
    p.add_argument("--fidelity", nargs="+", default=["sampled", "full"])
    a = p.parse_args(argv)
    base = ["gemm", "--m", a.m, "--n", a.n, "--k", a.k, "--dtype", a.dtype, "--model", a.model]
    print(f"ptxsim op {' '.join(base)}")
    for fidelity in a.fidelity:
        wall, result = time_op([*base, "--fidelity", fidelity])
        if isinstance(result, str):
            print(f"  {fidelity:8} not available: {result}")
            continue
        print(f"  {fidelity:8} {wall:8.1f} s wall (goal <= {GOALS_S[fidelity]:.0f} s)   "
              f"simulated {result['time_us']:.1f} us, {result['tflops']:.0f} TFLOP/s, "
              f"{result['bound']}-bound, roofline {result['roofline_us']:.1f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
