"""Functional interpreter speed in warp-instructions per second (one core).

Prints one line per kernel: warp-instructions executed, wall seconds (best of
`--repeat` runs, after one warm-up that also pays numba's compile), and the rate.
Kernels: saxpy over 1M elements and the tiled SGEMM (16x16 shared tiles).

    python benchmarks/isa_speed.py [--repeat 3] [--n 1048576] [--gemm 256]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import isa
from workloads.kernels.case import load_ptx


def _time(fn, repeat: int) -> tuple[float, object]:
    fn()
    best, result = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t0)
    return best, result


def bench_saxpy(n: int, repeat: int):
    program = isa.compile_kernel(load_ptx("saxpy.cu"), "saxpy", "saxpy.ptx")
    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    return _time(lambda: isa.run_kernel(program, "saxpy", -(-n // 256), 256,
                                        [n, np.float32(1.5), x, y]), repeat)


def bench_sgemm(size: int, repeat: int):
    program = isa.compile_kernel(load_ptx("sgemm.cu"), "sgemm_tiled", "sgemm.ptx")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size)).astype(np.float32)
    b = rng.standard_normal((size, size)).astype(np.float32)
    c = np.zeros((size, size), np.float32)
    grid = (-(-size // 16), -(-size // 16))
    return _time(lambda: isa.run_kernel(program, "sgemm_tiled", grid, (16, 16),
                                        [size, size, size, np.float32(1.0), a, b,
                                         np.float32(0.0), c]), repeat)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--n", type=int, default=1 << 20)
    ap.add_argument("--gemm", type=int, default=256)
    args = ap.parse_args()
    for name, (secs, res) in ((f"saxpy n={args.n}", bench_saxpy(args.n, args.repeat)),
                              (f"sgemm {args.gemm}^3", bench_sgemm(args.gemm, args.repeat))):
        rate = res.warp_instructions / secs
        print(f"{name:<16} warp-instr {res.warp_instructions:>10,}  {secs:7.3f} s  "
              f"{rate / 1e6:6.2f} M warp-instr/s")


if __name__ == "__main__":
    main()
