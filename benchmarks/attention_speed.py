"""Wall seconds of `ptxsim op attention` on DeepSeek-V3's prefill attention (and of
`ptxsim op mla-decode` on its decode attention), sampled fidelity.

    python benchmarks/attention_speed.py [--model h800_sxm] [--fidelity sampled]

Prefill: batch 1, 128 heads, 4096 tokens, head dims 192 (q, k) / 128 (v), causal, bf16
(the shape of `workloads.layer("deepseek-v3", "prefill", 4096)`). Decode: MLA, batch 64,
128 heads, 4096 cached tokens. Runs the command in-process (`simulator.app.cli.main`) and
prints the wall seconds beside the simulated time, TFLOP/s and the roofline. The first
run of a process includes the simulator's one-time JIT compilation; it is printed
separately (a warm-up op) so the figures are those of a warm process.
Units: wall seconds, simulated microseconds.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import time

from simulator.app.cli import main as ptxsim

PREFILL = ["attention", "--batch", "1", "--heads", "128", "--seqlen", "4096", "--headdim",
           "192", "--headdim-v", "128", "--causal", "--dtype", "bf16"]
DECODE = ["mla-decode", "--batch", "64", "--heads", "128", "--kv-len", "4096"]
WARMUP = ["attention", "--batch", "1", "--heads", "1", "--seqlen", "128", "--headdim", "64"]


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
    p.add_argument("--model", default="h800_sxm")
    p.add_argument("--fidelity", default="sampled")
    a = p.parse_args(argv)
    wall, _ = time_op([*WARMUP, "--model", a.model, "--fidelity", "full"])
    print(f"warm-up (one-time compilation): {wall:.1f} s wall")
    for name, base in (("prefill", PREFILL), ("decode", DECODE)):
        wall, result = time_op([*base, "--model", a.model, "--fidelity", a.fidelity])
        print(f"ptxsim op {' '.join(base)} --model {a.model} --fidelity {a.fidelity}")
        if isinstance(result, str):
            print(f"  {name:8} failed: {result}")
            continue
        print(f"  {name:8} {wall:8.1f} s wall   simulated {result['time_us']:.1f} us, "
              f"{result['tflops']:.0f} TFLOP/s, {result['gbps']:.0f} GB/s, "
              f"{result['bound']}-bound, roofline {result['roofline_us']:.1f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
