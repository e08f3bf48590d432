"""Per-kernel table built from the long stats table (and a workload's kernels table).

`kernel_table(stats, config, kernels=None)` returns one row per kernel with the columns of
`KERNEL_COLUMNS` (name, unit, meaning): its times, achieved TFLOP/s, bytes and bandwidth per
memory level, hit rates, utilization per unit, occupancy, stall breakdown and the roofline
bound with its gap. It reads only the stats DataFrame (`run_id, kernel, component, stat,
value, unit`), the resolved config dict and, for a workload, its `kernels` DataFrame (one
row per kernel: `name`, `op`, `stream`, `start_us`, `end_us`, `time_us`, `flops`, bytes per
level as `<level>_bytes` or `bytes_<level>`, the op's minimum `bytes` (a graph's
`bytes_min` stands in), `roofline_us`, `bound`; `workloads.execute`), whose values win
over the stats.

Times, one definition each (a reader reconciles them: span_us = cycles / sm_clock_ghz,
kernel_time_us = span_us + front_end_us, time_us = kernel_time_us + launch_overhead_us,
each summed over the kernel's launches):

    cycles          the SMs' span in SM cycles: first CTA launched to last CTA done
    span_us         cycles at the SM clock (`sm_clock_ghz`: the chip's, or the sustained
                    clock a workload op ran at)
    kernel_time_us  what a profiler shows as the kernel's duration: span_us + the launch's
                    front end (`launch.kernel_front_end_us`, the part the SMs do not see);
                    the stats' kernel `time_us` row
    time_us         what the kernel costs its stream: kernel_time_us + the host's launch
                    overhead (`launch.kernel_overhead_us`); `KernelResult.time_us`, a
                    workload node's duration (end_us - start_us, with any contention stretch)

A workload node's cycles and kernel time come from the stats of its simulated launches only
where those add up to the node's time_us (launches timed as they are); a node timed from
reduced sample launches, re-timed at a sustained clock or stretched by contention has no
such figures in its stats and shows NaN there unless its kernels table gives them.

FLOP: a `flops` column when given (`flops_source` "given": the op's useful work, 2·M·N·K for
a GEMM); otherwise an estimate from the issued FP warp-instructions of the vector units
(each counted as a full-warp FMA, 2 FLOP per lane: an upper bound for vector work;
tensor-core work is not in the stats per shape and counts 0, `flops_source` says so).
`issued_flops` is what the tensor cores issued: flops - 2 x macs_skipped where the op's
flops count the products the co-design units skip (a GEMM's dense 2·M·N·K under the ZCE or
2:4), else flops (causal attention's flops count the visible products only, so the zeros
the ZCE skips are not in them; `workloads.codesign.codesign_ops.op_counts`).
`achieved_tflops` = issued_flops / time_us.

Roofline (`models.roofline`, one definition): roofline_us = max(issued_flops /
peak_tflops, roofline_bytes / peak_hbm_gbps), roofline_bytes a workload's own (the op's
minimum bytes with a GEMM's operands as stored, `workloads.ops.registry.issued_work`), else
the op's minimum bytes where given, else the HBM bytes simulated; a workload's own
`roofline_us` and `bound` (from `workloads.ops.simulate_op`, the same definition) win. The
compute peak is the tensor peak of the kernel's MMA `precision` column where given
(e4m3/e5m2: fp8), else of `precision` for kernels that issued tensor-core instructions (or,
without stats, whose op names a GEMM, attention or MMA), else the FP64 or FP32 vector peak.
roofline_gap = time_us / roofline_us; `intensity_flops_per_byte` = issued_flops /
roofline_bytes, so a kernel sits on the side of the ridge its bound names.
A workload's own `gap` and `tflops` columns (the same figures under other names) are not
carried.

Utilization of a unit is its busy cycles (summed over SMs and sub-partitions) / (cycles x
compute SMs x sub-partitions), over the launches the stats hold. Stall fractions divide
each reason's scheduler cycles by their sum: memory, dependency, barrier, issue (pipe
busy), idle (no warp), other (any reason not named here).

Left out: per-SM rows (the stats sum over SMs), instruction mix by opcode.
Units: microseconds, cycles, GHz, FLOP, TFLOP/s, B, GB/s, fractions.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from models.roofline import chip_peaks, roofline_bound, roofline_time_us

LEVELS = ("l1", "l2", "l3", "hbm")
UNITS = ("fp32", "fp16", "bf16", "fp64", "int32", "sfu", "conversion", "shuffle", "lsu",
         "tensor", "tma", "branch")
FP_VECTOR_UNITS = ("fp32", "fp16", "bf16", "fp64")
TENSOR_OPS = ("gemm", "attention", "mma")
SKIPS_OUTSIDE_FLOPS = ("attention",)
"""Op kinds whose `macs_skipped` are products their flops already leave out (causal
attention's zeros, `op_counts`): their issued FLOPs are their flops."""
MMA_PRECISION_PEAK = {"e4m3": "fp8", "e5m2": "fp8", "f16": "fp16"}
"""A workload's MMA `precision` names -> `chip_peaks` tensor precisions (others: as named)."""
STALL_GROUPS = {"memory": "memory", "dependency": "dependency", "barrier": "barrier",
                "pipe_busy": "issue", "no_warp": "idle"}
STALL_COLUMNS = ("memory", "dependency", "barrier", "issue", "idle", "other")
STATS_KERNEL_TIME = "time_us"
"""The stats' kernel row holding kernel_time_us (`simulator.runner.simulate.KERNEL_STATS`)."""
LAUNCH_TIME_COLUMNS = ("cycles", "span_us", "kernel_time_us", "front_end_us",
                       "launch_overhead_us")
"""The figures a workload node gets from its stats only where they add up to its time."""
NOT_CARRIED = ("gap", "tflops")
"""A workload's columns for figures this table holds under one name (roofline_gap,
achieved_tflops)."""

KERNEL_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("run_id", "", "run the kernel belongs to"),
    ("kernel", "", "kernel name"),
    ("op", "", "operation (workload kernels)"),
    ("stream", "", "stream the kernel ran on"),
    ("start_us", "us", "when the kernel starts on its stream (workload kernels)"),
    ("end_us", "us", "when it ends: start_us + time_us"),
    ("time_us", "us", "what the kernel costs its stream: kernel_time_us + "
     "launch_overhead_us (a workload node: its duration)"),
    ("kernel_time_us", "us", "what a profiler shows as the kernel's duration: span_us + "
     "front_end_us"),
    ("span_us", "us", "the SMs' span: cycles / sm_clock_ghz"),
    ("cycles", "cycles", "the SMs' span in SM cycles, first CTA launched to last CTA done"),
    ("sm_clock_ghz", "GHz", "SM clock the cycles ran at"),
    ("front_end_us", "us", "launch front end the SMs do not see (launch.kernel_front_end_us "
     "per launch)"),
    ("launch_overhead_us", "us", "host launch overhead outside the kernel "
     "(launch.kernel_overhead_us per launch)"),
    ("flops", "FLOP", "floating-point operations of the op (useful work)"),
    ("flops_source", "", "given, or estimated from FP warp-instructions"),
    ("issued_flops", "FLOP", "FLOPs issued: flops - 2 x macs_skipped where the flops count "
     "the skipped products, else flops"),
    ("achieved_tflops", "TFLOP/s", "issued_flops / time_us"),
    *((f"{lv}_bytes", "B", f"bytes moved at {lv.upper()}") for lv in LEVELS),
    *((f"{lv}_gbps", "GB/s", f"{lv.upper()} bandwidth: bytes / time_us") for lv in LEVELS),
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
    ("roofline_bytes", "B", "bytes of the roofline's memory term: the op's minimum bytes "
     "(inputs once, outputs once; GEMM operands as stored) where given, else the HBM bytes "
     "simulated"),
    ("intensity_flops_per_byte", "FLOP/B", "issued_flops / roofline_bytes (the side of the "
     "ridge the bound is on)"),
    ("roofline_us", "us", "max(issued_flops / peak_tflops, roofline_bytes / peak_hbm_gbps)"),
    ("bound", "", "compute or memory: the larger roofline term (none: no FLOPs, no bytes)"),
    ("roofline_gap", "x", "time_us / roofline_us"),
)


