"""Simulated co-design what-ifs on the standard workloads, each row with both sides of the
trade: time beside numerical error. Layers at several ZCE thresholds (and typed sparsities),
the train step under the precision policies, softmax/attention with and without the LUT exp,
the all-reduce with and without gradient compression.

Everything here runs `simulator.simulate_workload` / `workloads.ops.simulate_op` on the
standard layer graphs (`workloads.layer`), so the co-design units act through the GEMM and
attention ops' hooks (`codesign_ops`) and the timing model (LUT `ex2`, L3), exactly as in
`ptxsim run --model deepseek_codesign`. Configs are named by `CONFIGS` (preset + overrides).

* Error (`numerics.layer_error`, `ERROR_COLUMNS`): the model's reduced layer (`reduction`:
  the width divisor, tokens, FFN kind; `numerics.reduced_layer`) run on seeded data under the
  config's units against FP64: the GEMM precision the config (or its VPCU policy) gives,
  relative and max error of the layer output, the share of tokens whose classifier-head
  argmax changes, the softmax error of the exp unit alone, the share of zero activations the
  GEMMs ran on and the MACs the ZCE skips on them (`macs_skipped_measured`).
* Measured sparsity: with the ZCE on, the time side runs at the activation sparsity the
  error side measured (`activation_sparsity` = the MAC-weighted zero share of the reduced
  layer's GEMM activations at `units.zce.threshold`, applied to every GEMM of the graph),
  not at a typed ratio; a typed `sparsity` what-if prunes that share of each GEMM's
  smallest activations (and weights) on the error side.
* `layer_row(model, tokens, config)`: one prefill layer (or the nodes `keep` selects); time
  (makespan), achieved TFLOPS (the graph's flops over the makespan), GEMM time and TFLOPS
  (dense-equivalent: every product counted) and `gemm_tflops_issued` (only the products the
  units do, so a ZCE run cannot pass the peak), MACs and MACs skipped (GEMM MACs x (1 -
  share of non-zero products) of each GEMM's ZCE sample, half of them under the 2:4
  baseline; the time reflects the issued share, floored at `units.zce.min_issue_fraction`),
  HBM and L2 bytes (the workload table's, weighted like its times), L1/L3 bytes and the L3
  hit rate (summed over the simulated launches' stats: for sampled ops those are the reduced
  launches, unweighted).
* `train_row(model, tokens, config, norms)`: the `train` graph of every layer at the
  precision the config's policy gives it (policy `gradient_norm`: the layer's norm from
  `norms`, by default measured by the backward pass of a seeded numpy MLP with one hidden
  layer per model layer, `numerics.mlp_gradient_norms`; layers with the same precision are
  simulated once), attention backward included (the `attention` op's backward kernels;
  `attention_bwd_ms` is their simulated time over the step). Throughput = tokens x layers /
  step time. Error: the forward error of the reduced layer at each layer's precision, mean
  over the step's layers (max for `max_abs_error`); backward-pass error is left out.
* `exp_rows(config_pairs)`: the softmax and attention ops with and without the LUT exp, with
  the softmax error of the table (`units.lut_exp.entries`, `interpolation`) on the reduced
  layer's FP64 attention scores and the layer's error.
* `compress_rows(config)`: the all-reduce with and without top-k + 4-bit compression, and
  the error of the running compressed sum after N steps of a seeded gradient stream, with
  and without error feedback (`numerics.compressed_allreduce_error`).
* 2:4 baselines: `h800_2:4` at the rate an H100 measured (`TWO_FOUR_MEASURED`, 1.45x),
  `h800_2:4_datasheet` at the preset's 2x; their error is that of pruning 2 of every 4
  weights without retraining.

Units: microseconds, bytes, FLOP, TFLOP/s, tokens per second; errors as `numerics`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np
import pandas as pd

import models
import workloads
from isa.errors import InputError
from workloads.codesign import codesign_ops as co
from workloads.codesign import numerics as N
from workloads.codesign.precision import GEMM_OPS, GradientNorms
from workloads.execute import simulate_workload
from workloads.graph import KernelGraph, KernelNode
from workloads.node_ops import GEMM_DTYPES
from workloads.ops import build_op, simulate_op

TWO_FOUR_MEASURED = 1770 / 1217
"""mma.sp over mma.sync, dense-equivalent FMA/clk/SM at 16 warps/SM on an H100 SXM
(`workloads.codesign.mma_sp_probe`): 1.45x, against the datasheet's 2x (the Hopper presets
time 2:4 at the measured rate)."""
TWO_FOUR_DATASHEET = 2.0
"""The datasheet's 2:4 rate over dense (H100 SXM: 1978.9 / 989.4 BF16 TFLOPS), a what-if."""
CONFIGS: dict[str, tuple[str, dict]] = {
    "h800_sxm": ("h800_sxm", {}),
    "h800_2:4": ("h800_sxm", {"units.tensor.sparse_2_4": True,
                              "units.tensor.sparse_rate_multiplier": TWO_FOUR_MEASURED}),
    "h800_2:4_datasheet": ("h800_sxm", {"units.tensor.sparse_2_4": True,
                                        "units.tensor.sparse_rate_multiplier":
                                            TWO_FOUR_DATASHEET}),
    "codesign_off": ("deepseek_codesign", {"units.vpcu.enabled": False,
                                           "units.zce.enabled": False,
                                           "units.lut_exp.enabled": False,
                                           "l3.enabled": False}),
    "codesign": ("deepseek_codesign", {}),
}


