"""Deployments as data: how DeepSeek runs V3 across GPUs, and one GPU alone.

Bundled files (each value cites its source in a `# source:` comment):
* `deepseek-v3-prefill.toml`: EP32, TP1, 4K prompts, 16K tokens per GPU in two
  micro-batches whose computation overlaps the other's dispatch and combine; 8 routed + 1
  redundant expert per GPU; 20 communication SMs (deepseek-ai/profile-data README,
  prefill.json; DeepSeek-V3 technical report §3.2.2, §3.4.1). `ptxsim run`'s default.
* `deepseek-v3-decode.toml`: EP128, TP1, 128 requests per GPU at a 4K cache, two
  micro-batches, an all-to-all that holds no SMs once its RDMA messages are issued
  (profile-data README, decode.json). `ptxsim run --phase decode`.
* `deepseek-v3-train.toml`: EP64, TP1, 4K sequences, DualPipe's pair of a forward and a
  backward micro-batch, 20 communication SMs (profile-data README, train.json; report
  §3.2). `ptxsim run --phase train`.
* `single-gpu.toml`: one DeepSeek-V3 MoE layer on one GPU, prefill of 4096 tokens, EP1,
  no SM reserved (`ptxsim run --deployment single-gpu`).

`load_deployment(name or path)` -> `Deployment` (`deployment.py`: keys, checks, graph);
`micro_batch_overlap(kernels)` -> compute, communication and hidden communication per
micro-batch of a simulated graph (`overlap.py`).

Left out: see `deployment.py`. Units: token counts, SM counts, microseconds.
"""

from workloads.deployments.deployment import (
    BALANCED,
    FIELDS,
    OVERLAPS,
    Deployment,
    deployment_path,
    list_deployments,
    load_deployment,
)
from workloads.deployments.overlap import MicroBatchOverlap, micro_batch_overlap

PHASE_DEPLOYMENTS = {"prefill": "deepseek-v3-prefill", "decode": "deepseek-v3-decode",
                     "train": "deepseek-v3-train"}
"""The deployment `ptxsim run --phase P` runs for DeepSeek-V3 when none is named."""
SINGLE_GPU = "single-gpu"

__all__ = ["BALANCED", "FIELDS", "OVERLAPS", "PHASE_DEPLOYMENTS", "SINGLE_GPU", "Deployment",
           "MicroBatchOverlap", "deployment_path", "list_deployments", "load_deployment",
           "micro_batch_overlap"]
