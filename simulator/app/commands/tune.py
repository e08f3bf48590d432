"""`ptxsim tune`: search a space of settings (TOML) for the best value of a point metric.

The space file format is `simulator.app.tune.TUNE_FORMAT`, shown as this command's help
epilog (examples in `workloads/sweeps/tune_*.toml`, more in docs/tuning.md); the search, the
output folder (a sweep folder plus `tune.json`) and the summary in `simulator/app/tune.py`.
Flags override the space file's [tune] defaults. `--dry-run` validates the space (every
point is checked) and lists its parameters without running.
Prints the best settings and metric, the curve of the metric over each parameter's values
and the Pareto front of the metric against `sm.comm_count` when the points' communication
SMs vary (`--json`: the summary as JSON, what tune.json holds).
Exit status: 0 when every point the search ran is ok, 1 when some point erred, failed, timed
out or was lost, 2 for a bad space file or bad arguments, 130 when interrupted by Ctrl-C and
143 by SIGTERM (finished points are kept: continue with --resume).
Left out: as `ptxsim sweep` (cluster start-up for `--dask`).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys

from isa.errors import InputError
from simulator.app.commands.sweep import add_execution_arguments
from simulator.app.sweep_runner import SweepInterrupted
from simulator.app.tune import (
    DIRECTIONS,
    SAMPLERS,
    TUNE_FORMAT,
    dry_run_lines,
    format_summary,
    load_space,
    resolve_settings,
    run_tune,
    space_points,
)

NAME = "tune"
HELP = ("search a space of settings (TOML: comm SMs, chunk size, ...) for the best value of a "
        "metric; prints the best, the curves and the Pareto front against comm SMs")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments: space file, --out, --metric, --direction, --sampler, --trials, --seed,
    --batch, --workers | --dask, --point-timeout, --no-cache, --resume, --dry-run, --json;
    the file format as the help's epilog."""

    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = TUNE_FORMAT
    parser.add_argument("file", metavar="SPACE", help="space file (TOML)")
    parser.add_argument("--out", metavar="DIR",
                        help="output folder: a sweep folder of the points run, plus tune.json "
                        "(required unless --dry-run)")
    parser.add_argument("--metric", help="the metric to optimize (default: [tune] metric, "
                        "else time_us; e.g. comm_exposed_us)")
    parser.add_argument("--direction", choices=DIRECTIONS,
                        help="min or max (default: [tune] direction, else min)")
    parser.add_argument("--sampler", choices=SAMPLERS,
                        help="grid: every point; random, tpe: Optuna's samplers, --trials "
                        "points (default: [tune] sampler, else grid)")
    parser.add_argument("--trials", type=int, metavar="N",
                        help="distinct points to run with random or tpe (default: [tune] "
                        "trials)")
    parser.add_argument("--seed", type=int, help="the sampler's seed (default: [tune] seed, "
                        "else 0)")
    parser.add_argument("--batch", type=int, metavar="N",
                        help="points proposed and run at a time by random and tpe (default 1; "
                        "more keeps more workers busy; tpe's proposals depend on it)")
    add_execution_arguments(parser)
    parser.add_argument("--resume", action="store_true",
                        help="continue a search in DIR: the same proposals are made again, "
                        "points with a part are read instead of run")
    parser.add_argument("--dry-run", action="store_true",
                        help="validate the space (every point checked) and list it; run nothing")
    parser.add_argument("--json", action="store_true",
                        help="print the summary (what DIR/tune.json holds) as JSON")


def simulates(args: argparse.Namespace) -> bool:
    return not args.dry_run


def run(args: argparse.Namespace) -> int:
    """Run (or list) the search; print the summary."""

    space = load_space(args.file)
    settings = resolve_settings(space, metric=args.metric, direction=args.direction,
                                sampler=args.sampler, trials=args.trials, seed=args.seed,
                                batch=args.batch)
    if args.dry_run:
        points = space_points(space)
        if args.json:
            print(json.dumps({"space": space.name, "points": len(points),
                              "params": {p.key: list(p.values) for p in space.params}},
                             indent=1))
        else:
            print("\n".join(dry_run_lines(space)))
        return 0
    if not args.out:
        raise InputError("--out DIR is required (or use --dry-run)")
    try:
        outcome = run_tune(space, args.out, settings=settings, workers=args.workers,
                           dask=args.dask, resume=args.resume,
                           point_timeout_s=args.point_timeout, op_cache=not args.no_cache)
    except KeyboardInterrupt as exc:
        signum = exc.signum if isinstance(exc, SweepInterrupted) else signal.SIGINT
        print(f"\nptxsim tune: interrupted ({signal.Signals(signum).name}); finished points "
              f"are in {args.out}/parts; continue with --resume", file=sys.stderr)
        return 128 + signum
    if args.json:
        print(json.dumps(outcome.summary, indent=1))
    else:
        print(format_summary(outcome.summary))
    return 0 if outcome.complete else 1
