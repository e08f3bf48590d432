"""Time every catalogued CUDA kernel of `workloads/kernels` on the GPU at two larger sizes.

For each entry of `workloads.kernels.catalog.KERNELS` and each size in `HW_SIZES` the case
builder makes the exact launch (grid, block, arguments, dynamic shared bytes) the simulator
runs; the committed PTX (the same program the simulator runs) is loaded with CuPy (driver
JIT for sm_90) and launched with those arguments. Method: one launch on fresh inputs whose
outputs are checked against the case's expected arrays (`check` column), then `warmup`
untimed and `reps` timed launches, each between two CUDA events, once back to back (L2
warm, `l2_flush` false) and once with a 256 MiB buffer written before every launch
(`l2_flush` true). Timed launches reuse the outputs of the previous ones (atomics keep
accumulating; in-place kernels keep updating their data): times only. Without the flush a
20 us single-thread spin kernel runs before each timed launch (no memory touched), so the
host has queued the launch when the events start and they time the kernel, not the host.

    python benchmarks/hardware/own_kernels.py --out DIR [--quick] [--only NAME ...]
    python benchmarks/hardware/own_kernels.py --ncu-launches [--quick]   # one launch each

`--quick` uses the catalog's small test sizes (a smoke test of the harness).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fast_reference import patch_fma_exact  # noqa: E402
from hw_common import (  # noqa: E402
    FLUSH_BYTES,
    ClockSampler,
    Table,
    environment,
    gpu_spin,
    reps_for,
    summarize_ms,
    time_cupy,
)

M20, M24 = 1 << 20, 1 << 24


def _rms_block(cols: int) -> int:
    """Threads per row the rmsnorm op gives `rmsnorm_bf16_rows` (4 held 8-wide vectors)."""
    return min(1024, max(32, -(-(-(-cols // 8) // 4) // 32) * 32))


# Two sizes per kernel, larger than the unit tests' so that times are meaningful: a
# cache-sized one and an HBM-sized one for streaming kernels, LLM widths for layer ops.
HW_SIZES: dict[str, tuple[dict, ...]] = {
    "saxpy": (dict(n=M20, block=256), dict(n=M24, block=256)),
    "gelu_tanh": (dict(n=M20, block=256), dict(n=M24, block=256)),
    "silu": (dict(n=M20, block=256), dict(n=M24, block=256)),
    "scale_shift_grid_stride": (dict(n=M20, grid=264, block=256),
                                dict(n=M24, grid=1056, block=256)),
    "daxpy": (dict(n=M20, block=256), dict(n=M24, block=256)),
    "transpose_tiled": (dict(rows=1024, cols=2048), dict(rows=4096, cols=8192)),
    "block_reduce_sum": (dict(n=M20, block=256), dict(n=M24, block=256)),
    "warp_reduce_sum": (dict(n=M20, block=256), dict(n=M24, block=256)),
    "atomic_sum_f32": (dict(n=1 << 18, block=256), dict(n=M20, block=256)),
    "absmax_cas": (dict(n=1 << 18, block=256), dict(n=M20, block=256)),
    "softmax_rows": (dict(rows=4096, cols=1024, rows_per_block=4),
                     dict(rows=16384, cols=4096, rows_per_block=4)),
    "layernorm_rows": (dict(rows=4096, cols=1024, block=128),
                       dict(rows=16384, cols=4096, block=256)),
    "rmsnorm_bf16": (dict(rows=4096, cols=4096, rows_per_block=4),
                     dict(rows=16384, cols=7168, rows_per_block=4)),
    "rmsnorm_bf16_rows": (dict(rows=4096, cols=4096, block=_rms_block(4096)),
                          dict(rows=16384, cols=7168, block=_rms_block(7168))),
    "scan_inclusive_block": (dict(n=M20, block=256), dict(n=M24, block=256)),
    "histogram_shared": (dict(n=M20, bins=37, grid=264, block=256),
                         dict(n=M24, bins=256, grid=1056, block=256)),
    "ddot_atomic": (dict(n=M20, grid=264, block=256), dict(n=M24, grid=1056, block=256)),
    "sgemm_tiled": (dict(m=512, n=512, k=512), dict(m=2048, n=2048, k=2048)),
    "wmma_gemm_f16": (dict(m=512, n=512, k=512, warps=4), dict(m=2048, n=2048, k=2048, warps=4)),
    "mma_bf16_gemm": (dict(m=512, n=512, k=512, warps=4), dict(m=2048, n=2048, k=2048, warps=4)),
    "mma_fp8_gemm": (dict(m=512, n=512, k=512, warps=4), dict(m=2048, n=2048, k=2048, warps=4)),
    "half2_fma_relu_mul": (dict(n_pairs=M20, block=256), dict(n_pairs=M24, block=256)),
    "quantize_e4m3": (dict(n=M20, block=256), dict(n=M24, block=256)),
    "quantize_e4m3_pairs": (dict(n_pairs=M20, block=256), dict(n_pairs=M24, block=256)),
    "dequantize_e4m3": (dict(n=M20, block=256), dict(n=M24, block=256)),
    "collatz_steps": (dict(n=1 << 18, block=256, max_steps=1000),
                      dict(n=M20, block=256, max_steps=1000)),
    "poly_derivative_call": (dict(n=M20, block=256), dict(n=M24, block=256)),
    "ballot_popc": (dict(n=M20, block=256), dict(n=M24, block=256)),
    "swiglu_bf16": (dict(rows=1024, cols=14336, threads=256),
                    dict(rows=8192, cols=14336, threads=256)),
    "swiglu_bwd_bf16": (dict(rows=1024, cols=14336, threads=256),
                        dict(rows=8192, cols=14336, threads=256)),
    "gelu_bf16": (dict(rows=1024, cols=8192, threads=256), dict(rows=8192, cols=8192, threads=256)),
    "gelu_bwd_bf16": (dict(rows=1024, cols=8192, threads=256),
                      dict(rows=8192, cols=8192, threads=256)),
    "rope_bf16": (dict(rows=4096, heads=32, rot_dim=128, seqlen=4096, threads=256),
                  dict(rows=16384, heads=32, rot_dim=128, seqlen=16384, threads=256)),
    "add_n_bf16": (dict(rows=4096, cols=4096, inputs=2, threads=256),
                   dict(rows=16384, cols=7168, inputs=4, threads=256)),
    "quantize_e4m3_1x128": (dict(rows=4096, cols=7168), dict(rows=16384, cols=7168)),
    "quantize_e4m3_128x1_t": (dict(rows=4096, cols=7168), dict(rows=16384, cols=7168)),
    "quantize_e4m3_tensor": (dict(n=4096 * 7168), dict(n=16384 * 7168)),
    "rms_norm_f16": (dict(tokens=2048, hidden=4096), dict(tokens=8192, hidden=4096)),
    "silu_and_mul_f16": (dict(tokens=1024, d=11008), dict(tokens=4096, d=11008)),
    "rotary_neox_f16": (dict(tokens=1024, heads=32, kv_heads=32, head_size=128, rot_dim=128),
                        dict(tokens=4096, heads=32, kv_heads=32, head_size=128, rot_dim=128)),
    "moe_topk_sigmoid": (dict(tokens=4096, experts=256, topk=8),
                         dict(tokens=16384, experts=256, topk=8)),
    "rmsnorm_bwd_bf16": (dict(rows=4096, cols=4096, rows_per_block=4),
                         dict(rows=16384, cols=7168, rows_per_block=4)),
    "layernorm_bwd_bf16": (dict(rows=4096, cols=4096, rows_per_block=4),
                           dict(rows=16384, cols=7168, rows_per_block=4)),
}

NOT_YET_MEASURED = {"quantize_e4m3_tensor": "2026-11-27", "rms_norm_f16": "2026-11-27",
                    "silu_and_mul_f16": "2026-11-27", "rotary_neox_f16": "2026-11-27"}
"""Catalog kernels added after the stored tables (`workloads/reference/h100/own_kernels.csv`,
`ncu_own_kernels.csv`) were measured, with the date each was added: the next run on a lent
device measures them (their sizes are in `HW_SIZES`)."""

_PARAM = re.compile(r"\.param\s+(?:\.align\s+\d+\s+)?\.(\w+)\s+(\w+)")
_SCALAR = {"u32": np.uint32, "s32": np.int32, "b32": np.uint32, "u64": np.uint64,
           "s64": np.int64, "b64": np.uint64, "f32": np.float32, "f64": np.float64,
           "u16": np.uint16, "s16": np.int16, "u8": np.uint8, "s8": np.int8}


def entry_params(ptx: str, entry: str) -> list[str]:
    """PTX types of `entry`'s parameters, in order (e.g. ['u32', 'f32', 'u64', 'u64'])."""
    m = re.search(r"\.entry\s+" + re.escape(entry) + r"\s*\((.*?)\)", ptx, re.S)
    if m is None:
        raise ValueError(f"entry {entry!r} not found in its PTX")
    return [t for t, _ in _PARAM.findall(m.group(1))]