WORKLOAD_UNITS = {"macs": "MAC", "macs_skipped": "MAC", "operand_bytes": "B",
                  "operand_bytes_stored": "B", "output_bytes": "B", "output_bytes_stored": "B",
                  "compress_cycles": "cycles", "bytes": "B", "gbps": "GB/s",
                  "link_bytes": "B", "rel_error": "fraction", "max_abs_error": "",
                  "argmax_change": "fraction", "rel_error_vs_stock": "fraction"}
"""Units of the workload columns the table carries (`workloads.execute`): co-design
counts, the op's minimum `bytes` (a collective's bus bytes) and `gbps` = bytes / time_us;
a run's error beside the time (`ptxsim run`, `workloads.codesign.run_numerics`): the
relative error, max absolute error (in the data's own units) and argmax change of its
error category against FP64, and the relative error against the stock precision."""


def column_units() -> dict[str, str]:
    """Column name -> unit of the kernel table (and of the workload columns it carries)."""
    return {**{name: unit for name, unit, _ in KERNEL_COLUMNS}, **WORKLOAD_UNITS}


def kernel_table(stats: pd.DataFrame, config: Mapping[str, Any] | None = None,
                 kernels: pd.DataFrame | None = None, *, precision: str = "bf16",
                 peaks: Mapping[str, float] | None = None) -> pd.DataFrame:
    """One row per kernel with the columns of `KERNEL_COLUMNS` (see the module docstring).

    `precision` picks the tensor peak for kernels that issued tensor-core instructions (or
    workload kernels without stats) and carry no MMA precision of their own; `peaks`
    overrides entries of `chip_peaks(config)`.
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


def _launch_times(rows: pd.DataFrame, chip: dict) -> dict[str, float]:
    """cycles, span, kernel time, front end and launch overhead summed over the launches the
    stats hold (a missing front end or overhead row counts 0)."""
    cycles = _sum(rows, "kernel", "cycles")
    kernel_us = _sum(rows, "kernel", STATS_KERNEL_TIME)
    known = np.isfinite(kernel_us)
    front = _sum(rows, "kernel", "front_end_us")
    overhead = _sum(rows, "kernel", "launch_overhead_us")
    clock = chip.get("clock_ghz", np.nan)
    return {"cycles": cycles, "sm_clock_ghz": clock, "span_us": cycles / (clock * 1e3),
            "kernel_time_us": kernel_us,
            "front_end_us": np.nan_to_num(front) if known else np.nan,
            "launch_overhead_us": np.nan_to_num(overhead) if known else np.nan}


def _one_kernel(run_id: str, kernel: str, rows: pd.DataFrame, chip: dict) -> dict:
    row: dict[str, Any] = {"run_id": run_id, "kernel": kernel, "_stats": True,
                           **_launch_times(rows, chip)}
    for stat in ("theoretical_occupancy", "achieved_occupancy"):
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
    given = kernels.rename(columns={"name": "kernel"}).drop(
        columns=[c for c in NOT_CARRIED if c in kernels.columns])
    for level in LEVELS:
        if f"bytes_{level}" in given.columns and f"{level}_bytes" not in given.columns:
            given = given.rename(columns={f"bytes_{level}": f"{level}_bytes"})
    if "bytes" not in given.columns and "bytes_min" in given.columns:
        given["bytes"] = given["bytes_min"]
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
    return _launch_times_of_the_node(merged, given.columns)


def _launch_times_of_the_node(merged: pd.DataFrame, given) -> pd.DataFrame:
    """A node's stats figures of `LAUNCH_TIME_COLUMNS` kept only where the stats' kernel
    time + launch overhead is the node's time_us (module docstring)."""
    if "time_us" not in given:
        return merged
    time_us = pd.to_numeric(merged["time_us"], errors="coerce")
    own = (pd.to_numeric(merged["kernel_time_us"], errors="coerce")
           + pd.to_numeric(merged["launch_overhead_us"], errors="coerce"))
    theirs = np.isclose(own, time_us, rtol=1e-9, atol=1e-9) | time_us.isna()
    for col in LAUNCH_TIME_COLUMNS:
        if col not in given:
            merged[col] = merged[col].where(theirs)
    return merged


