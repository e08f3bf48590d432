"""What-if figures for DeepSeek-V3's expert-parallel all-to-all on H800 (EP64: 8 nodes x 8 GPUs):
dispatch (fp8) and combine (bf16) of 4096 tokens, hidden 7168, top-8 of 256 experts, against
the SMs reserved for communication and the chunk size. Prints time, DeepEP-style bandwidth
(RDMA bytes / time), NIC utilization (RDMA bytes / time / links.network_pipe_gbps) and the
HBM bytes the collective's own chunks cause (the L2 footprint spilling).

    python benchmarks/comm_whatif.py [--tokens 4096] [--quick]

Units: microseconds, GB/s, fraction, MB.
"""

from __future__ import annotations

import argparse

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--quick", action="store_true", help="20 comm SMs, 64 KiB only")
    args = parser.parse_args()
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
