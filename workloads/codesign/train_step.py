"""Roofline estimate of a training step under a precision policy, per layer and in total.

What it models
--------------
`train_step(model, policy, config, tokens, layers, norms)` builds the `train` kernel graph of
each layer (`workloads.layer(..., phase="train", layer_index=l)`), applies the policy with that
layer's gradient norm (`precision.apply_policy`) and bounds every kernel by the roofline:
`time = max(flops / peak(precision), bytes_min / hbm_bandwidth)`. The peak of a GEMM at
precision p is the VPCU's (`units.vpcu.<p>_flop_per_clk_per_sm`) when the config enables it,
otherwise the stock tensor core's for that precision (fp32 has none: it runs at the FP32
vector rate); attention kernels likewise at their own dtype (policies here choose GEMM
precisions only). Other kernels are bounded by the FP32 vector peak and HBM. Each change of
precision between consecutive tensor kernels costs `units.vpcu.switch_cycles` (all SMs switch in
parallel). With the VPCU, a GEMM's A and B operands move `units.vpcu.<p>_operand_bytes` per
element (the graph stores them at the dtype's width). Communication kernels are counted at
their bytes over HBM only.

This is the analytic bound every report puts beside simulated numbers, not a simulation: it
answers how much compute and HBM traffic a policy saves, with perfect overlap assumed inside
each kernel and none between kernels. Left out: communication time, FP8 scale-factor math,
memory beyond compulsory traffic. Units: microseconds, bytes, FLOP, TFLOP/s.
"""

from __future__ import annotations

import pandas as pd

from models.gpu_spec import FLOP_PER_FMA
from workloads.codesign.precision import GEMM_OPS, GradientNorms, apply_policy, operand_elements
from workloads.graph import COMM_OPS
from workloads.layer import layer
from workloads.layers import ops

TENSOR_OPS = GEMM_OPS + ("attention", "mla_decode")
_STOCK_TENSOR = {"tf32": "tf32", "fp16": "fp16", "bf16": "bf16", "e4m3": "fp8", "e5m2": "fp8"}
_FROM_DTYPE = {"e4m3": "e4m3", "e5m2": "e5m2", "bf16": "bf16", "f16": "fp16", "f32": "fp32"}


def gemm_peak_tflops(config, precision: str) -> float:
    """Peak TFLOP/s of a GEMM at `precision` on `config` (see the module docstring)."""
    chip = config.sm.count * config.chip.clock_ghz / 1e3
    if config.units.vpcu.enabled:
        return config.units.vpcu.flop_per_clk_per_sm(precision) * chip
    if precision in _STOCK_TENSOR:
        fma = config.units.tensor.fma_per_clk_per_sm(_STOCK_TENSOR[precision])
        return fma * FLOP_PER_FMA * chip
    return config.peak_vector_tflops("fp32")


def _node_rows(graph, config, layer_index: int) -> list[dict]:
    hbm_bytes_per_us = config.hbm.peak_bandwidth_gbps * 1e3
    rows = []
    for node in graph.nodes:
        precision = None
        if node.op in TENSOR_OPS:
            precision = node.args.get("precision", _FROM_DTYPE[node.args["dtype"]])
            peak = gemm_peak_tflops(config, precision)
        else:
            peak = config.peak_vector_tflops("fp32")
        compute_us = 0.0 if node.op in COMM_OPS else node.flops / (peak * 1e6)
        hbm_bytes = _hbm_bytes(node, precision, config)
        memory_us = hbm_bytes / hbm_bytes_per_us
        rows.append({"layer": layer_index, "name": node.name, "op": node.op, "role": node.role,
                     "precision": precision, "flops": node.flops, "hbm_bytes": hbm_bytes,
                     "time_us": max(compute_us, memory_us),
                     "bound": "compute" if compute_us >= memory_us else "memory"})
    return rows


def _hbm_bytes(node, precision: str | None, config) -> float:
    """Compulsory bytes; a GEMM's operands at the VPCU's operand bytes of its precision."""
    if node.op not in GEMM_OPS or not config.units.vpcu.enabled:
        return float(node.bytes_min)
    stored = ops.nbytes(node.args["dtype"])
    extra = config.units.vpcu.operand_bytes(precision) - stored
    return float(node.bytes_min + sum(operand_elements(node)) * extra)


def _switch_count(rows: list[dict]) -> int:
    precisions = [r["precision"] for r in rows if r["precision"] is not None]
    return sum(1 for a, b in zip(precisions, precisions[1:], strict=False) if a != b)


def train_step(model: str, policy, config, tokens: int, layers: range,
               norms: GradientNorms | None = None) -> tuple[pd.DataFrame, dict]:
    """(per-kernel table, totals) of one training step over `layers` (module docstring)."""
    rows: list[dict] = []
    for index in layers:
        graph = layer(model, phase="train", tokens=tokens, layer_index=index)
        norm = norms[index] if norms is not None else None
        rows.extend(_node_rows(apply_policy(graph, policy, norm), config, index))
    switches = _switch_count(rows)
    switch_us = switches * config.units.vpcu.switch_cycles / (config.chip.clock_ghz * 1e3)
    table = pd.DataFrame(rows)
    time_us = float(table.time_us.sum()) + switch_us
    flops = float(table.flops.sum())
    gemm = table[table.op.isin(GEMM_OPS)]
    totals = {"time_us": time_us, "flops": flops, "tflops": flops / time_us / 1e6,
              "hbm_bytes": float(table.hbm_bytes.sum()), "precision_switches": switches,
              "switch_us": switch_us,
              "gemm_flops_by_precision": gemm.groupby("precision").flops.sum().to_dict()}
    return table, totals
