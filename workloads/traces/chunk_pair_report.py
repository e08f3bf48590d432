"""Write the DeepSeek-V3 chunk-pair comparison (`workloads.traces.chunk_pair`) to a folder.

    python -m workloads.traces.chunk_pair_report --out workloads/reference/deepseek_chunk_pair \
        --cache runs/deepseek_chunk_pair_ops.json [--no-contention] [--fidelity sampled]

Steps: every distinct op of the layer pair is simulated once, largest first, into a
resumable op cache (`workloads.traces.distinct_ops.fill_op_cache`; a killed run keeps
finished ops; `--workers N` processes; `--budget-min` stops handing out ops; results kept
under another config, e.g. from before a preset changed, are simulated again), nodes whose
op cannot be simulated (or was not reached) are taken out of the graph (their users wait
on their deps) and listed, then `simulator.simulate_workload` schedules the pair from the
cache (with contention pairs measured, and kept in the cache file, unless
`--no-contention`). The folder gets `kernels.csv` (per trace kernel, paired where the
counts agree), `classes.csv`, `categories.csv`, `overlap.csv`, `simulated_nodes.csv` (the
layer pair), `contention.csv` (the measured pairs, with contention) and `README.md`
(assumptions, figures, what is left out, this command). Units: microseconds.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from workloads.execute import simulate_workload
from workloads.traces import chunk_pair as cp
from workloads.traces.distinct_ops import (
    cached_only,
    fill_op_cache,
    missing,
    node_ops,
    save,
    without,
)

NOT_YET = ("not simulated in this run's time budget (largest ops first); rerun the command "
           "to fill the op cache")


def simulate(cache_path: str | Path, fidelity: str = "sampled", contention: bool = True,
             progress=None, workers: int = 1, budget_s: float | None = None):
    """(layer-pair WorkloadResult, unsimulated {node: reason}, graph, CPU seconds per op)."""

    config, graph = cp.chunk_pair_config(), cp.chunk_pair_graph()
    cache = fill_op_cache(graph, config, fidelity, cache_path, progress, workers=workers,
                          largest_first=True, budget_s=budget_s)
    unsimulated = dict(cache.unsimulated)
    for name in missing(graph, config, cache, fidelity):
        unsimulated[name] = NOT_YET
    runnable = without(graph, unsimulated)
    cached_only(runnable, config, cache, fidelity)   # scheduling simulates no op afresh
    result = simulate_workload(runnable, config=config, fidelity=fidelity,
                                         timeline=False, contention=contention,
                                         op_cache=cache.op_cache)
    if contention:   # keep the measured contention pairs for a rerun
        save(cache, cache_path)
    return result, unsimulated, graph, dict(cache.cpu_s)


def _cell(value) -> str:
    if isinstance(value, float | np.floating):
        return "" if value != value else f"{float(value):.1f}"
    return str(value)


def _fmt(table: pd.DataFrame) -> str:
    """A markdown table (floats to one decimal, NaN blank)."""
    lines = ["| " + " | ".join(map(str, table.columns)) + " |",
             "|" + "---|" * len(table.columns)]
    lines += ["| " + " | ".join(_cell(v) for v in row) + " |"
              for row in table.itertuples(index=False)]
    return "\n".join(lines)


def write(out: Path, result, unsimulated: dict, graph, cpu_s: dict, command: str,
          contention: bool) -> dict:
    """Write the tables and README.md into `out`; the headline figures as a dict."""
    trace = cp.trace_kernels()
    nodes = cp.simulated_nodes(result, unsimulated, graph)
    kernels = cp.per_kernel(trace, nodes)
    classes = cp.per_class(trace, nodes)
    categories = cp.per_category(trace, nodes)
    overlap = cp.overlaps(trace, result)
    out.mkdir(parents=True, exist_ok=True)
    kernels.to_csv(out / "kernels.csv", index=False)
    classes.to_csv(out / "classes.csv", index=False)
    categories.to_csv(out / "categories.csv", index=False)
    overlap.to_csv(out / "overlap.csv", index=False)
    pairs = getattr(result, "meta", {}).get("contention")
    pairs = pairs if isinstance(pairs, pd.DataFrame) else pd.DataFrame()
    if contention:
        pairs.to_csv(out / "contention.csv", index=False)
    nodes.to_csv(out / "simulated_nodes.csv", index=False)
    paired = kernels[kernels["matched"]]
    figures = {
        "trace_kernels": len(trace), "paired_kernels": len(paired),
        "paired_mape_pct": cp.mape(kernels),
        "paired_measured_us": float(paired["measured_us"].sum()),
        "paired_simulated_us": float(paired["simulated_us"].sum()),
        "trace_kernel_time_us": float(trace["dur_us"].sum()),
        "simulated_kernel_time_us": float(nodes["simulated_us"].sum()) * cp.LAYERS,
        "distinct_ops_cpu_s": float(sum(cpu_s.values())),
    }
    ops_total, ops_simulated = _op_counts(graph, unsimulated)
    figures.update(distinct_ops=ops_total, distinct_ops_simulated=ops_simulated)
    by_class = paired.groupby(["pass", "class"]).agg(
        kernels=("measured_us", "size"), measured_us=("measured_us", "sum"),
        simulated_us=("simulated_us", "sum"),
        mape_pct=("error_pct", lambda e: e.abs().mean())).reset_index()
    by_category = paired.assign(category=paired["class"].map(cp.CLASS_CATEGORY)).groupby(
        "category").agg(
        kernels=("measured_us", "size"), measured_us=("measured_us", "sum"),
        simulated_us=("simulated_us", "sum"),
        mape_pct=("error_pct", lambda e: e.abs().mean())).reset_index().sort_values(
        "measured_us", ascending=False, kind="stable")
    figures["paired_mape_pct_by_category"] = dict(zip(by_category["category"],
                                                      by_category["mape_pct"], strict=True))
    contention_section = _contention_text(pairs) if contention else ""
    left_out = "\n".join(f"* `{name}`: {reason}" for name, reason in unsimulated.items())
    text = f"""# DeepSeek-V3 DualPipe chunk pair: trace vs simulation (h800_sxm)