def config(name: str, **overrides):
    """The config `name` of `CONFIGS` (or a preset name) with dotted `overrides`."""
    preset, base = CONFIGS.get(name, (name, {}))
    return models.load_preset(preset, {**base, **overrides} or None)


def zce(sparsity: float, base: str = "codesign", weight: float | None = None):
    """`base` with ZCE activation sparsity `sparsity` and weight sparsity `weight` (same)."""
    return config(base, **{"units.zce.activation_sparsity": sparsity,
                           "units.zce.weight_sparsity": sparsity if weight is None else weight})


def _stats_sum(stats: pd.DataFrame, pattern: str, stat: str) -> float:
    if not len(stats):
        return 0.0
    rows = stats[stats["component"].str.match(pattern) & (stats["stat"] == stat)]
    return float(rows["value"].sum())


def macs_skipped(graph: KernelGraph, cfg) -> tuple[float, float]:
    """(GEMM MACs, MACs the ZCE skips) of `graph` on `cfg`."""
    macs = skipped = 0.0
    for node in graph.nodes:
        if node.op not in GEMM_OPS:
            continue
        m = node.flops / 2
        macs += m
        if co.active(cfg):
            skipped += m * (1 - co.codesign_info(cfg, "gemm",
                                                 GEMM_DTYPES[node.args["dtype"]])["raw_share"])
    return macs, skipped


ERROR_COLUMNS = ("reduction", "precision", "rel_error", "max_abs_error", "argmax_change",
                 "softmax_rel_error", "activation_zeros", "macs_skipped_measured",
                 "zce_threshold")
"""The error side of every what-if row (module docstring)."""


def error_row(cfg, layer: N.ReducedLayer, seed: int = 0, sparsity: float = 0.0) -> dict:
    """The `ERROR_COLUMNS` of `cfg` on the reduced `layer` (`sparsity`: a typed what-if)."""
    e = N.layer_error(cfg, layer, seed, sparsity)
    return {"reduction": layer.reduction, "precision": e["precision"],
            **{k: e[k] for k in ("rel_error", "max_abs_error", "argmax_change",
                                 "softmax_rel_error", "activation_zeros")},
            "macs_skipped_measured": e["macs_skipped_share"], "zce_threshold": e["zce_threshold"]}


def timed_config(cfg, errors: dict, typed: bool):
    """`cfg` for the time side: with the ZCE on and no typed sparsity, the activation
    sparsity the error side measured (weights as configured)."""
    if typed or not cfg.units.zce.enabled:
        return cfg
    return cfg.with_overrides({"units.zce.activation_sparsity":
                               round(errors["activation_zeros"], 4)})


