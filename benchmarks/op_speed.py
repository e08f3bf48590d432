"""Wall and CPU seconds of `ptxsim op gemm` on the DeepSeek-V3-sized FP8 GEMM, per fidelity,
and how well sampled agrees with full on a GEMM suite.

    python benchmarks/op_speed.py [--m 4096 --n 7168 --k 16384 --dtype fp8 --model h800_sxm]
                                  [--fidelity sampled full] [--full-limit-s 600]
                                  [--mid-k 2048] [--no-suite]

Each run goes through the command in-process (`simulator.app.cli.main`). The process's first
simulation compiles the cached-memory kernel (numba); that warm-up is timed apart on a
128³ GEMM and printed on its own line, so the per-fidelity figures are those of a warm
process (add the warm-up for a cold `ptxsim` command). CPU seconds (`time.process_time`)
are printed beside wall seconds because the wall clock of a shared machine includes
waiting for a core.

Full fidelity of the big GEMM: a full run of the same M x N at `--mid-k` is timed first;
the full time of the big GEMM is estimated from it in proportion to K (a full run's
work is the tiles' k-loops plus their epilogues, so this overestimates slightly) and
printed as "estimate". The big full run is made only when that estimate is within
`--full-limit-s`; otherwise the estimate stands, labelled as such.

Suite: GEMMs small enough to run in full (4 compute SMs via `sm.count`, plain and
grouped, bf16 and fp8) plus two on the whole chip (one round of tiles; seven rounds, of
which sampling simulates the partial one and one full round), each timed sampled and full; the
relative errors of the sampled time and HBM bytes are printed with the suite's largest.
Units: wall and CPU seconds, simulated microseconds, percent.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import time

from simulator.app.cli import main as ptxsim

GOALS_S = {"sampled": 10.0, "full": 120.0}
# (label, ptxsim op arguments): full runs of a few seconds each
SUITE = (
    ("fp8 896x768x5120, 4 SMs", ["--m", "896", "--n", "768", "--k", "5120", "--dtype", "fp8",
                                 "--set", "sm.count=4"]),
    ("bf16 1024x512x2560, 3 SMs", ["--m", "1024", "--n", "512", "--k", "2560", "--set",
                                   "sm.count=3"]),
    ("fp8 grouped 12x128x256x1024 contiguous, 2 SMs",
     ["--m", "128", "--n", "256", "--k", "1024", "--dtype", "fp8", "--groups", "12",
      "--set", "sm.count=2"]),
    ("fp8 grouped 6x128x256x8192 masked, 4 SMs",
     ["--m", "128", "--n", "256", "--k", "8192", "--dtype", "fp8", "--groups", "6",
      "--layout", "masked", "--set", "sm.count=4"]),
    ("fp8 2048x2048x8192, h800_sxm", ["--m", "2048", "--n", "2048", "--k", "8192",
                                      "--dtype", "fp8"]),
    ("fp8 4096x7168x2048, h800_sxm (rounds cut)", ["--m", "4096", "--n", "7168", "--k", "2048",
                                                  "--dtype", "fp8"]),
)


def time_op(argv: list[str]) -> tuple[float, float, dict | str]:
    """(wall s, CPU s, JSON result or the error line) of one `ptxsim op gemm` run."""
    out, err = io.StringIO(), io.StringIO()
    wall, cpu = time.perf_counter(), time.process_time()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = ptxsim(["op", "gemm", *argv, "--json"])
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return wall, cpu, (json.loads(out.getvalue()) if rc == 0 else err.getvalue().strip())


def _line(label: str, wall: float, cpu: float, result: dict, goal: str = "") -> str:
    return (f"  {label:28} {wall:7.1f} s wall {cpu:7.1f} s CPU{goal}   simulated "
            f"{result['time_us']:.1f} us, {result['tflops']:.0f} TFLOP/s, "
            f"{result['bound']}-bound, roofline {result['roofline_us']:.1f} us")


def big_gemm(a, base: list[str]) -> None:
    print(f"ptxsim op gemm {' '.join(base)}")
    for fidelity in a.fidelity:
        goal = f" (goal <= {GOALS_S[fidelity]:.0f} s)"
        if fidelity == "full" and int(a.k) > a.mid_k:
            mid = [*base[:base.index("--k") + 1], str(a.mid_k), *base[base.index("--k") + 2:]]
            wall, cpu, result = time_op([*mid, "--fidelity", "full"])
            if isinstance(result, str):
                print(f"  full (K={a.mid_k}) not available: {result}")
                continue
            print(_line(f"full, K={a.mid_k} (measured)", wall, cpu, result))
            scale = int(a.k) / a.mid_k
            print(f"  {'full (estimate, K-scaled)':28} {wall * scale:7.1f} s wall "
                  f"{cpu * scale:7.1f} s CPU{goal}   from the K={a.mid_k} run x {scale:g}")
            if cpu * scale > a.full_limit_s:
                print(f"  full at K={a.k} not run: the estimate exceeds "
                      f"--full-limit-s {a.full_limit_s:.0f}")
                continue
        wall, cpu, result = time_op([*base, "--fidelity", fidelity])
        if isinstance(result, str):
            print(f"  {fidelity:28} not available: {result}")
            continue
        print(_line(fidelity, wall, cpu, result, goal))
        if fidelity == "sampled" and isinstance(result.get("kernel"), dict):
            print(f"    {result['kernel'].get('sample_note', '')}")


def suite() -> None:
    print("sampled vs full (time_us, hbm_bytes), error of sampled:")
    worst = worst_bytes = 0.0
    for label, argv in SUITE:
        wf, cf, full = time_op([*argv, "--model", "h800_sxm", "--fidelity", "full"])
        ws, cs, sampled = time_op([*argv, "--model", "h800_sxm", "--fidelity", "sampled"])
        if isinstance(full, str) or isinstance(sampled, str):
            print(f"  {label:46} not available: {full if isinstance(full, str) else sampled}")
            continue
        error = 100.0 * (sampled["time_us"] / full["time_us"] - 1)
        bytes_error = 100.0 * (sampled["hbm_bytes"] / full["hbm_bytes"] - 1)
        worst, worst_bytes = max(worst, abs(error)), max(worst_bytes, abs(bytes_error))
        print(f"  {label:46} full {full['time_us']:9.2f} us ({cf:5.1f} s CPU)  sampled "
              f"{sampled['time_us']:9.2f} us ({cs:5.1f} s CPU)  error {error:+.2f} %, "
              f"HBM bytes {bytes_error:+.2f} %")
    print(f"  largest |error| {worst:.2f} % time, {worst_bytes:.2f} % HBM bytes "
          f"(goal <= 3 %)")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--m", default="4096")
    p.add_argument("--n", default="7168")
    p.add_argument("--k", default="16384")
    p.add_argument("--dtype", default="fp8")
    p.add_argument("--model", default="h800_sxm")
    p.add_argument("--fidelity", nargs="+", default=["sampled", "full"],
                   choices=("sampled", "full"))
    p.add_argument("--full-limit-s", type=float, default=600.0,
                   help="run the big full GEMM only if its estimated CPU time is within this")
    p.add_argument("--mid-k", type=int, default=2048, help="K of the measured full run")
    p.add_argument("--no-suite", action="store_true", help="skip the sampled-vs-full suite")
    a = p.parse_args(argv)
    wall, cpu, _ = time_op(["--m", "128", "--n", "128", "--k", "128", "--model", a.model])
    print(f"warm-up (numba compile of the memory kernel, first simulation): {wall:.1f} s "
          f"wall {cpu:.1f} s CPU")
    big_gemm(a, ["--m", a.m, "--n", a.n, "--k", a.k, "--dtype", a.dtype, "--model", a.model])
    if not a.no_suite:
        suite()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
