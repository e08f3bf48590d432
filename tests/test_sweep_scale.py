"""Sweeps at scale: points die alone, time out, stop with the sweep; bad files are clear errors."""

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pyarrow.parquet as pq
import pytest

import simulator.app.sweep as sweep_module
from isa.errors import InputError
from reports import load_sweep
from simulator.app.cli import main
from simulator.app.points import Point, part_frame
from simulator.app.sweep import MAX_POINTS, SweepError, load_sweep_spec, parse_sweep
from simulator.app.sweep_runner import run_sweep

BASE = """\
[base]
kind = "kernel"
preset = "h100_sxm"
kernel = "saxpy"
size = { n = 64, block = 32 }
"""

ROOT = Path(__file__).resolve().parents[1]


def _sweep(tmp_path: Path, axes: str, name: str = "scale") -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(BASE + axes)
    return path


SEEDS_4 = '[[axis]]\nkey = "seed"\nvalues = [0, 1, 2, 3]\n'


# ---- point executors for the worker processes (module level, so spawned workers import them)

def quick_part(point_data):
    """An ok part at once, without simulating (these tests are about processes, not results)."""
    point = Point.from_dict(point_data)
    head = {"point_id": point.point_id, "index": point.index, "status": "ok", "error": "",
            "traceback": "", "elapsed_s": 0.0, "worker": f"test:{os.getpid()}",
            "finished_at": "", "params_json": json.dumps(point.params(), sort_keys=True),
            "config_json": ""}
    return part_frame(head, None, {})


def die_on_point_one(point_data):
    """Point 1's process kills itself as the out-of-memory killer would; the others are ok."""
    if point_data["index"] == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return quick_part(point_data)


def hang_on_point_one(point_data):
    """Point 1 never finishes; the others are ok at once."""
    if point_data["index"] == 1:
        time.sleep(600)
    return quick_part(point_data)


def hang_after_point_zero(point_data):
    """Point 0 is ok at once; every later point runs for ten minutes."""
    if point_data["index"] > 0:
        time.sleep(600)
    return quick_part(point_data)


# ---- a point's process can die alone ---------------------------------------------------------

def test_point_killed_by_sigkill_is_recorded_as_failed_and_the_others_finish(tmp_path):
    """A point whose worker is SIGKILLed gets a "failed" part naming the signal; 3 others run."""
    out = tmp_path / "out"
    outcome = run_sweep(_sweep(tmp_path, SEEDS_4), out, workers=2, progress=io.StringIO(),
                        execute=die_on_point_one)
    assert outcome.lost == () and len(outcome.ran) == 4 and outcome.errors == 1
    df = load_sweep(out)
    assert list(df["status"]) == ["ok", "failed", "ok", "ok"]
    assert "killed by SIGKILL" in df["error"][1]


def test_resume_does_not_rerun_a_failed_point_unless_retrying_errors(tmp_path):
    """A failed point keeps its part on --resume; --retry-errors runs it again (now ok)."""
    sweep, out = _sweep(tmp_path, SEEDS_4), tmp_path / "out"
    first = run_sweep(sweep, out, workers=2, progress=io.StringIO(), execute=die_on_point_one)
    again = run_sweep(sweep, out, workers=2, resume=True, progress=io.StringIO(),
                      execute=die_on_point_one)
    assert again.ran == () and again.skipped == 4 and again.errors == 1
    retried = run_sweep(sweep, out, workers=1, resume=True, retry_errors=True,
                        progress=io.StringIO(), execute=quick_part)
    failed_id = load_sweep(out).loc[1, "point_id"]
    assert retried.ran == (failed_id,) and failed_id in first.ran and retried.errors == 0
    assert (load_sweep(out)["status"] == "ok").all()


def test_point_past_its_timeout_is_recorded_as_timeout_and_a_new_worker_runs_the_rest(tmp_path):
    """With one worker and a 1 s limit, the hanging point 1 times out; points 2 and 3 still run."""
    out = tmp_path / "out"
    outcome = run_sweep(_sweep(tmp_path, SEEDS_4), out, workers=1, point_timeout_s=1.0,
                        progress=io.StringIO(), execute=hang_on_point_one)
    assert outcome.lost == () and len(outcome.ran) == 4
    df = load_sweep(out)
    assert list(df["status"]) == ["ok", "timeout", "ok", "ok"]
    assert "point timeout of 1 s" in df["error"][1] and "was killed" in df["error"][1]
    workers = df["worker"].str.split(":").str[-1]
    assert workers[0] != workers[2] == workers[3]    # the replacement took points 2 and 3


