"""The tuner (`ptxsim tune`, simulator/app/tune.py): the grid finds the best point a sweep of the
same settings finds, the Optuna samplers are reproducible with a seed, a stopped search
resumes to what an uninterrupted one gives, the Pareto front is the closed-form one, and bad
input names file, key and what is accepted. Points are saxpy kernels (a fraction of a second
each)."""

from __future__ import annotations

import io
import json
import signal
from pathlib import Path

import pandas as pd
import pytest

import reports
from isa.errors import InputError
from simulator.app.cli import main
from simulator.app.points import execute_point
from simulator.app.sweep_runner import SweepInterrupted, run_sweep
from simulator.app.tune import (
    TuneError,
    load_space,
    pareto_front,
    parse_space,
    range_values,
    resolve_settings,
    run_tune,
    space_points,
)

ROOT = Path(__file__).resolve().parents[1]
SPACE = ROOT / "workloads" / "sweeps" / "tune_saxpy_comm.toml"
PREFILL = [ROOT / "workloads" / "sweeps" / f"tune_prefill_comm{s}.toml" for s in ("", "_small")]

SAXPY_BASE = """
[base]
kind = "kernel"
preset = "h800_sxm"
kernel = "saxpy"
size = { n = 4096, block = 128 }
"""


def _tune(out: Path, **settings):
    space = load_space(SPACE)
    return run_tune(space, out, settings=resolve_settings(space, **settings), workers=1,
                    progress=io.StringIO())


def _ids(outcome) -> list[str]:
    return [h["point_id"] for h in outcome.summary["history"]]


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    return _tune(tmp_path_factory.mktemp("tune") / "grid")


def test_grid_finds_the_best_point_of_the_sweep_of_the_same_settings(grid, tmp_path):
    """The grid runs every point of the space, with the ids a sweep of the same axes gives,
    and its best is the sweep's minimum."""
    text = SPACE.read_text().replace("[[param]]", "[[axis]]").replace("[tune]", "[sweep]")
    text = "\n".join(line for line in text.splitlines()
                     if not line.startswith(("metric", "direction")))
    sweep_file = tmp_path / "same.toml"
    sweep_file.write_text(text)
    run_sweep(sweep_file, tmp_path / "sweep", workers=1, progress=io.StringIO())
    swept = reports.load_sweep(tmp_path / "sweep")
    tuned = reports.load_sweep(grid.out_dir)
    assert sorted(tuned["point_id"]) == sorted(swept["point_id"]) and len(swept) == 8
    best = swept.loc[swept["time_us"].idxmin()]
    assert grid.summary["best"]["point_id"] == best["point_id"]
    assert grid.summary["best"]["metrics"]["time_us"] == pytest.approx(best["time_us"])
    assert grid.summary["best"]["settings"] == {"sm.comm_count": int(best["sm.comm_count"]),
                                                "size.block": int(best["size.block"])}
    assert json.loads((grid.out_dir / "tune.json").read_text()) == grid.summary


def test_curve_holds_the_best_per_value_and_the_slice_through_the_best(grid):
    """Each parameter's curve gives, per value, the best over the points with it and the
    point with the other settings at the best's."""
    table = reports.load_sweep(grid.out_dir)
    best = grid.summary["best"]["settings"]
    for row in grid.summary["curve"]["sm.comm_count"]:
        here = table[table["sm.comm_count"] == row["value"]]
        assert row["best"] == pytest.approx(here["time_us"].min()) and row["points"] == 2
        at = here[here["size.block"] == best["size.block"]]["time_us"].iloc[0]
        assert row["at_best"] == pytest.approx(at)


def test_pareto_front_of_a_hand_made_table():
    """A point is on the front when every point with fewer comm SMs is worse; of equal comm
    SMs only the best; points that did not finish are ignored; max flips the metric."""
    table = pd.DataFrame({
        "index": range(8), "status": ["ok"] * 7 + ["error"],
        "sm.comm_count": [8, 8, 12, 16, 20, 24, 32, 4],
        "time_us": [10.0, 11.0, 9.0, 9.5, 7.0, 7.0, 6.5, 1.0]})
    front = pareto_front(table, "sm.comm_count", "time_us")
    assert front["sm.comm_count"].tolist() == [8, 12, 20, 32]
    assert front["time_us"].tolist() == [10.0, 9.0, 7.0, 6.5]
    assert pareto_front(table, "sm.comm_count", "time_us", "max")["index"].tolist() == [1]


