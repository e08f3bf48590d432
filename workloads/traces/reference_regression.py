"""The LLaMA-3-8B H100 traces as a regression: coverage and MAPE of `ptxsim compare`, stored.

    ptxsim compare --regression                    # both traces against the stored baseline
    ptxsim compare --regression --write-baseline   # store them

Each trace of `TRACES` (`workloads/reference/h100/llama3_8b_layer_{prefill,decode}.json`,
recorded with shapes) is compared as `ptxsim compare --reference FILE --model h100_sxm` does:
mapped through its operators, every distinct op simulated once (sampled fidelity) with the
Kineto front end (`reference_ops.KINETO_FRONT_END_US`) and no host launch overhead, at the SM
clock the trace's sidecar recorded (`workloads.traces.recorded_clock`: 1.98 GHz, the
power-cap model kept) and with `L2_START` ("warm-inputs": element-wise, copy and norm kernels
start with their inputs in the L2, `reference_ops.WARM_KINDS`). Its
summary (`reports.compare.baseline_summary`) holds the kernel count, coverage (share of the
measured kernel time simulated), MAPE over the simulated kernels, Pearson r and summed
error, the same per category (`share` of the measured time, `coverage`, `mape_pct`,
`total_error_pct`), and every distinct op with its simulated time, kernel count and the CPU
seconds it took. `BASELINE` stores both summaries (`FORMAT`: `model`, `fidelity`,
`front_end_us`, `l2_start`, `sm_clock_ghz` by phase, `command`, `traces` by phase);
`ptxsim compare --regression` and `tests/test_compare_regression.py` fail when coverage
drops or MAPE worsens by more than `TOLERANCE_POINTS` (2 points): a fast test re-simulates
the ops that cost under `FAST_OP_CPU_S` CPU seconds and takes the others' times from the
baseline (coverage from building every op, which needs no simulation), a slow one
(PTXSIM_SLOW=1) re-simulates everything (about 90 CPU seconds for both traces).

Units: microseconds, percent, fractions, CPU seconds.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

import models
from isa.errors import InputError
from workloads.traces.kineto import read_kineto
from workloads.traces.mapping import map_kernels
from workloads.traces.recorded_clock import at_sm_clock, recorded_sm_clock
from workloads.traces.reference_ops import KINETO_FRONT_END_US, simulate_reference

H100 = Path(__file__).resolve().parents[1] / "reference" / "h100"
TRACES = {"prefill": H100 / "llama3_8b_layer_prefill.json",
          "decode": H100 / "llama3_8b_layer_decode.json"}
BASELINE = H100.parent / "llama3_8b_compare" / "baseline.json"   # simulated, not measured
MODEL = "h100_sxm"
FIDELITY = "sampled"
L2_START = "warm-inputs"
TOLERANCE_POINTS = 2.0
FAST_OP_CPU_S = 1.0
FORMAT = "ptxsim-compare-baseline/1"


def mapped_trace(phase: str) -> pd.DataFrame:
    """The trace of `phase`, read and mapped."""

    return map_kernels(read_kineto(TRACES[phase]))


def sm_clock_ghz(phase: str) -> float:
    """The SM clock the trace of `phase` recorded (the preset's where it recorded none)."""

    recorded = recorded_sm_clock(TRACES[phase])
    return recorded[0] if recorded else models.load_preset(MODEL).chip.clock_ghz


def config(phase: str):
    """The preset the baseline of `phase` is simulated on, at the trace's recorded clock."""

    return at_sm_clock(models.load_preset(MODEL), sm_clock_ghz(phase))


def simulate(mapped: pd.DataFrame, phase: str, times: dict | None = None,
             costs: dict | None = None) -> pd.DataFrame:
    """`simulate_reference` of the mapped trace of `phase`; ops whose (kind, sizes JSON) key
    is in `times` take that simulated time instead of being simulated again."""

    if not times:
        return simulate_reference(mapped, config(phase), FIDELITY,
                                  front_end_us=KINETO_FRONT_END_US, costs=costs,
                                  l2_start=L2_START)
    keys = [(op, _canonical(sizes)) if isinstance(sizes, str) else None
            for op, sizes in zip(mapped["op"], mapped["sizes"], strict=True)]
    stored = [k in times for k in keys]
    fresh = mapped[[not s for s in stored]]
    result = simulate_reference(fresh, config(phase), FIDELITY,
                                front_end_us=KINETO_FRONT_END_US, costs=costs,
                                l2_start=L2_START)
    kept = mapped[stored].copy()
    kept["kind"] = kept["op"]
    kept["sizes"] = [_canonical(s) for s in kept["sizes"]]
    kept["simulated_us"] = [times[k] for k, s in zip(keys, stored, strict=True) if s]
    kept["status"], kept["reason"] = "simulated", None
    return pd.concat([result, kept]).sort_index()


def _canonical(sizes: str) -> str:
    return json.dumps(json.loads(sizes), sort_keys=True)


def load_baseline(path: Path = BASELINE) -> dict:
    """The stored summaries (an `InputError` naming the file if it is missing or is not one)."""

    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: cannot read a baseline ({exc}); write one with ptxsim "
                         "compare --regression --write-baseline") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT or \
            not set(TRACES) <= set(doc.get("traces", {})):
        raise InputError(f"{path}: not a {FORMAT} file with traces {', '.join(TRACES)}; "
                         "write one with ptxsim compare --regression --write-baseline")
    return doc


def op_times(entry: dict) -> dict:
    """(kind, sizes JSON) -> stored simulated time of a baseline trace entry."""
    return {(op["kind"], json.dumps(op["sizes"], sort_keys=True)): op["simulated_us"]
            for op in entry["ops"]}


def baseline_document(traces: dict) -> dict:
    """The `BASELINE` file's content for the summaries `traces` ({phase: summary})."""

    return {"format": FORMAT, "model": MODEL, "fidelity": FIDELITY,
            "front_end_us": KINETO_FRONT_END_US, "l2_start": L2_START,
            "sm_clock_ghz": {phase: sm_clock_ghz(phase) for phase in TRACES},
            "command": "ptxsim compare --regression --write-baseline", "traces": traces}


def op_costs(entry: dict) -> dict:
    """(kind, sizes JSON) -> stored CPU seconds of a baseline trace entry."""
    return {(op["kind"], json.dumps(op["sizes"], sort_keys=True)): op["cpu_s"]
            for op in entry["ops"]}
