"""The LLaMA-3-8B H100 traces hold `ptxsim compare` to its stored baseline: simulated
coverage may not drop and MAPE may not worsen by more than 2 points
(`workloads.traces.reference_regression`; the baseline in
`workloads/reference/llama3_8b_compare/baseline.json`).

The fast tests build every distinct op of both traces (no simulation) for the coverage and
re-simulate the ops that cost under a CPU second, taking the others' times from the
baseline; the slow test (PTXSIM_SLOW=1) re-simulates every op of both traces.
"""

from __future__ import annotations

import json
import os

import pytest

from reports import compare
from workloads.traces import reference_regression as reg

TOLERANCE = reg.TOLERANCE_POINTS


@pytest.fixture(scope="module")
def baseline() -> dict:
    return reg.load_baseline()


@pytest.fixture(scope="module")
def mapped() -> dict:
    return {phase: reg.mapped_trace(phase) for phase in reg.TRACES}


@pytest.mark.parametrize("phase", list(reg.TRACES))
def test_baseline_meets_the_goal_it_was_written_for(baseline, phase):
    """The stored figures are whole: every kernel counted, coverage >= 95 %, categories'
    shares sum to 1."""
    entry = baseline["traces"][phase]
    assert entry["coverage"] >= 0.95
    assert sum(c["share"] for c in entry["categories"].values()) == pytest.approx(1.0)
    assert sum(op["kernels"] for op in entry["ops"]) == entry["simulated"]


def test_baseline_records_the_clock_and_l2_start_it_was_simulated_at(baseline):
    """The stored baseline names its SM clock per trace, the one each sidecar recorded
    (1.98 GHz, not the preset's 1.83), and its L2 start."""
    from workloads.traces.recorded_clock import recorded_sm_clock

    for phase, path in reg.TRACES.items():
        assert baseline["sm_clock_ghz"][phase] == recorded_sm_clock(path)[0] == 1.98
        assert reg.config(phase).chip.clock_ghz == 1.98
    assert baseline["l2_start"] == reg.L2_START == "warm-inputs"


@pytest.mark.parametrize("phase", list(reg.TRACES))
def test_coverage_does_not_drop(baseline, mapped, phase):
    """Every kernel whose op builds counts as simulated: that share of the measured time is
    at least the baseline's coverage less 2 points."""
    from isa.errors import InputError
    from workloads.ops import build_op

    df = mapped[phase]
    config = reg.config(phase)

    def builds(kind, sizes) -> bool:
        if not isinstance(sizes, str):       # no sizes: not simulated
            return False
        try:
            build_op(kind, config, **json.loads(sizes))
        except InputError:
            return False
        return True

    keys = list(zip(df["op"], df["sizes"], strict=True))
    built = {key: builds(*key) for key in set(keys)}
    ok = [built[key] for key in keys]
    coverage = float(df.loc[ok, "dur_us"].sum() / df["dur_us"].sum())
    assert 100 * coverage >= 100 * baseline["traces"][phase]["coverage"] - TOLERANCE


@pytest.mark.parametrize("phase", list(reg.TRACES))
def test_cheap_ops_keep_their_error(baseline, mapped, phase):
    """The ops that cost under a CPU second re-simulated, the rest from the baseline: MAPE
    over the trace and per category within 2 points of the baseline's."""
    entry = baseline["traces"][phase]
    costs = reg.op_costs(entry)
    stored = {k: t for k, t in reg.op_times(entry).items() if costs[k] >= reg.FAST_OP_CPU_S}
    result = reg.simulate(mapped[phase], phase, stored)
    _within_baseline(result, entry)


@pytest.mark.skipif(os.environ.get("PTXSIM_SLOW") != "1", reason="slow: set PTXSIM_SLOW=1")
def test_regression_command_re_simulates_both_traces_within_the_baseline(capsys):
    """`ptxsim compare --regression`: every op of both traces re-simulated, coverage and MAPE
    (overall and per category) within 2 points of the baseline, exit status 0."""
    from simulator.app.cli import main

    status = main(["compare", "--regression", "--json", "--quiet"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["failures"] == [] and status == 0
    assert set(doc["traces"]) == set(reg.TRACES)


def test_regression_failures_name_what_fell_behind():
    """Coverage 3 points lower and a category's MAPE 3 points higher are both named; 1 point
    either way is within the tolerance."""
    stored = {"coverage": 1.0, "mape_pct": 10.0,
              "categories": {"gemm": {"coverage": 1.0, "mape_pct": 5.0}}}
    now = {"coverage": 0.97, "mape_pct": 11.0,
           "categories": {"gemm": {"coverage": 1.0, "mape_pct": 8.0}}}
    failures = compare.regression_failures(now, stored, TOLERANCE)
    assert len(failures) == 2
    assert failures[0].startswith("all kernels: coverage 97.0 %")
    assert failures[1].startswith("category gemm: MAPE 8.0 %")


def _within_baseline(result, entry: dict) -> None:
    failures = compare.regression_failures(compare.baseline_summary(result), entry, TOLERANCE)
    assert failures == []


def test_accuracy_doc_quotes_the_baseline(baseline):
    """docs/accuracy.md's LLaMA-3-8B table holds the stored coverage, MAPE and Pearson r."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "accuracy.md").read_text()
    for label, phase in (("| prefill, 4096 tokens", "prefill"),
                         ("| decode, batch 64", "decode")):
        rows = [line for line in text.splitlines() if line.startswith(label)]
        entry = baseline["traces"][phase]
        assert len(rows) == 1, label
        for figure in (f"{100 * entry['coverage']:.1f} %", f"{entry['mape_pct']:.1f} %",
                       f"{entry['pearson_r']:.3f}"):
            assert figure in rows[0], (phase, figure, rows[0])