def test_grid_of_saxpy_has_its_front_at_zero_comm_sms(grid):
    """saxpy alone only loses from SMs taken from compute: the front is the 0-SM point."""
    front = grid.summary["pareto"]["front"]
    assert [row["sm.comm_count"] for row in front] == [0]
    assert front[0]["point_id"] == grid.summary["best"]["point_id"]


@pytest.mark.parametrize("sampler", ["random", "tpe"])
def test_optuna_samplers_are_reproducible_with_a_seed(sampler, tmp_path):
    """Two searches with one seed run the same distinct points in the same order."""
    first = _tune(tmp_path / "a", sampler=sampler, trials=4, seed=7)
    second = _tune(tmp_path / "b", sampler=sampler, trials=4, seed=7)
    assert _ids(first) == _ids(second)
    assert len(set(_ids(first))) == 4 and first.ran == 4
    assert first.summary["best"] == second.summary["best"]


def test_a_resumed_search_runs_only_new_points_and_matches_an_uninterrupted_one(tmp_path):
    """TPE with 3 trials, resumed with 5, reads the 3 points, runs 2, and proposes what a
    fresh search of 5 proposes."""
    short = _tune(tmp_path / "run", sampler="tpe", trials=3, seed=2)
    resumed = run_tune(load_space(SPACE), tmp_path / "run",
                       settings=resolve_settings(load_space(SPACE), sampler="tpe", trials=5,
                                                 seed=2),
                       workers=1, resume=True, progress=io.StringIO())
    fresh = _tune(tmp_path / "fresh", sampler="tpe", trials=5, seed=2)
    assert short.ran == 3 and resumed.ran == 2
    assert _ids(resumed) == _ids(fresh) and _ids(resumed)[:3] == _ids(short)


def _stop_at_index_three(point: dict):
    """A worker that is stopped (Ctrl-C) when it reaches the fourth point."""
    if point["index"] == 3:
        raise KeyboardInterrupt
    return execute_point(point)


def test_a_killed_grid_keeps_its_points_and_resume_runs_the_rest(grid, tmp_path):
    """A grid stopped at its fourth point keeps three parts; without --resume the folder is
    refused, with it the other five run and the best is the uninterrupted grid's."""
    space = load_space(SPACE)
    with pytest.raises(KeyboardInterrupt):
        run_tune(space, tmp_path / "run", workers=1, progress=io.StringIO(),
                 execute=_stop_at_index_three)
    assert len(reports.load_sweep(tmp_path / "run")) == 3
    with pytest.raises(InputError, match="--resume"):
        run_tune(space, tmp_path / "run", workers=1, progress=io.StringIO())
    resumed = run_tune(space, tmp_path / "run", workers=1, resume=True,
                       progress=io.StringIO())
    assert resumed.ran == 5 and resumed.summary["best"] == grid.summary["best"]


def test_a_stop_signal_raised_again_from_its_args_is_still_a_stop():
    """SimPy raises an exception from a process again as `type(exc)(*exc.args)`: a SIGTERM
    arriving inside an in-process point stays a `SweepInterrupted` (the search stops, the
    point is not recorded as an error)."""
    stop = SweepInterrupted(signal.SIGTERM)
    again = type(stop)(*stop.args)
    assert again.signum == signal.SIGTERM and str(again) == "stopped by SIGTERM"


