"""Roofline bound of a kernel: peaks read from a resolved config dict, bound time and gap.

`chip_peaks(config)` reads the resolved config *dict* (as `KernelResult.config` carries it,
never a live config object) and returns the peaks the roofline uses, by the same closed
forms as `models.gpu_spec`: tensor-core peak per precision (FMA per clock per SM x 2 FLOP x
SMs x clock), per-lane vector peak per unit (results per clock per SM x 2 x SMs x clock),
HBM peak (channels x channel bandwidth) and L2 peak (slices x slice bytes per clock x
clock). `roofline_time_us(flops, hbm_bytes, peak_tflops, hbm_gbps)` is
max(flops / peak, hbm_bytes / bandwidth); the bound is "compute" when the compute term is
the larger one, else "memory"; the gap is simulated time / roofline time (>= 1 when the
simulator is slower than the bound).

Left out: L2/L1 roofs in the bound (the plot draws the L2 roof, the bound uses HBM only),
sparse tensor peaks, clock boost of vector work.
Units: TFLOP/s, GB/s, FLOP, B, microseconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

FLOP_PER_FMA = 2
TENSOR_PRECISIONS = ("fp64", "tf32", "fp16", "bf16", "fp8", "int8")
VECTOR_UNITS = ("fp64", "fp32", "fp16", "bf16")


def _get(config: Mapping[str, Any], dotted: str, default: Any = None) -> Any:
    node: Any = config
    for key in dotted.split("."):
        if not isinstance(node, Mapping) or key not in node:
            return default
        node = node[key]
    return node


def chip_peaks(config: Mapping[str, Any]) -> dict[str, float]:
    """Peaks from a resolved config dict: `tensor_<prec>_tflops`, `vector_<unit>_tflops`,
    `hbm_gbps`, `l2_gbps`, plus `sm_count`, `subpartitions`, `clock_ghz` (NaN when absent)."""
    nan = float("nan")
    sms = float(_get(config, "sm.count", nan))
    clock = float(_get(config, "chip.clock_ghz", nan))
    peaks: dict[str, float] = {
        "sm_count": sms,
        "compute_sm_count": sms - float(_get(config, "sm.comm_count", 0) or 0),
        "subpartitions": float(_get(config, "sm.subpartitions", nan)),
        "clock_ghz": clock,
    }
    for prec in TENSOR_PRECISIONS:
        fma = float(_get(config, f"units.tensor.{prec}_fma_per_clk_per_sm", nan))
        peaks[f"tensor_{prec}_tflops"] = fma * FLOP_PER_FMA * sms * clock / 1e3
    for unit in VECTOR_UNITS:
        results = float(_get(config, f"units.{unit}.results_per_clk_per_sm", nan))
        peaks[f"vector_{unit}_tflops"] = results * FLOP_PER_FMA * sms * clock / 1e3
    channels = (float(_get(config, "hbm.stacks", nan))
                * float(_get(config, "hbm.channels_per_stack", nan)))
    peaks["hbm_gbps"] = channels * float(_get(config, "hbm.channel_bandwidth_gbps", nan))
    l2_bytes_per_clk = (float(_get(config, "l2.slices", nan))
                        * float(_get(config, "l2.slice_bandwidth_bytes_per_clk", nan)))
    peaks["l2_gbps"] = l2_bytes_per_clk * clock
    return peaks


def roofline_time_us(flops, hbm_bytes, peak_tflops, hbm_gbps):
    """max(flops / peak, bytes / bandwidth) in microseconds (array-friendly)."""
    compute_us = np.asarray(flops, dtype=float) / (np.asarray(peak_tflops, dtype=float) * 1e6)
    memory_us = np.asarray(hbm_bytes, dtype=float) / (np.asarray(hbm_gbps, dtype=float) * 1e3)
    return np.fmax(compute_us, memory_us)


def roofline_bound(flops, hbm_bytes, peak_tflops, hbm_gbps) -> np.ndarray:
    """"compute" where the compute term of the roofline is the larger, else "memory"."""
    compute_us = np.asarray(flops, dtype=float) / (np.asarray(peak_tflops, dtype=float) * 1e6)
    memory_us = np.asarray(hbm_bytes, dtype=float) / (np.asarray(hbm_gbps, dtype=float) * 1e3)
    return np.where(compute_us >= memory_us, "compute", "memory")


def ridge_point_flops_per_byte(peak_tflops: float, bandwidth_gbps: float) -> float:
    """Arithmetic intensity where the memory roof meets the compute roof."""
    return peak_tflops * 1e3 / bandwidth_gbps
