"""Roofline bound of a kernel: peaks read from a resolved config dict, bound time and gap.

`chip_peaks(config)` reads the resolved config *dict* (as `KernelResult.config` carries it,
never a live config object) and returns the peaks the roofline uses, by the same closed
forms as `models.gpu_spec`: tensor-core peak per precision (FMA per clock per SM x 2 FLOP x
SMs x clock), per-lane vector peak per unit (results per clock per SM x 2 x SMs x clock),
HBM peak (channels x channel bandwidth) and L2 peak (slices x slice bytes per clock x
clock).

The roofline (one definition, used by `workloads.ops.simulate_op`, a workload's kernels
table and `reports.kernel_table`; its column is `roofline_us` everywhere):

    roofline_us = max(flops / compute peak, bytes / HBM peak)

with `roofline_time_us(flops, bytes, peak_tflops, hbm_gbps)`. flops: the op's useful FLOPs
(2·M·N·K for a GEMM). bytes: the bytes the op must move at least once (inputs read once,
outputs written once: an op plan's `bytes`); a kernel known only by its stats uses the HBM
bytes it moved in the simulation. Compute peak: the tensor-core peak of the op's precision
(`tensor_<precision>_tflops`) for tensor-core work, else the FP32 (or FP64) vector peak;
HBM peak: `hbm_gbps`. The bound is "compute" when the compute term is the larger one, else
"memory"; the gap (`roofline_gap`) is time_us / roofline_us (>= 1 when the simulator is
slower than the bound).

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


def _terms(flops, nbytes, peak_tflops, hbm_gbps) -> tuple[np.ndarray, np.ndarray]:
    """(compute time, memory time) in microseconds."""
    compute_us = np.asarray(flops, dtype=float) / (np.asarray(peak_tflops, dtype=float) * 1e6)
    memory_us = np.asarray(nbytes, dtype=float) / (np.asarray(hbm_gbps, dtype=float) * 1e3)
    return compute_us, memory_us


def roofline_time_us(flops, nbytes, peak_tflops, hbm_gbps):
    """`roofline_us` = max(flops / compute peak, bytes / HBM peak) in microseconds
    (array-friendly; which flops, bytes and peaks: the module docstring)."""
    return np.fmax(*_terms(flops, nbytes, peak_tflops, hbm_gbps))


def roofline_bound(flops, nbytes, peak_tflops, hbm_gbps) -> np.ndarray:
    """"compute" where the compute term of the roofline is the larger, else "memory"."""
    compute_us, memory_us = _terms(flops, nbytes, peak_tflops, hbm_gbps)
    return np.where(compute_us >= memory_us, "compute", "memory")


def ridge_point_flops_per_byte(peak_tflops: float, bandwidth_gbps: float) -> float:
    """Arithmetic intensity where the memory roof meets the compute roof."""
    return peak_tflops * 1e3 / bandwidth_gbps