def _raw_view(a: np.ndarray) -> np.ndarray:
    """A view CuPy can copy: ml_dtypes (bf16, fp8) as unsigned integers of their width."""
    if a.dtype.kind == "V" or a.dtype.name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        return a.view({1: np.uint8, 2: np.uint16}[a.dtype.itemsize])
    return a


class Launch:
    """A case on the device: its arguments copied over, launchable, outputs readable."""

    def __init__(self, case, module_cache: dict):
        import cupy

        from workloads.kernels.case import KERNEL_DIR

        ptx_path = (KERNEL_DIR / case.file).with_suffix(".ptx")
        if ptx_path not in module_cache:
            module_cache[ptx_path] = cupy.RawModule(path=str(ptx_path))
        self.kernel = module_cache[ptx_path].get_function(case.entry)
        types = entry_params(ptx_path.read_text(), case.entry)
        if len(types) != len(case.args):
            raise ValueError(f"{case.entry}: {len(case.args)} args for {len(types)} params")
        self.case = case
        self.dev: list = []
        for t, a in zip(types, case.args, strict=True):
            if isinstance(a, np.ndarray):
                self.dev.append(cupy.asarray(_raw_view(np.ascontiguousarray(a))))
            else:
                self.dev.append(_SCALAR[t](a))
        if case.shared_bytes > 48 * 1024:
            self.kernel.max_dynamic_shared_size_bytes = case.shared_bytes

    def __call__(self):
        c = self.case
        self.kernel(c.grid, c.block, tuple(self.dev), shared_mem=c.shared_bytes)

    def results(self) -> list:
        """The case's arguments with every array replaced by its device contents."""
        out = []
        for host, dev in zip(self.case.args, self.dev, strict=True):
            if isinstance(host, np.ndarray):
                out.append(dev.get().view(host.dtype).reshape(host.shape))
            else:
                out.append(host)
        return out


