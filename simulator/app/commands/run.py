"""`ptxsim run`: the main job — one transformer layer simulated kernel by kernel, on one GPU
of a deployment.

With no arguments it runs DeepSeek-V3's prefill as DeepSeek deploys it
(`workloads/deployments/deepseek-v3-prefill.toml`): one GPU of EP32, TP1, 16K tokens of 4K
prompts in two micro-batches whose computation overlaps the other's dispatch and combine,
8 routed + 1 redundant expert per GPU, balanced routing, on `h800_sxm` with 20 SMs reserved
for communication (`sm.comm_count`, set by the deployment; `--set sm.comm_count=N` wins),
sampled fidelity. `--phase decode` runs the EP128 decode deployment (its RDMA all-to-all
holds no SMs), `--phase train` the EP64 DualPipe pair; `--deployment NAME|FILE.toml` names
one (`single-gpu`: one MoE layer on one GPU, EP1, no SM reserved; `--ep 1`, or a
`--workload` other than DeepSeek-V3, starts from it too). Explicit flags (`--workload`,
`--phase`, `--tokens`, `--batch`, `--seqlen`, `--kv-len`, `--ep`, `--tp`,
`--micro-batches`, `--model`) override the deployment's values: `--tokens` and `--batch`
count the whole GPU (all micro-batches; decode: requests), `--batch` defaults to the
deployment's sequences per GPU and `--seqlen` to its sequence length, and the rules of
`workloads.layer` (tokens = batch x seqlen) fill in the rest.

Every node of the GPU's kernel graph is timed as an op (`simulator.simulate_workload`); the
command prints one line per kernel (name, op, stream, start, time, TFLOP/s, bound, share of
the summed kernel time), the layer's time and, per micro-batch, its compute time, its
communication time and how much of that is hidden behind computation
(`workloads.deployments.micro_batch_overlap`), and writes a run directory
(`runs/<workload>-<phase>-<tokens>[-ep<N>][-mb<M>]/` or `--out DIR`; checked before
simulating, written whole or not at all, files ptxsim did not write never touched: see
`reports.output_dir`; `--force` writes beside other files) through `reports.write_report`:
config.json (the resolved hardware config), kernels.csv/.parquet, stats.csv/.parquet,
report.html, trace.json, plots, plus run.json (strict JSON: the workload, the deployment
(name, file, values, sources, overrides), the per-micro-batch overlap and the printed
summary, with the tensor-core MACs, the MACs the co-design units skip, the MMA
precision mix and the GEMM operand bytes dense / as stored, summed from the kernels table's
columns of `workloads.codesign.codesign_ops.op_counts`, the kernels the sustained clock
under tensor load slowed, with their clocks, and `numerics`).

Error beside time (`workloads.codesign.run_numerics`, `--numerics auto|on|off`, default
auto: computed when a co-design unit that changes numerics is on, i.e. the VPCU, the ZCE,
2:4 or the LUT exp; `--numerics-seed`): the model's reduced-width layer on seeded data
under the config's units against FP64 and against the stock precision, per op category
(gemm, attention, the whole layer with its head's argmax change); the kernels table gets
`error_category`, `rel_error`, `max_abs_error`, `argmax_change`, `rel_error_vs_stock` (a
`rel_err` column in the printed table), run.json a `numerics` section (reduction, seed,
reference, settings) and report.html a Numerics section. A stock run says "stock
precision, error not computed".

With the ZCE on and `units.zce.activation_sparsity_source` "measured" (the default), the run
first measures the activation sparsity of its model's reduced layer at `units.zce.threshold`
(`workloads.codesign.run_numerics.zce_sparsity`: same reduction and seed as the numerics,
whatever `--numerics` says) and times the layer at that share: config.json carries it as
`units.zce.activation_sparsity`, run.json's `zce_activation_sparsity` says where it came
from (source, threshold, typed value, measured share, reduction, seed), and a printed line
gives it. A `--set units.zce.activation_sparsity=X` with the source "measured" is an
`InputError` (the typed value would not be timed; `--set
units.zce.activation_sparsity_source=config` times it). Collectives are simulated kernels
on the reserved communication SMs (with 0 they run on the compute stream), an all-reduce
across nodes and an all-to-all that holds no SMs are timed by link bandwidth; overlapping
streams are slowed by a measured pair per collective (see `workloads.execute`). Single
kernels: `ptxsim kernel FILE.ptx`; single ops: `ptxsim op KIND`.
Op results are read from and saved to the on-disk op result cache
(`workloads.op_result_cache`: keyed by the op, the resolved config and the code version;
`--cache-dir DIR`, default `~/.cache/ptxsim/op-cache` or under `$XDG_CACHE_HOME`), so a
re-run of a finished run simulates nothing; `--no-cache` simulates every op afresh. run.json
says which kernels were read (`kernels[].cached`) and from where (`op_cache`: folder, code
version, entries read, missed and written; null with `--no-cache`). A re-run whose report
folder already holds this result's files (`reports.report_digest`: the same figures, config
and code version; every file present as written) keeps the folder as it is and says so
(`out_unchanged` in `--json`); with `--no-cache` the folder is always written.
Bad flags (unknown model, preset, deployment or `--set` key, impossible sizes) are an
`InputError` naming the flag: one line, exit status 2.
Units: microseconds, TFLOP/s, fractions.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import reports
import simulator
from isa.errors import InputError
from reports.output_dir import check_output_dir
from simulator.app.commands.models import add_config_arguments, config_from_args
from simulator.app.op_cache_options import add_cache_arguments, cache_from_args
from simulator.app.progress import add_quiet_argument, progress_bar
from simulator.framework.config import parse_overrides, strict_json
from workloads.codesign.codesign_ops import totals
from workloads.codesign.run_numerics import (
    KERNEL_ERROR_COLUMNS,
    NUMERICS_MODES,
    SPARSITY_KEY,
    NumericsSettings,
    kernel_error_columns,
    run_numerics,
    timed_config,
    zce_sparsity,
)
from workloads.codesign.whatif import TWO_FOUR_MEASURED
from workloads.deployments import (
    PHASE_DEPLOYMENTS,
    SINGLE_GPU,
    load_deployment,
    micro_batch_overlap,
)
from workloads.models import MODELS

NAME = "run"
HELP = ("simulate a transformer layer on one GPU of a deployment (default: DeepSeek-V3 "
        "prefill, EP32, two micro-batches, 20 comm SMs)")
DEFAULT_PRESET = "h800_sxm"
DEFAULT_WORKLOAD = "deepseek-v3"
COMM_COUNT_KEY = "sm.comm_count"
REPORT_PRECISION = {"e4m3": "fp8", "e5m2": "fp8", "bf16": "bf16", "f16": "fp16",
                    "f32": "tf32"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--deployment, --model, --workload, --phase, --tokens, --batch, --seqlen, --kv-len,
    --ep, --tp, --micro-batches, --layer-index, --fidelity, --out, --set, --json."""
    add_config_arguments(parser, DEFAULT_PRESET)
    parser.set_defaults(model=None)   # the deployment's preset unless --model names one
    parser.add_argument("--deployment", metavar="NAME|FILE",
                        help="deployment preset (workloads/deployments: deepseek-v3-prefill, "
                        "deepseek-v3-decode, deepseek-v3-train, single-gpu) or a .toml file "
                        "(default: DeepSeek-V3's for --phase; single-gpu with --ep 1 or "
                        "another --workload)")
    parser.add_argument("--workload", metavar="MODEL",
                        help="model config: deepseek-v3, llama3-8b, llama3-70b, gpt3-175b, "
                        f"bert-base (default: the deployment's, {DEFAULT_WORKLOAD})")
    parser.add_argument("--phase", choices=("prefill", "decode", "train"),
                        help="prefill (default), decode or train (forward + backward)")
    parser.add_argument("--tokens", type=int, metavar="N",
                        help="new tokens per GPU, all micro-batches (default: the "
                        "deployment's, or batch x seqlen; decode: = batch)")
    parser.add_argument("--batch", type=int, metavar="B",
                        help="sequences per GPU, all micro-batches (decode: requests; "
                        "default: the deployment's)")
    parser.add_argument("--seqlen", type=int, metavar="S",
                        help="tokens per sequence (default: the deployment's)")
    parser.add_argument("--kv-len", type=int, metavar="L",
                        help="cached keys per sequence (decode default 4096)")
    parser.add_argument("--ep", type=int, metavar="N",
                        help="expert-parallel ranks (default: the deployment's; 1 starts "
                        "from single-gpu)")
    parser.add_argument("--tp", type=int, metavar="N",
                        help="tensor-parallel ranks (default: the deployment's)")
    parser.add_argument("--micro-batches", type=int, metavar="M",
                        help="micro-batches the GPU's batch is split into (default: the "
                        "deployment's)")
    parser.add_argument("--layer-index", type=int, metavar="I",
                        help="layer of the model (default: the first MoE layer, else 0)")
    parser.add_argument("--fidelity", choices=("sampled", "full"), default="sampled",
                        help="sampled (default): steady-state waves extrapolated; full: "
                        "every CTA")
    parser.add_argument("--out", metavar="DIR",
                        help="run directory (default runs/<workload>-<phase>-<tokens>"
                        "[-ep<N>][-mb<M>]); a folder holding files ptxsim did not write is "
                        "refused")
    parser.add_argument("--force", action="store_true",
                        help="write into a folder that holds other files too (only "
                        "ptxsim's own files are replaced)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--numerics", choices=NUMERICS_MODES, default="auto",
                        help="error of the layer's co-design units against FP64 (on a "
                        "seeded reduced-width layer, workloads.codesign.run_numerics): auto "
                        "(default) when a co-design unit changing numerics is on, on "
                        "(also the stock precision's error), off")
    parser.add_argument("--numerics-seed", type=int, default=0, metavar="S",
                        help="seed of the reduced layer's data (default 0)")
    add_cache_arguments(parser)
    add_quiet_argument(parser)