@pytest.mark.parametrize("value", [0, -1, float("nan"), float("inf")])
def test_point_timeout_must_be_a_positive_finite_number_of_seconds(tmp_path, value):
    """--point-timeout 0, negative or non-finite is refused before anything runs."""
    with pytest.raises(InputError, match="--point-timeout"):
        run_sweep(_sweep(tmp_path, SEEDS_4), tmp_path / "out", point_timeout_s=value,
                  progress=io.StringIO())
    assert not (tmp_path / "out").exists()


def test_point_timeout_with_dask_is_refused(tmp_path, capsys):
    """`--point-timeout` needs local workers: with --dask it is a one-line error, exit 2."""
    assert main(["sweep", str(_sweep(tmp_path, SEEDS_4)), "--out", str(tmp_path / "o"),
                 "--dask", "local:1", "--point-timeout", "5"]) == 2
    assert "--point-timeout works with local worker processes" in capsys.readouterr().err


# ---- stopping the sweep stops its workers ---------------------------------------------------

DRIVER = """
import sys
import test_sweep_scale
from simulator.app.sweep_runner import SweepInterrupted, run_sweep

try:
    run_sweep(sys.argv[1], sys.argv[2], workers=2,
              execute=test_sweep_scale.hang_after_point_zero)
except SweepInterrupted as stop:
    sys.exit(128 + stop.signum)
"""


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except psutil.NoSuchProcess:
        return True


