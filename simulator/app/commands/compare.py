"""`ptxsim compare`: hold the simulator to a reference trace, kernel by kernel.

    ptxsim compare --reference trace.json --model h100_sxm --out DIR
    ptxsim compare --reference kernels.csv --model h100_sxm --json

The reference is a PyTorch-profiler (Kineto) Chrome-trace JSON or the plain kernel CSV
(`kernel, op, measured_us` + shape columns; see `workloads.traces.csv_trace`), chosen by
`--format` or the file suffix. Its kernels are mapped to ops (`workloads.traces.mapping`:
through the aten operators that launched them where the trace recorded their shapes, else
by kernel name), simulated as ops on `--model` where an op builder and the sizes exist
(`workloads.traces.reference_ops`), and compared by `reports.compare`: a per-kernel table
(measured, simulated, error %), MAPE, Pearson r, a per-category summary (share of the
measured time, share of it simulated, error), the kernels not simulated with the reason and
the measured busy time and overlap of the trace's streams; `--out DIR` also writes the CSVs,
summary.json, scatter.png, timeline.png (measured lane beside simulated lane) and
compare.html.

What is compared: a Kineto trace's kernel durations against each op's kernel time, the SMs'
span plus `--front-end-us` (default `reference_ops.KINETO_FRONT_END_US`, what a CUPTI
activity record holds beyond the span), without host launch overhead; a kernel CSV's
measurements (CUDA events around an operator) against `time_us` with the preset's launch
costs. A Kineto trace recorded without shapes (DeepSeek-V3's training trace) is said to be
so, with the path that compares it (`workloads.traces.chunk_pair_report`).

Clock and L2 (Kineto traces; both stated in the output and in summary.json):
`--sm-clock` (default "recorded") simulates at the SM clock the trace's sidecar
`NAME.meta.json` recorded (`workloads.traces.recorded_clock`: `chip.clock_ghz` set to it,
the L2's bytes per second kept, the power-cap model still lowering tensor-bound launches),
the preset's where there is no sidecar; "preset" keeps the preset's, a number of GHz sets
one. `--l2-start` (default "warm-inputs") starts element-wise, copy and norm kernels with
their inputs in the L2, as the kernel before them left them, GEMMs and attention cold
(`reference_ops.WARM_KINDS`, `simulator.runner.l2_start`); "cold" starts every op from an
empty L2. A kernel CSV (operators measured alone) keeps the preset's clock and a cold L2.

    ptxsim compare --regression [--write-baseline] [--json]

compares the two LLaMA-3-8B H100 traces of `workloads.traces.reference_regression` on
h100_sxm and checks them against the stored baseline: exit status 1 where coverage drops or
MAPE (overall or in a category) worsens by more than 2 points; `--write-baseline` stores
the new figures instead. Bad flags or files are an `InputError` naming the flag (exit
status 2). Units: microseconds, percent.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from isa.errors import InputError
from reports import compare
from reports.output_dir import check_output_dir
from simulator.app.commands.models import add_config_arguments, config_from_args
from simulator.app.progress import add_quiet_argument, progress_bar
from simulator.runner.l2_start import L2_STARTS
from workloads.ops import available_fidelities
from workloads.traces import map_kernels, read_kernel_csv, read_kineto
from workloads.traces import reference_regression as reg
from workloads.traces.operators import records_shapes
from workloads.traces.recorded_clock import at_sm_clock, recorded_sm_clock
from workloads.traces.reference_ops import KINETO_FRONT_END_US, simulate_reference

NAME = "compare"
HELP = "simulate a reference trace's kernels as ops and report the error per kernel"
FORMATS = ("auto", "kineto", "csv")
NAME_CHARS = 60
REASON_CHARS = 100
NO_SHAPES_NOTE = (
    "this trace records no operator input shapes (profiled without record_shapes), so its "
    "kernels are mapped by name only and the ops that need sizes cannot be simulated; "
    "record with torch.profiler(record_shapes=True), or, for DeepSeek-V3's training trace, "
    "compare through its chunk-pair graph: python -m workloads.traces.chunk_pair_report "
    "--out DIR --cache FILE (docs/accuracy.md)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--reference or --regression [--write-baseline], --format, --device, --model, --set,
    --fidelity, --front-end-us, --sm-clock, --l2-start, --top, --out, --force, --json,
    --quiet."""
    parser.add_argument("--reference", default=None, metavar="FILE",
                        help="Kineto trace (.json) or kernel CSV (.csv) with measured times")
    parser.add_argument("--regression", action="store_true",
                        help="instead of --reference: compare the stored LLaMA-3-8B H100 "
                        "traces and check them against their baseline (exit 1 where "
                        "coverage drops or MAPE worsens by more than 2 points)")
    parser.add_argument("--write-baseline", action="store_true",
                        help="--regression: store the figures as the new baseline")
    parser.add_argument("--format", choices=FORMATS, default="auto",
                        help="reference format (default: from the file suffix)")
    parser.add_argument("--device", type=int, default=None, metavar="N",
                        help="Kineto traces: keep the kernels of this GPU only")
    add_config_arguments(parser, "h100_sxm")
    parser.add_argument("--fidelity", choices=("sampled", "full"), default=None,
                        help="simulation fidelity of every op (default: sampled where "
                        "available)")
    parser.add_argument("--front-end-us", type=float, default=None, metavar="US",
                        help="Kineto traces: the front end added to each simulated span "
                        "to compare with a kernel duration (default "
                        f"{KINETO_FRONT_END_US}, fitted by python -m "
                        "workloads.traces.kineto_front_end)")
    parser.add_argument("--sm-clock", default=None, metavar="recorded|preset|GHZ",
                        help="Kineto traces: the SM clock to simulate at: the one the "
                        "trace's sidecar NAME.meta.json recorded (default; the preset's "
                        "without one), the preset's, or GHz; the power-cap model still "
                        "lowers tensor-bound launches")
    parser.add_argument("--l2-start", choices=L2_STARTS, default=None,
                        help="Kineto traces: warm-inputs (default) starts element-wise, copy "
                        "and norm kernels with their inputs in the L2 as the kernel before "
                        "left them (GEMMs and attention cold); cold starts every op from an "
                        "empty L2")
    parser.add_argument("--top", type=int, default=20, metavar="N",
                        help="kernels printed in the text table, longest first (default 20)")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="write tables, summary.json, scatter.png and compare.html here "
                        "(a folder holding files ptxsim did not write is refused)")
    parser.add_argument("--force", action="store_true",
                        help="--out: write into a folder that holds other files too (only "
                        "ptxsim's own files are replaced)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_quiet_argument(parser)


def reference_format(path: str, fmt: str = "auto") -> str:
    """"kineto" or "csv": `fmt`, or the file suffix's (an `InputError` names the flag)."""

    if fmt != "auto":
        return fmt
    file = Path(path)
    found = {".json": "kineto", ".csv": "csv"}.get(file.suffix.lower(), "")
    if not found:
        raise InputError(f"--reference {path}: cannot tell the format from the suffix "
                         f"{file.suffix!r}; give --format kineto or --format csv")
    return found


def load_reference(path: str, fmt: str = "auto", device: int | None = None):
    """The reference's kernel table, mapped to ops (an `InputError` names the flag)."""

    file = Path(path)
    if not file.is_file():
        raise InputError(f"--reference {path}: no such file (expected a Kineto .json trace "
                         "or a kernel .csv)")
    fmt = reference_format(path, fmt)
    if fmt == "csv" and device is not None:
        raise InputError("--device: only for Kineto traces (a kernel CSV has no devices)")
    table = read_kineto(file, device) if fmt == "kineto" else read_kernel_csv(file)
    if table.empty:
        raise InputError(f"--reference {path}: no GPU kernels found"
                         + (f" on device {device}" if device is not None else ""))
    return map_kernels(table)


def _clean(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "item"):
        return _clean(value.item())
    return value


def _records(frame) -> list[dict]:
    return [{k: _clean(v) for k, v in row.items()} for row in frame.to_dict("records")]


DEFAULT_L2_START = "warm-inputs"
L2_START_NOTES = {
    "cold": "every op starts from an empty L2",
    "warm-inputs": "element-wise, copy and norm kernels start with the inputs they load "
                   "resident (dirty) in the L2 when those fit in it together, assumed just "
                   "written by the kernel before; GEMMs and attention start cold",
}


def sm_clock(value: str, reference: str, config) -> tuple[float, str]:
    """(GHz, how it was obtained) for `--sm-clock` `value` (an `InputError` names the flag)."""
    if value == "preset":
        return config.chip.clock_ghz, "the preset's chip.clock_ghz (--sm-clock preset)"
    if value == "recorded":
        recorded = recorded_sm_clock(reference)
        if recorded is None:
            return config.chip.clock_ghz, ("the preset's chip.clock_ghz (no SM clock "
                                           "recorded beside the trace)")
        return recorded[0], f"recorded: {recorded[1]}"
    try:
        ghz = float(value)
    except ValueError:
        ghz = math.nan
    if not 0 < ghz <= 10:
        raise InputError(f"--sm-clock {value}: accepted recorded, preset or a clock in GHz "
                         "above 0 and up to 10")
    return ghz, f"--sm-clock {value}"


def run(args: argparse.Namespace) -> int:
    """Import, map, simulate, compare, print (and write with --out); or --regression."""

    if args.regression or args.write_baseline:
        return run_regression(args)
    if args.reference is None:
        raise InputError("--reference FILE or --regression: accepted one of them")
    if args.top < 0:
        raise InputError(f"--top {args.top}: accepted an integer >= 0")
    if args.front_end_us is not None and not (0 <= args.front_end_us < 1e3):
        raise InputError(f"--front-end-us {args.front_end_us}: accepted 0 to 1000")
    config = config_from_args(args)
    if args.out:
        check_output_dir(args.out, force=args.force)   # refused before simulating
    fidelity = args.fidelity or available_fidelities()[0]
    mapped = load_reference(args.reference, args.format, args.device)
    kineto = reference_format(args.reference, args.format) == "kineto"
    if args.front_end_us is not None and not kineto:
        raise InputError("--front-end-us: only for Kineto traces (a kernel CSV is compared "
                         "with time_us, the preset's launch costs)")
    front_end = (KINETO_FRONT_END_US if args.front_end_us is None else args.front_end_us) \
        if kineto else None
    for flag, value in (("--sm-clock", args.sm_clock), ("--l2-start", args.l2_start)):
        if value is not None and not kineto:
            raise InputError(f"{flag}: only for Kineto traces (a kernel CSV's operators are "
                             "timed alone, at the preset's clock, from a cold L2)")
    clock_ghz, clock_source = sm_clock(args.sm_clock or "recorded", args.reference, config) \
        if kineto else (config.chip.clock_ghz, "the preset's chip.clock_ghz")
    config = at_sm_clock(config, clock_ghz)
    l2_start = (args.l2_start or DEFAULT_L2_START) if kineto else None
    with progress_bar(len(mapped), "simulating kernels", args.quiet) as progress:
        result = simulate_reference(mapped, config, fidelity, progress, front_end,
                                    l2_start=l2_start)
    about = {"reference": args.reference, "model": args.model, "fidelity": fidelity,
             "figure": (f"kernel duration: span + {front_end} us front end, no host launch "
                        "overhead" if kineto else "time_us: span + the preset's launch costs"),
             "sm_clock_ghz": clock_ghz, "sm_clock_source": clock_source,
             "l2_start": l2_start or config.fidelity.l2_start,
             "l2_start_note": L2_START_NOTES[l2_start or config.fidelity.l2_start]}
    if kineto and not records_shapes(mapped):
        about["note"] = NO_SHAPES_NOTE
    summary = {**about, **compare.error_summary(result)}
    if args.out:
        summary["out"] = str(compare.write_compare(
            result, args.out, title=f"{Path(args.reference).name} on {args.model}",
            about=about, force=args.force))
    if args.json:
        doc = {**{k: _clean(v) for k, v in summary.items()},
               "categories": _records(compare.category_summary(result)),
               "unsimulated": _records(compare.unsimulated(result)),
               "streams": _records(compare.stream_summary(result)),
               "per_kernel": _records(compare.kernel_errors(result))}
        print(json.dumps(doc, indent=1))
    else:
        print(_text(result, summary, args.top))
    return 0


REGRESSION_EXCLUSIVE = {"reference": "--reference", "out": "--out",
                        "front_end_us": "--front-end-us", "device": "--device",
                        "fidelity": "--fidelity", "overrides": "--set",
                        "sm_clock": "--sm-clock", "l2_start": "--l2-start"}


def run_regression(args: argparse.Namespace) -> int:
    """Both stored traces simulated and checked against (or written as) their baseline."""

    if not args.regression:
        raise InputError("--write-baseline: only with --regression")
    given = [flag for key, flag in REGRESSION_EXCLUSIVE.items()
             if getattr(args, key, None) is not None]
    if given or args.model != reg.MODEL:
        raise InputError(f"--regression: the baseline is {reg.MODEL}, {reg.FIDELITY}, the "
                         "Kineto front end, the recorded clock, warm inputs; drop "
                         + ", ".join(given or ["--model"]))
    stored = None if args.write_baseline else reg.load_baseline()
    traces, failures = {}, []
    for phase in reg.TRACES:
        costs: dict = {}
        traces[phase] = compare.baseline_summary(reg.simulate(reg.mapped_trace(phase), phase,
                                                              costs=costs), costs)
        if stored is not None:
            failures += [f"{phase}: {f}" for f in compare.regression_failures(
                traces[phase], stored["traces"][phase], reg.TOLERANCE_POINTS)]
    if args.write_baseline:
        reg.BASELINE.write_text(json.dumps(reg.baseline_document(traces), indent=1) + "\n")
    if args.json:
        print(json.dumps({"traces": traces, "failures": failures,
                          "written": str(reg.BASELINE) if args.write_baseline else None},
                         indent=1))
    else:
        print(_regression_text(traces, stored, failures, args.write_baseline, reg.BASELINE))
    return 1 if failures else 0


def _regression_text(traces: dict, stored: dict | None, failures: list[str], written: bool,
                     path) -> str:
    def figures(entry: dict) -> str:
        return (f"coverage {100 * entry['coverage']:5.1f} %  MAPE {entry['mape_pct']:5.1f} %"
                if entry.get("mape_pct") is not None else
                f"coverage {100 * entry['coverage']:5.1f} %  MAPE -")

    lines = []
    for phase, entry in traces.items():
        base = stored["traces"][phase] if stored else None
        lines.append(f"{phase}: {entry['simulated']} of {entry['kernels']} kernels, "
                     f"{figures(entry)}" + (f"   (baseline {figures(base)})" if base else ""))
        for category, now in entry["categories"].items():
            was = base["categories"].get(category) if base else None
            lines.append(f"  {category:12s} share {100 * now['share']:5.1f} %  {figures(now)}"
                         + (f"   (baseline {figures(was)})" if was else ""))
    if written:
        lines.append(f"baseline written to {path}")
    lines += [f"FAILED {f}" for f in failures] or ([] if written else ["within the baseline"])
    return "\n".join(lines)


def _shorten(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def _text(result, summary: dict, top: int) -> str:
    import pandas as pd


    table = compare.kernel_errors(result).sort_values("measured_us", ascending=False,
                                                      kind="stable").head(top)
    missing = compare.unsimulated(result)
    for frame, column, width in ((table, "name", NAME_CHARS), (missing, "name", NAME_CHARS),
                                 (missing, "reason", REASON_CHARS)):
        frame[column] = [_shorten(str(v), width) for v in frame[column]]
    with pd.option_context("display.width", 200, "display.float_format", "{:.2f}".format):
        kernels = table[["name", "category", "kind", "measured_us", "simulated_us",
                         "error_pct", "status"]].to_string(index=False)
        categories = compare.category_summary(result).to_string(index=False)
        missing = missing[["name", "status", "count", "dur_us", "reason"]].to_string(
            index=False, justify="left")
        streams = compare.stream_summary(result).to_string(index=False)
    lines = [f"{summary['reference']} on {summary['model']} (fidelity {summary['fidelity']})",
             f"compared: {summary['figure']}",
             f"SM clock {summary['sm_clock_ghz']:g} GHz ({summary['sm_clock_source']}); "
             f"L2 start {summary['l2_start']}: {summary['l2_start_note']}",
             *([f"note: {summary['note']}"] if summary.get("note") else []),
             f"kernels {summary['kernels']}, simulated {summary['simulated']} "
             f"({summary['coverage']:.1%} of the measured time)",
             f"MAPE {summary['mape_pct']:.1f} %   Pearson r {summary['pearson_r']:.3f}   "
             f"summed error {summary['total_error_pct']:+.1f} %", "",
             f"longest {len(table)} kernels:", kernels, "", "per category:", categories, "",
             "not simulated:", missing, "", "streams (measured, us):", streams]
    if summary.get("out"):
        lines += ["", f"written to {summary['out']}"]
    return "\n".join(lines)
