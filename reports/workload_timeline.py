"""A workload's time series on one time axis: per-SM utilization and bandwidth per level.

`workload_timeline(result, bins=200)` reads a `WorkloadResult` (`kernels` with each node's
`start_us`/`end_us`, and `kernel_timelines`: the `KernelResult.timeline` tables of each
node's simulated launches) and returns the long table of `reports.plot_timeline`
(`run_id, kernel, start_us, time_us, component, stat, value, unit`; `time_us` is a bin's
end) on `bins` equal bins from 0 to the makespan, so the heatmap's columns have equal width:

    sm.<id>      utilization     fraction  busy fraction of the SM over the bin
    sm           utilization     fraction  mean over the SMs that ran any node
    memory.<l>   bytes           B         bytes moved at level l (l1, l2, l3, hbm) in the bin
    memory.<l>   bandwidth_gbps  GB/s      bytes / bin duration
    memory.link  bytes, bandwidth_gbps     link-timed nodes' link bytes, spread evenly over
                                           the node

Placing a node: its representative launch is the one with the largest sampling weight (a
sampled op runs reduced launches whose weighted sum is the op); that launch's buckets are
stretched from [0, launch time] onto the node's [start_us, end_us] (which holds the
launch overheads too), utilization as is, and
the bytes of every level scaled so the node's total equals the weighted sum over its
launches. Nodes running at the same time add up (contention between streams is not
modelled by `simulate_workload`, so a sum above 1 on an SM means oversubscription).
Left out: CTA spans (see each kernel's own timeline), nodes without a timeline (run with
`timeline=False`) other than link-timed ones.
Units: microseconds, fractions, bytes, GB/s.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from isa.errors import InputError

COLUMNS = ("run_id", "kernel", "start_us", "time_us", "component", "stat", "value", "unit")
LEVEL_PATTERN = r"memory\.(l1|l2|l3|hbm)"


def _representative(frame: pd.DataFrame) -> pd.DataFrame:
    weights = frame.groupby("launch")["weight"].first()
    return frame[frame["launch"] == weights.idxmax()]


def _bucket_rows(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["stat"] != "cta_span"]


def _node_intervals(node: pd.Series, frame: pd.DataFrame) -> pd.DataFrame:
    """The node's representative buckets placed on the workload axis: a, b, component,
    stat, value (utilization fractions; bytes scaled to the node's weighted total)."""
    rows = _bucket_rows(_representative(frame))
    rows = rows[(rows["stat"] == "utilization") | (rows["stat"] == "bytes")]
    rows = rows[rows["component"].astype(str).str.fullmatch(r"sm\.\d+|" + LEVEL_PATTERN)]
    if rows.empty:
        return pd.DataFrame(columns=["a", "b", "component", "stat", "value"])
    launch_us = float(rows["time_us"].max())
    scale = (float(node["end_us"]) - float(node["start_us"])) / launch_us if launch_us else 0.0
    out = pd.DataFrame({"a": node["start_us"] + rows["start_us"].to_numpy(float) * scale,
                        "b": node["start_us"] + rows["time_us"].to_numpy(float) * scale,
                        "component": rows["component"].astype(str).to_numpy(),
                        "stat": rows["stat"].astype(str).to_numpy(),
                        "value": rows["value"].to_numpy(float)})
    moved = _bucket_rows(frame)
    moved = moved[moved["stat"] == "bytes"]
    totals = (moved["value"] * moved["weight"]).groupby(moved["component"].astype(str)).sum()
    is_bytes = out["stat"] == "bytes"
    shown = out[is_bytes].groupby("component")["value"].sum()
    factor = (totals / shown).replace([np.inf, -np.inf], np.nan).fillna(0.0)
    out.loc[is_bytes, "value"] *= out.loc[is_bytes, "component"].map(factor).to_numpy(float)
    return out


def _binned(a: np.ndarray, b: np.ndarray, amount: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Sum over intervals [a, b) of `amount` x (overlap with each bin / interval length)."""
    length = np.where(b > a, b - a, np.nan)
    rate = np.nan_to_num(amount / length)
    cum = np.zeros(len(edges))
    for start in range(0, len(a), 4096):
        sl = slice(start, start + 4096)
        covered = np.clip(edges[:, None] - a[None, sl], 0.0, (b - a)[None, sl])
        cum += covered @ rate[sl]
    return np.maximum(np.diff(cum), 0.0)  # amounts are >= 0: drop rounding below zero


def workload_timeline(result, bins: int = 200) -> pd.DataFrame:
    """The workload's per-SM and per-level series on `bins` equal bins (see module)."""
    if not isinstance(bins, int) or bins < 1:
        raise InputError(f"workload_timeline: bins={bins!r}; accepted a positive integer")
    kernels, series = result.kernels, getattr(result, "kernel_timelines", None) or {}
    makespan = float(kernels["end_us"].max()) if len(kernels) else 0.0
    if makespan <= 0:
        return pd.DataFrame(columns=list(COLUMNS))
    parts = [_node_intervals(node, series[node["name"]]) for _, node in kernels.iterrows()
             if node["name"] in series]
    links = kernels[(kernels["link_bytes"].fillna(0) > 0) & (kernels["time_us"] > 0)]
    if len(links):
        parts.append(pd.DataFrame({"a": links["start_us"], "b": links["end_us"],
                                   "component": "memory.link", "stat": "bytes",
                                   "value": links["link_bytes"].astype(float)}))
    intervals = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()
    if intervals.empty:
        return pd.DataFrame(columns=list(COLUMNS))
    edges = np.linspace(0.0, makespan, bins + 1)
    width = np.diff(edges)
    rows = []
    sm_busy = []
    for (component, stat), group in intervals.groupby(["component", "stat"], sort=True):
        a, b = group["a"].to_numpy(float), group["b"].to_numpy(float)
        value = group["value"].to_numpy(float)
        if stat == "utilization":
            busy = _binned(a, b, value * (b - a), edges) / width
            sm_busy.append(busy)
            rows.append((component, "utilization", "fraction", busy))
        else:
            moved = _binned(a, b, value, edges)
            rows.append((component, "bytes", "B", moved))
            rows.append((component, "bandwidth_gbps", "GB/s", moved / (width * 1e3)))
    if sm_busy:
        rows.append(("sm", "utilization", "fraction", np.mean(sm_busy, axis=0)))
    frames = [pd.DataFrame({"run_id": result.run_id, "kernel": result.run_id,
                            "start_us": edges[:-1], "time_us": edges[1:],
                            "component": component, "stat": stat, "value": values,
                            "unit": unit})
              for component, stat, unit, values in rows]
    return pd.concat(frames, ignore_index=True)[list(COLUMNS)]


def kernel_shares(result) -> pd.DataFrame:
    """Per node: time, share of the summed node time, bound, roofline time and gap, and the
    simulated time's cause (`model`), largest first; shares sum to 1."""
    table = result.kernels[["name", "op", "kind", "stream", "start_us", "end_us", "time_us",
                            "flops", "hbm_bytes", "roofline_us", "bound", "gap",
                            "model"]].copy()
    total = float(table["time_us"].sum())
    table["share"] = table["time_us"] / total if total else np.nan
    return table.sort_values("time_us", ascending=False, kind="stable").reset_index(drop=True)