def _row(result, graph, cfg) -> dict:
    k, stats = result.kernels, result.stats
    gemm = k[k["op"].isin(GEMM_OPS)]
    macs, skipped = macs_skipped(graph, cfg)
    gemm_us = float(gemm["time_us"].sum())
    l3_sectors = _stats_sum(stats, r"memory\.l3\.(?!store)", "sectors")
    return {"time_us": result.time_us, "flops": float(k["flops"].sum()),
            "tflops": float(k["flops"].sum()) / result.time_us / 1e6,
            "gemm_us": gemm_us,
            "gemm_tflops": float(gemm["flops"].sum()) / gemm_us / 1e6 if gemm_us else np.nan,
            "gemm_tflops_issued": (float(gemm["flops"].sum()) - 2 * skipped) / gemm_us / 1e6
            if gemm_us else np.nan,
            "attention_us": float(k.loc[k["op"] == "attention", "time_us"].sum()),
            "macs": macs, "macs_skipped": skipped,
            "activation_sparsity": float(cfg.units.zce.activation_sparsity)
            if cfg.units.zce.enabled else 0.0,
            "hbm_bytes": float(np.nansum(k["hbm_bytes"])),
            "l2_bytes": float(np.nansum(k["l2_bytes"])),
            "output_bytes_stored": float(k["output_bytes_stored"].sum()),
            "compress_cycles": float(k["compress_cycles"].sum()),
            "l1_bytes": _stats_sum(stats, r"memory\.l1\.", "bytes"),
            "l3_bytes": _stats_sum(stats, r"memory\.l3\.", "bytes"),
            "l3_hit_rate": (_stats_sum(stats, r"memory\.l3\.(?!store)", "hit_sectors")
                            / l3_sectors if l3_sectors else np.nan)}


def layer_row(model: str, tokens: int, cfg, fidelity: str = "sampled",
              gemms_only: bool = False, sparsity: float | None = None, seed: int = 0,
              keep: Callable[[KernelNode], bool] | None = None) -> dict:
    """One prefill layer of `model` at `tokens` on `cfg`, time and error (module docstring);
    `gemms_only` simulates only its GEMM nodes (what the ZCE changes), in their dependency
    order; `keep(node)`, when given, selects the nodes simulated (named in `nodes`); the
    error is the whole reduced layer's either way; `sparsity` marks a typed ZCE sparsity
    what-if (`cfg` carries it)."""

    graph = workloads.layer(model, "prefill", tokens=tokens)
    nodes = "all"
    if gemms_only:
        graph, nodes = without(graph, lambda n: n.op not in GEMM_OPS)[0], "gemms"
    if keep is not None:
        names = [n.name for n in graph.nodes]
        graph = without(graph, lambda n: not keep(n))[0]
        if not graph.nodes:
            raise InputError(f"layer_row keep: selects none of the {model} layer's nodes "
                             f"(accepted: a predicate true for some of {', '.join(names)})")
        nodes = ", ".join(n.name for n in graph.nodes)
    errors = error_row(cfg, N.reduced_layer(model, tokens), seed, sparsity or 0.0)
    timed = timed_config(cfg, errors, sparsity is not None)
    return {"model": model, "tokens": tokens, "nodes": nodes,
            **_row(simulate_workload(graph, timed, fidelity), graph, timed), **errors}


def without(graph: KernelGraph, drop) -> tuple[KernelGraph, list]:
    """(`graph` less the nodes `drop(node)` selects, their dependencies passed on to the
    nodes that waited for them; the dropped nodes)."""
    gone = {n.name: n for n in graph.nodes if drop(n)}
    deps = {name: n.deps for name, n in gone.items()}

    def resolve(names) -> tuple[str, ...]:
        out: list[str] = []
        for d in names:
            out += resolve(deps[d]) if d in deps else [d]
        return tuple(dict.fromkeys(out))

    kept = [dataclasses.replace(n, deps=resolve(n.deps)) for n in graph.nodes
            if n.name not in gone]
    return KernelGraph(graph.name, tuple(kept), dict(graph.meta)), list(gone.values())


