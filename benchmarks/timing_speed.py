"""Timing-model speed in simulated warp-instructions per wall second (one core).

For each kernel prints the warp-instructions, the wall time of the functional run with the
trace recorder, the wall time of `simulate_kernel` (functional run, trace and replay), the
rates of the replay alone and end to end (best of `--repeat`), and the end-to-end rate in
process CPU time (steadier than wall time on a loaded machine). Kernels: saxpy over `--n`
floats and the tiled SGEMM of size `--gemm`. A small warm-up launch runs first so that
one-time JIT compilation (the cached memory's numba kernel) is not counted.

    python benchmarks/timing_speed.py [--repeat 1] [--n 1048576] [--gemm 256]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import isa
import models
from models.units import instruction_timings
from simulator.runner import simulate
from simulator.runner.trace import TraceRecorder
from workloads.kernels.case import load_ptx


def _launch_saxpy(n: int):
    x = np.ones(n, np.float32)
    y = np.ones(n, np.float32)
    return "saxpy.cu", "saxpy", (-(-n // 256), 1, 1), (256, 1, 1), [n, np.float32(1.5), x, y]


def _launch_sgemm(size: int):
    a = np.ones((size, size), np.float32)
    c = np.zeros((size, size), np.float32)
    grid = (-(-size // 16), -(-size // 16), 1)
    return ("sgemm.cu", "sgemm_tiled", grid, (16, 16, 1),
            [size, size, size, np.float32(1.0), a, a, np.float32(0.0), c])


def bench(label: str, launch, repeat: int) -> None:
    file, entry, grid, block, args = launch
    program = isa.compile_kernel(load_ptx(file), entry)
    config = models.load_preset("h100_sxm")
    best_trace = best_total = best_cpu = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        rec = TraceRecorder(grid, int(np.prod(block)), program.local_bytes)
        isa.run_kernel(program, entry, grid, block, args, observer=rec)
        rec.finish()
        instruction_timings(program, config)
        t1, c1 = time.perf_counter(), time.process_time()
        res = simulate.simulate_kernel(program, entry, grid, block, args, config=config)
        t2, c2 = time.perf_counter(), time.process_time()
        best_trace, best_total = min(best_trace, t1 - t0), min(best_total, t2 - t1)
        best_cpu = min(best_cpu, c2 - c1)
    replay = max(best_total - best_trace, 1e-9)
    print(f"{label:18s} warp-instr {res.instructions:>10,}  trace {best_trace:6.2f} s  "
          f"total {best_total:6.2f} s  replay {res.instructions / replay / 1e3:7.1f} K/s  "
          f"end-to-end {res.instructions / best_total / 1e3:7.1f} K/s  "
          f"(cpu {res.instructions / best_cpu / 1e3:7.1f} K/s)  "
          f"({res.cycles:,} cycles, {res.time_us:.2f} us)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--n", type=int, default=1 << 20)
    parser.add_argument("--gemm", type=int, default=256)
    opts = parser.parse_args()
    file, entry, grid, block, args = _launch_saxpy(4096)
    simulate.simulate_kernel(isa.compile_kernel(load_ptx(file), entry), entry, grid, block, args)
    bench(f"saxpy n={opts.n}", _launch_saxpy(opts.n), opts.repeat)
    bench(f"sgemm {opts.gemm}^3", _launch_sgemm(opts.gemm), opts.repeat)


if __name__ == "__main__":
    main()
