"""Simulated co-design what-ifs on the standard workloads: layers at several sparsities, the
train step under the precision policies, softmax/attention with and without the LUT exp.

Everything here runs `simulator.simulate_workload` / `workloads.ops.simulate_op` on the
standard layer graphs (`workloads.layer`), so the co-design units act through the GEMM and
attention ops' hooks (`codesign_ops`) and the timing model (LUT `ex2`, L3), exactly as in
`ptxsim run --model deepseek_codesign`. Configs are named by `CONFIGS` (preset + overrides).

* `layer_row(model, tokens, config)`: one prefill layer; time (makespan), achieved TFLOPS
  (the graph's flops over the makespan), GEMM time and TFLOPS, MACs and MACs skipped
  (GEMM MACs x (1 - share of non-zero products) of each GEMM's ZCE sample, half of them
  under the 2:4 baseline; the time
  reflects the issued share, floored at `units.zce.min_issue_fraction`), HBM and L2 bytes (the
  workload table's, weighted like its times), L1/L3 bytes and the L3 hit rate (summed over
  the simulated launches' stats: for sampled ops those are the reduced launches, unweighted).
* `train_row(model, tokens, config, norms)`: the `train` graph of every layer at the
  precision the config's policy gives it (policy `gradient_norm`: the layer's norm from
  `norms`; layers with the same precision are simulated once), attention backward included
  (the `attention` op's backward kernels; `attention_bwd_ms` is their simulated time over
  the step). Throughput = tokens x layers / step time.
* `exp_rows(config_pairs)`: the softmax and attention ops with and without the LUT exp.

Units: microseconds, bytes, FLOP, TFLOP/s, tokens per second.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

import models
import workloads
from workloads.codesign import codesign_ops as co
from workloads.codesign.precision import GEMM_OPS, GradientNorms
from workloads.execute import simulate_workload
from workloads.graph import KernelGraph
from workloads.node_ops import GEMM_DTYPES
from workloads.ops import build_op, simulate_op

CONFIGS: dict[str, tuple[str, dict]] = {
    "h800_sxm": ("h800_sxm", {}),
    "h800_2:4": ("h800_sxm", {"units.tensor.sparse_2_4": True}),
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


def _row(result, graph, cfg) -> dict:
    k, stats = result.kernels, result.stats
    gemm = k[k["op"].isin(GEMM_OPS)]
    macs, skipped = macs_skipped(graph, cfg)
    l3_sectors = _stats_sum(stats, r"memory\.l3\.(?!store)", "sectors")
    return {"time_us": result.time_us, "flops": float(k["flops"].sum()),
            "tflops": float(k["flops"].sum()) / result.time_us / 1e6,
            "gemm_us": float(gemm["time_us"].sum()),
            "gemm_tflops": float(gemm["flops"].sum()) / float(gemm["time_us"].sum()) / 1e6,
            "attention_us": float(k.loc[k["op"] == "attention", "time_us"].sum()),
            "macs": macs, "macs_skipped": skipped,
            "hbm_bytes": float(np.nansum(k["hbm_bytes"])),
            "l2_bytes": float(np.nansum(k["l2_bytes"])),
            "output_bytes_stored": float(k["output_bytes_stored"].sum()),
            "compress_cycles": float(k["compress_cycles"].sum()),
            "l1_bytes": _stats_sum(stats, r"memory\.l1\.", "bytes"),
            "l3_bytes": _stats_sum(stats, r"memory\.l3\.", "bytes"),
            "l3_hit_rate": (_stats_sum(stats, r"memory\.l3\.(?!store)", "hit_sectors")
                            / l3_sectors if l3_sectors else np.nan)}


def layer_row(model: str, tokens: int, cfg, fidelity: str = "sampled",
              gemms_only: bool = False) -> dict:
    """One prefill layer of `model` at `tokens` on `cfg` (module docstring); `gemms_only`
    simulates only its GEMM nodes (what the ZCE changes), in their dependency order."""

    graph = workloads.layer(model, "prefill", tokens=tokens)
    if gemms_only:
        graph = without(graph, lambda n: n.op not in GEMM_OPS)[0]
    return {"model": model, "tokens": tokens, "nodes": "gemms" if gemms_only else "all",
            **_row(simulate_workload(graph, cfg, fidelity), graph, cfg)}


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
              layers: int | None = None, fidelity: str = "sampled") -> dict:
    """The train step of `layers` layers (default all) on `cfg` (module docstring)."""

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
    for key, (c, idx) in classes.items():
        graph = workloads.layer(model, "train", tokens=tokens, layer_index=0)
        res = simulate_workload(graph, c, fidelity)
        k = res.kernels
        bwd = (k["op"] == "attention") & (k["role"] != "forward")
        total["time_us"] += len(idx) * res.time_us
        total["attention_bwd_us"] += len(idx) * float(k.loc[bwd, "time_us"].sum())
        total["hbm_bytes"] += len(idx) * float(np.nansum(k["hbm_bytes"]))
        total["flops"] += len(idx) * float(k["flops"].sum())
        precisions[key] = len(idx)
    return {"model": model, "tokens": tokens, "layers": n_layers, "policy": policy,
            "precisions": ", ".join(f"{k} x{v}" for k, v in precisions.items()),
            "step_ms": total["time_us"] / 1e3,
            "tokens_per_s": tokens / (total["time_us"] / 1e6),
            "tflops": total["flops"] / total["time_us"] / 1e6,
            "hbm_gb": total["hbm_bytes"] / 1e9,
            "attention_bwd_ms": total["attention_bwd_us"] / 1e3}


def exp_rows(cfg_pairs: dict, softmax: dict, attention: dict,
             fidelity: str = "sampled") -> pd.DataFrame:
    """Softmax and attention op times per config of `cfg_pairs` (label -> config)."""

    rows = []
    for label, cfg in cfg_pairs.items():
        for kind, sizes in (("softmax", softmax), ("attention", attention)):
            res = simulate_op(build_op(kind, cfg, **sizes), cfg, fidelity)
            rows.append({"config": label, "op": kind, "time_us": float(res["time_us"])})
    return pd.DataFrame(rows)


def layer_table(model: str, tokens: int, sparsities=(0.0, 0.25, 0.5, 0.75),
                fidelity: str = "sampled", gemms_only: bool = False,
                on_row=None) -> pd.DataFrame:
    """`layer_row` on h800_sxm, its 2:4 baseline, deepseek_codesign with the units off, and
    deepseek_codesign at each ZCE sparsity (activations and weights alike)."""
    runs = [("h800_sxm", config("h800_sxm")), ("h800_sxm + 2:4", config("h800_2:4")),
            ("codesign, units off", config("codesign_off"))]
    runs += [(f"codesign, sparsity {s:g}", zce(s)) for s in sparsities]
    rows = []
    for label, c in runs:
        rows.append({"config": label, **layer_row(model, tokens, c, fidelity, gemms_only)})
        if on_row:
            on_row(rows[-1])
    return pd.DataFrame(rows)


TRAIN_RUNS = ("h800_sxm", "static", "per_kernel", "gradient_norm")


def train_table(model: str, tokens: int, layers: int | None = None, seed: int = 0,
                fidelity: str = "sampled", norms: GradientNorms | None = None,
                sigma: float = 1.5, runs=TRAIN_RUNS) -> pd.DataFrame:
    """`train_row` on h800_sxm and on deepseek_codesign under static bf16, DeepSeek's fp8
    recipe (per_kernel) and gradient_norm (`norms`, or log-normal norms around 1e-2 with
    log-spread `sigma` from `seed`); `runs` picks among `TRAIN_RUNS`."""
    n = layers or workloads.models.get_model(model).num_layers
    norms = norms or GradientNorms.generated(n, seed, sigma=sigma)
    configs = [("h800_sxm", config("h800_sxm")),
               ("codesign, static bf16", config("codesign", **{"units.vpcu.policy": "static"})),
               ("codesign, DeepSeek fp8 recipe",
                config("codesign", **{"units.vpcu.policy": "per_kernel"})),
               ("codesign, gradient_norm",
                config("codesign", **{"units.vpcu.policy": "gradient_norm"}))]
    return pd.DataFrame([{"config": label, **train_row(model, tokens, c, norms, n, fidelity)}
                         for key, (label, c) in zip(TRAIN_RUNS, configs, strict=True)
                         if key in runs])


def main(argv=None) -> None:
    """`python -m workloads.codesign.whatif layers|train|exp ...`: print the table (and
    write it as CSV with --csv)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m workloads.codesign.whatif")
    parser.add_argument("table", choices=("layers", "train", "exp"))
    parser.add_argument("--model", default="bert-base")
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--layers", type=int, default=None)
    parser.add_argument("--sparsity", type=float, nargs="+", default=[0.0, 0.25, 0.5, 0.75])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--norms", default=None,
                        help="train: per-layer gradient norms (CSV layer,grad_norm or .npy)")
    parser.add_argument("--sigma", type=float, default=1.5,
                        help="train: log-spread of the generated norms (default 1.5)")
    parser.add_argument("--runs", nargs="+", default=list(TRAIN_RUNS), choices=TRAIN_RUNS)
    parser.add_argument("--gemms-only", action="store_true",
                        help="layers: simulate only the GEMM nodes")
    parser.add_argument("--csv", default=None)
    args = parser.parse_args(argv)
    if args.table == "layers":
        table = layer_table(args.model, args.tokens, tuple(args.sparsity),
                            gemms_only=args.gemms_only, on_row=lambda r: print(r, flush=True))
    elif args.table == "train":
        norms = GradientNorms.from_file(args.norms) if args.norms else None
        table = train_table(args.model, args.tokens, args.layers, args.seed, norms=norms,
                            sigma=args.sigma, runs=tuple(args.runs))
    else:
        lut = {f"units.lut_exp.{k}": v                 # the deepseek_codesign LUT exp
               for k, v in config("codesign").units.lut_exp.to_dict().items()}
        table = exp_rows({"h800_sxm": config("h800_sxm"),
                          "h800_sxm + LUT exp": config("h800_sxm", **lut)},
                         {"rows": 4096, "cols": 1024},
                         {"batch": 1, "heads": 16, "seqlen": 1024, "headdim": 128})
    with pd.option_context("display.width", 250, "display.max_columns", 30):
        print(table.to_string(index=False))
    if args.csv:
        table.to_csv(args.csv, index=False)


if __name__ == "__main__":
    main()