def _left_behind(family: set[int], limit_s: float = 20.0) -> list[int]:
    """Processes of `family` still running after up to `limit_s` (they are then killed)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline and not all(_gone(pid) for pid in family):
        time.sleep(0.05)
    left = [pid for pid in family if not _gone(pid)]
    for pid in left:
        psutil.Process(pid).kill()
    return left


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=lambda s: s.name)
def test_signal_to_a_sweep_leaves_no_process_behind_and_keeps_finished_parts(tmp_path, sig):
    """SIGTERM or SIGKILL to a sweep running two hanging points ends its workers; part 0 stays."""
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), str(ROOT)])}
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(_sweep(tmp_path, SEEDS_4)),
                             str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            cwd=ROOT, env=env)
    family: set[int] = set()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            children = psutil.Process(proc.pid).children(recursive=True)
            family |= {c.pid for c in children}
            workers = [c for c in children if "spawn_main" in " ".join(c.cmdline())]
            if len(workers) == 2 and any((out / "parts").glob("*.parquet")):
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the sweep ended before it could be stopped"
        proc.send_signal(sig)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        left = _left_behind(family)
    assert proc.returncode == (128 + sig if sig == signal.SIGTERM else -sig)
    assert len(family) >= 2 and left == []
    (part,) = (out / "parts").glob("*.parquet")
    assert pq.read_table(part).column("index")[0].as_py() == 0
    assert run_sweep(tmp_path / "scale.toml", out, workers=1, resume=True, progress=io.StringIO(),
                     execute=quick_part).skipped == 1


def test_sigterm_during_a_sweep_exits_143_with_a_resume_hint(tmp_path, monkeypatch, capsys):
    """`ptxsim sweep` stopped by SIGTERM prints one line naming the signal and --resume."""
    import simulator.app.commands.sweep as command

    def stopped(*args, **kw):
        raise command.SweepInterrupted(signal.SIGTERM)

    monkeypatch.setattr(command, "run_sweep", stopped)
    assert main(["sweep", str(_sweep(tmp_path, SEEDS_4)), "--out", str(tmp_path / "o")]) == 143
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == (f"ptxsim sweep: interrupted (SIGTERM); finished points are in "
                   f"{tmp_path / 'o'}/parts; continue with --resume")


# ---- resume with an edited sweep -------------------------------------------------------------

def test_resume_of_an_edited_sweep_reports_indices_of_the_new_manifest(tmp_path):
    """Inserting a value before the old ones shifts indices: load_sweep gives the new ones."""
    out = tmp_path / "out"
    axes = '[[axis]]\nkey = "seed"\nvalues = {}\n'
    run_sweep(_sweep(tmp_path, axes.format("[5, 6]")), out, workers=1, progress=io.StringIO(),
              execute=quick_part)
    edited = _sweep(tmp_path, axes.format("[4, 5, 6]"))
    outcome = run_sweep(edited, out, workers=1, resume=True, progress=io.StringIO(),
                        execute=quick_part)
    assert len(outcome.ran) == 1 and outcome.skipped == 2
    df = load_sweep(out)
    manifest = json.loads((out / "sweep.json").read_text())
    assert list(df["index"]) == [p["index"] for p in manifest["points"]] == [0, 1, 2]
    assert list(df["seed"]) == [4, 5, 6]
    stale = pq.read_table(out / "parts" / f"{df['point_id'][1]}.parquet").column("index")
    assert stale[0].as_py() == 0          # the part keeps the index it ran under


def test_resume_into_a_folder_with_a_foreign_manifest_is_refused(tmp_path):
    """A manifest of another format cannot be matched to points: resume says so and stops."""
    sweep, out = _sweep(tmp_path, SEEDS_4), tmp_path / "out"
    (out / "parts").mkdir(parents=True)
    (out / "sweep.json").write_text('{"format": "ptxsim-sweep/99", "points": []}')
    with pytest.raises(InputError, match="not a ptxsim-sweep/1 manifest.*ptxsim-sweep/99"):
        run_sweep(sweep, out, workers=1, resume=True, progress=io.StringIO())


# ---- sweep files -----------------------------------------------------------------------------

def test_random_axis_count_beyond_the_point_cap_is_refused_before_drawing(monkeypatch):
    """count = 10^8 names the axis, the count and the cap; no random value is drawn."""
    def no_draws(*args, **kw):
        raise AssertionError("values were drawn before the cap was checked")

    monkeypatch.setattr(sweep_module.np.random, "default_rng", no_draws)
    text = BASE + ('[[axis]]\nkey = "l2.size_bytes"\n'
                   'random = { low = 1, high = 1e9, count = 100000000, seed = 0 }\n')
    with pytest.raises(SweepError) as info:
        parse_sweep(text, "big.toml")
    message = str(info.value)
    assert info.value.path == "axis[0].random.count" and info.value.line == 8
    assert "l2.size_bytes" in message and "100000000" in message
    assert f"{MAX_POINTS:,}" in message


def test_non_utf8_sweep_file_is_an_input_error_naming_file_line_and_byte(tmp_path, capsys):
    """A Latin-1 byte on line 3 gives file:3, the byte and exit status 2 from the CLI."""
    path = tmp_path / "latin1.toml"
    path.write_bytes(BASE.encode().replace(b'"h100_sxm"', b'"h100_sxm" # caf\xe9'))
    with pytest.raises(SweepError) as info:
        load_sweep_spec(path)
    assert info.value.file == str(path) and info.value.line == 3
    assert "0xe9" in str(info.value) and "UTF-8" in str(info.value)
    assert main(["sweep", str(path), "--dry-run"]) == 2
    assert f"{path}:3:" in capsys.readouterr().err


def test_malformed_or_deeply_nested_toml_file_is_an_input_error_with_the_file(tmp_path):
    """A cut-off file names its line; 5,000 nested arrays are refused, not a RecursionError."""
    cut = tmp_path / "cut.toml"
    cut.write_text(BASE + '[[axis]]\nkey = "seed"\nvalues = [1,\n')
    with pytest.raises(SweepError, match=rf"^{cut}:\d+: not valid TOML"):
        load_sweep_spec(cut)
    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(SweepError, match=rf"^{deep}: not valid TOML: .*nested too deeply"):
        load_sweep_spec(deep)


def test_sweep_file_with_a_byte_order_mark_is_read(tmp_path):
    """A UTF-8 file that starts with a byte-order mark loads like one without it."""
    plain, marked = tmp_path / "plain.toml", tmp_path / "marked.toml"
    plain.write_bytes((BASE + SEEDS_4).encode())
    marked.write_bytes(b"\xef\xbb\xbf" + (BASE + SEEDS_4).encode())
    assert load_sweep_spec(marked).axes == load_sweep_spec(plain).axes
