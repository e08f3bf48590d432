"""Nsight Compute counters of the LLaMA-3-8B layer's ATen kernels: what their DRAM and L2
traffic is, to tell apart the mechanisms `ptxsim compare` cannot yet see in them.

The layer of `layer_trace.py` (same weights, shapes and eager PyTorch), one warm-up forward
per phase and then one forward inside `cudaProfilerStart/Stop`, so that ncu run with
`--profile-from-start off` measures exactly one forward's kernels:

    ncu --profile-from-start off --clock-control none --csv --page raw \\
        --metrics $(python3 benchmarks/hardware/layer_ncu.py --metrics) \\
        -k "regex:$(python3 benchmarks/hardware/layer_ncu.py --kernels)" \\
        --log-file OUT/layer_ncu_raw.csv python3 benchmarks/hardware/layer_ncu.py --run
    python3 benchmarks/hardware/layer_ncu.py --table OUT/layer_ncu_raw.csv OUT/layer_ncu.csv

(`run_all.sh OUT` does both as its `layer_ncu` stage.) ncu's default cache control flushes
the caches before each kernel, so every kernel starts cold, unlike the trace.

What the table is for (declared before any run): the RoPE stack (`CatArrayBatchedCopy`
along the last dimension, a 4-byte store every 8 bytes, so each 32-byte sector is written
half by each input) reads −64 % in the prefill. If the GPU fills partially written sectors
from DRAM when it evicts them (read-modify-write), the cat's `dram_read_bytes` exceeds its
inputs (2 × 33.5 MB at 4096 × 32 × 64 f32) by up to twice its output; if the L2 pays per
written sector, `lts_write_sectors` is about 8 per output sector (4 stores of 4 bytes from
each input). The generic f32 muls of RoPE (stride-2 reads) and the bf16 → f32 copies get the
same counters and stall reasons.
Units: bytes, sectors, requests, ns, cycles per instruction issued (stall ratios).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

KERNELS = ("CatArrayBatchedCopy|elementwise_kernel|vectorized_elementwise_kernel|"
           "unrolled_elementwise_kernel|vectorized_layer_norm_kernel|splitKreduce")
"""ncu's `-k regex:` of the kernels profiled: ATen's element-wise, copy, cat and norm
kernels and cuBLAS's split-K reduction (not the GEMMs or attention)."""

METRICS = {
    "gpu__time_duration.sum": "duration_ns",
    "dram__bytes_read.sum": "dram_read_bytes",
    "dram__bytes_write.sum": "dram_write_bytes",
    "lts__t_sectors_srcunit_tex_op_read.sum": "lts_read_sectors",
    "lts__t_sectors_srcunit_tex_op_write.sum": "lts_write_sectors",
    "lts__t_requests_srcunit_tex_op_write.sum": "lts_write_requests",
    "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum": "lts_read_miss_sectors",
    "smsp__inst_executed.sum": "warp_instructions",
    "sm__cycles_elapsed.avg.per_second": "sm_clock_hz",
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
    "launch__registers_per_thread": "registers_per_thread",
    "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio":
        "stall_long_scoreboard",
    "smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio": "stall_lg_throttle",
    "smsp__average_warps_issue_stalled_drain_per_issue_active.ratio": "stall_drain",
    "smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio":
        "stall_math_pipe_throttle",
}
"""ncu metric -> column of the table."""


def run(prefill_tokens: int, decode_batch: int, kv_len: int) -> None:
    """One warm-up and one profiled forward per phase (prefill, then decode)."""
    import torch
    from layer_trace import HEAD_DIM, HIDDEN, KV_HEADS, Layer

    layer, bf = Layer(torch), torch.bfloat16
    x = torch.randn(prefill_tokens, HIDDEN, device="cuda", dtype=bf)
    pos = torch.arange(prefill_tokens, device="cuda")
    xd = torch.randn(decode_batch, HIDDEN, device="cuda", dtype=bf)
    posd = torch.full((decode_batch,), kv_len, device="cuda")
    cache = tuple(torch.randn(decode_batch, KV_HEADS, kv_len + 1, HEAD_DIM, device="cuda",
                              dtype=bf) for _ in range(2))
    phases = (lambda: layer.forward(x, pos, 1),
              lambda: layer.forward(xd, posd, decode_batch, cache, kv_len))
    with torch.no_grad():
        for forward in phases:
            forward()
            torch.cuda.synchronize()
            torch.cuda.profiler.start()
            forward()
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()


def table(raw_path: Path, out_path: Path) -> int:
    """The raw ncu CSV as one row per kernel launch, in launch order (prefill's first)."""
    from ncu_table import SCALE, _number, read_raw

    rows = []
    for index, r in enumerate(read_raw(raw_path)):
        row = {"launch": index, "kernel": r["Kernel Name"][0], "grid": r["Grid Size"][0],
               "block": r["Block Size"][0]}
        for metric, column in METRICS.items():
            if metric in r:
                value, unit = r[metric]
                row[column] = round(_number(value) * SCALE.get(unit, 1), 3)
        rows.append(row)
    columns = ["launch", "kernel", "grid", "block", *METRICS.values()]
    with out_path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns, lineterminator="\n", restval="")
        writer.writeheader()
        writer.writerows(rows)
    meta = {"table": out_path.name, "rows": len(rows), "kernels_regex": KERNELS,
            "method": "ncu --profile-from-start off --clock-control none, default "
                      "--cache-control all, --page raw; one forward per phase after one "
                      "warm-up (benchmarks/hardware/layer_ncu.py)",
            "metrics": METRICS}
    out_path.with_suffix(".meta.json").write_text(json.dumps(meta, indent=1))
    print(f"wrote {out_path} ({len(rows)} launches)")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--run", action="store_true", help="run the profiled forwards")
    what.add_argument("--metrics", action="store_true", help="print ncu's --metrics list")
    what.add_argument("--kernels", action="store_true", help="print ncu's -k regex")
    what.add_argument("--table", nargs=2, type=Path, metavar=("RAW", "OUT"))
    ap.add_argument("--prefill-tokens", type=int, default=4096)
    ap.add_argument("--decode-batch", type=int, default=64)
    ap.add_argument("--kv-len", type=int, default=2048)
    args = ap.parse_args(argv)
    if args.metrics:
        print(",".join(METRICS))
    elif args.kernels:
        print(KERNELS)
    elif args.table:
        return table(*args.table)
    else:
        run(args.prefill_tokens, args.decode_batch, args.kv_len)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
