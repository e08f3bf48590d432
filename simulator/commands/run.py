"""`ptxsim run`: the main job — one transformer layer simulated kernel by kernel.

With no arguments it runs the built-in default: a DeepSeek-V3 MoE layer (the first MoE
layer, `workloads.layer`'s default index), prefill of 4096 tokens, on `h800_sxm`, sampled
fidelity. Every node of the layer's kernel graph is timed as an op
(`simulator.simulate_workload`); the command prints one line per kernel (name, op, stream,
start, time, TFLOP/s, bound, share of the summed kernel time) and the layer's time, and
writes a run directory (`runs/<workload>-<phase>-<tokens>/` or `--out DIR`; checked before
simulating, written whole or not at all, files ptxsim did not write never touched: see
`reports.output_dir`; `--force` writes beside other files) through `reports.write_report`:
config.json (the resolved hardware config), kernels.csv/.parquet, stats.csv/.parquet,
report.html, trace.json, plots, plus run.json (strict JSON: the workload and the printed
summary, with the tensor-core MACs, the MACs the co-design units skip, the MMA
precision mix and the GEMM operand bytes dense / as stored, summed from the kernels table's
columns of `workloads.codesign.codesign_ops.op_counts`, and the kernels the sustained clock
under tensor load slowed, with their clocks). Collectives are simulated kernels
on the reserved communication SMs (`--set sm.comm_count=N`; with 0 they run on the compute
stream), an all-reduce across nodes is timed by link bandwidth; overlapping streams are
slowed by a measured pair per collective (see `simulator.workload`). Single kernels:
`ptxsim kernel FILE.ptx`; single ops: `ptxsim op KIND`.
Bad flags (unknown model, preset or `--set` key, impossible sizes) are an `InputError`
naming the flag: one line, exit status 2.
Units: microseconds, TFLOP/s, fractions.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from simulator.commands.models import add_config_arguments, config_from_args
from simulator.progress import add_quiet_argument

NAME = "run"
HELP = "simulate a transformer layer (default: DeepSeek-V3 MoE layer, prefill 4096 tokens)"
DEFAULT_PRESET = "h800_sxm"
DEFAULT_WORKLOAD = "deepseek-v3"
REPORT_PRECISION = {"e4m3": "fp8", "e5m2": "fp8", "bf16": "bf16", "f16": "fp16",
                    "f32": "tf32"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--model, --workload, --phase, --tokens, --batch, --seqlen, --kv-len, --ep, --tp,
    --layer-index, --fidelity, --out, --set, --json."""
    add_config_arguments(parser, DEFAULT_PRESET)
    parser.add_argument("--workload", default=DEFAULT_WORKLOAD, metavar="MODEL",
                        help="model config: deepseek-v3, llama3-8b, llama3-70b, gpt3-175b, "
                        f"bert-base (default {DEFAULT_WORKLOAD})")
    parser.add_argument("--phase", default="prefill", choices=("prefill", "decode", "train"),
                        help="prefill (default), decode or train (forward + backward)")
    parser.add_argument("--tokens", type=int, metavar="N",
                        help="tokens per rank (default: batch x seqlen, or 4096 per sequence "
                        "capped at the model's positions; decode: = batch)")
    parser.add_argument("--batch", type=int, default=1, metavar="B",
                        help="sequences (default 1)")
    parser.add_argument("--seqlen", type=int, metavar="S", help="tokens per sequence")
    parser.add_argument("--kv-len", type=int, metavar="L",
                        help="cached keys per sequence (decode default 4096)")
    parser.add_argument("--ep", type=int, default=1, metavar="N",
                        help="expert-parallel ranks (default 1)")
    parser.add_argument("--tp", type=int, default=1, metavar="N",
                        help="tensor-parallel ranks (default 1)")
    parser.add_argument("--layer-index", type=int, metavar="I",
                        help="layer of the model (default: the first MoE layer, else 0)")
    parser.add_argument("--fidelity", choices=("sampled", "full"), default="sampled",
                        help="sampled (default): steady-state waves extrapolated; full: "
                        "every CTA")
    parser.add_argument("--out", metavar="DIR",
                        help="run directory (default runs/<workload>-<phase>-<tokens>); a "
                        "folder holding files ptxsim did not write is refused")
    parser.add_argument("--force", action="store_true",
                        help="write into a folder that holds other files too (only "
                        "ptxsim's own files are replaced)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_quiet_argument(parser)


def _graph(args):
    import workloads
    from isa.errors import InputError

    try:
        return workloads.layer(args.workload, phase=args.phase, tokens=args.tokens,
                               batch=args.batch, seqlen=args.seqlen,
                               layer_index=args.layer_index, ep=args.ep, tp=args.tp,
                               kv_len=args.kv_len)
    except InputError as exc:
        raise InputError(f"--workload {args.workload}: {exc}") from None


def run(args: argparse.Namespace) -> int:
    """Build the layer graph, check the run directory, simulate, write it, print the
    summary."""
    import reports
    import simulator
    from reports.output_dir import check_output_dir
    from simulator.config import strict_json
    from simulator.progress import progress_bar

    config = config_from_args(args)
    graph = _graph(args)
    meta = graph.meta
    out = Path(args.out or Path("runs") / f"{meta['model']}-{meta['phase']}-{meta['tokens']}")
    check_output_dir(out, force=args.force)   # refused before minutes of simulation
    with progress_bar(len(graph.nodes), "simulating kernels", args.quiet) as progress:
        result = simulator.simulate_workload(graph, config=config, fidelity=args.fidelity,
                                             progress=progress)
    precision = REPORT_PRECISION.get(meta.get("gemm_dtype", "bf16"), "bf16")
    report = _report(args, result, out)
    text = strict_json(report, indent=1)
    reports.write_report(result, out, title=f"ptxsim run: {graph.name} on {args.model}",
                         precision=precision, extra_files={"run.json": text},
                         force=args.force)
    print(text if args.json else _text(report))
    return 0


def _report(args, result, out: Path) -> dict:
    import json

    from workloads.codesign.codesign_ops import totals

    summary = result.summary()
    plans = result.kernels[["fidelity_method", "fidelity_params", "simulated_cta_share",
                            "extrapolated_time_share"]]
    kernels = [{"name": r.name, "op": r.op, "stream": r.stream, "start_us": r.start_us,
                "time_us": r.time_us, "tflops": r.tflops, "bound": r.bound,
                "share": r.share, "model": r.model, "macs": r.macs,
                "macs_skipped": r.macs_skipped, "fidelity_method": p.fidelity_method,
                "fidelity_params": json.loads(p.fidelity_params or "{}"),
                "simulated_cta_share": p.simulated_cta_share,
                "extrapolated_time_share": p.extrapolated_time_share}
               for r, p in zip(summary.itertuples(), plans.itertuples(), strict=True)]
    return {"model": args.model, "workload": result.meta.get("model"),
            "graph": result.graph, "layer": result.meta, "fidelity": result.fidelity,
            "time_us": result.time_us, "kernel_time_us": float(summary["time_us"].sum()),
            "by_op": {op: float(t) for op, t in result.by_op()["time_us"].items()},
            "kernels": kernels, "units": totals(result.kernels),
            "sm_clock": _clock(result), "out": str(out),
            "left_out": "all-reduce across nodes timed by link bandwidth alone; contention "
                        "measured for collectives only (compute streams do not slow "
                        "each other)"}


def _fidelity_cell(k: dict) -> str:
    """A kernel row's fidelity method with its CTA and time shares (`-` where none)."""
    def pct(v) -> str:
        return "-" if v is None or v != v else f"{100 * v:.0f}%"
    return (f"{k['fidelity_method'] or '-'} ({pct(k['simulated_cta_share'])}, "
            f"{pct(k['extrapolated_time_share'])})")


def _clock(result) -> dict:
    """The preset's SM clock and the kernels the sustained clock under tensor load slowed
    (`simulate_op` re-times those launches; kernels table column `sm_clock_ghz`)."""
    preset = float(result.config.chip.clock_ghz)
    clocks = result.kernels.set_index("name")["sm_clock_ghz"].dropna()
    slowed = clocks[clocks < preset]
    return {"preset_ghz": preset, "slowed": {n: float(c) for n, c in slowed.items()}}


def _clock_lines(c: dict) -> list[str]:
    slowed = c["slowed"]
    if not slowed:
        return []
    return [f"SM clock {c['preset_ghz']:.2f} GHz; {len(slowed)} kernel(s) sustained "
            f"{min(slowed.values()):.2f}-{max(slowed.values()):.2f} GHz under tensor load "
            "(chip.power_cap_clock_ghz)"]


def _units_lines(u: dict) -> list[str]:
    """Tensor-core MACs, skipped MACs, precision mix and GEMM operand bytes (summed)."""
    if not u.get("macs"):
        return []
    mix = ", ".join(f"{p} {100 * m / u['macs']:.0f}%" for p, m in u["macs_by_precision"].items())
    stored = (f"; GEMM operands {u['operand_bytes'] / 1e6:.1f} MB dense, "
              f"{u['operand_bytes_stored'] / 1e6:.1f} MB as stored" if u["operand_bytes"] else "")
    return [f"tensor MACs {u['macs']:.4g}, skipped {u['macs_skipped']:.4g} "
            f"({100 * u['macs_skipped'] / u['macs']:.1f}%); precision mix {mix}{stored}"]


def _text(r: dict) -> str:
    layer = r["layer"]
    lines = [f"{r['graph']} ({layer['layer_kind']} layer, {layer['tokens']} tokens, "
             f"ep {layer['ep']}, tp {layer['tp']}) on {r['model']}, fidelity {r['fidelity']}",
             f"{'kernel':<36} {'op':<18} {'stream':<8} {'start_us':>10} {'time_us':>10} "
             f"{'TFLOP/s':>8} {'bound':<7} {'share':>6}  {'fidelity (CTAs sim., time extr.)'}"]
    for k in r["kernels"]:
        tflops = f"{k['tflops']:8.1f}" if k["tflops"] == k["tflops"] else f"{'-':>8}"
        bound = "link" if k["model"] == "link bandwidth" else k["bound"]
        lines.append(f"{k['name']:<36} {k['op']:<18} {k['stream']:<8} {k['start_us']:10.1f} "
                     f"{k['time_us']:10.1f} {tflops} {bound:<7} {100 * k['share']:5.1f}%  "
                     f"{_fidelity_cell(k)}")
    top = ", ".join(f"{op} {100 * t / r['kernel_time_us']:.0f}%"
                    for op, t in list(r["by_op"].items())[:4]) if r["kernel_time_us"] else ""
    lines += [f"layer time {r['time_us']:.1f} us (kernels summed {r['kernel_time_us']:.1f} us; "
              f"largest: {top})",
              *_units_lines(r["units"]), *_clock_lines(r["sm_clock"]),
              f"note: {r['left_out']}",
              f"wrote {r['out']}/ (report.html, kernels.csv, stats.csv, config.json, "
              "trace.json)"]
    return "\n".join(lines)
