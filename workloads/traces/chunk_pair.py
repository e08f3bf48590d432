"""DeepSeek-V3's DualPipe chunk pair: its published trace beside the simulated pair.

The reference (`deepseek_v3_train_trace.json`, see `../shared/reference/README.md`) is one
forward chunk and one backward chunk of DeepSeek-V3 training on H800, 4 MoE layers each,
overlapped by DualPipe, EP64, TP1, 4K-token sequences, rank 0 only. It has no input shapes,
so the simulated pair is built from the model's config, not from the trace:

* `chunk_pair_graph()`: `workloads.layer("deepseek-v3", "train", tokens=4096, ep=64)` (one
  4096-token sequence per micro-batch: the trace's FlashAttention forward, 1.2 ms, is
  S^2 x 128 heads x (192 + 128) FLOP = 687 GFLOP at 555 TFLOP/s; the routed GEMMs of
  4096 x 8 / 64 x 64 = 32768 rows per rank over 256 / 64 = 4 experts match the trace's 1-2 ms
  grouped kernels), paired by `workloads.layers.dualpipe.dualpipe_pair` (forward of one
  micro-batch beside the backward of another, on streams compute / comm / wgrad). The four
  layers of a chunk are identical, so one layer pair is simulated and counted 4 times: the
  chunk pair's makespan is 4 x the layer pair's (the trace runs its four layer pairs one
  after another too).
* `chunk_pair_config()`: `h800_sxm` with DeepSeek's 20 communication SMs (`sm.comm_count`);
  the preset's cluster (`links.nodes`) already spans the 8 nodes of EP64.

Trace side: `trace_kernels()` maps every kernel (`workloads.traces.mapping`), gives it a
pass (`forward` where DualPipe's annotation ends in "(F)", else `backward`: B, W, and the
unannotated autograd launches, which include the forward ops DeepSeek recomputes in the
backward) and a comparison class (`TRACE_CLASSES`). Simulated side: every node of the
layer pair gets a pass (its role) and a class (`node_class`).

`compare(trace, nodes)`:
* per kernel: within each (pass, class), trace kernels in time order are paired with the
  simulated nodes in issue order (`TRACE_ORDER` where the trace issues a layer's kernels in
  another order), 4 layers over; only where the counts agree (e.g. 7 dense
  forward GEMMs per layer on both sides); elsewhere (recomputed GEMMs, per-expert wgrad
  launches, fused/unfused casts) only the class totals are compared, and the table says so;
* per category (`mapping.CATEGORIES`): summed measured vs simulated time, error %;
* overlap: per-stream busy time, union and overlap of the streams (`stream_overlap`), for
  the trace and for the simulated pair (x 4).

Left out: kernels with no simulated counterpart (layout copies, transposes, PyTorch
element-wise and reduction kernels, DeepEP's notify kernels, memcpy/memset) count as
measured time with no simulated time; the trace's three attention backward kernels
(flash_attn_bwd_pre, flash_attn_bwd, flash_attn_bwd_post, class `attention_bwd`) are one
simulated node (`attention.bwd`, whose op runs the same three kernels); communication
kernel times in the trace include waiting for peers (the simulated
collectives do not wait for other ranks).
Units: microseconds.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

import models
import workloads
from workloads.layers.dualpipe import dualpipe_pair
from workloads.shared_reference import SHARED_REFERENCE
from workloads.traces.kineto import read_kineto
from workloads.traces.mapping import map_kernels
from workloads.traces.overlap import stream_overlap

REFERENCE = SHARED_REFERENCE / "deepseek_v3_train_trace.json"
LAYERS = 4
TOKENS, EP, COMM_SMS = 4096, 64, 20
STREAM_IDS = {"compute": 7, "wgrad": 23, "comm": 27}   # the trace's stream numbers

TRACE_CLASSES = {
    "deepgemm_fp8": "gemm", "deepgemm_m_grouped_fp8": "grouped_gemm",
    "deepgemm_fp8_acc": "wgrad_gemm", "deepgemm_fp8_acc_wgrad_stream": "wgrad_gemm",
    "cublas_sm90_gemm": "moe_gating", "moe_routing": "moe_gating",
    "deepep_layout": "moe_gating",
    "flash_attn_fwd": "attention", "flash_attn_bwd": "attention_bwd",
    "flash_attn_bwd_pre": "attention_bwd", "flash_attn_bwd_post": "attention_bwd",
    "layer_norm_fwd": "norm", "layer_norm_bwd": "norm_bwd", "rmsnorm": "norm",
    "swiglu": "swiglu", "rope": "rope", "fp8_cast": "quantize", "torch_add": "residual_add",
    "moe_weighted_reduce": "moe_sum", "deepep_dispatch": "dispatch",
    "deepep_combine": "combine", "deepep_notify": "comm_notify",
}
CLASS_CATEGORY = {
    "gemm": "gemm", "grouped_gemm": "gemm", "wgrad_gemm": "gemm", "attention": "attention",
    "attention_bwd": "attention", "norm": "norm", "norm_bwd": "norm",
    "swiglu": "elementwise", "rope": "elementwise", "residual_add": "elementwise",
    "quantize": "quantize", "moe_gating": "moe_routing", "moe_sum": "reduction",
    "dispatch": "communication", "combine": "communication", "comm_notify": "communication",
}
TRACE_ORDER = {
    # the trace issues the routed experts' SwiGLU (grid 31104 / 30976 CTAs: one per routed
    # row received) before the shared expert's (grid 4096: one per token) in every layer;
    # the simulated graph issues the shared expert's first
    ("forward", "swiglu"): ("experts.swiglu", "shared_expert.swiglu"),
}
"""(pass, class) -> node names (without the micro-batch prefix) in the trace's issue order
within a layer, where it differs from the simulated graph's."""
KERNEL_COLUMNS = ("pass", "class", "category", "index", "trace_kernel", "stream",
                  "measured_us", "node", "simulated_us", "error_pct", "matched")


