"""`ptxsim report`: time a catalogued kernel on a preset and write its report folder.

The kernel comes from `workloads.kernels.catalog.KERNELS` (name and variant index), is built
with a seeded Generator, timed with `simulator.simulate_kernel` on `--model` and written
with `reports.write_report` to `--out` (tables, plots, report.html, trace.json). The printed
line (or JSON object with `--json`) names the folder, its files and the kernel's three
figures, labelled as everywhere: `cycles` (the SMs' span), `kernel_time_us` (span plus front
end, what a profiler shows) and `time_us` (plus the host's launch overhead).
Units: cycles, microseconds.
"""

from __future__ import annotations

import argparse
import json

import models
import reports
import simulator
from isa.errors import InputError
from reports.output_dir import check_output_dir
from simulator.app.commands.models import seed_value
from workloads.kernels.case import load_ptx
from workloads.kernels.catalog import KERNELS

NAME = "report"
HELP = "time a catalogued kernel on a preset and write a report folder (tables, plots, HTML)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """KERNEL, --variant, --model, --seed, --out, --json."""
    parser.add_argument("kernel", metavar="KERNEL",
                        help="catalogued kernel name (e.g. sgemm_tiled, saxpy)")
    parser.add_argument("--variant", type=int, default=0, metavar="N",
                        help="index of the catalogued problem size (default 0)")
    parser.add_argument("--model", default="h100_sxm", metavar="PRESET",
                        help="hardware preset (default h100_sxm; see ptxsim models)")
    parser.add_argument("--seed", type=seed_value, default=0, metavar="S",
                        help="seed of the input data (default 0)")
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="report folder to write (a folder holding files ptxsim did not "
                        "write is refused)")
    parser.add_argument("--force", action="store_true",
                        help="write into a folder that holds other files too (only "
                        "ptxsim's own files are replaced)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    """Build the case, time it, write the report, print where it went."""
    import numpy as np


    spec = KERNELS.get(args.kernel)
    if spec is None:
        raise InputError(f"unknown kernel {args.kernel!r} (expected one of "
                         f"{', '.join(sorted(KERNELS))})")
    if not 0 <= args.variant < len(spec.variants):
        raise InputError(f"--variant {args.variant} out of range: {args.kernel} has "
                         f"{len(spec.variants)} variants (0..{len(spec.variants) - 1})")
    check_output_dir(args.out, force=args.force)
    case = spec.build(np.random.default_rng(args.seed), **spec.variants[args.variant])
    config = models.load_preset(args.model)
    result = simulator.simulate_kernel(load_ptx(case.file), case.entry, case.grid, case.block,
                                       case.args, config=config, shared_bytes=case.shared_bytes,
                                       run_id=f"{args.kernel}-v{args.variant}")
    folder = reports.write_report(result, args.out, title=f"{case.entry} on {args.model}",
                                  force=args.force)
    summary = {"out": str(folder), "files": sorted(p.name for p in folder.iterdir()),
               "kernel": case.entry, "model": args.model, "cycles": int(result.cycles),
               "kernel_time_us": float(result.kernel_time_us),
               "time_us": float(result.time_us)}
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        print(f"{case.entry} on {args.model}: cycles {summary['cycles']} (SM span), "
              f"kernel_time_us {summary['kernel_time_us']:.3f} (profiler duration), "
              f"time_us {summary['time_us']:.3f} (with launch overhead); report in {folder} "
              f"({len(summary['files'])} files)")
    return 0
