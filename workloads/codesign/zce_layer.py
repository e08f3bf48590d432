"""Roofline what-if of the zero-compression engine on a layer's GEMMs, against 2:4 sparsity.

What it models
--------------
`zce_layer(graph, config, activation_sparsity, weight_sparsity, seed)` samples an activation
tile (`zce_format.relu_activations`) and a weight tile (`zce_format.magnitude_pruned` of
normal weights) at the given zero ratios, measures on them the share of MMA work the engine
still issues at `units.zce.granularity` (`zce_format.active_fraction`, floored at
`units.zce.min_issue_fraction`) and the compressed/dense byte ratio of each operand in the
ZCE format (128-element blocks, in each GEMM's dtype), and applies both to every GEMM of the
graph (or measures them on real tensors bound with `operands=(activations, weights)`):

* dense (the stock part): `max(flops / peak, bytes_min / hbm)`;
* zce: `max(flops * share / peak, (A * ratio_a + B * ratio_w + C) / hbm)`, C (the output)
  stored dense;
* two_four (the stock 2:4 structured sparsity, weights pruned 2:4 whatever
  `weight_sparsity` is): `max(flops / (peak * units.tensor.sparse_rate_multiplier),
  (A + B * (1/2 + 1/(4 * itemsize)) + C) / hbm)` (half the weights kept plus 2 bits of
  index metadata per kept element).

Peaks per precision as in `train_step.gemm_peak_tflops`. MACs = flops / 2; skipped MACs =
MACs * (1 - share). TFLOPS are dense-equivalent (the GEMM's flops over its time). This is
the analytic bound reports put beside simulated numbers, not a simulation of each GEMM;
`tests/test_zce.py` checks the engine's timing on the zmma microbenchmark. Left out:
compression time of activations produced on the fly (overlapped), non-GEMM kernels.
Units: FLOP, MACs, bytes, microseconds, TFLOP/s.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pandas as pd

from isa.errors import InputError
from workloads.codesign import zce_format as Z
from workloads.codesign.precision import GEMM_OPS, operand_elements
from workloads.codesign.train_step import gemm_peak_tflops
from workloads.layers import ops

SAMPLE = 128
BLOCK_ELEMS = 128
_PRECISION = {"e4m3": "e4m3", "e5m2": "e5m2", "bf16": "bf16", "f16": "fp16", "f32": "fp32"}
_NUMPY = {"e4m3": np.dtype(ml_dtypes.float8_e4m3fn), "e5m2": np.dtype(ml_dtypes.float8_e5m2),
          "bf16": np.dtype(ml_dtypes.bfloat16), "f16": np.dtype(np.float16),
          "f32": np.dtype(np.float32)}


def sample_operands(activation_sparsity: float, weight_sparsity: float, config,
                    seed: int = 0) -> dict:
    """Share of issued MMA work and compressed byte ratios measured on sampled tiles."""
    rng = np.random.default_rng(seed)
    a = Z.relu_activations((SAMPLE, SAMPLE), activation_sparsity, rng)
    w = Z.magnitude_pruned(rng.standard_normal((SAMPLE, SAMPLE)).astype(np.float32),
                           weight_sparsity)
    return measure_operands(a, w, config)


def measure_operands(a: np.ndarray, w: np.ndarray, config) -> dict:
    """Share and compressed byte ratios measured on real tensors: activations `a` [M, K] and
    weights `w` [K, N] (M, K multiples of 16, N of 8)."""
    zce = config.units.zce
    share = Z.active_fraction(a, w, zce.granularity, kblock=zce.kblock_elements)
    ratios = {name: tuple(Z.compress(x.astype(dtype), BLOCK_ELEMS).ratio for x in (a, w))
              for name, dtype in _NUMPY.items()}
    return {"share": max(zce.min_issue_fraction, share), "raw_share": share,
            "ratio_a_bf16": ratios["bf16"][0], "ratio_w_bf16": ratios["bf16"][1],
            "ratios": ratios}


def _operand_bytes(node) -> tuple[float, float, float]:
    """(A, B, C) bytes of a GEMM node (B = the weights)."""
    nb = ops.nbytes(node.args["dtype"])
    a_elems, b_elems = operand_elements(node)
    a_bytes, b_bytes = a_elems * nb, b_elems * nb
    return a_bytes, b_bytes, max(node.bytes_min - a_bytes - b_bytes, 0)


def zce_layer(graph, config, activation_sparsity: float, weight_sparsity: float,
              seed: int = 0, operands: tuple[np.ndarray, np.ndarray] | None = None
              ) -> tuple[pd.DataFrame, dict]:
    """(per-GEMM table, totals) of dense, ZCE and 2:4 times (module docstring); with
    `operands` = (activations, weights) the share and ratios come from those tensors."""
    if not config.units.zce.enabled:
        raise InputError("zce_layer needs a config with units.zce.enabled = true (accepted: "
                         "deepseek_codesign, or h800_sxm with that override)")
    if operands is not None:
        sample = measure_operands(*operands, config)
    else:
        sample = sample_operands(activation_sparsity, weight_sparsity, config, seed)
    hbm = config.hbm.peak_bandwidth_gbps * 1e3           # bytes per microsecond
    multiplier = config.units.tensor.sparse_rate_multiplier
    rows = []
    for node in graph.nodes:
        if node.op not in GEMM_OPS:
            continue
        peak = gemm_peak_tflops(config, _PRECISION[node.args["dtype"]]) * 1e6  # FLOP per us
        a, b, c = _operand_bytes(node)
        nb = ops.nbytes(node.args["dtype"])
        ratio_a, ratio_w = sample["ratios"][node.args["dtype"]]
        zce_bytes = a * ratio_a + b * ratio_w + c
        tf_bytes = a + b * (0.5 + 1 / (4 * nb)) + c
        rows.append({
            "name": node.name, "role": node.role, "flops": node.flops, "macs": node.flops / 2,
            "dense_us": max(node.flops / peak, node.bytes_min / hbm),
            "zce_us": max(node.flops * sample["share"] / peak, zce_bytes / hbm),
            "two_four_us": max(node.flops / (peak * multiplier), tf_bytes / hbm),
            "dense_bytes": node.bytes_min, "zce_bytes": zce_bytes, "two_four_bytes": tf_bytes})
    table = pd.DataFrame(rows)
    flops = float(table.flops.sum())
    totals = {"activation_sparsity": activation_sparsity, "weight_sparsity": weight_sparsity,
              **{k: v for k, v in sample.items() if k != "ratios"},
              "macs": flops / 2, "macs_skipped": flops / 2 * (1 - sample["share"])}
    for kind in ("dense", "zce", "two_four"):
        time_us = float(table[f"{kind}_us"].sum())
        totals[f"{kind}_us"] = time_us
        totals[f"{kind}_tflops"] = flops / time_us / 1e6
        totals[f"{kind}_hbm_bytes"] = float(table[f"{kind}_bytes"].sum())
    return table, totals
