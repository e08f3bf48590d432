"""What-if of DeepSeek-V3's expert-parallel training step: SMs reserved for communication and
the all-to-all chunk size, on a DualPipe chunk pair of one MoE block.

What it models
--------------
`train_pair(tokens, ep)` is the MoE feed-forward block of a DeepSeek-V3 MoE layer
(`workloads.layers.dualpipe.moe_block`) in `train`, as a DualPipe pair: the forward of one
micro-batch beside the backward of another (`dualpipe_pair`). `whatif_point` simulates it
with `simulator.simulate_workload(comm_sms=..., chunk_bytes=...)` (compute kernels on the
other SMs, contention measured on one chip) and once more without contention (from the
same `op_cache`, so nothing is simulated twice) and sums up one row:

* `step_us`: makespan of the pair; `step_no_contention_us`: the same schedule with every
  kernel at its alone time (the cost of sharing L2/HBM is the difference);
* `gemm_us`: summed GEMM node time; `gemm_slowdown_pct`: the GEMMs' extra time from
  contention over their alone time; `gemm_overlap_slowdown_pct`: how much slower a GEMM
  runs while beside a collective (the measured pairs' compute stretch, weighted by their
  overlap in the schedule);
* `comm_us`: summed collective time; `nic_utilization`: bytes over the bottleneck links
  (RDMA across nodes, DeepEP's count) / (step time x `links.network_pipe_gbps`);
* `l2_miss_alone` / `l2_miss_beside`: L2 miss sectors of the measured GEMM launches alone
  and beside the collectives, and their increase in percent; `comm_hbm_mb`: HBM bytes the
  collectives' chunks cause (their L2 footprint spilling).

`comm_sms = 0` reserves no SM: the collectives run as kernels on the compute SMs, one at
a time with the compute kernels (no overlap, so no contention is measured).

Left out: the attention half of the layer (its backward is not modelled), pipeline
send/receive, the optimizer. Units: microseconds, percent, fraction, sectors, MB.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

import workloads
from workloads.execute import simulate_workload
from workloads.layers.dualpipe import dualpipe_pair, moe_block

EP = 64
LAYER_INDEX = 3            # DeepSeek-V3's first MoE layer (first_k_dense_replace = 3)
COMM_SMS = (0, 8, 20, 32)
CHUNKS = (16384, 65536, 262144)
COLLECTIVE_KINDS = ("alltoall", "allreduce")


def train_pair(tokens: int, ep: int = EP):
    """The DualPipe pair of DeepSeek-V3's MoE block in `train` (tokens per rank)."""
    layer = workloads.layer("deepseek-v3", "train", tokens=tokens, ep=ep,
                            layer_index=LAYER_INDEX)
    return dualpipe_pair(moe_block(layer))


def whatif_point(config, graph, comm_sms: int, chunk_bytes: int, op_cache: dict,
                 fidelity: str = "sampled") -> tuple[dict, object]:
    """One what-if row (see the module docstring) and the simulated `WorkloadResult`."""
    res = simulate_workload(graph, config, fidelity, timeline=False,
                                      comm_sms=comm_sms, chunk_bytes=chunk_bytes,
                                      op_cache=op_cache)
    alone = simulate_workload(graph, config, fidelity, timeline=False,
                                        comm_sms=comm_sms, chunk_bytes=chunk_bytes,
                                        contention=False, op_cache=op_cache)
    return summary_row(res, alone, comm_sms, chunk_bytes), res


def summary_row(res, alone, comm_sms: int, chunk_bytes: int) -> dict:
    """The row of one point from the result with and without contention."""
    k, a = res.kernels.set_index("name"), alone.kernels.set_index("name")
    gemm = k["kind"] == "gemm"
    comm = k["kind"].isin(COLLECTIVE_KINDS)
    gemm_alone = float(a.loc[gemm, "time_us"].sum())
    gemm_extra = float((k.loc[gemm, "time_us"] - a.loc[gemm, "time_us"]).sum())
    pairs = res.meta.get("contention", pd.DataFrame())
    measured = len(pairs) > 0
    overlap = float(pairs["overlap_us"].sum()) if measured else 0.0
    stretch = (float(((pairs["compute_stretch"] - 1.0) * pairs["overlap_us"]).sum()) / overlap
               if overlap else 0.0)
    miss_alone = float(pairs["compute_l2_miss_alone"].sum()) if measured else 0.0
    miss_beside = float(pairs["compute_l2_miss_beside"].sum()) if measured else 0.0
    nic_gbps = res.config.links.network_pipe_gbps
    return {
        "comm_sms": comm_sms, "chunk_bytes": chunk_bytes,
        "tokens": int(res.meta.get("tokens", 0)),
        "step_us": res.time_us, "step_no_contention_us": alone.time_us,
        "gemm_us": float(k.loc[gemm, "time_us"].sum()),
        "gemm_slowdown_pct": 100.0 * gemm_extra / gemm_alone if gemm_alone else 0.0,
        "gemm_overlap_slowdown_pct": 100.0 * stretch,
        "comm_us": float(k.loc[comm, "time_us"].sum()),
        "nic_utilization": float(k.loc[comm, "bytes"].sum()) / (res.time_us * nic_gbps * 1e3),
        "l2_miss_alone": miss_alone, "l2_miss_beside": miss_beside,
        "l2_miss_increase_pct": (100.0 * (miss_beside / miss_alone - 1.0)
                                 if miss_alone else np.nan),
        "comm_hbm_mb": float(k.loc[comm, "hbm_bytes"].sum()) / 1e6,
        "pairs_measured": len(pairs),
    }