Regenerate (about {figures['distinct_ops_cpu_s'] / 60:.0f} min of CPU for the distinct ops on
one core; the op cache makes a rerun cheap):

    {command}

Reference: `../shared/reference/deepseek_v3_train_trace.json` (DeepSeek's profile-data
`train.json`, rank 0 of 64: one forward chunk + one backward chunk, 4 MoE layers each,
EP64, TP1, 4K tokens, 20 communication SMs). Simulated: `workloads.traces.chunk_pair`
(its docstring states the assumptions): one DeepSeek-V3 MoE layer (layer 3) in `train`
phase, 4096 tokens per micro-batch, EP64, FP8 GEMMs with DeepSeek scaling, paired by
`dualpipe_pair`, on `h800_sxm` with `sm.comm_count = 20`, fidelity
`{result.fidelity}`, contention {'measured' if contention else 'off'}; each distinct op
simulated once ({ops_simulated} of the layer pair's {ops_total} distinct ops) and the layer
pair counted 4 times.

## Headline

* Trace kernels: {figures['trace_kernels']}; paired one-to-one with a simulated node:
  {figures['paired_kernels']} ({figures['paired_measured_us']:.0f} us measured,
  {figures['paired_simulated_us']:.0f} us simulated), MAPE {figures['paired_mape_pct']:.1f} %.
* Simulated nodes: {int(nodes['simulated_us'].notna().sum())} of {len(nodes)} in the layer
  pair ({len(unsimulated)} not simulated, listed at the end); the simulated sums, the
  schedule and the overlap figures below leave those out.
* Summed kernel time: measured {figures['trace_kernel_time_us']:.0f} us, simulated
  {figures['simulated_kernel_time_us']:.0f} us (communication kernels in the trace include
  waiting for peers).

Paired kernels per category (MAPE over the kernels):

{_fmt(by_category)}

## Per category (summed kernel time; `categories.csv`)

`covered_*`: only the (pass, class) groups whose nodes were all simulated, like for like.

{_fmt(categories)}

## Why attention and communication read low

{_causes(trace, classes, kernels, categories, overlap, unsimulated)}

## Overlap of the streams (`overlap.csv`)

{_fmt(overlap)}

{contention_section}## Paired kernels per class (`kernels.csv` has every kernel)

{_fmt(by_class)}

## Per class, both sides (`classes.csv`)

Classes whose kernel counts differ (recomputed forward ops in the backward, per-expert
weight-gradient launches, casts fused differently, DeepEP notify kernels) are compared by
their sums only.

{_fmt(classes)}

## Not simulated

{left_out or '* nothing'}
* Kernels with no simulated counterpart (class `other`: layout copies and transposes,
  PyTorch element-wise/reduction kernels, memcpy/memset, setup) count as measured time only.
"""
    (out / "README.md").write_text(text)
    return figures


def _op_counts(graph, unsimulated: dict) -> tuple[int, int]:
    """(distinct ops of the layer pair, those simulated: with a node not left out)."""
    keys = {name: op.key for name, op in node_ops(graph, cp.chunk_pair_config()).items()}
    simulated = {key for name, key in keys.items() if name not in unsimulated}
    return len(set(keys.values())), len(simulated)


def _contention_text(pairs: pd.DataFrame) -> str:
    """The measured contention pairs (`contention.csv`) as a README section."""
    if not len(pairs):
        return "## Contention\n\nNo collective overlapped a compute node: nothing measured.\n\n"
    cols = ["comm_node", "partner", "beside", "overlap_us", "compute_alone_us",
            "compute_beside_us", "comm_alone_us", "comm_beside_us", "compute_stretch",
            "comm_stretch"]
    table = pairs[cols].copy()
    table["compute_stretch"] = table["compute_stretch"].map(lambda v: f"{v:.3f}")
    table["comm_stretch"] = table["comm_stretch"].map(lambda v: f"{v:.3f}")
    return ("## Contention (`contention.csv`)\n\nEach collective run beside its largest "
            "overlapping compute node (reduced launches, `simulator.runner.contention`); both "
            "sides' times stretched over the overlap in the schedule (`beside`: compute "
            "nodes overlapped).\n\n" + _fmt(table) + "\n\n")


def _pct(value) -> str:
    return "nothing simulated" if value != value else f"{value:+.1f} %"


def _ratio(value) -> str:
    return "(not simulated)" if value != value else f"{value:.2f}x"


def _sum(table: pd.DataFrame, column: str, **where) -> float:
    rows = table
    for key, value in where.items():
        rows = rows[rows[key].isin(value if isinstance(value, list) else [value])]
    return float(rows[column].sum())


def _forward_attention(measured_us: float, simulated_us: float) -> str:
    """The forward attention's line: the category without the backward's kernels."""
    if measured_us <= 0:
        return ""
    return (f"Forward attention alone: {_pct(100 * (simulated_us - measured_us) / measured_us)} "
            f"({simulated_us:.0f} us simulated vs {measured_us:.0f} us measured).")


def _causes(trace, classes, kernels, categories, overlap, unsimulated: dict) -> str:
    """The causes of the attention and communication errors, with their figures."""
    cat = categories.set_index("category")
    lines = []
    attn = cat.loc["attention"] if "attention" in cat.index else None
    bwd_us = _sum(classes, "measured_us", **{"class": "attention_bwd"})
    bwd_reason = next((r for n, r in unsimulated.items() if n.endswith("attention.bwd")), "")
    bwd_sim = _sum(classes, "simulated_us", **{"class": "attention_bwd"})
    if attn is not None and not bwd_reason and bwd_sim > 0:
        lines.append(
            f"* Attention ({_pct(attn['error_pct'])}): the trace's backward attention "
            f"(FlashAttention bwd + its pre/post kernels, {bwd_us:.0f} us, "
            f"{100 * bwd_us / attn['measured_us']:.0f} % of the category) is simulated as "
            f"{bwd_sim:.0f} us ({_pct(100 * (bwd_sim - bwd_us) / bwd_us)}). "
            + _forward_attention(attn["measured_us"] - bwd_us, attn["simulated_us"] - bwd_sim))
    elif attn is not None:
        lines.append(
            f"* Attention ({_pct(attn['error_pct'])}): the "
            "trace's backward attention "
            f"(FlashAttention bwd + its pre/post kernels, {bwd_us:.0f} us, "
            f"{100 * bwd_us / attn['measured_us']:.0f} % of the category) has no simulated "
            f"time ({bwd_reason or 'simulated'}). Nothing is simulated in its place; the node "
            "is taken out of the graph and its users wait on its dependencies, so the "
            "backward chain of the simulated schedule is shorter by that much. "
            + (f"Forward attention alone: {_pct(attn['covered_error_pct'])} "
               f"({attn['covered_simulated_us']:.0f} us simulated vs "
               f"{attn['covered_measured_us']:.0f} us measured)."
               if attn["covered_measured_us"] > 0 else
               "Forward attention was not simulated in this run either."))
    comm = cat.loc["communication"] if "communication" in cat.index else None
    if comm is not None:
        notify = trace[trace["class"] == "comm_notify"]["dur_us"]
        matched = kernels[kernels["matched"]]
        err = matched.groupby(["pass", "class"])["error_pct"].mean()

        def mean(pas: str, cls: str, column: str) -> float:
            rows = matched[(matched["class"] == cls) & (matched["pass"].isin(
                ["forward", "backward"] if pas == "both" else [pas]))]
            return float(rows[column].mean()) if len(rows) else float("nan")

        # the backward's dispatch sends BF16 gradients: twice the FP8 forward dispatch's
        # bytes, the bytes of a combine
        ratio = {(cls, col): mean(pas, cls, col) / mean("backward", "dispatch", col)
                 for pas, cls in (("forward", "dispatch"), ("both", "combine"))
                 for col in ("measured_us", "simulated_us")}
        view = overlap.set_index("what")
        comm_busy = view.loc[view.index.str.contains("comm"), ["measured_us",
                                                                "simulated_us"]].sum()
        span = view.loc["span"]
        lines.append(
            f"* Communication ({_pct(comm['error_pct'])}): (1) DeepEP's notify kernels, "
            f"{len(notify)} of them, {notify.sum():.0f} us "
            f"({100 * notify.sum() / comm['measured_us']:.0f} % of the category), have no "
            "simulated counterpart: they exchange per-rank token counts (a few KiB) and "
            f"wait at a barrier, so their {notify.min():.0f}-{notify.max():.0f} us are "
            f"waiting for the {cp.EP - 1} peers. (2) Trace times of dispatch and combine "
            "hold waiting for peers too: the forward's FP8 dispatch moves about half the bytes of "
            "the backward's BF16 dispatch yet takes "
            f"{_ratio(ratio['dispatch', 'measured_us'])} its time measured "
            f"({_ratio(ratio['dispatch', 'simulated_us'])} simulated), and a combine, which "
            "moves that BF16 dispatch's bytes and ends when the slowest rank's experts have "
            f"sent, {_ratio(ratio['combine', 'measured_us'])} measured "
            f"({_ratio(ratio['combine', 'simulated_us'])} simulated). The simulation runs "
            "rank 0 with every peer ready; mean error per kernel: forward dispatch "
            f"{_pct(err.get(('forward', 'dispatch'), np.nan))}, backward dispatch "
            f"{_pct(err.get(('backward', 'dispatch'), np.nan))}, forward combine "
            f"{_pct(err.get(('forward', 'combine'), np.nan))}, backward combine "
            f"{_pct(err.get(('backward', 'combine'), np.nan))}. "
            f"(3) The comm stream is busy {comm_busy['measured_us']:.0f} us of the "
            f"trace's {span['measured_us']:.0f} us span "
            f"({100 * comm_busy['measured_us'] / span['measured_us']:.0f} %), "
            f"{comm_busy['simulated_us']:.0f} us of the simulated "
            f"{span['simulated_us']:.0f} us. Like for like (dispatch and combine only): "
            f"{_pct(comm['covered_error_pct'])}.")
    return "\n".join(lines) or "* nothing simulated in these categories"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workloads.traces.chunk_pair_report",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="workloads/reference/deepseek_chunk_pair")
    parser.add_argument("--cache", default="runs/deepseek_chunk_pair_ops.json")
    parser.add_argument("--fidelity", default="sampled", choices=("sampled", "full"))
    parser.add_argument("--no-contention", action="store_true")
    parser.add_argument("--workers", type=int, default=1,
                        help="processes simulating distinct ops (default 1)")
    parser.add_argument("--budget-min", type=float, metavar="MIN",
                        help="stop starting new ops after MIN minutes of wall time; the "
                        "rest are listed as not simulated (a rerun continues)")
    args = parser.parse_args(argv)
    start = time.time()

    def progress(name, cpu, err):
        print(f"{time.time() - start:8.1f} s  {name:45s} {cpu:7.1f} s CPU {err or ''}",
              flush=True)

    result, unsimulated, graph, cpu_s = simulate(
        args.cache, args.fidelity, not args.no_contention, progress, args.workers,
        None if args.budget_min is None else 60.0 * args.budget_min)
    command = ("python -m workloads.traces.chunk_pair_report --out " + args.out + " --cache "
               + args.cache + (" --no-contention" if args.no_contention else "")
               + ("" if args.fidelity == "sampled" else f" --fidelity {args.fidelity}"))
    figures = write(Path(args.out), result, unsimulated, graph, cpu_s, command,
                    not args.no_contention)
    print(figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
