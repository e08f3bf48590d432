"""What-if figures for DeepSeek-V3's expert-parallel all-to-all on H800 (EP64: 8 nodes x 8 GPUs):
dispatch (fp8) and combine (bf16) of 4096 tokens, hidden 7168, top-8 of 256 experts, against
the SMs reserved for communication and the chunk size. Prints time, DeepEP-style bandwidth
(RDMA bytes / time), NIC utilization (RDMA bytes / time / links.network_pipe_gbps) and the
HBM bytes the collective's own chunks cause (the L2 footprint spilling).

    python benchmarks/comm_whatif.py [--tokens 4096] [--quick]

`--train` runs the sweep of `workloads.comm_whatif` instead (a DualPipe pair of the MoE block
in `train`, EP64, comm SMs x chunk sizes) and writes one CSV row per point as it goes, plus
the kernel table of the DeepSeek setting (20 SMs, 64 KiB) beside it:

    python benchmarks/comm_whatif.py --train --tokens 512 \
        --out notebooks/data/comm_whatif_ep64.csv [--comm-sms 0 8 20 32] [--chunks ...]

Units: microseconds, GB/s, fraction, MB.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pandas as pd

import models
from workloads.ops import build_op, simulate_op

COMM_SMS = (8, 20, 32)
CHUNKS = (16384, 65536, 262144)


def row(config, kind: str, tokens: int, comm_sms: int, chunk: int) -> dict:
    dtype = "fp8" if kind == "dispatch" else "bf16"
    plan = build_op("alltoall", config, kind=kind, ranks=64, tokens=tokens, hidden=7168,
                    topk=8, experts=256, dtype=dtype, comm_sms=comm_sms, chunk_bytes=chunk)
    res = simulate_op(plan, config, "sampled")
    nic = config.links.network_pipe_gbps
    return {"kind": kind, "comm_sms": comm_sms, "chunk_bytes": chunk,
            "time_us": round(res["time_us"], 1), "rdma_gbps": round(res["gbps"], 1),
            "nic_utilization": round(res["gbps"] / nic, 2),
            "hbm_mb": round(res["hbm_bytes"] / 1e6, 1)}


def train_sweep(tokens: int, out: Path, comm_sms: tuple[int, ...],
                chunks: tuple[int, ...]) -> None:
    """The `workloads.comm_whatif` sweep, DeepSeek's setting first; rows written to `out`
    after every point (points of one comm-SM count share their compute kernels)."""
    from workloads import comm_whatif as w

    config = models.load_preset("h800_sxm", {"links.nodes": w.EP // 8})
    graph = w.train_pair(tokens)
    order = sorted(((s, c) for s in comm_sms for c in chunks),
                   key=lambda p: (abs(p[0] - 20), p[0], abs(p[1] - 65536)))
    cache: dict = {}
    rows = []
    out.parent.mkdir(parents=True, exist_ok=True)
    for sms, chunk in order:
        start = time.process_time()
        row, res = w.whatif_point(config, graph, sms, chunk, cache)
        rows.append(row)
        pd.DataFrame(rows).sort_values(["comm_sms", "chunk_bytes"]).to_csv(out, index=False)
        if (sms, chunk) == (20, 65536):
            res.kernels.to_csv(out.with_name(out.stem + "_kernels.csv"), index=False)
        print(f"comm_sms {sms:2d} chunk {chunk:6d}: step {row['step_us']:8.1f} us, GEMM "
              f"+{row['gemm_slowdown_pct']:.1f} %, NIC {row['nic_utilization']:.2f}, "
              f"L2 misses +{row['l2_miss_increase_pct']:.1f} % "
              f"({time.process_time() - start:.0f} s CPU)", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--quick", action="store_true", help="20 comm SMs, 64 KiB only")
    parser.add_argument("--train", action="store_true",
                        help="the EP64 train sweep of workloads.comm_whatif")
    parser.add_argument("--out", type=Path, default=Path("notebooks/data/comm_whatif_ep64.csv"))
    parser.add_argument("--comm-sms", type=int, nargs="+", help="train sweep: comm SM counts "
                        "(default workloads.comm_whatif.COMM_SMS)")
    parser.add_argument("--chunks", type=int, nargs="+", help="train sweep: chunk bytes "
                        "(default workloads.comm_whatif.CHUNKS)")
    args = parser.parse_args()
    if args.train:
        from workloads import comm_whatif as w

        train_sweep(args.tokens, args.out, tuple(args.comm_sms or w.COMM_SMS),
                    tuple(args.chunks or w.CHUNKS))
        return
    config = models.load_preset("h800_sxm")
    points = [(20, 65536)] if args.quick else \
        [(sms, 65536) for sms in COMM_SMS] + [(20, c) for c in CHUNKS if c != 65536]
    print("kind      comm_sms  chunk_bytes   time_us  rdma_gbps  nic_util  hbm_MB")
    for kind in ("dispatch", "combine"):
        for sms, chunk in points:
            r = row(config, kind, args.tokens, sms, chunk)
            print(f"{r['kind']:9s} {r['comm_sms']:8d} {r['chunk_bytes']:12d} {r['time_us']:9.1f} "
                  f"{r['rdma_gbps']:10.1f} {r['nic_utilization']:9.2f} {r['hbm_mb']:7.1f}",
                  flush=True)


if __name__ == "__main__":
    main()