def chunk_pair_config():
    """`h800_sxm` with DeepSeek's 20 communication SMs (its cluster of 256 nodes of 8 GPUs
    already spans EP64)."""

    return models.load_preset("h800_sxm").with_overrides({"sm.comm_count": COMM_SMS})


def chunk_pair_graph():
    """One DeepSeek-V3 MoE layer's DualPipe pair (forward of micro-batch 1 beside the
    backward of micro-batch 0), 4096 tokens per micro-batch, EP64."""

    return dualpipe_pair(workloads.layer("deepseek-v3", phase="train", tokens=TOKENS, ep=EP))


def trace_kernels(path: str | Path = REFERENCE) -> pd.DataFrame:
    """The trace's activities, mapped, with `pass`, `class` and `end_us` (see module)."""

    df = map_kernels(read_kineto(path)).sort_values(["start_us", "stream"], kind="stable")
    annotation = df["annotation"].fillna("").astype(str)
    df["pass"] = np.where(annotation.str.endswith("(F)"), "forward", "backward")
    df["class"] = df["rule"].map(TRACE_CLASSES).fillna("other")
    df["end_us"] = df["start_us"] + df["dur_us"]
    return df.reset_index(drop=True)


def node_class(op: str, kind: str, name: str) -> str:
    """Comparison class of a simulated node (its graph op, registry kind and name)."""
    if op in ("gemm", "grouped_gemm"):
        return "wgrad_gemm" if name.endswith(".wgrad") else op
    if op == "attention":
        return "attention_bwd" if name.endswith(".bwd") else "attention"
    if op in ("rmsnorm", "layernorm"):
        return "norm_bwd" if kind.endswith("-bwd") else "norm"
    if op == "residual_add":
        return "moe_sum" if name.split("/")[-1].startswith("moe_sum") else "residual_add"
    if op == "alltoall_dispatch":
        return "dispatch"
    if op == "alltoall_combine":
        return "combine"
    return {"moe_gating": "moe_gating", "quantize": "quantize", "swiglu": "swiglu",
            "rope": "rope"}.get(op, "other")