def train_row(model: str, tokens: int, cfg, norms: GradientNorms | None = None,
              layers: int | None = None, fidelity: str = "sampled", seed: int = 0) -> dict:
    """The train step of `layers` layers (default all) on `cfg`, time and error (module
    docstring)."""

    n_layers = layers or workloads.models.get_model(model).num_layers
    policy = cfg.units.vpcu.policy if cfg.units.vpcu.enabled else "dtype"
    per_layer = [norms[i] if policy == "gradient_norm" else None for i in range(n_layers)]
    classes: dict = {}
    for i, norm in enumerate(per_layer):
        c = cfg if norm is None else cfg.with_overrides({"units.vpcu.grad_norm": norm})
        key = co.precision_of(c, "gemm", "bf16") if c.units.vpcu.enabled else "stock"
        classes.setdefault(key, [c, []])[1].append(i)
    total = {"time_us": 0.0, "hbm_bytes": 0.0, "flops": 0.0, "attention_bwd_us": 0.0}
    precisions = {}
    reduced = N.reduced_layer(model, tokens)
    err = {"rel_error": 0.0, "max_abs_error": 0.0, "argmax_change": 0.0}
    for key, (c, idx) in classes.items():
        graph = workloads.layer(model, "train", tokens=tokens, layer_index=0)
        res = simulate_workload(graph, c, fidelity)
        k = res.kernels
        bwd = (k["op"] == "attention") & (k["role"] != "forward")
        total["time_us"] += len(idx) * res.time_us
        total["attention_bwd_us"] += len(idx) * float(k.loc[bwd, "time_us"].sum())
        total["hbm_bytes"] += len(idx) * float(np.nansum(k["hbm_bytes"]))
        total["flops"] += len(idx) * float(k["flops"].sum())
        e = N.layer_error(c, reduced, seed)
        err["rel_error"] += len(idx) / n_layers * e["rel_error"]
        err["argmax_change"] += len(idx) / n_layers * e["argmax_change"]
        err["max_abs_error"] = max(err["max_abs_error"], e["max_abs_error"])
        precisions[e["precision"] if key == "stock" else key] = len(idx)
    return {"model": model, "tokens": tokens, "layers": n_layers, "policy": policy,
            "precisions": ", ".join(f"{k} x{v}" for k, v in precisions.items()),
            "step_ms": total["time_us"] / 1e3,
            "tokens_per_s": tokens / (total["time_us"] / 1e6),
            "tflops": total["flops"] / total["time_us"] / 1e6,
            "hbm_gb": total["hbm_bytes"] / 1e9,
            "attention_bwd_ms": total["attention_bwd_us"] / 1e3,
            "reduction": reduced.reduction, **err}


def exp_rows(cfg_pairs: dict, softmax: dict, attention: dict,
             fidelity: str = "sampled", layer: N.ReducedLayer | None = None,
             seed: int = 0) -> pd.DataFrame:
    """Softmax and attention op times per config of `cfg_pairs` (label -> config), with
    the error columns of `layer` (default: bert-base's reduced layer at 128 tokens)."""

    layer = layer or N.reduced_layer("bert-base", 128)
    rows = []
    for label, cfg in cfg_pairs.items():
        errors = error_row(cfg, layer, seed)
        lut = cfg.units.lut_exp
        table = f"{lut.entries} entries, {lut.interpolation}" if lut.enabled else "exact exp"
        for kind, sizes in (("softmax", softmax), ("attention", attention)):
            res = simulate_op(build_op(kind, cfg, **sizes), cfg, fidelity)
            rows.append({"config": label, "op": kind, "time_us": float(res["time_us"]),
                         "exp": table, **{k: errors[k] for k in
                                          ("softmax_rel_error", "rel_error", "argmax_change",
                                           "reduction")}})
    return pd.DataFrame(rows)


def layer_table(model: str, tokens: int, thresholds=(0.0, 0.1, 0.25, 0.5), sparsities=(),
                fidelity: str = "sampled", gemms_only: bool = False, seed: int = 0,
                on_row=None) -> pd.DataFrame:
    """`layer_row` on h800_sxm, its 2:4 baselines (measured and datasheet rate),
    deepseek_codesign with the units off, deepseek_codesign at each ZCE threshold (sparsity
    measured) and at each typed sparsity (activations and weights alike)."""
    runs = [("h800_sxm", config("h800_sxm"), None),
            ("h800_sxm + 2:4 (1.45x measured)", config("h800_2:4"), None),
            ("h800_sxm + 2:4 (2x datasheet)", config("h800_2:4_datasheet"), None),
            ("codesign, units off", config("codesign_off"), None)]
    runs += [(f"codesign, ZCE threshold {t:g}", config("codesign", **{"units.zce.threshold": t}),
              None) for t in thresholds]
    runs += [(f"codesign, typed sparsity {s:g}", zce(s), s) for s in sparsities]
    rows = []
    for label, c, typed in runs:
        rows.append({"config": label, **layer_row(model, tokens, c, fidelity, gemms_only,
                                                  typed, seed)})
        if on_row:
            on_row(rows[-1])
    return pd.DataFrame(rows)


