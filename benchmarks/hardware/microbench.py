"""Microbenchmarks on the GPU: latency per level, HBM and shared bandwidth, pipe throughput.

* pointer_chase.csv: `chase_ca` / `chase_cg` of microbench_hw.cu (one thread, dependent
  64-bit loads over a random cyclic order of 128-byte lines of a footprint); cycles per hop
  from %clock64, ns per hop from %globaltimer, both read in the kernel around the timed
  hops. mode `warm`: one untimed lap over every line first (footprints up to 64 MiB);
  mode `cold`: a 256 MiB buffer written before the launch and no warm lap (HBM).
* microbench.csv: the project's kernels of workloads/kernels/microbench (stream copy /
  read / write, shared_bandwidth at word stride 1 and 32, fma_throughput, sfu_throughput,
  pack_throughput (f32 -> bf16x2 conversions, not yet measured), int_mix_throughput
  (IMAD and LOP3 chains half each: the ALU and FMA pipes apart or not; not yet measured),
  mma_throughput) and microbench_hw.cu's shared_volatile (the same loads as
  ld.volatile.shared, which ptxas keeps), wgmma_bf16 and wgmma_e4m3, and fence_cost
  (`membar.gl` after 0 and 4 stores, cycles per round with and without it; not yet
  measured), and store_halves (8-byte pairs written whole, as two 4-byte halves, or half:
  partial-sector stores against whole ones; not yet measured). Bandwidths are bytes
  over the median event time of a launch; per-SM rates are the difference of two launches
  that differ only in `iters` (N and 2N), so launch and ramp costs cancel:
  Δops / (Δseconds × SM clock × SMs). The SM clock is NVML's median during the timing.

    python benchmarks/hardware/microbench.py --out DIR [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(HERE))

from hw_common import FLUSH_BYTES, ClockSampler, Table, environment, gpu_spin, time_cupy  # noqa: E402

MB_DIR = REPO / "workloads" / "kernels" / "microbench"
LINE_BYTES = 128
KIB, MIB = 1 << 10, 1 << 20
FOOTPRINTS = (8 * KIB, 16 * KIB, 32 * KIB, 64 * KIB, 128 * KIB, 192 * KIB, 256 * KIB,
              512 * KIB, 1 * MIB, 4 * MIB, 16 * MIB, 24 * MIB, 32 * MIB, 40 * MIB,
              48 * MIB, 64 * MIB, 256 * MIB, 1024 * MIB)
WARM_LIMIT_BYTES = 64 * MIB


def build_cubin() -> Path:
    out = Path(tempfile.mkdtemp()) / "microbench_hw.cubin"
    cmd = ["nvcc", "-O3", "-gencode=arch=compute_90a,code=sm_90a", "-cubin",
           str(HERE / "microbench_hw.cu"), "-o", str(out)]
    subprocess.run(cmd, check=True)
    return out


def chain_buffer(cp, footprint: int, seed: int):
    """A footprint of u64 words whose line heads form one random cycle of all lines."""
    lines = footprint // LINE_BYTES
    words = LINE_BYTES // 8
    buf = cp.zeros(footprint // 8, dtype=cp.uint64)
    order = np.random.default_rng(seed).permutation(lines)
    nxt = np.roll(order, -1)
    base = buf.data.ptr
    heads = cp.asarray(order * words)
    buf[heads] = cp.asarray((base + nxt * LINE_BYTES).astype(np.uint64))
    return buf, lines


def pointer_chase(cp, module, out: Path, env, clocks, quick: bool) -> None:
    method = ("one thread of one CTA; random cyclic order of all 128-byte lines of the "
              "footprint, starting at line 0; cycles from %clock64 and ns from %globaltimer "
              "around `hops` dependent loads; median of 3 launches. mode warm: an untimed "
              "lap over every line first; cold: L2 flushed (256 MiB written) before each "
              "launch, no warm lap. load ca = ld.global.ca (L1), cg = ld.global.cg (L2).")
    table = Table(out, "pointer_chase", method, env, clocks)
    res = cp.zeros(4, dtype=cp.uint64)
    flush_buf = cp.empty(FLUSH_BYTES, dtype=cp.uint8)
    hops = 2048 if quick else 8192
    for footprint in (FOOTPRINTS[:4] + FOOTPRINTS[-1:] if quick else FOOTPRINTS):
        try:
            buf, lines = chain_buffer(cp, footprint, seed=footprint % 9973)
        except Exception as exc:
            table.fail(f"chain {footprint}", exc)
            continue
        mode = "warm" if footprint <= WARM_LIMIT_BYTES else "cold"
        warm = lines if mode == "warm" else 0
        for load in ("ca", "cg"):
            kernel = module.get_function(f"chase_{load}")
            try:
                cycles, ns = [], []
                with clocks.window() as w:
                    for _ in range(3):
                        if mode == "cold":
                            flush_buf.fill(1)
                        kernel((1,), (32,), (buf, np.int32(warm), np.int32(hops), res))
                        r = res.get()
                        cycles.append(int(r[1]) / hops)
                        ns.append(int(r[2]) / hops)
                c, t = statistics.median(cycles), statistics.median(ns)
                table.add({"footprint_bytes": footprint, "lines": lines, "load": load,
                           "mode": mode, "warm_hops": warm, "hops": hops,
                           "cycles_per_hop": round(c, 2), "ns_per_hop": round(t, 2),
                           "kernel_clock_mhz": round(1e3 * c / t, 1) if t else "",
                           **w.stats})
            except Exception as exc:
                table.fail(f"chase {load} {footprint}", exc)
        del buf
    table.close()


def _delta_rate(cp, launch_n, iters: int, reps: int, clocks):
    """Median seconds of launch_n(2 iters) minus launch_n(iters), and the clock stats
    (a 20 us spin kernel before each timed launch keeps the host's latency out)."""
    spin = gpu_spin()
    with clocks.window() as w:
        t1 = statistics.median(time_cupy(lambda: launch_n(iters), 2, reps, spin))
        t2 = statistics.median(time_cupy(lambda: launch_n(2 * iters), 2, reps, spin))
    return (t2 - t1) * 1e-3, t1, t2, w.stats


def throughput(cp, mods, out: Path, env, clocks, sms: int, quick: bool) -> None:
    method = ("CUDA events around each launch, median of `reps`. Bandwidth: bytes moved / "
              "median time (copy counts read + write). Rates: launches with iters N and 2N, "
              "value = delta ops / (delta seconds x median NVML SM clock x SM count).")
    table = Table(out, "microbench", method, env, clocks)
    reps = 5 if quick else 20

    def row(group, metric, value, unit, **extra):
        table.add({"group": group, "metric": metric, "value": round(value, 3), "unit": unit,
                   **extra})

    # HBM streams (project kernels, one float4 per thread, 256 threads per CTA).
    stream = mods["stream"]
    for size in ((64 * MIB,) if quick else (256 * MIB, 2048 * MIB)):
        try:
            n = size // 16
            src = cp.random.standard_normal(size // 4, dtype=cp.float32)
            dst = cp.empty_like(src)
            count = cp.zeros(1, dtype=cp.uint32)
            grid = (n + 255) // 256
            kernels = {
                "copy": (stream.get_function("stream_copy"), (src, dst, np.int64(n)), 2 * size),
                "read": (stream.get_function("stream_read"),
                         (src, np.float32(-3e38), count, np.int64(n)), size),
                "write": (stream.get_function("stream_write"),
                          (dst, np.float32(1.5), np.int64(n)), size)}
            for name, (k, kargs, nbytes) in kernels.items():
                with clocks.window() as w:
                    times = time_cupy(lambda k=k, a=kargs, g=grid: k((g,), (256,), a), 3, reps)
                t = statistics.median(times)
                row("hbm", f"stream_{name} bandwidth", nbytes / (t * 1e-3) / 1e9, "GB/s",
                    size_bytes=size, grid=grid, block=256, median_ms=round(t, 4),
                    min_ms=round(min(times), 4), **w.stats)
            del src, dst
        except Exception as exc:
            table.fail(f"stream {size}", exc)

    # Shared-memory loads (project kernel): 8 CTAs of 256 threads per SM.
    grid, block = 8 * sms, 256
    sh_out = cp.zeros(grid * block, dtype=cp.uint32)
    for kname, shared in (("shared_bandwidth", mods["shared_bandwidth"]),
                          ("shared_volatile", mods["hw"])):
        k = shared.get_function(kname)
        for stride in (1, 32):
            try:
                iters = 200 if quick else (2000 if stride == 1 else 200)
                dt, t1, t2, st = _delta_rate(cp, lambda it, s=stride, k=k: k(
                    (grid,), (block,), (sh_out, np.int32(s), np.int32(it))), iters, reps,
                    clocks)
                nbytes = grid * block * 16 * iters * 4
                bpc = (nbytes / (dt * st["sm_clock_mhz_median"] * 1e6 * sms) if dt > 0
                       else float("nan"))
                note = ("time does not grow with iters: ptxas removed the repeated loads"
                        if t2 < 1.2 * t1 else "")
                row("shared", f"{kname} ld.shared.u32, word stride {stride}", bpc,
                    "B/clk/SM", grid=grid, block=block, iters=iters, median_ms=round(t1, 4),
                    median_ms_2x=round(t2, 4), **st, check=note)
            except Exception as exc:
                table.fail(f"{kname} stride {stride}", exc)

    # FP32 FMA and SFU ex2 (project kernels): 8 CTAs of 256 threads per SM.
    ct = mods["compute_throughput"]
    c_out = cp.zeros(grid * block * 8, dtype=cp.float32)
    for name, per_iter, unit in (("fma_throughput", 8 * 32, "FMA results/clk/SM"),
                                 ("sfu_throughput", 8 * 8, "ex2 results/clk/SM"),
                                 ("pack_throughput", 8 * 16, "F2FP.BF16 packs/clk/SM"),
                                 ("int_mix_throughput", 8 * 16,
                                  "IMAD + LOP3 results/clk/SM")):
        try:
            k = ct.get_function(name)
            iters = 100 if quick else 1000
            dt, t1, t2, st = _delta_rate(
                cp, lambda it, k=k: k((grid,), (block,), (c_out, np.int32(it))), iters, reps,
                clocks)
            ops = grid * block * per_iter * iters
            row("pipe", name, ops / (dt * st["sm_clock_mhz_median"] * 1e6 * sms), unit,
                grid=grid, block=block, iters=iters, median_ms=round(t1, 4),
                median_ms_2x=round(t2, 4), **st)
        except Exception as exc:
            table.fail(name, exc)

    # mma.sync m16n8k16 bf16 (project kernel): 4 CTAs of 8 warps per SM, 8 chains per warp.
    try:
        import ml_dtypes

        mm = mods["mma_throughput"].get_function("mma_throughput")
        a = cp.asarray(np.ones((16, 16), ml_dtypes.bfloat16).view(np.uint16))
        bt = cp.asarray(np.ones((8, 16), ml_dtypes.bfloat16).view(np.uint16))
        g = 4 * sms
        warps = g * 8
        m_out = cp.zeros(warps * 8 * 128, dtype=cp.float32)
        iters = 100 if quick else 2000
        dt, t1, t2, st = _delta_rate(
            cp, lambda it: mm((g,), (256,), (a, bt, m_out, np.int32(it))), iters, reps, clocks)
        macs = warps * 8 * 2048 * iters
        # accumulator k ends at k + 2 iters * 16 (all-ones A, B) after the last launch
        got = m_out.get().reshape(warps, 8, 128)
        want = np.arange(8)[None, :, None] + 2 * iters * 16.0
        check = ("ok" if np.array_equal(got, np.broadcast_to(want, got.shape))
                 else f"accumulators {got.min()}..{got.max()}")
        row("tensor", "mma.sync m16n8k16 bf16", macs / (dt * st["sm_clock_mhz_median"] * 1e6 * sms),
            "FMA/clk/SM", grid=g, block=256, iters=iters, median_ms=round(t1, 4),
            median_ms_2x=round(t2, 4), **st, check=check)
    except Exception as exc:
        table.fail("mma_throughput", exc)

    # wgmma m64n128 (microbench_hw.cu): 4 CTAs of one warpgroup per SM.
    for name, k_depth in (("wgmma_bf16", 16), ("wgmma_e4m3", 32)):
        try:
            wk = mods["hw"].get_function(name)
            g = 4 * sms
            w_out = cp.zeros(g * 128 * 2, dtype=cp.float32)
            iters = 100 if quick else 2000
            dt, t1, t2, st = _delta_rate(
                cp, lambda it, wk=wk, g=g, o=w_out: wk((g,), (128,), (o, np.int32(it))),
                iters, reps, clocks)
            macs = g * 8 * 64 * 128 * k_depth * iters
            got = w_out.get()
            want = float(2 * iters * 8 * k_depth)
            check = ("ok" if (got == want).all() else
                     f"accumulators {got.min()}..{got.max()}, exact sum {want}")
            row("tensor", f"{name} m64n128k{k_depth}",
                macs / (dt * st["sm_clock_mhz_median"] * 1e6 * sms), "FMA/clk/SM", grid=g,
                block=128, iters=iters, median_ms=round(t1, 4), median_ms_2x=round(t2, 4),
                tflops=round(2 * macs / dt / 1e12, 1), **st, check=check)
        except Exception as exc:
            table.fail(name, exc)
    # membar.gl after 0 or 4 stores (microbench_hw.cu fence_cost): one thread per SM.
    try:
        fk = mods["hw"].get_function("fence_cost")
        lines = cp.zeros(sms * 32 * 64, dtype=cp.uint32)
        counter = cp.zeros(sms, dtype=cp.uint32)
        f_out = cp.zeros(sms, dtype=cp.uint64)
        iters = 100 if quick else 1000
        for stores in (0, 4):
            per = {}
            for mode in (0, 1):
                fk((sms,), (32,), (lines, counter, np.int32(iters), np.int32(stores),
                                   np.int32(mode), f_out))
                cp.cuda.Device().synchronize()
                per[mode] = float(np.median(f_out.get()))
            row("sync", f"membar.gl after {stores} stores", per[1] - per[0], "cycles",
                grid=sms, block=32, iters=iters, round_cycles_no_fence=per[0],
                round_cycles_fence=per[1])
    except Exception as exc:
        table.fail("fence_cost", exc)
    # 8-byte pairs written whole, in two 4-byte halves, or half (microbench_hw.cu store_halves):
    # what partial-sector stores cost the L2 and HBM, beside the whole ones.
    try:
        hk = mods["hw"].get_function("store_halves")
        size = 64 * MIB if quick else 512 * MIB
        buf = cp.zeros(size // 4, dtype=cp.uint32)
        pairs, grid = size // 8, 8 * sms
        for mode, label in ((0, "whole 8-byte"), (1, "two 4-byte halves"), (2, "low half only")):
            with clocks.window() as w:
                times = time_cupy(lambda m=mode, b=buf: hk((grid,), (256,),
                                                           (b, np.int64(pairs), np.int32(m),
                                                            np.uint32(7))), 3, reps)
            t = statistics.median(times)
            written = size if mode < 2 else size // 2
            row("hbm", f"store_halves {label} bandwidth", written / (t * 1e-3) / 1e9, "GB/s",
                size_bytes=size, bytes_written=written, grid=grid, block=256, mode=mode,
                median_ms=round(t, 4), min_ms=round(min(times), 4), **w.stats)
        del buf
    except Exception as exc:
        table.fail("store_halves", exc)
    table.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("hw_out"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--skip-chase", action="store_true")
    args = ap.parse_args(argv)
    import cupy as cp

    args.out.mkdir(parents=True, exist_ok=True)
    env = environment()
    sms = env.get("sm_count", 132)
    mods = {name: cp.RawModule(path=str(MB_DIR / f"{name}.ptx"))
            for name in ("stream", "shared_bandwidth", "compute_throughput", "mma_throughput")}
    mods["hw"] = cp.RawModule(path=str(build_cubin()))
    with ClockSampler() as clocks:
        if not args.skip_chase:
            pointer_chase(cp, mods["hw"], args.out, env, clocks, args.quick)
        throughput(cp, mods, args.out, env, clocks, sms, args.quick)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