def _compute_peak(row: pd.Series, chip: dict, precision: str) -> tuple[str, float]:
    mma = str(row.get("precision", "") or "") if pd.notna(row.get("precision")) else ""
    if mma:
        own = MMA_PRECISION_PEAK.get(mma, mma)
        return f"tensor {own}", chip.get(f"tensor_{own}_tflops", np.nan)
    tensor_issued = row.get("_issued_tensor", np.nan)
    stats_known = pd.notna(row.get("_stats")) and bool(row.get("_stats"))
    tensor_op = any(word in str(row.get("op", "")) for word in TENSOR_OPS)
    if (np.isfinite(tensor_issued) and tensor_issued > 0) or (tensor_op and not stats_known):
        return f"tensor {precision}", chip.get(f"tensor_{precision}_tflops", np.nan)
    if np.isfinite(row.get("_issued_fp64", np.nan)) and row["_issued_fp64"] > 0:
        return "vector fp64", chip.get("vector_fp64_tflops", np.nan)
    return "vector fp32", chip.get("vector_fp32_tflops", np.nan)


def _numeric(table: pd.DataFrame, col: str) -> pd.Series:
    if col not in table.columns:
        return pd.Series(np.nan, index=table.index)
    return pd.to_numeric(table[col], errors="coerce")


