"""The LLaMA-3-8B H100 traces as a regression: coverage and MAPE of `ptxsim compare`, stored.

    python -m workloads.traces.reference_regression               # print both summaries
    python -m workloads.traces.reference_regression --write-baseline

Each trace of `TRACES` (`workloads/reference/h100/llama3_8b_layer_{prefill,decode}.json`,
recorded with shapes) is compared as `ptxsim compare --reference FILE --model h100_sxm` does:
mapped through its operators, every distinct op simulated once (sampled fidelity) with the
Kineto front end (`reference_ops.KINETO_FRONT_END_US`) and no host launch overhead. Its
`summary` holds the kernel count, coverage (share of the measured kernel time simulated),
MAPE over the simulated kernels, Pearson r and summed error, the same per category
(`share` of the measured time, `coverage`, `mape_pct`, `total_error_pct`), and every
distinct op with its simulated time, kernel count and the CPU seconds it took.
`BASELINE` stores both summaries; `tests/test_compare_regression.py` fails when coverage
drops or MAPE worsens by more than `TOLERANCE_POINTS` (2 points): a fast test re-simulates
the ops that cost under `FAST_OP_CPU_S` CPU seconds and takes the others' times from the
baseline (coverage from building every op, which needs no simulation), a slow one
(PTXSIM_SLOW=1) re-simulates everything (about 90 CPU seconds for both traces).

Units: microseconds, percent, fractions, CPU seconds.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pandas as pd

H100 = Path(__file__).resolve().parents[1] / "reference" / "h100"
TRACES = {"prefill": H100 / "llama3_8b_layer_prefill.json",
          "decode": H100 / "llama3_8b_layer_decode.json"}
BASELINE = H100 / "llama3_8b_compare_baseline.json"
MODEL = "h100_sxm"
FIDELITY = "sampled"
TOLERANCE_POINTS = 2.0
FAST_OP_CPU_S = 1.0
FORMAT = "ptxsim-compare-baseline/1"


def mapped_trace(phase: str) -> pd.DataFrame:
    """The trace of `phase`, read and mapped."""
    from workloads.traces.kineto import read_kineto
    from workloads.traces.mapping import map_kernels

    return map_kernels(read_kineto(TRACES[phase]))


def config():
    """The preset the baseline is simulated on."""
    import models

    return models.load_preset(MODEL)


def simulate(mapped: pd.DataFrame, times: dict | None = None,
             costs: dict | None = None) -> pd.DataFrame:
    """`simulate_reference` of a mapped trace; ops whose (kind, sizes JSON) key is in
    `times` take that simulated time instead of being simulated again."""
    from workloads.traces.reference_ops import KINETO_FRONT_END_US, simulate_reference

    if not times:
        return simulate_reference(mapped, config(), FIDELITY, front_end_us=KINETO_FRONT_END_US,
                                  costs=costs)
    keys = [(op, _canonical(sizes)) if isinstance(sizes, str) else None
            for op, sizes in zip(mapped["op"], mapped["sizes"], strict=True)]
    stored = [k in times for k in keys]
    fresh = mapped[[not s for s in stored]]
    result = simulate_reference(fresh, config(), FIDELITY, front_end_us=KINETO_FRONT_END_US,
                                costs=costs)
    kept = mapped[stored].copy()
    kept["kind"] = kept["op"]
    kept["sizes"] = [_canonical(s) for s in kept["sizes"]]
    kept["simulated_us"] = [times[k] for k, s in zip(keys, stored, strict=True) if s]
    kept["status"], kept["reason"] = "simulated", None
    return pd.concat([result, kept]).sort_index()


def _canonical(sizes: str) -> str:
    return json.dumps(json.loads(sizes), sort_keys=True)


def _number(value) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def summary(result: pd.DataFrame, costs: dict | None = None) -> dict:
    """Coverage, MAPE and the rest, overall and per category, and the distinct ops."""
    from reports import compare

    overall = compare.error_summary(result)
    categories = compare.category_summary(result)
    ops = []
    done = result[result["status"] == "simulated"]
    for (kind, sizes), group in done.groupby(["kind", "sizes"], sort=True):
        ops.append({"kind": kind, "sizes": json.loads(sizes), "kernels": len(group),
                    "simulated_us": float(group["simulated_us"].iloc[0]),
                    "cpu_s": round((costs or {}).get((kind, sizes), math.nan), 2)})
    return {
        **{k: _number(overall[k]) for k in ("coverage", "mape_pct", "pearson_r",
                                            "total_error_pct", "measured_sum_us",
                                            "simulated_sum_us")},
        "kernels": int(overall["kernels"]), "simulated": int(overall["simulated"]),
        "categories": {r.category: {"kernels": int(r.kernels), "share": _number(r.share),
                                    "coverage": _number(r.coverage),
                                    "mape_pct": _number(r.mape_pct),
                                    "total_error_pct": _number(r.total_error_pct)}
                       for r in categories.itertuples()},
        "ops": ops,
    }


def compare_all() -> dict:
    """Both traces simulated in full: {phase: summary}."""
    out = {}
    for phase in TRACES:
        costs: dict = {}
        out[phase] = summary(simulate(mapped_trace(phase), costs=costs), costs)
    return out


def load_baseline(path: Path = BASELINE) -> dict:
    """The stored summaries (an `InputError` naming the file if it is not one)."""
    from isa.errors import InputError

    doc = json.loads(path.read_text())
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or \
            not set(TRACES) <= set(doc.get("traces", {})):
        raise InputError(f"{path}: not a {FORMAT} file with traces {', '.join(TRACES)}; "
                         "write one with python -m workloads.traces.reference_regression "
                         "--write-baseline")
    return doc


def op_times(entry: dict) -> dict:
    """(kind, sizes JSON) -> stored simulated time of a baseline trace entry."""
    return {(op["kind"], json.dumps(op["sizes"], sort_keys=True)): op["simulated_us"]
            for op in entry["ops"]}


def op_costs(entry: dict) -> dict:
    """(kind, sizes JSON) -> stored CPU seconds of a baseline trace entry."""
    return {(op["kind"], json.dumps(op["sizes"], sort_keys=True)): op["cpu_s"]
            for op in entry["ops"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write-baseline", action="store_true",
                        help=f"store the summaries in {BASELINE.name}")
    args = parser.parse_args(argv)
    from workloads.traces.reference_ops import KINETO_FRONT_END_US

    traces = compare_all()
    for phase, s in traces.items():
        print(f"{phase}: {s['simulated']} of {s['kernels']} kernels, coverage "
              f"{s['coverage']:.1%}, MAPE {s['mape_pct']:.1f} %, summed error "
              f"{s['total_error_pct']:+.1f} %, {sum(o['cpu_s'] for o in s['ops']):.0f} CPU s")
        for category, c in s["categories"].items():
            print(f"  {category:12s} share {c['share']:6.1%}  coverage {c['coverage']:6.1%}  "
                  f"MAPE {c['mape_pct']:5.1f} %  summed {c['total_error_pct']:+6.1f} %")
    if args.write_baseline:
        doc = {"format": FORMAT, "model": MODEL, "fidelity": FIDELITY,
               "front_end_us": KINETO_FRONT_END_US,
               "command": "python -m workloads.traces.reference_regression --write-baseline",
               "traces": traces}
        BASELINE.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"written {BASELINE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