def test_out_folder_with_user_files_is_refused(tmp_path):
    """A folder holding files ptxsim did not write is refused before anything runs."""
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="notes.txt"):
        _tune(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_cli_prints_json_and_writes_tune_json(tmp_path, capsys):
    """`ptxsim tune --json` prints the summary tune.json holds; exit status 0."""
    out = tmp_path / "cli"
    assert main(["tune", str(SPACE), "--out", str(out), "--sampler", "random",
                 "--trials", "2", "--workers", "1", "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads((out / "tune.json").read_text())
    assert printed["sampler"] == "random" and printed["evaluated"] == 2


def test_op_points_share_the_op_cache_in_the_out_folder_unless_no_cache(tmp_path):
    """An op search keeps its op results in DIR/op-cache; --no-cache writes none."""
    space = tmp_path / "rmsnorm.toml"
    space.write_text('[base]\nkind = "op"\npreset = "h800_sxm"\nop = "rmsnorm"\n'
                     'params = { rows = 256, cols = 1024 }\n[[param]]\n"sm.count" = [132]\n')
    for flags, cached in (([], True), (["--no-cache"], False)):
        out = tmp_path / f"out{len(flags)}"
        assert main(["tune", str(space), "--out", str(out), "--workers", "1", *flags]) == 0
        assert (out / "op-cache").is_dir() == cached


def test_help_shows_the_space_format(capsys):
    """`ptxsim tune --help` documents [[param]], ranges and the metrics."""
    with pytest.raises(SystemExit):
        main(["tune", "--help"])
    text = capsys.readouterr().out
    assert "[[param]]" in text and "factor" in text and "comm_exposed_us" in text


def test_range_values_by_step_and_by_factor():
    """A range runs from low up to high inclusive, by step or by factor."""
    assert range_values(8, 32, step=8) == (8, 16, 24, 32)
    assert range_values(16384, 262144, factor=4) == (16384, 65536, 262144)
    assert range_values(0.5, 1.0, step=0.25) == (0.5, 0.75, 1.0)


def test_example_prefill_spaces_check_all_their_points():
    """The prefill examples expand to comm SMs {8..32} x three chunk sizes, every point
    checked (the layer graph built), without running any."""
    for path in PREFILL:
        points = space_points(load_space(path))
        assert len(points) == 18
        combos = {(p.overrides["sm.comm_count"], p.target["chunk_bytes"]) for p in points}
        assert {c for c, _ in combos} == {8, 12, 16, 20, 24, 32}
        assert {b for _, b in combos} == {16384, 65536, 262144}


BAD_SPACES = [
    ("tune.toml", "[[param]\n", "line 1", "not valid TOML"),
    ("empty.toml", SAXPY_BASE, "param", "the space is empty"),
    ("unknown.toml", SAXPY_BASE + '[[param]]\nkey = "sm.count"\nvalue = [66]\n',
     "param[0].value", "unknown key (accepted: one of key, values, range)"),
    ("preset_key.toml", SAXPY_BASE + '[[param]]\n"sm.bogus" = [1, 2]\n', "param[0]",
     "sm.bogus"),
    ("size.toml", SAXPY_BASE + '[[param]]\nkey = "size.n"\nvalues = [4096, 0]\n',
     "param[0].values[1]", "an integer >= 1"),
    ("step.toml", SAXPY_BASE + '[[param]]\nkey = "sm.count"\n'
     "range = { low = 64, high = 132, step = 0 }\n", "param[0].range.step", "step > 0"),
    ("metric.toml", '[tune]\nmetric = "speed"\n' + SAXPY_BASE
     + '[[param]]\n"sm.count" = [66]\n', "tune.metric", "cycles, time_us, instructions"),
    ("twice.toml", SAXPY_BASE + '[[param]]\n"sm.count" = [66]\n[[param]]\n'
     '"sm.count" = [132]\n', "param[1].key", "already in param[0]"),
    ("chunk.toml", '[base]\nkind = "layer"\npreset = "h800_sxm"\nworkload = "bert-base"\n'
     "batch = 1\nseqlen = 128\n[[param]]\nchunk_bytes = [65536, 1000]\n",
     "param[0].chunk_bytes[1]", "a multiple of 512"),
]


@pytest.mark.parametrize(("name", "text", "where", "what"), BAD_SPACES,
                         ids=[b[0] for b in BAD_SPACES])
def test_bad_space_files_name_file_key_and_what_is_accepted(tmp_path, name, text, where,
                                                            what):
    """Each mistake is one TuneError naming the file, the key path and what is accepted."""
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(TuneError) as caught:
        space_points(load_space(path))
    message = str(caught.value)
    assert message.startswith(str(path)) and where in message and what in message


def test_bad_search_settings_name_the_flag():
    """A bad metric, --trials with grid, random without --trials: errors naming the flag and
    what is accepted."""
    space = parse_space(SAXPY_BASE + '[[param]]\n"sm.count" = [66, 132]\n', "s.toml")
    with pytest.raises(InputError, match=r"--metric speed: .*accepted: cycles, time_us"):
        resolve_settings(space, metric="speed")
    with pytest.raises(InputError, match="--trials 3: the grid sampler runs every point"):
        resolve_settings(space, trials=3)
    with pytest.raises(InputError, match="needs --trials N"):
        resolve_settings(space, sampler="random")
    assert resolve_settings(space, sampler="tpe", trials=10).trials == 2
