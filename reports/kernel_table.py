"""Per-kernel table built from the long stats table (and a workload's kernels table).

`kernel_table(stats, config, kernels=None)` returns one row per kernel with the columns of
`KERNEL_COLUMNS` (name, unit, meaning): time, achieved TFLOP/s, bytes and bandwidth per
memory level, hit rates, utilization per unit, occupancy, stall breakdown and the roofline
bound with its gap. It reads only the stats DataFrame (`run_id, kernel, component, stat,
value, unit`), the resolved config dict and, for a workload, its `kernels` DataFrame (one
row per kernel: `name`, `op`, `stream`, `start_us`, `end_us`, `time_us`, `flops`, bytes per
level as `<level>_bytes` or `bytes_<level>`; a graph's `bytes_min` stands in for HBM bytes
when no HBM bytes are given), whose values win over the stats. The compute peak is the
tensor peak of `precision` for kernels that issued tensor-core instructions (or, without
stats, whose op names a GEMM, attention or MMA), else the FP64 or FP32 vector peak.

FLOP: a `flops` column when given (`flops_source` "given"); otherwise an estimate from the
issued FP warp-instructions of the vector units (each counted as a full-warp FMA, 2 FLOP
per lane: an upper bound for vector work; tensor-core work is not in the stats per shape
and counts 0, `flops_source` says so). Utilization of a unit is its busy cycles (summed over
SMs and sub-partitions) / (cycles x compute SMs x sub-partitions). Stall fractions divide
each reason's scheduler cycles by their sum: memory, dependency, barrier, issue (pipe
busy), idle (no warp), other (any reason not named here).

Left out: per-SM rows (the stats sum over SMs), instruction mix by opcode.
Units: microseconds, cycles, FLOP, TFLOP/s, B, GB/s, fractions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from reports.roofline import chip_peaks, roofline_bound, roofline_time_us

LEVELS = ("l1", "l2", "l3", "hbm")
UNITS = ("fp32", "fp16", "bf16", "fp64", "int32", "sfu", "conversion", "shuffle", "lsu",
         "tensor", "tma", "branch")
FP_VECTOR_UNITS = ("fp32", "fp16", "bf16", "fp64")
TENSOR_OPS = ("gemm", "attention", "mma")
STALL_GROUPS = {"memory": "memory", "dependency": "dependency", "barrier": "barrier",
                "pipe_busy": "issue", "no_warp": "idle"}
STALL_COLUMNS = ("memory", "dependency", "barrier", "issue", "idle", "other")

KERNEL_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("run_id", "", "run the kernel belongs to"),
    ("kernel", "", "kernel name"),
    ("op", "", "operation (workload kernels)"),
    ("stream", "", "stream the kernel ran on"),
    ("start_us", "us", "start time"),
    ("end_us", "us", "end time"),
    ("time_us", "us", "simulated duration"),
    ("cycles", "cycles", "simulated duration in SM cycles"),
    ("flops", "FLOP", "floating-point operations"),
    ("flops_source", "", "given, or estimated from FP warp-instructions"),
    ("achieved_tflops", "TFLOP/s", "flops / time"),
    *((f"{lv}_bytes", "B", f"bytes moved at {lv.upper()}") for lv in LEVELS),
    *((f"{lv}_gbps", "GB/s", f"{lv.upper()} bandwidth: bytes / time") for lv in LEVELS),
    ("l1_hit_rate", "fraction", "L1 sector hit rate"),
    ("l2_hit_rate", "fraction", "L2 sector hit rate"),
    ("hbm_row_hit_rate", "fraction", "HBM row-buffer hit rate"),
    *((f"util_{u}", "fraction", f"{u} busy cycles / (cycles x SMs x sub-partitions)")
      for u in UNITS),
    ("theoretical_occupancy", "fraction", "resident warps / max warps (limit)"),
    ("achieved_occupancy", "fraction", "average resident warps / max warps"),
    ("stall_cycles", "cycles", "scheduler cycles without an issue, all reasons"),
    *((f"stall_{s}_frac", "fraction", f"share of stall cycles: {s}") for s in STALL_COLUMNS),
    ("compute_peak", "", "which peak bounds the compute side"),
    ("peak_tflops", "TFLOP/s", "compute peak used by the roofline"),
    ("peak_hbm_gbps", "GB/s", "HBM peak used by the roofline"),
    ("intensity_flops_per_byte", "FLOP/B", "flops / HBM bytes"),
    ("roofline_time_us", "us", "max(flops / peak, HBM bytes / HBM peak)"),
    ("bound", "", "compute or memory: the larger roofline term (none: no FLOPs, no HBM bytes)"),
    ("roofline_gap", "x", "simulated time / roofline time"),
)


WORKLOAD_UNITS = {"macs": "MAC", "macs_skipped": "MAC", "operand_bytes": "B",
                  "operand_bytes_stored": "B", "output_bytes": "B", "output_bytes_stored": "B",
                  "compress_cycles": "cycles", "sm_clock_ghz": "GHz"}
"""Units of the co-design and clock columns a workload's kernels table adds
(`simulator.workload`)."""


def column_units() -> dict[str, str]:
    """Column name -> unit of the kernel table (and of the workload columns it carries)."""
    return {**{name: unit for name, unit, _ in KERNEL_COLUMNS}, **WORKLOAD_UNITS}


def kernel_table(stats: pd.DataFrame, config: Mapping[str, Any] | None = None,
                 kernels: pd.DataFrame | None = None, *, precision: str = "bf16",
                 peaks: Mapping[str, float] | None = None) -> pd.DataFrame:
    """One row per kernel with the columns of `KERNEL_COLUMNS` (see the module docstring).

    `precision` picks the tensor peak for kernels that issued tensor-core instructions (or
    workload kernels without stats); `peaks` overrides entries of `chip_peaks(config)`.
    """
    chip = {**chip_peaks(config or {}), **(peaks or {})}
    table = _from_stats(stats, chip)
    if kernels is not None and len(kernels):
        table = _merge_kernels(table, kernels)
    table = _derive(table, chip, precision)
    ordered = [c for c, _, _ in KERNEL_COLUMNS]
    extra = [c for c in table.columns if c not in ordered]
    table = table[ordered + extra].reset_index(drop=True)
    table.attrs["units"] = column_units()
    return table


# -- steps ----------------------------------------------------------------------------------
def _sum(rows: pd.DataFrame, component: str | re.Pattern, stat: str) -> float:
    comp = rows["component"]
    mask = (comp.str.match(component) if isinstance(component, re.Pattern)
            else comp == component) & (rows["stat"] == stat)
    return float(rows.loc[mask, "value"].sum()) if mask.any() else np.nan


def _hit_rate(rows: pd.DataFrame, level: str) -> float:
    pattern = re.compile(rf"memory\.{level}(\.|$)")
    hits, misses = _sum(rows, pattern, "hit_sectors"), _sum(rows, pattern, "miss_sectors")
    if np.isfinite(hits) and np.isfinite(misses) and hits + misses > 0:
        return hits / (hits + misses)
    mask = rows["component"].str.match(pattern) & (rows["stat"] == "hit_rate")
    return float(rows.loc[mask, "value"].mean()) if mask.any() else np.nan


def _one_kernel(run_id: str, kernel: str, rows: pd.DataFrame, chip: dict) -> dict:
    row: dict[str, Any] = {"run_id": run_id, "kernel": kernel}
    for stat in ("cycles", "time_us", "theoretical_occupancy", "achieved_occupancy"):
        row[stat] = _sum(rows, "kernel", stat)
    for level in LEVELS:
        row[f"{level}_bytes"] = _sum(rows, re.compile(rf"memory\.{level}(\.|$)"), "bytes")
    row["l1_hit_rate"], row["l2_hit_rate"] = _hit_rate(rows, "l1"), _hit_rate(rows, "l2")
    row["hbm_row_hit_rate"] = _sum(rows, "memory.hbm", "row_hit_rate")
    lanes = 32
    slots = row["cycles"] * chip["compute_sm_count"] * chip["subpartitions"]
    fp_issued = 0.0
    for unit in UNITS:
        busy = _sum(rows, f"sm.units.{unit}", "busy_cycles")
        row[f"util_{unit}"] = busy / slots if slots and np.isfinite(busy) else np.nan
        issued = _sum(rows, f"sm.units.{unit}", "issued")
        row[f"_issued_{unit}"] = issued
        if unit in FP_VECTOR_UNITS and np.isfinite(issued):
            fp_issued += issued
    row["_flops_estimate"] = fp_issued * lanes * 2
    stalls = rows[rows["component"].str.startswith("sm.scheduler.")
                  & (rows["stat"] == "stall_cycles")]
    by_group = dict.fromkeys(STALL_COLUMNS, 0.0)
    for comp, value in zip(stalls["component"], stalls["value"], strict=True):
        by_group[STALL_GROUPS.get(comp.removeprefix("sm.scheduler."), "other")] += value
    total = sum(by_group.values())
    row["stall_cycles"] = total if len(stalls) else np.nan
    for group, value in by_group.items():
        row[f"stall_{group}_frac"] = value / total if total > 0 else np.nan
    return row


def _from_stats(stats: pd.DataFrame, chip: dict) -> pd.DataFrame:
    if stats is None or stats.empty:
        return pd.DataFrame(columns=["run_id", "kernel"])
    rows = [_one_kernel(str(run_id), str(kernel), group, chip)
            for (run_id, kernel), group in stats.groupby(["run_id", "kernel"], sort=False)]
    return pd.DataFrame(rows)


def _merge_kernels(table: pd.DataFrame, kernels: pd.DataFrame) -> pd.DataFrame:
    given = kernels.rename(columns={"name": "kernel"}).copy()
    for level in LEVELS:
        if f"bytes_{level}" in given.columns and f"{level}_bytes" not in given.columns:
            given = given.rename(columns={f"bytes_{level}": f"{level}_bytes"})
    if "hbm_bytes" not in given.columns and "bytes_min" in given.columns:
        given["hbm_bytes"] = given["bytes_min"]
    given["kernel"] = given["kernel"].astype(str)
    if table.empty:
        return given
    keep = [c for c in table.columns if c not in given.columns or c == "kernel"]
    merged = given.merge(table[keep], on="kernel", how="left")
    for col in given.columns:    # missing given values fall back to the stats
        if col in table.columns and col != "kernel":
            from_stats = table.set_index("kernel")[col]
            merged[col] = merged[col].where(merged[col].notna(),
                                            merged["kernel"].map(from_stats))
    return merged


def _compute_peak(row: pd.Series, chip: dict, precision: str) -> tuple[str, float]:
    tensor_issued = row.get("_issued_tensor", np.nan)
    stats_known = np.isfinite(row.get("cycles", np.nan))
    tensor_op = any(word in str(row.get("op", "")) for word in TENSOR_OPS)
    if (np.isfinite(tensor_issued) and tensor_issued > 0) or (tensor_op and not stats_known):
        return f"tensor {precision}", chip.get(f"tensor_{precision}_tflops", np.nan)
    if np.isfinite(row.get("_issued_fp64", np.nan)) and row["_issued_fp64"] > 0:
        return "vector fp64", chip.get("vector_fp64_tflops", np.nan)
    return "vector fp32", chip.get("vector_fp32_tflops", np.nan)


def _derive(table: pd.DataFrame, chip: dict, precision: str) -> pd.DataFrame:
    table = table.copy()
    for col, _, _ in KERNEL_COLUMNS:
        if col not in table.columns:
            table[col] = np.nan
    if "_flops_estimate" not in table.columns:
        table["_flops_estimate"] = np.nan
    given = pd.to_numeric(table["flops"], errors="coerce")
    table["flops_source"] = np.where(given.notna(), "given",
                                     np.where(table["_flops_estimate"].notna(),
                                              "estimated: FP vector issue, tensor not counted",
                                              ""))
    table["flops"] = given.fillna(table["_flops_estimate"])
    time_us = pd.to_numeric(table["time_us"], errors="coerce")
    if {"start_us", "end_us"} <= set(table.columns):
        span = pd.to_numeric(table["end_us"], errors="coerce") - pd.to_numeric(
            table["start_us"], errors="coerce")
        time_us = time_us.fillna(span)
    table["time_us"] = time_us
    table["achieved_tflops"] = table["flops"] / (time_us * 1e6)
    for level in LEVELS:
        table[f"{level}_gbps"] = pd.to_numeric(table[f"{level}_bytes"]) / (time_us * 1e3)
    picks = [_compute_peak(row, chip, precision) for _, row in table.iterrows()]
    table["compute_peak"] = [name for name, _ in picks]
    table["peak_tflops"] = [peak for _, peak in picks]
    table["peak_hbm_gbps"] = chip.get("hbm_gbps", np.nan)
    hbm = pd.to_numeric(table["hbm_bytes"]).fillna(0.0)
    table["intensity_flops_per_byte"] = table["flops"] / hbm.where(hbm > 0)
    table["roofline_time_us"] = roofline_time_us(table["flops"].fillna(0.0), hbm,
                                                 table["peak_tflops"], table["peak_hbm_gbps"])
    table["bound"] = roofline_bound(table["flops"].fillna(0.0), hbm, table["peak_tflops"],
                                    table["peak_hbm_gbps"])
    # No FLOPs and no HBM bytes (a communication kernel timed by its links): no roofline.
    table["bound"] = table["bound"].where(table["roofline_time_us"] > 0, "none")
    roof = table["roofline_time_us"].where(table["roofline_time_us"] > 0)
    table["roofline_gap"] = time_us / roof
    return table.drop(columns=[c for c in table.columns if c.startswith("_")])