def _issued_flops(table: pd.DataFrame) -> pd.Series:
    """flops - 2 x macs_skipped where the flops count the skipped products (module
    docstring)."""
    skipped = _numeric(table, "macs_skipped").fillna(0.0)
    kind = table["kind"] if "kind" in table.columns else table["op"]
    inside = ~kind.map(lambda k: isinstance(k, str)
                       and any(word in k for word in SKIPS_OUTSIDE_FLOPS)).astype(bool)
    return table["flops"] - 2 * skipped.where(inside, 0.0)


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
    own = _numeric(table, "kernel_time_us") + _numeric(table, "launch_overhead_us")
    span = _numeric(table, "end_us") - _numeric(table, "start_us")
    time_us = _numeric(table, "time_us").fillna(own).fillna(span)
    table["time_us"] = time_us
    clock = _numeric(table, "sm_clock_ghz")
    table["span_us"] = _numeric(table, "span_us").where(
        clock.isna(), _numeric(table, "cycles") / (clock * 1e3))
    table["issued_flops"] = _issued_flops(table)
    table["achieved_tflops"] = table["issued_flops"] / (time_us * 1e6)
    for level in LEVELS:
        table[f"{level}_gbps"] = _numeric(table, f"{level}_bytes") / (time_us * 1e3)
    picks = [_compute_peak(row, chip, precision) for _, row in table.iterrows()]
    table["compute_peak"] = [name for name, _ in picks]
    table["peak_tflops"] = [peak for _, peak in picks]
    table["peak_hbm_gbps"] = chip.get("hbm_gbps", np.nan)
    return _roofline(table, _numeric(table, "hbm_bytes").fillna(0.0))


def _roofline(table: pd.DataFrame, hbm: pd.Series) -> pd.DataFrame:
    """roofline_bytes, roofline_us, bound and roofline_gap (module docstring); a workload's
    own roofline_us and bound win."""
    nbytes = _numeric(table, "roofline_bytes").fillna(_numeric(table, "bytes")).fillna(hbm)
    table["roofline_bytes"] = nbytes
    issued = _numeric(table, "issued_flops")
    table["intensity_flops_per_byte"] = issued / nbytes.where(nbytes > 0)
    flops = issued.fillna(0.0)
    roof = pd.Series(roofline_time_us(flops, nbytes, table["peak_tflops"],
                                      table["peak_hbm_gbps"]), index=table.index)
    bound = pd.Series(roofline_bound(flops, nbytes, table["peak_tflops"],
                                     table["peak_hbm_gbps"]), index=table.index)
    theirs = table["bound"].notna() & (table["bound"].astype(str) != "")
    table["roofline_us"] = _numeric(table, "roofline_us").where(theirs, roof)
    # No FLOPs and no bytes (a communication kernel timed by its links): no roofline.
    bound = bound.where(roof > 0, "none")
    table["bound"] = table["bound"].where(theirs, bound)
    positive = table["roofline_us"].where(table["roofline_us"] > 0)
    table["roofline_gap"] = table["time_us"] / positive
    return table.drop(columns=[c for c in table.columns if c.startswith("_")])
