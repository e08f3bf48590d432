"""Print the validation table: simulated microbenchmarks against published hardware figures.

For each preset, runs `workloads.microbench.validation_table` (pointer-chase latencies, HBM
stream bandwidths, FP32/SFU/tensor rates, shared-memory bandwidth and bank conflicts) and
prints metric, expected, simulated, deviation and source, with the memory model that
`simulator.simulate_kernel` used. About 30 s per preset on one core.

    python benchmarks/validate.py [--model h100_sxm] [--model a100_sxm ...] [--rows KEY ...]
                                  [--memory NAME] [--markdown] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys

import pandas as pd

import models
from workloads.microbench import EXPECTED, memory_model_name, validation_table

DEFAULT_MODELS = ("h100_sxm",)


def _format(table: pd.DataFrame) -> pd.DataFrame:
    shown = table.copy()
    for column in ("expected", "simulated"):
        shown[column] = shown[column].map(lambda v: f"{v:.4g}" if abs(v) < 1e4 else f"{v:.0f}")
    shown["deviation_pct"] = shown["deviation_pct"].map(lambda v: f"{v:+.1f}")
    return shown


def _markdown(table: pd.DataFrame) -> str:
    shown = _format(table)
    lines = ["| " + " | ".join(shown.columns) + " |",
             "|" + "|".join("---" for _ in shown.columns) + "|"]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in shown.itertuples(False)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", choices=sorted(EXPECTED),
                        help="preset to validate (repeatable; default h100_sxm)")
    parser.add_argument("--rows", nargs="+", metavar="KEY",
                        help="only these rows (keys of workloads.microbench.EXPECTED[model])")
    parser.add_argument("--memory", help="memory model for simulate_kernel by name "
                        "(default: its default)")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--json", action="store_true", help="print the tables as JSON")
    opts = parser.parse_args(argv)
    results = {}
    for preset in opts.model or DEFAULT_MODELS:
        table = validation_table(preset, rows=opts.rows, memory=opts.memory)
        memory = memory_model_name(models.load_preset(preset), opts.memory)
        results[preset] = (memory, table)
    if opts.json:
        payload = {preset: {"memory_model": memory,
                            "rows": table.reset_index().to_dict(orient="records")}
                   for preset, (memory, table) in results.items()}
        json.dump(payload, sys.stdout, indent=1)
        print()
        return
    for preset, (memory, table) in results.items():
        print(f"{preset} (memory model: {memory})")
        if opts.markdown:
            print(_markdown(table))
        else:
            with pd.option_context("display.width", 400, "display.max_colwidth", 200):
                print(_format(table).to_string(index=False))
        print()


if __name__ == "__main__":
    main()
