"""A workload's time series on one time axis: per-SM utilization and bandwidth per level.

`workload_timeline(result, bins=200)` reads a `WorkloadResult` (`kernels` with each node's
`start_us`/`end_us` and, where given, `hbm_bytes`/`l2_bytes`, `config` for the launch
overheads, and `kernel_timelines`: the `KernelResult.timeline` tables of each node's
simulated launches with their sampling weights) and returns the long table of
`reports.plot_timeline` (`run_id, kernel, start_us, end_us, component, stat, value, unit`;
`start_us` and `end_us` are the points in time where a bin starts and ends) on `bins` equal
bins from 0 to the makespan, so the heatmap's columns have equal width:

    sm.<id>      utilization     fraction  busy fraction of the SM over the bin
    sm           utilization     fraction  mean over the SMs that ran any node
    memory.<l>   bytes           B         bytes moved at level l (l1, l2, l3, hbm) in the bin
    memory.<l>   bandwidth_gbps  GB/s      bytes / bin duration
    memory.link  bytes, bandwidth_gbps     link-timed nodes' link bytes, spread evenly over
                                           the node

Each launch series' bytes are first kept within the level's peak (`chip_peaks` of the
result's config: HBM, L2) by `simulator.framework.stats.within_peak`,
as `models.timeline_tracer` does
given the peaks: bytes counted at their requests' completion, a bucket's excess carried to
the buckets before.

Placing a node on [start_us, end_us]: first its launches' fixed overheads (weights summed x
(`launch.kernel_overhead_us` + `launch.kernel_front_end_us`), shortened where the node
leaves less time: the SMs idle), then its representative launch (the one with the largest
sampling weight) at its own pace: the first half of its buckets, then the rest of the node,
then the second half. The rest is what the representative launch does not show: the waves
and rounds a sampled op extrapolates, its other launches, a slower sustained clock; it gets
the node's remaining bytes per level (the kernels table's where it gives them, which count
the extrapolated work, else the weighted sum over the launches' series) evenly, and each
SM the representative launch's mean utilization. Rates are not scaled up: a node's bytes
in any bin come at its representative launch's rates or at its remaining average rate.
Stretching the representative launch onto the whole node and scaling its bytes to the
node's total instead would raise every bucket by (node bytes / node time) / (launch bytes
/ launch time): 1.9x for kv_b_proj and 1.16x for the expert GEMMs of the DeepSeek-V3 layer
on h800_sxm, whose sampled launches pay a fill and drain the extrapolated rounds do not, so
their HBM bins would read above the chip's peak. A node with no time beyond its
representative launch (no simulated op is timed below it) has the launch fitted onto it
and the bytes scaled to its total. Nodes running at the same time add up (contention
between streams is modelled by `simulate_workload` as a stretch of their times, so a sum
above 1 on an SM means oversubscription).
Left out: CTA spans (see each kernel's own timeline), nodes without a timeline (run with
`timeline=False`) other than link-timed ones.
Units: microseconds, fractions, bytes, GB/s.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from isa.errors import InputError
from models.roofline import chip_peaks
from simulator.framework.stats import within_peak

COLUMNS = ("run_id", "kernel", "start_us", "end_us", "component", "stat", "value", "unit")
LEVEL_PATTERN = r"memory\.(l1|l2|l3|hbm)"
TABLE_BYTES = {"memory.hbm": "hbm_bytes", "memory.l2": "l2_bytes"}
"""Levels whose node totals the workload's kernels table gives (extrapolated work counted)."""
_EMPTY = pd.DataFrame(columns=["a", "b", "component", "stat", "value"])


def _config_dict(config) -> dict:
    """The resolved config as a dict (from an object with `to_dict()`; {} when absent)."""
    if config is not None and not isinstance(config, Mapping) and hasattr(config, "to_dict"):
        config = config.to_dict()
    return dict(config) if isinstance(config, Mapping) else {}


def _launch_overhead_us(config: Mapping) -> float:
    """Fixed time of one launch the SMs do not run: host overhead + front end (0 absent)."""
    launch = config.get("launch", {}) or {}
    return float(launch.get("kernel_overhead_us", 0.0) or 0.0) + float(
        launch.get("kernel_front_end_us", 0.0) or 0.0)


def _representative(frame: pd.DataFrame) -> pd.DataFrame:
    weights = frame.groupby("launch")["weight"].first()
    return frame[frame["launch"] == weights.idxmax()]


def _bucket_rows(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["stat"] != "cta_span"]


def _node_totals(node: pd.Series, frame: pd.DataFrame) -> pd.Series:
    """Bytes per level of the whole node: the kernels table's where it gives them, else the
    weighted sum of its launches' series."""
    moved = _bucket_rows(frame)
    moved = moved[(moved["stat"] == "bytes")
                  & moved["component"].astype(str).str.fullmatch(LEVEL_PATTERN)]
    totals = (moved["value"] * moved["weight"]).groupby(moved["component"].astype(str)).sum()
    for component, column in TABLE_BYTES.items():
        given = pd.to_numeric(node.get(column, np.nan), errors="coerce")
        if pd.notna(given) and component in totals.index:
            totals[component] = float(given)
    return totals


