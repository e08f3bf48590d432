"""Cost of recording the time series (`models.timeline_tracer`) in `simulate_kernel`.

Run: `python benchmarks/timeline_overhead.py [--n 524288] [--repeat 3]`. Times saxpy over
`--n` floats on h100_sxm in process CPU time (best of `--repeat`), first as
`simulate_kernel` runs it (timeline recorded) and with the tracer's `attach_sm` and
`attach_memory` replaced by no-ops for this process (nothing recorded), the two runs
interleaved, and prints both and the overhead in percent. A small warm-up
launch first keeps the numba compilation out of the figures. Prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import models
import simulator
from models import timeline_tracer
from workloads.kernels.case import load_ptx


def _run(ptx: str, n: int, config) -> float:
    x = np.ones(n, np.float32)
    y = np.ones(n, np.float32)
    start = time.process_time()
    simulator.simulate_kernel(ptx, "saxpy", (-(-n // 256), 1, 1), (256, 1, 1),
                              [n, np.float32(1.5), x, y], config=config)
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1 << 19)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    config = models.load_preset("h100_sxm")
    ptx = load_ptx("saxpy.cu")
    _run(ptx, 1024, config)
    tracer = timeline_tracer.TimelineTracer
    recording = tracer.attach_sm, tracer.attach_memory
    silent = (lambda self, hooks, sm_id: None), (lambda self, hooks: None)
    best = {"with": float("inf"), "without": float("inf")}
    try:
        for _ in range(args.repeat):   # interleaved, so load changes hit both alike
            for label, (attach_sm, attach_memory) in (("with", recording),
                                                      ("without", silent)):
                tracer.attach_sm, tracer.attach_memory = attach_sm, attach_memory
                best[label] = min(best[label], _run(ptx, args.n, config))
    finally:
        tracer.attach_sm, tracer.attach_memory = recording
    with_timeline, without = best["with"], best["without"]
    print(f"saxpy n={args.n}: with timeline {with_timeline:.3f} s CPU, without "
          f"{without:.3f} s CPU, overhead {100 * (with_timeline / without - 1):+.1f} %")


if __name__ == "__main__":
    main()