def simulated_nodes(result, unsimulated: dict[str, str] | None = None, graph=None) -> \
        pd.DataFrame:
    """The layer pair's kernels table with `pass`, `class`, `category`, plus one row per
    node left out of the simulation (`simulated_us` NaN, `reason`)."""
    k = result.kernels
    rows = pd.DataFrame({
        "node": k["name"], "op": k["op"], "kind": k["kind"], "stream": k["stream"],
        "start_us": k["start_us"], "end_us": k["end_us"], "simulated_us": k["time_us"],
        "pass": np.where(k["role"] == "forward", "forward", "backward"),
        "class": [node_class(o, str(kind), n) for o, kind, n
                  in zip(k["op"], k["kind"], k["name"], strict=True)],
        "reason": "",
    })
    extra = []
    for name, reason in (unsimulated or {}).items():
        node = graph.node(name) if graph is not None else None
        op = node.op if node is not None else ""
        role = node.role if node is not None else "dgrad"
        extra.append({"node": name, "op": op, "kind": "", "stream": getattr(node, "stream", ""),
                      "start_us": np.nan, "end_us": np.nan, "simulated_us": np.nan,
                      "pass": "forward" if role == "forward" else "backward",
                      "class": node_class(op, "", name), "reason": reason})
    if extra:
        rows = pd.concat([rows, pd.DataFrame(extra)], ignore_index=True)
    rows["category"] = rows["class"].map(CLASS_CATEGORY).fillna("other")
    return rows


def per_kernel(trace: pd.DataFrame, nodes: pd.DataFrame, layers: int = LAYERS) -> pd.DataFrame:
    """Trace kernels paired with simulated nodes where a (pass, class) has as many kernels
    as simulated nodes x `layers` (see the module docstring); one row per trace kernel.
    A kernel paired with a node left out of the simulation keeps the node's name but is not
    `matched` (no simulated time, no error)."""
    rows = []
    for (pas, cls), group in trace.groupby(["pass", "class"], sort=True):
        sim = nodes[(nodes["pass"] == pas) & (nodes["class"] == cls)]
        order = TRACE_ORDER.get((pas, cls))
        if order is not None:
            rank = [_order_of(name, order) for name in sim["node"]]
            sim = sim.iloc[np.argsort(rank, kind="stable")]
        paired = cls != "other" and len(sim) > 0 and len(group) == len(sim) * layers
        sim_rows = list(sim.itertuples()) * layers
        for i, kernel in enumerate(group.itertuples()):
            node = sim_rows[i] if paired else None
            simulated = float(node.simulated_us) if node is not None else np.nan
            timed = bool(np.isfinite(simulated))
            rows.append({
                "pass": pas, "class": cls,
                "category": kernel.category if isinstance(kernel.category, str)
                else "unmatched",
                "index": i, "trace_kernel": kernel.rule if isinstance(kernel.rule, str)
                else kernel.name[:60],
                "stream": int(kernel.stream), "measured_us": float(kernel.dur_us),
                "node": node.node if node is not None else None,
                "simulated_us": simulated,
                "error_pct": 100.0 * (simulated - kernel.dur_us) / kernel.dur_us
                if timed and kernel.dur_us > 0 else np.nan,
                "matched": timed,
            })
    return pd.DataFrame(rows, columns=list(KERNEL_COLUMNS))


def _order_of(name: str, suffixes: tuple[str, ...]) -> int:
    """Position in `suffixes` of `name` without its micro-batch prefix; unlisted names go
    last."""
    base = name.split("/")[-1]
    return next((i for i, suffix in enumerate(suffixes) if base == suffix), len(suffixes))


def per_class(trace: pd.DataFrame, nodes: pd.DataFrame, layers: int = LAYERS) -> pd.DataFrame:
    """Per (pass, class): kernel counts and summed time on both sides, error % of the sums."""
    measured = trace.groupby(["pass", "class"]).agg(trace_kernels=("dur_us", "size"),
                                                    measured_us=("dur_us", "sum"))
    sim = nodes.groupby(["pass", "class"]).agg(
        simulated_nodes=("node", "size"),
        simulated_us=("simulated_us", lambda s: s.sum(min_count=1)),
        unsimulated=("simulated_us", lambda s: int(s.isna().sum())))
    sim["simulated_nodes"] *= layers
    sim["simulated_us"] *= layers
    sim["unsimulated"] *= layers
    table = measured.join(sim, how="outer").reset_index()
    table["category"] = table["class"].map(CLASS_CATEGORY).fillna("other")
    table["error_pct"] = 100.0 * (table["simulated_us"] - table["measured_us"]) / \
        table["measured_us"]
    return table


