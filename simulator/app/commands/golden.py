"""`ptxsim golden`: re-measure the golden kernels and compare with `tests/golden/kernels.json`.

Without `--update` it prints every figure that changed (old -> new, % change) and exits 1
when any is outside the tolerance (instruction counts exact, cycles and bytes +-2 %).
With `--update` it writes the new records and prints the same diff. See `simulator.app.golden`.
"""

from __future__ import annotations

import argparse
import json

from simulator.app import golden

NAME = "golden"
HELP = "re-measure the golden kernels; compare with or (--update) rewrite tests/golden"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """--update, --json."""
    parser.add_argument("--update", action="store_true",
                        help="write the new records to tests/golden/kernels.json")
    parser.add_argument("--json", action="store_true",
                        help="print the changes as one JSON object")


def run(args: argparse.Namespace) -> int:

    old = golden.load_golden()
    new = golden.measure_all()
    changes = golden.compare(old, new)
    if args.update:
        golden.write_golden(new)
    failing = [c for c in changes if not c.allowed]
    if args.json:
        print(json.dumps({"updated": args.update, "cases": sorted(new),
                          "changes": [{"case": c.case, "figure": c.figure, "old": c.old,
                                       "new": c.new, "relative": c.relative,
                                       "allowed": c.allowed} for c in changes]}))
    else:
        for change in changes:
            print(change.line())
        verb = "written" if args.update else "checked"
        print(f"{len(new)} golden cases {verb}; {len(changes)} figures changed, "
              f"{len(failing)} outside tolerance")
    return 0 if args.update or not failing else 1