def _deployment_name(args) -> str:
    """The deployment a run starts from (see the module docstring)."""

    if args.deployment:
        return args.deployment
    if args.workload not in (None, DEFAULT_WORKLOAD) or args.ep == 1:
        return SINGLE_GPU
    return PHASE_DEPLOYMENTS[args.phase or "prefill"]


def _positive_flags(args) -> None:

    for flag, value in (("--tokens", args.tokens), ("--batch", args.batch),
                        ("--seqlen", args.seqlen), ("--ep", args.ep), ("--tp", args.tp),
                        ("--micro-batches", args.micro_batches)):
        if value is not None and value <= 0:
            raise InputError(f"{flag} {value}: expected a positive integer")
    if args.kv_len is not None and args.kv_len < 0:
        raise InputError(f"--kv-len {args.kv_len}: expected an integer >= 0")


def _flag_values(args, base) -> tuple[dict, dict]:
    """Deployment values (dotted keys) the explicit flags set, and the flag naming each."""

    values, names = {}, {}

    def put(key, value, flag):
        values[key], names[key] = value, flag

    for key, value, flag in (("model", args.workload, "--workload"),
                             ("phase", args.phase, "--phase"),
                             ("parallel.ep", args.ep, "--ep"),
                             ("parallel.tp", args.tp, "--tp"),
                             ("batch.kv_len", args.kv_len, "--kv-len"),
                             ("batch.micro_batches", args.micro_batches, "--micro-batches")):
        if value is not None:
            put(key, value, flag)
    if args.micro_batches is not None and base.overlap != "dualpipe":
        put("schedule.overlap", "none" if args.micro_batches == 1 else "micro-batches",
            "--micro-batches")
    phase = args.phase or base.phase
    if phase == "decode":
        _decode_batch(args, put)
        return values, names
    if args.workload in MODELS and base.sequence_tokens is not None:
        positions = MODELS[args.workload].max_positions
        if base.sequence_tokens > positions and args.seqlen is None:
            sequences = base.tokens_per_gpu // base.sequence_tokens
            put("batch.sequence_tokens", positions, "--workload")
            put("batch.tokens_per_gpu", sequences * positions, "--workload")
    _prefill_batch(args, base, values, put)
    return values, names