def _check(case, launch: Launch) -> str:
    try:
        dataclasses.replace(case, args=launch.results()).check()
    except AssertionError as exc:
        return "FAIL: " + str(exc)[:240]
    return "ok"


def sizes_for(name: str, spec, quick: bool) -> tuple[dict, ...]:
    """The catalog's test sizes with --quick or for a kernel missing from HW_SIZES."""
    return spec.variants if quick or name not in HW_SIZES else HW_SIZES[name]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("hw_out"))
    ap.add_argument("--quick", action="store_true", help="catalog test sizes, few repeats")
    ap.add_argument("--only", nargs="*", help="entry names to run (default: all)")
    ap.add_argument("--deadline-s", type=float, default=None,
                    help="start no new kernel after this many seconds (ends cleanly under ncu)")
    ap.add_argument("--ncu-launches", action="store_true",
                    help="one checked launch per kernel and size, nothing timed (under ncu)")
    args = ap.parse_args(argv)

    import cupy

    from workloads.kernels.catalog import KERNELS

    missing = sorted(set(KERNELS) - set(HW_SIZES))
    if missing:
        print(f"own_kernels: no hardware sizes for {missing}; using the catalog's", flush=True)
    patch_fma_exact()
    names = args.only or list(KERNELS)
    args.out.mkdir(parents=True, exist_ok=True)
    warmup, reps_cap = (1, 5) if args.quick else (3, 50)
    env = environment()
    flush_buf = cupy.empty(FLUSH_BYTES, dtype=cupy.uint8)
    flush = lambda: flush_buf.fill(1)  # noqa: E731
    spin = gpu_spin()
    modules: dict = {}
    with ClockSampler() as clocks:
        method = ("CUDA events around each launch; committed PTX loaded with CuPy RawModule "
                  f"(driver JIT); warm-up {warmup}, up to {reps_cap} repeats (about 60 ms per "
                  "row); l2_flush true: a 256 MiB buffer written (cupy fill) before every "
                  "launch, outside the events; false: a 20 us one-thread spin kernel (no memory) "
                  "before every launch instead, so L2 stays warm and the host's launch latency "
                  "stays out of the events. check: outputs "
                  "of the first launch on fresh inputs against the case's expected arrays.")
        table = None if args.ncu_launches else Table(args.out, "own_kernels", method, env,
                                                       clocks)
        started = time.monotonic()
        for name in names:
            if args.deadline_s is not None and time.monotonic() - started > args.deadline_s:
                print(f"own_kernels: deadline reached before {name}; stopping", flush=True)
                break
            spec = KERNELS[name]
            for index, sizes in enumerate(sizes_for(name, spec, args.quick)):
                try:
                    t0 = time.monotonic()
                    case = spec.build(np.random.default_rng(index), **sizes)
                    build_s = time.monotonic() - t0
                    launch = Launch(case, modules)
                    launch()
                    cupy.cuda.runtime.deviceSynchronize()
                    check = _check(case, launch)
                    if args.ncu_launches:
                        print(f"{name} {sizes} check={check}", flush=True)
                        continue
                    probe = time_cupy(launch, 1, 3, spin)
                    reps = min(reps_cap, reps_for(min(probe)))
                    for flushed in (False, True):
                        with clocks.window() as w:
                            times = time_cupy(launch, warmup, reps, flush if flushed else spin)
                        table.add({"kernel": name, "file": spec.file, "size_index": index,
                                   "sizes": json.dumps(sizes, sort_keys=True),
                                   "grid_x": case.grid[0], "grid_y": case.grid[1],
                                   "grid_z": case.grid[2], "block_x": case.block[0],
                                   "block_y": case.block[1], "block_z": case.block[2],
                                   "shared_bytes": case.shared_bytes, "l2_flush": flushed,
                                   "warmup": warmup, "reps": reps, **summarize_ms(times),
                                   **w.stats, "check": check,
                                   "build_s": round(build_s, 2)})
                    del launch
                except Exception as exc:  # one kernel's failure is a finding, not the end
                    if table is None:
                        print(f"FAILED {name} {sizes}: {exc}", flush=True)
                    else:
                        table.fail(f"{name} {sizes}", exc)
        if table is not None:
            table.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
