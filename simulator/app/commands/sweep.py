"""`ptxsim sweep`: run a TOML sweep of simulation points into a folder of Parquet parts.

Sweep kinds: `kernel` (a catalogued kernel), `op` (any `ptxsim op` kind), `layer` (what
`ptxsim run` simulates) and `step` (a training step, sequential or a DualPipe pair); axes over
any preset key, any parameter of the kind, and the preset. The file format is
`simulator.app.sweep.SWEEP_FORMAT`, shown as this command's help epilog (examples in
`workloads/sweeps/`, more in docs/sweeps.md); execution and the output folder
(`sweep.json`, `parts/<point_id>.parquet`) in `simulator/app/sweep_runner.py`. `--dry-run`
validates and lists the points without running.
Each point runs in a worker process that can die alone: a point whose worker dies, or that
runs past `--point-timeout SECONDS`, is recorded as failed (status "failed" or "timeout") and
the sweep goes on.
Exit status: 0 when every point has an ok part, 1 when some point erred, failed, timed out or
was lost, 2 for a bad sweep file or bad arguments, 130 when interrupted by Ctrl-C and 143 by
SIGTERM (the workers are stopped, finished parts are kept: continue with --resume).
Read the results with `reports.load_sweep(DIR)` (a row per point: parameters and metrics)
and `reports.load_sweep_kernels(DIR)` (the per-kernel tables).
Left out: cluster start-up for `--dask` (start `dask scheduler` / `dask worker` yourself,
with ptxsim installed on every worker).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys

from isa.errors import InputError
from simulator.app.sweep import SWEEP_FORMAT, expand_points, load_sweep_spec
from simulator.app.sweep_runner import SweepInterrupted, run_sweep

NAME = "sweep"
HELP = "run a sweep (TOML) of kernels, ops, layers or training steps into DIR/parts/*.parquet"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments: sweep file, --out, --workers | --dask, --point-timeout, --resume,
    --retry-errors, --no-cache, --dry-run, --json; the file format as the help's epilog."""

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = SWEEP_FORMAT
    parser.add_argument("file", metavar="FILE", help="sweep file (TOML)")
    parser.add_argument("--out", metavar="DIR", help="output folder (required unless --dry-run)")
    add_execution_arguments(parser)
    parser.add_argument("--resume", action="store_true",
                        help="skip points whose part exists in DIR/parts (matched by point id, "
                        "so an edited sweep file reuses the parts of the points it kept)")
    parser.add_argument("--retry-errors", action="store_true",
                        help="with --resume, run points recorded as error, failed or timeout "
                        "again")
    parser.add_argument("--dry-run", action="store_true",
                        help="validate the sweep and list its points; run nothing")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def add_execution_arguments(parser: argparse.ArgumentParser) -> None:
    """Where a sweep's points run and what they share (`ptxsim sweep`, `ptxsim tune`):
    --workers | --dask, --point-timeout, --no-cache."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--workers", type=int, metavar="N",
                       help="local worker processes, one point each at a time (default: the "
                       "CPUs; 1 runs in-process unless --point-timeout is given)")
    where.add_argument("--dask", metavar="ADDRESS",
                       help="run on Dask distributed: tcp://host:8786, or local:N for a "
                       "loopback LocalCluster of N worker processes")
    parser.add_argument("--point-timeout", type=float, metavar="SECONDS",
                        help="kill a point's worker after this many seconds and record the "
                        "point as status 'timeout' (counted from when a started worker takes "
                        "the point; local workers only, not --dask)")
    parser.add_argument("--no-cache", action="store_true",
                        help="simulate every op afresh: no op result cache (default: points "
                        "share DIR/op-cache, keyed by op, resolved config and code version)")


def _varying(points) -> list[str]:
    keys = list(points[0].params()) if points else []
    return [k for k in keys if len({json.dumps(p.params().get(k)) for p in points}) > 1]


def _dry_run(args) -> int:

    spec = load_sweep_spec(args.file)
    points = expand_points(spec)
    if args.json:
        print(json.dumps([{**p.to_dict(), "params": p.params()} for p in points], indent=1))
        return 0
    keys = _varying(points)
    print(f"sweep {spec.name}: {len(points)} points (kind {spec.kind}, preset {spec.preset})")
    for p in points:
        params = p.params()
        print(f"  {p.index:>4} {p.point_id}  " + "  ".join(f"{k}={params[k]}" for k in keys))
    return 0


def run(args: argparse.Namespace) -> int:
    """Run (or list) the sweep; print a one-line summary."""

    if args.dry_run:
        return _dry_run(args)
    if not args.out:
        raise InputError("--out DIR is required (or use --dry-run)")
    if args.retry_errors and not args.resume:
        raise InputError("--retry-errors goes with --resume")
    try:
        outcome = run_sweep(args.file, args.out, workers=args.workers, dask=args.dask,
                            resume=args.resume, retry_errors=args.retry_errors,
                            point_timeout_s=args.point_timeout,
                            op_cache=not args.no_cache)
    except KeyboardInterrupt as exc:
        signum = exc.signum if isinstance(exc, SweepInterrupted) else signal.SIGINT
        print(f"\nptxsim sweep: interrupted ({signal.Signals(signum).name}); finished points "
              f"are in {args.out}/parts; continue with --resume", file=sys.stderr)
        return 128 + signum
    summary = outcome.summary()
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"sweep {summary['sweep']}: {summary['points']} points, {summary['ran']} ran, "
              f"{summary['skipped']} skipped, {summary['errors']} errors, "
              f"{summary['lost']} lost -> {summary['out']}")
    return 0 if summary["errors"] == 0 and summary["lost"] == 0 else 1