def _decode_batch(args, put) -> None:

    if args.seqlen is not None:
        raise InputError(f"--seqlen {args.seqlen}: decode adds one token per request; "
                         "accepted --kv-len for the cached keys")
    if args.tokens is not None and args.batch is not None and args.tokens != args.batch:
        raise InputError(f"--tokens {args.tokens}: decode adds one token per request, so "
                         f"--tokens must equal --batch {args.batch} (or be left out)")
    requests = args.batch if args.batch is not None else args.tokens
    if requests is not None:
        put("batch.requests_per_gpu", requests, "--batch" if args.batch else "--tokens")


def _prefill_batch(args, base, values, put) -> None:
    """tokens = batch x seqlen per GPU, the missing one from the deployment's (as
    `workloads.layer` fills in batch 1 and 4096-token sequences)."""

    if args.tokens is None and args.batch is None and args.seqlen is None:
        return
    seq = values.get("batch.sequence_tokens", base.sequence_tokens or 4096)
    tokens = values.get("batch.tokens_per_gpu", base.tokens_per_gpu or seq)
    batch = args.batch if args.batch is not None else max(tokens // seq, 1)
    seq = args.seqlen if args.seqlen is not None else seq
    if args.tokens is None:
        tokens = batch * seq
    elif args.seqlen is None:
        if args.tokens % batch:
            raise InputError(f"--tokens {args.tokens}: must be a multiple of the {batch} "
                             "sequences per GPU (--batch)")
        seq = args.tokens // batch
        tokens = args.tokens
    else:
        tokens = args.tokens
        if tokens != batch * seq and args.batch is not None:
            raise InputError(f"--tokens {tokens}: must equal --batch x --seqlen = "
                             f"{batch * seq}")
    flag = "--tokens" if args.tokens is not None else ("--batch" if args.batch is not None
                                                       else "--seqlen")
    put("batch.tokens_per_gpu", tokens, flag)
    put("batch.sequence_tokens", seq, "--seqlen" if args.seqlen is not None else flag)


def _deployment(args):
    """The deployment this run simulates: the named (or chosen) one with the flags' values."""

    _positive_flags(args)
    name = _deployment_name(args)
    try:
        base = load_deployment(name)
    except InputError as exc:
        raise InputError(f"--deployment {name}: {exc}") from None
    values, names = _flag_values(args, base)
    return base.with_values(values, names) if values else base


def _config(args, deployment):
    """The preset (`--model`, else the deployment's) with the deployment's communication SMs
    and the `--set` overrides (which win); a typed ZCE activation sparsity the run would
    replace by the measured one is refused."""

    args.model = args.model or deployment.preset
    config = config_from_args(args)
    zce = config.units.zce
    typed = parse_overrides(args.overrides)
    if zce.enabled and zce.activation_sparsity_source == "measured" and SPARSITY_KEY in typed:
        raise InputError(f"--set {SPARSITY_KEY}={typed[SPARSITY_KEY]}: the run measures the "
                         "activation sparsity at units.zce.threshold "
                         "(units.zce.activation_sparsity_source = measured), so a typed one "
                         "would not be timed; accepted: --set "
                         "units.zce.activation_sparsity_source=config to time the typed "
                         "share, or no typed share")
    if COMM_COUNT_KEY in typed:
        return config
    try:
        return config.with_overrides({COMM_COUNT_KEY: deployment.comm_sms})
    except InputError as exc:
        raise InputError(f"--deployment {deployment.name}: communication.comm_sms = "
                         f"{deployment.comm_sms}: {exc}") from None


def _graph(args, deployment):

    try:
        return deployment.graph(args.layer_index)
    except InputError as exc:
        flags = dict.fromkeys(f"{o['set_by']} {o['value']}"
                              for o in deployment.overrides.values())
        given = ", ".join(flags) or f"--workload {deployment.model}"
        raise InputError(f"{given}: {exc}") from None


def _out_dir(args, meta: dict) -> Path:
    if args.out:
        return Path(args.out)
    name = f"{meta['model']}-{meta['phase']}-{meta['tokens']}"
    if meta.get("ep", 1) > 1:
        name += f"-ep{meta['ep']}"
    if meta.get("micro_batches", 1) > 1:
        name += f"-mb{meta['micro_batches']}"
    return Path("runs") / name


def run(args: argparse.Namespace) -> int:
    """Resolve the deployment, build its graph, check the run directory, simulate, write it,
    print the summary."""

    deployment = _deployment(args)
    config = _config(args, deployment)
    graph = _graph(args, deployment)
    meta = graph.meta
    out = _out_dir(args, meta)
    check_output_dir(out, force=args.force)   # refused before minutes of simulation
    settings = NumericsSettings(args.numerics, args.numerics_seed)
    sparsity = zce_sparsity(config, meta["model"], meta["tokens"], settings)
    config = timed_config(config, sparsity)
    cache = cache_from_args(args)
    with progress_bar(len(graph.nodes), "simulating kernels", args.quiet) as progress:
        result = simulator.simulate_workload(graph, config=config, fidelity=args.fidelity,
                                             result_cache=cache, progress=progress)
    numerics = run_numerics(config, meta["model"], meta["tokens"], settings)
    result = dataclasses.replace(result, kernels=kernel_error_columns(result.kernels,
                                                                      numerics))
    precision = REPORT_PRECISION.get(meta.get("gemm_dtype", "bf16"), "bf16")
    report = _report(args, result, out)
    report.update(_deployment_report(deployment, result), numerics=numerics,
                  zce_activation_sparsity=sparsity)
    text = strict_json(report, indent=1)
    title = f"ptxsim run: {graph.name} on {args.model}"
    content = None if cache is None else reports.report_digest(
        result, code=cache.code, title=title, precision=precision, numerics=numerics,
        extra=_without_provenance(report))
    report["out_unchanged"] = content is not None and reports.output_unchanged(out, content)
    if not report["out_unchanged"]:
        reports.write_report(result, out, title=title, precision=precision,
                             extra_files={"run.json": text}, force=args.force,
                             numerics=numerics, content=content)
    print(strict_json(report, indent=1) if args.json else _text(report))
    return 0


def _without_provenance(report: dict) -> dict:
    """run.json less where the op results were read from (`op_cache`, `kernels[].cached`),
    which differs between a run and its re-run while the figures do not."""
    return {**{k: v for k, v in report.items() if k != "op_cache"},
            "kernels": [{k: v for k, v in kernel.items() if k != "cached"}
                        for kernel in report["kernels"]]}


def _deployment_report(deployment, result) -> dict:
    """run.json's `deployment` and `micro_batches` (compute, comm, hidden per micro-batch)."""

    return {"deployment": {**deployment.describe(), "comm_sms": result.config.sm.comm_count},
            "micro_batches": [m.to_dict() for m in micro_batch_overlap(result.kernels)]}


def _report(args, result, out: Path) -> dict:
    import json


    summary = result.summary()
    plans = result.kernels[["fidelity_method", "fidelity_params", "simulated_cta_share",
                            "extrapolated_time_share"]]
    errors = result.kernels[list(KERNEL_ERROR_COLUMNS)]
    kernels = [{"name": r.name, "op": r.op, "stream": r.stream, "start_us": r.start_us,
                "time_us": r.time_us, "tflops": r.tflops, "bound": r.bound,
                "share": r.share, "model": r.model, "macs": r.macs,
                "macs_skipped": r.macs_skipped,
                **{c: getattr(e, c) for c in KERNEL_ERROR_COLUMNS},
                "fidelity_method": p.fidelity_method,
                "fidelity_params": json.loads(p.fidelity_params or "{}"),
                "simulated_cta_share": p.simulated_cta_share,
                "extrapolated_time_share": p.extrapolated_time_share, "cached": bool(cached)}
               for r, p, e, cached in zip(summary.itertuples(), plans.itertuples(),
                                          errors.itertuples(), result.kernels["cached"],
                                          strict=True)]
    layer = {k: v for k, v in result.meta.items() if k != "op_cache"}
    return {"model": args.model, "workload": result.meta.get("model"),
            "graph": result.graph, "layer": layer, "fidelity": result.fidelity,
            "time_us": result.time_us, "kernel_time_us": float(summary["time_us"].sum()),
            "by_op": {op: float(t) for op, t in result.by_op()["time_us"].items()},
            "kernels": kernels, "units": totals(result.kernels),
            "sm_clock": _clock(result), "two_four": _two_four(result.config),
            "out": str(out),
            "op_cache": result.meta.get("op_cache"),
            "left_out": "all-reduce across nodes timed by link bandwidth alone; contention "
                        "measured for collectives only (compute streams do not slow "
                        "each other)"}


def _fidelity_cell(k: dict) -> str:
    """A kernel row's fidelity method with its CTA and time shares (`-` where none)."""
    def pct(v) -> str:
        return "-" if v is None or v != v else f"{100 * v:.0f}%"
    return (f"{k['fidelity_method'] or '-'} ({pct(k['simulated_cta_share'])}, "
            f"{pct(k['extrapolated_time_share'])})")


def _two_four(config) -> dict | None:
    """With 2:4 on: the rate it was timed at and the rate an H100 measured (None when off)."""
    tensor = config.units.tensor
    if not tensor.sparse_2_4:
        return None
    return {"rate_multiplier": float(tensor.sparse_rate_multiplier),
            "measured_h100_multiplier": TWO_FOUR_MEASURED,
            "measured_by": "workloads/codesign/mma_sp_probe.py (mma.sp over mma.sync, "
                           "16 warps/SM)"}


def _two_four_lines(t: dict | None) -> list[str]:
    if t is None:
        return []
    return [f"2:4 timed at units.tensor.sparse_rate_multiplier {t['rate_multiplier']:.3g}x "
            f"(an H100 measured {t['measured_h100_multiplier']:.2f}x, {t['measured_by']}; "
            "the preset's 2x is the datasheet's)"]


def _error_cell(value) -> str:
    """A kernel's relative error against FP64 (`-` outside the error categories or when
    the numerics were not computed)."""
    return f"{'-':>8}" if value is None or value != value else f"{value:8.1e}"


def _numerics_lines(n: dict) -> list[str]:
    """The layer's error against FP64 and against the stock precision, per category, with
    the reduced layer it was measured on (or why it was not computed)."""
    if not n["computed"]:
        return [f"numerics: {n['reason']}"]
    rows = {c["category"]: c for c in n["categories"]}
    layer = rows["layer"]
    parts = ", ".join(f"{c} {rows[c]['rel_error']:.2g} ({rows[c]['rel_error_vs_stock']:.2g})"
                      for c in rows if c != "layer")
    lines = [f"numerics vs FP64 (and vs the stock precision: {n['stock']}): layer rel. "
             f"error {layer['rel_error']:.2g} ({layer['rel_error_vs_stock']:.2g}), max "
             f"{layer['max_abs_error']:.2g}, argmax change {100 * layer['argmax_change']:.1f}% "
             f"({100 * layer['argmax_change_vs_stock']:.1f}%); {parts}",
             f"  measured on the {n['reduction']}, seed {n['seed']}: {layer['shortcuts']}"]
    if (layer.get("activation_sparsity_source") == "config" and layer["zce_threshold"] > 0
            and layer["activation_zeros"] != layer["activation_sparsity"]):
        lines.append(f"  ZCE threshold {layer['zce_threshold']:g} zeroes "
                     f"{100 * layer['activation_zeros']:.1f}% of the GEMM activations; the "
                     f"time ran at the typed units.zce.activation_sparsity "
                     f"{layer['activation_sparsity']:g} "
                     "(units.zce.activation_sparsity_source=measured times at the measured "
                     "share)")
    return lines


def _sparsity_lines(z: dict | None) -> list[str]:
    """The ZCE activation sparsity the run was timed at and where it came from (none with
    the ZCE off)."""
    if z is None:
        return []
    if z["source"] == "config":
        return [f"ZCE activation sparsity {z['activation_sparsity']:g} as typed "
                "(units.zce.activation_sparsity_source = config)"]
    return [f"ZCE activation sparsity {z['activation_sparsity']:g} measured "
            f"(units.zce.activation_sparsity_source = measured): zeros of the GEMM "
            f"activations at units.zce.threshold {z['threshold']:g} on the {z['reduction']}, "
            f"seed {z['seed']}; the layer was timed at it (typed value {z['typed']:g} not "
            "used)"]


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


def _deployment_lines(d: dict | None, layer: dict) -> list[str]:
    """Which deployment ran: name, file, micro-batches, experts per GPU, comm SMs, routing."""
    if not d:
        return []
    v = d["values"]
    mbs, unit = v["batch.micro_batches"], "requests" if v["phase"] == "decode" else "tokens"
    split = f"{mbs} micro-batch(es) of {d['micro_batch_tokens']} {unit}"
    if v["schedule.overlap"] == "dualpipe":
        split += " (DualPipe: forward of mb1 beside backward of mb0)"
    experts = d.get("experts")
    share = (f", {experts['per_gpu']} experts per GPU ({experts['routed']} routed"
             + (f" + {experts['redundant']} redundant" if experts["redundant"] else "") + ")"
             if experts else "")
    comm = (f"{d['comm_sms']} comm SMs" if v["communication.holds_sms"] else
            f"{d['comm_sms']} comm SMs, all-to-all RDMA holding no SMs (link-timed)")
    routing = ("balanced routing" + (f" ({d['rows_per_peer']} rows to each peer)"
                                     if d.get("rows_per_peer") is not None else "")
               if v["communication.routing"] == "balanced" else "routing table")
    overrides = "; ".join(f"{k} = {o['value']} ({o['set_by']})"
                          for k, o in d.get("overrides", {}).items())
    return [f"deployment {d['name']} ({d['file']}): EP{layer['ep']}, TP{layer['tp']}, {split}"
            f"{share}, {comm}, {routing}",
            *([f"overridden: {overrides}"] if overrides else [])]


def _overlap_lines(rows: list[dict]) -> list[str]:
    """Per micro-batch: compute, communication, hidden communication and its share."""
    if not rows or not any(m["comm_us"] > 0 for m in rows):
        return []
    lines = [f"{'micro-batch':<12} {'compute_us':>10} {'comm_us':>10} {'hidden_us':>10} "
             f"{'exposed_us':>10} {'hidden':>7}"]
    for m in rows:
        share = m["hidden_share"]
        shown = f"{100 * share:6.1f}%" if share == share else f"{'-':>7}"
        lines.append(f"{m['micro_batch'] or 'all':<12} {m['compute_us']:10.1f} "
                     f"{m['comm_us']:10.1f} {m['hidden_us']:10.1f} {m['exposed_us']:10.1f} "
                     f"{shown}")
    return lines


def _cache_lines(c: dict | None) -> list[str]:
    """Where the op results came from: the cache's folder and its entries read and
    simulated (op results and contention pairs), or that it was off."""
    if c is None:
        return ["op cache off (--no-cache): every op simulated"]
    if not c:
        return []
    total = c["read"] + c["missed"]
    return [f"op cache {c['dir']}: {c['read']} of {total} results read, {c['missed']} "
            "simulated (--no-cache to simulate all)"]


def _text(r: dict) -> str:
    layer = r["layer"]
    lines = [*_deployment_lines(r.get("deployment"), layer),
             f"{r['graph']} ({layer['layer_kind']} layer, {layer['tokens']} tokens, "
             f"ep {layer['ep']}, tp {layer['tp']}) on {r['model']}, fidelity {r['fidelity']}",
             f"{'kernel':<36} {'op':<18} {'stream':<8} {'start_us':>10} {'time_us':>10} "
             f"{'TFLOP/s':>8} {'bound':<7} {'share':>6} {'rel_err':>8}  "
             f"{'fidelity (CTAs sim., time extr.)'}"]
    for k in r["kernels"]:
        tflops = f"{k['tflops']:8.1f}" if k["tflops"] == k["tflops"] else f"{'-':>8}"
        bound = "link" if k["model"] == "link bandwidth" else k["bound"]
        lines.append(f"{k['name']:<36} {k['op']:<18} {k['stream']:<8} {k['start_us']:10.1f} "
                     f"{k['time_us']:10.1f} {tflops} {bound:<7} {100 * k['share']:5.1f}% "
                     f"{_error_cell(k['rel_error'])}  {_fidelity_cell(k)}")
    top = ", ".join(f"{op} {100 * t / r['kernel_time_us']:.0f}%"
                    for op, t in list(r["by_op"].items())[:4]) if r["kernel_time_us"] else ""
    lines += [f"layer time {r['time_us']:.1f} us (kernels summed {r['kernel_time_us']:.1f} us; "
              f"largest: {top})",
              *_overlap_lines(r.get("micro_batches", [])),
              *_units_lines(r["units"]), *_two_four_lines(r["two_four"]),
              *_sparsity_lines(r.get("zce_activation_sparsity")),
              *_numerics_lines(r["numerics"]),
              *_clock_lines(r["sm_clock"]),
              *_cache_lines(r.get("op_cache", {})),
              f"note: {r['left_out']}",
              f"kept {r['out']}/ as it was: it holds this result's report already (the "
              "same figures, config and code version; its run.json says how they were "
              "first obtained)" if r.get("out_unchanged") else
              f"wrote {r['out']}/ (report.html, kernels.csv, stats.csv, config.json, "
              "trace.json)"]
    return "\n".join(lines)