TRAIN_RUNS = ("h800_sxm", "static", "per_kernel", "gradient_norm")
NORM_SOURCES = ("backward", "lognormal")


def train_norms(layers: int, seed: int = 0, source: str = "backward", steps: int = 200,
                sigma: float = 1.5) -> GradientNorms:
    """Per-layer gradient norms: `backward` measured on a seeded MLP with `layers` hidden
    layers after `steps` SGD steps (`numerics.mlp_gradient_norms`), or `lognormal` draws
    around 1e-2 with log-spread `sigma`."""
    if source == "backward":
        return N.mlp_gradient_norms(layers, steps=steps, seed=seed)
    if source == "lognormal":
        return GradientNorms.generated(layers, seed, sigma=sigma)
    raise ValueError(f"norm source {source!r} (accepted: {', '.join(NORM_SOURCES)})")


def train_table(model: str, tokens: int, layers: int | None = None, seed: int = 0,
                fidelity: str = "sampled", norms: GradientNorms | None = None,
                norm_source: str = "backward", norm_steps: int = 200, sigma: float = 1.5,
                runs=TRAIN_RUNS) -> pd.DataFrame:
    """`train_row` on h800_sxm and on deepseek_codesign under static bf16, DeepSeek's fp8
    recipe (per_kernel) and gradient_norm (`norms`, or `train_norms(..., norm_source,
    norm_steps, sigma)` from `seed`); `runs` picks among `TRAIN_RUNS`."""
    n = layers or workloads.models.get_model(model).num_layers
    label = "given" if norms else (f"backward, {norm_steps} SGD steps"
                                   if norm_source == "backward" else f"lognormal, {sigma:g}")
    norms = norms or train_norms(n, seed, norm_source, norm_steps, sigma)
    configs = [("h800_sxm", config("h800_sxm")),
               ("codesign, static bf16", config("codesign", **{"units.vpcu.policy": "static"})),
               ("codesign, DeepSeek fp8 recipe",
                config("codesign", **{"units.vpcu.policy": "per_kernel"})),
               ("codesign, gradient_norm",
                config("codesign", **{"units.vpcu.policy": "gradient_norm"}))]
    return pd.DataFrame([{"config": lbl, "norms": label,
                          **train_row(model, tokens, c, norms, n, fidelity, seed)}
                         for key, (lbl, c) in zip(TRAIN_RUNS, configs, strict=True)
                         if key in runs])


def compress_rows(cfg, ranks: int = 8, nbytes: int = 64 << 20, steps=(1, 10, 50),
                  stream_ranks: int = 4, stream_values: int = 8 * 2048, seed: int = 0,
                  fidelity: str = "sampled") -> pd.DataFrame:
    """The all-reduce of `nbytes` f32 gradients per rank over `ranks` GPUs, uncompressed and
    top-k + 4-bit (time), beside the error of the running compressed sum after each of
    `steps` steps of a seeded stream of `stream_values` gradients on `stream_ranks` ranks,
    with and without error feedback (a reduced all-reduce: the format works per 2048-value
    block, so its error does not depend on the buffer size)."""
    grads = N.gradient_stream(max(steps), stream_ranks, stream_values, seed)
    errors = {ef: N.compressed_allreduce_error(grads, ef) for ef in (True, False)}
    times = {c: float(simulate_op(build_op("allreduce", cfg, ranks=ranks, bytes=nbytes,
                                           compress=c), cfg, fidelity)["time_us"])
             for c in ("none", "topk4bit")}
    rows = [{"compress": "none", "error_feedback": "", "steps": n, "time_us": times["none"],
             "wire_share": 1.0, "cumulative_rel_error": 0.0, "step_rel_error": 0.0}
            for n in steps[:1]]
    for ef in (True, False):
        e = errors[ef]
        rows += [{"compress": "topk4bit", "error_feedback": "yes" if ef else "no", "steps": n,
                  "time_us": times["topk4bit"], "wire_share": e["wire_share"],
                  "cumulative_rel_error": float(e["cumulative_rel_error"][n - 1]),
                  "step_rel_error": float(e["step_rel_error"][n - 1])} for n in steps]
    frame = pd.DataFrame(rows)
    frame.attrs["reduction"] = (f"error on a seeded stream of {stream_values} f32 gradients "
                                f"x {stream_ranks} ranks; time of {nbytes} bytes x {ranks} "
                                "ranks")
    return frame


