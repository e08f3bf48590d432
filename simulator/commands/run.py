"""`ptxsim run`: the main job.

Until the timing core and the workload graphs land, the main job runs a bundled
example kernel from `workloads/kernels` functionally on seeded inputs, checks its
outputs against numpy and prints the instruction counts per unit and opcode.
"""

from __future__ import annotations

import json

import numpy as np

from isa.errors import InputError

NAME = "run"
HELP = "run the default job (a bundled example kernel, checked against numpy)"
DEFAULT_KERNEL = "saxpy"


def add_arguments(parser) -> None:
    parser.add_argument("--kernel", default=DEFAULT_KERNEL,
                        help="bundled kernel entry to run (see workloads/kernels/catalog.py; "
                        f"default {DEFAULT_KERNEL})")
    parser.add_argument("--variant", type=int, default=0,
                        help="problem-size variant of that kernel (default 0)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the input generator")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args) -> int:
    from workloads.kernels.catalog import KERNELS

    spec = KERNELS.get(args.kernel)
    if spec is None:
        raise InputError(f"unknown kernel '{args.kernel}'; choose one of: "
                         + ", ".join(sorted(KERNELS)))
    if not 0 <= args.variant < len(spec.variants):
        raise InputError(f"--variant {args.variant} out of range 0..{len(spec.variants) - 1}")
    size = spec.variants[args.variant]
    case = spec.build(np.random.default_rng(args.seed), **size)
    result = case.run()
    try:
        case.check()
        verdict = "ok"
    except AssertionError as exc:
        verdict = str(exc)
    report = {
        "kernel": spec.entry, "file": spec.file, "size": size,
        "grid": list(result.launch.grid), "block": list(result.launch.block),
        "matches_numpy": verdict == "ok", "check": verdict,
        "warp_instructions": result.warp_instructions,
        "thread_instructions": result.thread_instructions,
        "by_unit": result.by_unit(), "by_opcode": result.by_opcode(),
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0 if report["matches_numpy"] else 1
    print(f"kernel {spec.entry} ({spec.file}) size {size} grid {report['grid']} "
          f"block {report['block']}")
    print(f"matches numpy: {report['matches_numpy']} ({verdict})")
    print(f"warp-instructions: {result.warp_instructions}  "
          f"thread-instructions: {result.thread_instructions}")
    print("per unit: " + ", ".join(f"{k} {v}" for k, v in report["by_unit"].items()))
    for op, n in report["by_opcode"].items():
        print(f"  {op:<40} {n}")
    return 0 if report["matches_numpy"] else 1
