"""Sweeps on Dask distributed: a real loopback LocalCluster writes the same parts as a local run."""

import io
import os
import signal

import pandas as pd
import pytest

from reports import load_sweep
from simulator.app.cli import main
from simulator.app.points import execute_point
from simulator.app.sweep_runner import run_sweep

pytest.importorskip("distributed")

SWEEP = """\
[base]
kind = "kernel"
preset = "h800_sxm"
kernel = "saxpy"
size = { n = 96, block = 32 }

[[axis]]
key = "seed"
values = [0, 1]

[[axis]]
"sm.comm_count" = [0, 20]
"""

TIMING_COLUMNS = ["elapsed_s", "worker", "finished_at"]


def test_dask_local_cluster_writes_one_part_per_point_equal_to_a_local_run(tmp_path, capsys):
    """`--dask local:2` runs every point on cluster workers; parts equal the in-process ones."""
    sweep = tmp_path / "dask.toml"
    sweep.write_text(SWEEP)
    out = tmp_path / "dask"
    assert main(["sweep", str(sweep), "--out", str(out), "--dask", "local:2"]) == 0
    assert "4 ran, 0 skipped, 0 errors, 0 lost" in capsys.readouterr().out
    df = load_sweep(out)
    assert len(list((out / "parts").glob("*.parquet"))) == len(df) == 4
    assert (df["status"] == "ok").all()
    assert str(os.getpid()) not in set(df["worker"].str.split(":").str[-1])
    run_sweep(sweep, tmp_path / "local", workers=1, progress=io.StringIO())
    pd.testing.assert_frame_equal(df.drop(columns=TIMING_COLUMNS),
                                  load_sweep(tmp_path / "local").drop(columns=TIMING_COLUMNS))


def test_dask_resume_skips_points_whose_parts_exist(tmp_path):
    """A resumed Dask sweep submits only the points without a part."""
    sweep = tmp_path / "dask.toml"
    sweep.write_text(SWEEP)
    out = tmp_path / "dask"
    first = run_sweep(sweep, out, workers=1, progress=io.StringIO())
    (out / "parts" / f"{first.ran[0]}.parquet").unlink()
    again = run_sweep(sweep, out, dask="local:1", resume=True, progress=io.StringIO())
    assert again.ran == (first.ran[0],) and again.skipped == 3


def test_malformed_local_cluster_address_is_an_input_error(tmp_path, capsys):
    """`--dask local:0` is refused with one line and exit status 2."""
    sweep = tmp_path / "dask.toml"
    sweep.write_text(SWEEP)
    assert main(["sweep", str(sweep), "--out", str(tmp_path / "o"), "--dask", "local:0"]) == 2
    assert "local:N with N >= 1" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def die_on_point_one(point_data):
    """Point 1 kills its Dask worker process (as the out-of-memory killer would)."""
    if point_data["index"] == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return execute_point(point_data)


def test_dask_point_that_kills_its_worker_is_recorded_as_failed_not_lost(tmp_path):
    """KilledWorker gives the point a "failed" part; every point gets a part, none is lost."""
    import dask

    sweep = tmp_path / "dask.toml"
    sweep.write_text(SWEEP)
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        outcome = run_sweep(sweep, tmp_path / "out", dask="local:2", progress=io.StringIO(),
                            execute=die_on_point_one)
    assert outcome.lost == () and len(outcome.ran) == 4
    df = load_sweep(tmp_path / "out")
    assert df["status"][1] == "failed" and "KilledWorker" in df["error"][1]
    # Dask also fails a task queued on the dying worker: such bystanders are "failed" too
    assert set(df["status"]) <= {"ok", "failed"} and (df["status"] == "ok").any()
