"""Running sweeps: one atomic part per point, errors recorded, exact resume, crash safety."""

import io
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from isa.errors import InputError
from reports import load_sweep
from reports.sweep_plots import plot_sweep_heatmap, plot_sweep_lines
from simulator.app.cli import main
from simulator.app.sweep_runner import SweepProgress, run_sweep

BASE = """\
[sweep]
name = "{name}"

[base]
kind = "kernel"
preset = "h100_sxm"
kernel = "saxpy"
size = {{ n = 64, block = 32 }}
seed = 3

[[axis]]
key = "size.n"
values = {sizes}

[[axis]]
"{second}" = {second_values}
"""

TIMING_COLUMNS = ["elapsed_s", "worker", "finished_at"]


def _sweep(tmp_path: Path, name="small", sizes="[64, 200]", second="sm.count",
           second_values="[16, 132]") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(BASE.format(name=name, sizes=sizes, second=second,
                                second_values=second_values))
    return path


def _run(sweep, out, **kw):
    return run_sweep(sweep, out, progress=io.StringIO(), **kw)


def _results(out) -> pd.DataFrame:
    return load_sweep(out).drop(columns=TIMING_COLUMNS)


def test_local_run_writes_one_part_per_point_and_load_sweep_reads_them(tmp_path):
    """Four points give four parts named by point id; load_sweep gives one row per point."""
    out = tmp_path / "out"
    outcome = _run(_sweep(tmp_path), out, workers=1)
    assert len(outcome.ran) == outcome.total == 4 and outcome.errors == 0
    parts = sorted(p.stem for p in (out / "parts").iterdir())
    assert parts == sorted(outcome.ran)
    assert (out / "sweep.json").exists()
    df = load_sweep(out)
    assert list(df["index"]) == [0, 1, 2, 3]
    assert list(df["size.n"]) == [64, 64, 200, 200]
    assert list(df["sm.count"]) == [16, 132, 16, 132]
    assert (df["status"] == "ok").all() and (df["cycles"] > 0).all()
    per_warp = df["instructions"] / ((df["size.n"] + 31) // 32)   # one warp per 32 elements
    assert per_warp.nunique() == 1
    assert df.attrs["axes"] == ["size.n", "sm.count"] and df.attrs["missing"] == 0
    stats = load_sweep(out, stats=True)
    assert set(stats["point_id"]) == set(df["point_id"])
    cycles = stats[stats["stat"] == "cycles"].set_index("point_id")["value"]
    assert (cycles[df["point_id"]].to_numpy() == df["cycles"].to_numpy()).all()


def test_erroring_point_is_recorded_and_the_others_finish(tmp_path):
    """A point that raises (a 2048-thread block) becomes an error part; the rest run."""
    sweep = _sweep(tmp_path, second="size.block", second_values="[32, 2048]")
    outcome = _run(sweep, tmp_path / "out", workers=1)
    assert len(outcome.ran) == 4 and outcome.errors == 2
    df = load_sweep(tmp_path / "out")
    bad = df[df["size.block"] == 2048]
    assert (bad["status"] == "error").all() and bad["cycles"].isna().all()
    assert bad["error"].str.contains("LaunchError: block").all()
    assert bad["traceback"].str.contains("Traceback").all()
    assert (df[df["size.block"] == 32]["status"] == "ok").all()
    assert main(["sweep", str(sweep), "--out", str(tmp_path / "cli"), "--workers", "1"]) == 1


def test_resume_skips_finished_points_and_runs_only_the_missing(tmp_path):
    """After deleting two of four parts, --resume runs exactly those two again."""
    sweep, out = _sweep(tmp_path), tmp_path / "out"
    first = _run(sweep, out, workers=1)
    before = _results(out)
    removed = sorted(first.ran)[:2]
    for point_id in removed:
        (out / "parts" / f"{point_id}.parquet").unlink()
    again = _run(sweep, out, workers=1, resume=True)
    assert sorted(again.ran) == removed and again.skipped == 2
    pd.testing.assert_frame_equal(_results(out), before)
    nothing = _run(sweep, out, workers=1, resume=True)
    assert nothing.ran == () and nothing.skipped == 4


def test_resume_with_an_extended_sweep_runs_only_the_new_points(tmp_path):
    """Point ids are exact: adding an axis value and resuming runs just the new points."""
    out = tmp_path / "out"
    _run(_sweep(tmp_path), out, workers=1)
    extended = _run(_sweep(tmp_path, sizes="[64, 200, 300]"), out, workers=1, resume=True)
    assert len(extended.ran) == 2 and extended.skipped == 4
    df = load_sweep(out)
    assert list(df["size.n"]) == [64, 64, 200, 200, 300, 300] and df.attrs["missing"] == 0


def test_retry_errors_reruns_only_error_points(tmp_path):
    """--resume keeps error parts; with --retry-errors those points run again."""
    sweep = _sweep(tmp_path, second="size.block", second_values="[32, 2048]")
    out = tmp_path / "out"
    _run(sweep, out, workers=1)
    assert _run(sweep, out, workers=1, resume=True).ran == ()
    retried = _run(sweep, out, workers=1, resume=True, retry_errors=True)
    assert len(retried.ran) == 2 and retried.errors == 2


def test_existing_parts_are_not_overwritten_without_resume(tmp_path):
    """Running into a folder with parts and no --resume is refused."""
    sweep, out = _sweep(tmp_path), tmp_path / "out"
    _run(sweep, out, workers=1)
    with pytest.raises(InputError, match="--resume"):
        _run(sweep, out, workers=1)


def test_same_sweep_twice_gives_identical_metrics_and_stats(tmp_path):
    """Two clean runs of one sweep agree on every metric, config and stat."""
    sweep = _sweep(tmp_path)
    _run(sweep, tmp_path / "a", workers=1)
    _run(sweep, tmp_path / "b", workers=1)
    pd.testing.assert_frame_equal(_results(tmp_path / "a"), _results(tmp_path / "b"))
    pd.testing.assert_frame_equal(load_sweep(tmp_path / "a", stats=True),
                                  load_sweep(tmp_path / "b", stats=True))


def test_process_pool_gives_the_in_process_results(tmp_path):
    """Two spawned worker processes produce the same parts as an in-process run."""
    sweep = _sweep(tmp_path)
    pooled = _run(sweep, tmp_path / "pool", workers=2)
    _run(sweep, tmp_path / "inproc", workers=1)
    assert len(pooled.ran) == 4
    df = load_sweep(tmp_path / "pool")
    assert str(os.getpid()) not in set(df["worker"].str.split(":").str[-1])
    pd.testing.assert_frame_equal(_results(tmp_path / "pool"), _results(tmp_path / "inproc"))


def _wait_for_parts(parts: Path, proc: subprocess.Popen, limit_s: float = 300.0) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and proc.poll() is None:
        if parts.is_dir() and any(parts.glob("*.parquet")):
            return
        time.sleep(0.005)


def test_killed_sweep_leaves_whole_parts_and_resumes_to_the_clean_result(tmp_path):
    """SIGKILL mid-sweep leaves only complete parts; --resume runs the rest; equal results."""
    sweep = _sweep(tmp_path, name="crash", sizes="[12288, 16384]",
                   second_values="[8, 16, 66, 132]")
    out = tmp_path / "killed"
    proc = subprocess.Popen(
        [sys.executable, "-m", "simulator.app.cli", "sweep", str(sweep), "--out", str(out),
         "--workers", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        cwd=Path(__file__).resolve().parents[1])
    try:
        _wait_for_parts(out / "parts", proc)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    done = sorted((out / "parts").glob("*.parquet"))
    assert 1 <= len(done) < 8
    for path in done:
        assert pq.read_table(path).column("status")[0].as_py() == "ok"
    leftovers = [p for p in (out / "parts").iterdir() if p.suffix != ".parquet"]
    assert all(p.name.startswith(".") and p.name.endswith(".tmp") for p in leftovers)
    resumed = _run(sweep, out, workers=1, resume=True)
    assert resumed.skipped == len(done) and len(resumed.ran) == 8 - len(done)
    assert not [p for p in (out / "parts").iterdir() if p.suffix != ".parquet"]
    _run(sweep, tmp_path / "clean", workers=1)
    pd.testing.assert_frame_equal(_results(out), _results(tmp_path / "clean"))


def test_progress_prints_a_line_per_tenth_when_not_a_tty():
    """Off a terminal, progress is a start line plus one line per 10 % of 20 points."""
    stream = io.StringIO()
    bar = SweepProgress(20, 0, 0, stream)
    for i in range(20):
        bar.advance(error=i == 3)
    bar.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 11 and "\r" not in stream.getvalue()
    assert lines[0].startswith("sweep [") and "0/20 points" in lines[0]
    assert "20/20 points  errors 1  eta 0:00" in lines[-1]


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_redraws_one_line_in_place_on_a_terminal():
    """On a TTY every update rewrites the same line (carriage return) and ends with a newline."""
    stream = _Terminal()
    bar = SweepProgress(3, 1, 0, stream)
    bar.advance(error=False)
    bar.advance(error=True)
    bar.close()
    text = stream.getvalue()
    assert text.count("\r") == 3 and text.count("\n") == 1 and text.endswith("\n")
    assert "3/3 points  errors 1" in text.rsplit("\r", 1)[-1]


def test_cli_runs_a_sweep_and_prints_its_summary(tmp_path, capsys):
    """`ptxsim sweep FILE --out DIR --workers 1` prints the counts and exits 0."""
    out = tmp_path / "out"
    assert main(["sweep", str(_sweep(tmp_path)), "--out", str(out), "--workers", "1"]) == 0
    text = capsys.readouterr()
    assert f"sweep small: 4 points, 4 ran, 0 skipped, 0 errors, 0 lost -> {out}" in text.out
    assert "4/4 points" in text.err


def test_sweep_plots_draw_a_line_per_axis_value_and_a_full_heatmap(tmp_path):
    """Lines: one per sm.count value; heatmap: a size.n x sm.count grid of cycles."""
    _run(_sweep(tmp_path), tmp_path / "out", workers=1)
    df = load_sweep(tmp_path / "out")
    lines = plot_sweep_lines(df, "size.n", "cycles")
    assert [line.get_label() for line in lines.axes[0].get_lines()] == [
        "sm.count=16", "sm.count=132"]
    heat = plot_sweep_heatmap(df, "size.n", "sm.count", "cycles")
    assert heat.axes[0].images[0].get_array().shape == (2, 2)
    heat.savefig(tmp_path / "heat.png")
    assert (tmp_path / "heat.png").stat().st_size > 0