def per_category(trace: pd.DataFrame, nodes: pd.DataFrame, layers: int = LAYERS) -> \
        pd.DataFrame:
    """Per category (the class's where the kernel has one, e.g. the cuBLAS gating GEMM
    counts as moe_routing as its simulated node does; else the mapping's): measured and
    simulated summed kernel time, error % (NaN where
    nothing was simulated), the measured time of kernels with no simulated class, the
    nodes (x `layers`) of the category left out of the simulation, and the like-for-like
    sums and error (`covered_*`: only the (pass, class) groups simulated in full)."""
    cat = trace["class"].map(CLASS_CATEGORY).fillna(trace["category"]).fillna("unmatched")
    measured = trace.assign(category=cat).groupby("category").agg(
        trace_kernels=("dur_us", "size"), measured_us=("dur_us", "sum"))
    without = trace[trace["class"] == "other"].assign(category=cat).groupby("category")[
        "dur_us"].sum().rename("measured_without_counterpart_us")
    sim = nodes.groupby("category")["simulated_us"].sum(min_count=1).rename(
        "simulated_us") * layers
    unsimulated = nodes["simulated_us"].isna().groupby(nodes["category"]).sum().rename(
        "unsimulated_nodes") * layers
    table = measured.join(without, how="left").join(sim, how="outer").join(
        unsimulated, how="left").fillna({"measured_without_counterpart_us": 0.0,
                                         "trace_kernels": 0, "measured_us": 0.0,
                                         "unsimulated_nodes": 0})
    table["error_pct"] = 100.0 * (table["simulated_us"] - table["measured_us"]) / \
        table["measured_us"].where(table["measured_us"] > 0)
    covered = _covered(trace, nodes, layers)
    table = table.join(covered, how="left").fillna({"covered_measured_us": 0.0,
                                                     "covered_simulated_us": 0.0})
    table["covered_error_pct"] = 100.0 * (table["covered_simulated_us"]
                                          - table["covered_measured_us"]) / \
        table["covered_measured_us"].where(table["covered_measured_us"] > 0)
    return table.reset_index().sort_values("measured_us", ascending=False, kind="stable")


def _covered(trace: pd.DataFrame, nodes: pd.DataFrame, layers: int) -> pd.DataFrame:
    """Per category, like for like: measured and simulated time of the (pass, class)
    groups whose simulated nodes all have a time (no kernel without a counterpart, no node
    left out)."""
    sim = nodes.groupby(["pass", "class"])["simulated_us"].agg(
        simulated_us="sum", complete=lambda s: bool(s.notna().all()))
    measured = trace.groupby(["pass", "class"])["dur_us"].sum().rename("measured_us")
    both = sim[sim["complete"]].join(measured, how="inner").reset_index()
    both["category"] = both["class"].map(CLASS_CATEGORY).fillna("other")
    return both.groupby("category").agg(covered_measured_us=("measured_us", "sum"),
                                        covered_simulated_us=("simulated_us", "sum")) * \
        np.array([1.0, float(layers)])


def overlaps(trace: pd.DataFrame, result, layers: int = LAYERS) -> pd.DataFrame:
    """Busy time per stream, union, overlap and span: trace vs the simulated chunk pair
    (the layer pair's figures x `layers`), in microseconds."""
    measured = stream_overlap(trace[["stream", "start_us", "dur_us"]])
    k = result.kernels
    sim_table = pd.DataFrame({"stream": k["stream"].map(STREAM_IDS).fillna(0).astype(int),
                              "start_us": k["start_us"], "dur_us": k["time_us"]})
    simulated = stream_overlap(sim_table)
    names = {v: k for k, v in STREAM_IDS.items()}
    rows = []
    for stream in sorted(set(measured.busy_us_by_stream) | set(simulated.busy_us_by_stream)):
        rows.append((f"stream {stream} ({names.get(stream, '?')}) busy",
                     measured.busy_us_by_stream.get(stream, 0.0),
                     layers * simulated.busy_us_by_stream.get(stream, 0.0)))
    rows += [("union (any stream busy)", measured.union_us, layers * simulated.union_us),
             ("overlap (2+ streams busy)", measured.overlap_us, layers * simulated.overlap_us),
             ("span", measured.span_us, layers * simulated.span_us)]
    table = pd.DataFrame(rows, columns=["what", "measured_us", "simulated_us"])
    table["error_pct"] = 100.0 * (table["simulated_us"] - table["measured_us"]) / \
        table["measured_us"].where(table["measured_us"] > 0)
    return table


def mape(kernels: pd.DataFrame) -> float:
    """Mean absolute error % over the paired kernels."""
    paired = kernels[kernels["matched"]]
    return float(paired["error_pct"].abs().mean()) if len(paired) else float("nan")