def _within_peaks(out: pd.DataFrame, peaks: Mapping[str, float]) -> pd.DataFrame:
    """`out` (a launch's buckets) with each level's bytes kept within its peak
    (`simulator.framework.stats.within_peak`; a no-op on a series its tracer already kept)."""
    for component, group in out[out["stat"] == "bytes"].groupby("component"):
        peak = float(peaks.get(component.removeprefix("memory.") + "_gbps", np.nan))
        if np.isfinite(peak):
            group = group.sort_values("a")
            out.loc[group.index, "value"] = within_peak(
                group["value"], peak * (group["b"] - group["a"]).to_numpy(float) * 1e3)
    return out


def _launch_buckets(node: pd.Series, frame: pd.DataFrame, peaks: Mapping[str, float]) \
        -> tuple[pd.DataFrame, float, float, pd.Series, pd.Series] | None:
    """The buckets of a node's representative launch on its own axis (a, b from its
    start), within the levels' peaks; its span (us), the number of launches (weights
    summed), the bytes per level the buckets show and the node's total bytes per level.
    None when it has no buckets. What does not depend on where the node runs: nodes of one
    op share it (`workload_timeline`)."""
    rows = _bucket_rows(_representative(frame))
    rows = rows[(rows["stat"] == "utilization") | (rows["stat"] == "bytes")]
    rows = rows[rows["component"].astype(str).str.fullmatch(r"sm\.\d+|" + LEVEL_PATTERN)]
    if rows.empty:
        return None
    out = pd.DataFrame({"a": rows["start_us"].to_numpy(float),
                        "b": rows["end_us"].to_numpy(float),
                        "component": rows["component"].astype(str).to_numpy(),
                        "stat": rows["stat"].astype(str).to_numpy(),
                        "value": rows["value"].to_numpy(float)})
    out = _within_peaks(out, peaks)
    launch_us = float(out["b"].max())
    launches = float(frame.groupby("launch")["weight"].first().sum())
    shown = out[out["stat"] == "bytes"].groupby("component")["value"].sum()
    total = _node_totals(node, frame).reindex(shown.index).fillna(shown)
    return out, launch_us, launches, shown, total


def _node_intervals(node: pd.Series, frame: pd.DataFrame, overhead_us: float,
                    peaks: Mapping[str, float], buckets: dict | None = None) -> pd.DataFrame:
    """The node's intervals on the workload axis: a, b, component, stat, value
    (utilization fractions, bytes), laid out as the module docstring says. `buckets` (a
    dict the caller keeps for one workload) holds `_launch_buckets` per series table and
    the node's byte totals, so nodes of one op compute them once."""
    key = (id(frame), *(repr(node.get(column)) for column in TABLE_BYTES.values()))
    buckets = {} if buckets is None else buckets
    if key not in buckets:
        buckets[key] = (frame, _launch_buckets(node, frame, peaks))
    launch = buckets[key][1]
    if launch is None:
        return _EMPTY
    out, launch_us, launches, shown, total = launch
    out = out.copy()
    start, end = float(node["start_us"]), float(node["end_us"])
    lead = min(max(launches * overhead_us, 0.0), max(end - start - launch_us, 0.0))
    rest_us = end - start - lead - launch_us
    if rest_us <= 0:                   # no time beyond the launch: it fills the node
        scale = min((end - start) / launch_us, 1.0) if launch_us else 0.0
        out["a"], out["b"] = start + lead + out["a"] * scale, start + lead + out["b"] * scale
        return _scaled_bytes(out, total / shown)
    edges = np.unique(out["a"])
    middle = float(edges[len(edges) // 2])     # a bucket edge: no bucket straddles it
    origin = start + lead
    later = np.where(out["a"] >= middle, rest_us, 0.0)
    out["a"], out["b"] = origin + out["a"] + later, origin + out["b"] + later
    out = _scaled_bytes(out, (total / shown).clip(upper=1.0))
    rest = (total - shown).clip(lower=0.0)
    util = out[out["stat"] == "utilization"]
    mean = (util["value"] * (util["b"] - util["a"])).groupby(util["component"]).sum() / launch_us
    a, b = origin + middle, origin + middle + rest_us
    extra = pd.DataFrame({"a": a, "b": b,
                          "component": [*mean.index, *rest.index],
                          "stat": ["utilization"] * len(mean) + ["bytes"] * len(rest),
                          "value": [*mean.to_numpy(float), *rest.to_numpy(float)]})
    return pd.concat([out, extra], ignore_index=True)


def _scaled_bytes(out: pd.DataFrame, factor: pd.Series) -> pd.DataFrame:
    """`out` with each level's bytes multiplied by `factor[component]` (no bytes: 0)."""
    factor = factor.replace([np.inf, -np.inf], np.nan).fillna(0.0)
    is_bytes = out["stat"] == "bytes"
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
    config = _config_dict(getattr(result, "config", None))
    overhead_us, peaks = _launch_overhead_us(config), chip_peaks(config)
    buckets: dict = {}
    parts = [_node_intervals(node, series[node["name"]], overhead_us, peaks, buckets)
             for _, node in kernels.iterrows() if node["name"] in series]
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
                            "start_us": edges[:-1], "end_us": edges[1:],
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