def main(argv=None) -> None:
    """`python -m workloads.codesign.whatif layers|train|exp|compress ...`: print the table
    (and write it as CSV with --csv)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m workloads.codesign.whatif")
    parser.add_argument("table", choices=("layers", "train", "exp", "compress"))
    parser.add_argument("--model", default="bert-base")
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--layers", type=int, default=None)
    parser.add_argument("--threshold", type=float, nargs="*", default=[0.0, 0.1, 0.25, 0.5],
                        help="layers: ZCE thresholds (units.zce.threshold; sparsity measured)")
    parser.add_argument("--sparsity", type=float, nargs="*", default=[],
                        help="layers: typed ZCE sparsities (activations and weights)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--norms", default=None,
                        help="train: per-layer gradient norms (CSV layer,grad_norm or .npy)")
    parser.add_argument("--norm-source", default="backward", choices=NORM_SOURCES,
                        help="train: norms from an MLP backward pass or log-normal draws")
    parser.add_argument("--norm-steps", type=int, default=200,
                        help="train: SGD steps of the MLP before its norms are taken")
    parser.add_argument("--sigma", type=float, default=1.5,
                        help="train: log-spread of the log-normal norms (default 1.5)")
    parser.add_argument("--runs", nargs="+", default=list(TRAIN_RUNS), choices=TRAIN_RUNS)
    parser.add_argument("--gemms-only", action="store_true",
                        help="layers: simulate only the GEMM nodes")
    parser.add_argument("--steps", type=int, nargs="+", default=[1, 10, 50],
                        help="compress: steps after which the error is reported")
    parser.add_argument("--csv", default=None)
    args = parser.parse_args(argv)
    if args.table == "layers":
        table = layer_table(args.model, args.tokens, tuple(args.threshold),
                            tuple(args.sparsity), gemms_only=args.gemms_only, seed=args.seed,
                            on_row=lambda r: print(r, flush=True))
    elif args.table == "train":
        norms = GradientNorms.from_file(args.norms) if args.norms else None
        table = train_table(args.model, args.tokens, args.layers, args.seed, norms=norms,
                            norm_source=args.norm_source, norm_steps=args.norm_steps,
                            sigma=args.sigma, runs=tuple(args.runs))
    elif args.table == "compress":
        table = compress_rows(config("h800_sxm"), steps=tuple(args.steps), seed=args.seed)
    else:
        lut = {f"units.lut_exp.{k}": v                 # the deepseek_codesign LUT exp
               for k, v in config("codesign").units.lut_exp.to_dict().items()}
        table = exp_rows({"h800_sxm": config("h800_sxm"),
                          "h800_sxm + LUT exp": config("h800_sxm", **lut)},
                         {"rows": 4096, "cols": 1024},
                         {"batch": 1, "heads": 16, "seqlen": 1024, "headdim": 128},
                         layer=N.reduced_layer(args.model, args.tokens), seed=args.seed)
    reduction = table.attrs.get("reduction") or (table["reduction"].iloc[0]
                                                 if "reduction" in table else "")
    shown = table.drop(columns=["reduction"], errors="ignore")
    with pd.option_context("display.width", 250, "display.max_columns", 40):
        print(shown.to_string(index=False))
    print(f"error measured on: {reduction}")
    if args.csv:
        table.to_csv(args.csv, index=False)


if __name__ == "__main__":
    main()
