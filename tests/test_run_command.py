"""`ptxsim run`: a layer simulated kernel by kernel, summary printed, run directory written.

The default (DeepSeek-V3's EP32 prefill deployment, minutes of CPU) is measured in
docs/communication.md and its graph checked in tests/test_deployments.py; here a BERT-base
layer of 32 tokens keeps the run to seconds.
"""

from __future__ import annotations

import json

import pytest

from simulator.app.cli import main


def _needs(*kinds):
    from workloads.ops import OPS

    missing = [k for k in kinds if k not in OPS]
    if missing:
        pytest.skip(f"op(s) {', '.join(missing)} not registered in workloads.ops yet")


@pytest.fixture(scope="module")
def bert_run(tmp_path_factory):
    _needs("gemm", "attention", "layernorm", "gelu", "residual-add")
    out = tmp_path_factory.mktemp("runs") / "bert"
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = main(["run", "--workload", "bert-base", "--tokens", "32", "--out", str(out),
                     "--json"])
    return code, json.loads(buffer.getvalue()), out


def test_run_prints_every_kernel_and_the_layer_time(bert_run):
    """--json: one entry per graph node, shares summing to 1, layer time = last end."""
    import workloads

    code, report, _ = bert_run
    assert code == 0
    names = [k["name"] for k in report["kernels"]]
    assert names == list(workloads.layer("bert-base", "prefill", tokens=32).names())
    assert sum(k["share"] for k in report["kernels"]) == pytest.approx(1.0)
    assert report["time_us"] == pytest.approx(max(k["start_us"] + k["time_us"]
                                                  for k in report["kernels"]))
    assert report["fidelity"] == "sampled" and report["model"] == "h800_sxm"


def test_run_writes_the_run_directory(bert_run):
    """The run directory holds the resolved config, kernel table, stats, HTML and trace."""
    _, report, out = bert_run
    for name in ("config.json", "kernels.csv", "kernels.parquet", "stats.csv", "report.html",
                 "trace.json", "run.json"):
        assert (out / name).is_file(), name
    config = json.loads((out / "config.json").read_text())
    assert config["sm"]["count"] == 132
    assert json.loads((out / "run.json").read_text())["time_us"] == report["time_us"]


def test_run_text_summary_has_a_line_per_kernel_and_the_total(bert_run):
    """The printed summary names every kernel with its share and ends with the layer time."""
    from simulator.app.commands.run import _text

    _, report, out = bert_run
    text = _text(report)
    for k in report["kernels"]:
        assert any(line.startswith(k["name"] + " ") for line in text.splitlines()), k["name"]
    assert f"layer time {report['time_us']:.1f} us" in text
    assert str(out) in text


@pytest.mark.parametrize(("argv", "flag"), [
    (["--set", "sm.bogus=3"], "--set"),
    (["--model", "no_such_chip"], "--model"),
    (["--workload", "gpt-5"], "--workload"),
    (["--workload", "bert-base", "--phase", "decode"], "--workload"),
    (["--tokens", "0"], "--tokens"),
    (["--deployment", "deepseek-v4"], "--deployment"),
    (["--micro-batches", "3"], "--micro-batches"),
    (["--phase", "decode", "--seqlen", "128"], "--seqlen"),
    (["--phase", "decode", "--tokens", "8", "--batch", "4"], "--tokens"),
    (["--tokens", "1001"], "--tokens"),
    (["--ep", "3"], "--ep 3"),
])
def test_run_bad_flags_exit_2_naming_the_flag(argv, flag, capsys, tmp_path):
    """A bad preset, override, model, deployment or size: one error line naming the flag,
    status 2."""
    assert main(["run", "--out", str(tmp_path / "x"), *argv]) == 2
    err = capsys.readouterr().err
    assert flag in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


def test_run_reports_the_kernels_the_sustained_clock_slowed(bert_run, tmp_path):
    """run.json's `sm_clock` names the preset clock and no slowed kernel on BERT's 32 tokens
    (no line printed); with a power cap low enough to bind, the GEMMs are listed with the
    kernels table's clocks and the summary says so."""
    import contextlib
    import io

    import pandas as pd

    from simulator.app.commands.run import _text

    _, report, _ = bert_run
    assert report["sm_clock"] == {"preset_ghz": 1.83, "slowed": {}}
    assert "sustained" not in _text(report)
    out = tmp_path / "capped"
    with contextlib.redirect_stdout(io.StringIO()) as buffer:
        main(["run", "--workload", "bert-base", "--tokens", "32", "--out", str(out),
              "--set", "chip.power_cap_clock_ghz=0.05", "--json"])
    capped = json.loads(buffer.getvalue())["sm_clock"]
    kernels = pd.read_csv(out / "kernels.csv").set_index("kernel")
    slowed = kernels[kernels["sm_clock_ghz"] < 1.83]
    assert set(capped["slowed"]) == set(slowed.index) and len(slowed)
    assert set(slowed["op"]) <= {"gemm", "attention"}
    for name, ghz in capped["slowed"].items():
        assert ghz == pytest.approx(slowed.loc[name, "sm_clock_ghz"])
    text = _text(json.loads((out / "run.json").read_text()))
    assert f"{len(slowed)} kernel(s) sustained" in text
