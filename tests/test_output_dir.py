"""Output folders never lose a user's data (`reports.output_dir`): refused before anything
is written, staged and committed whole, only ptxsim's own files replaced, dead staging
folders cleaned."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from isa.errors import InputError
from reports.output_dir import (
    MANIFEST_NAME,
    STAGING_MARK,
    STAGING_PREFIX,
    check_output_dir,
    write_output_dir,
)
from simulator.app.cli import main


def _writer(files: dict[str, str]):
    def write(folder):
        for name, text in files.items():
            (folder / name).write_text(text)
    return write


def test_new_folder_gets_the_files_and_a_manifest(tmp_path):
    """A new folder holds exactly the written files and a manifest listing them."""
    out = write_output_dir(tmp_path / "out", _writer({"a.csv": "1", "b.json": "{}"}))
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST_NAME, "a.csv", "b.json"]
    manifest = json.loads((out / MANIFEST_NAME).read_text())
    assert manifest["files"] == ["a.csv", "b.json"]
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_folder_with_a_user_file_is_refused_and_the_file_kept(tmp_path):
    """A folder holding a file ptxsim did not write is refused; nothing in it changes."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "thesis.tex").write_text("years of work")
    with pytest.raises(InputError, match=r"--out .*thesis\.tex.*--force"):
        write_output_dir(out, _writer({"a.csv": "1"}))
    assert sorted(p.name for p in out.iterdir()) == ["thesis.tex"]
    assert (out / "thesis.tex").read_text() == "years of work"


def test_force_writes_beside_user_files_and_replaces_only_its_own(tmp_path):
    """With force, ptxsim's files go beside the user's; a second forced write replaces its
    own earlier files (and removes those it no longer writes), never the user's."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    write_output_dir(out, _writer({"a.csv": "1", "old.csv": "x"}), force=True)
    write_output_dir(out, _writer({"a.csv": "2"}), force=True)
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST_NAME, "a.csv", "notes.txt"]
    assert (out / "a.csv").read_text() == "2"
    assert (out / "notes.txt").read_text() == "mine"


def test_force_refuses_to_replace_a_user_file_of_the_same_name(tmp_path):
    """A user's file named like one ptxsim writes is never replaced, even with force."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "config.json").write_text("user config")
    with pytest.raises(InputError, match="config.json.*did not write"):
        write_output_dir(out, _writer({"config.json": "{}"}), force=True)
    assert (out / "config.json").read_text() == "user config"
    assert sorted(p.name for p in out.iterdir()) == ["config.json"]


def test_existing_file_as_out_is_refused(tmp_path):
    """An existing file given as the folder is refused, not replaced."""
    target = tmp_path / "report"
    target.write_text("a file")
    with pytest.raises(InputError, match="not a directory"):
        write_output_dir(target, _writer({"a.csv": "1"}), force=True)
    assert target.read_text() == "a file"


def test_earlier_ptxsim_output_is_replaced_whole(tmp_path):
    """A folder holding only an earlier ptxsim write is replaced by the new write."""
    out = write_output_dir(tmp_path / "out", _writer({"a.csv": "1", "b.csv": "1"}))
    write_output_dir(out, _writer({"a.csv": "2"}))
    assert sorted(p.name for p in out.iterdir()) == [MANIFEST_NAME, "a.csv"]
    assert (out / "a.csv").read_text() == "2"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_failed_write_keeps_the_earlier_output_and_leaves_no_staging(tmp_path):
    """A writer that fails leaves the earlier output as it was and no staging folder."""
    out = write_output_dir(tmp_path / "out", _writer({"a.csv": "1"}))

    def fail(folder):
        (folder / "a.csv").write_text("half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        write_output_dir(out, fail)
    assert (out / "a.csv").read_text() == "1"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_out_dot_writes_into_the_working_directory_with_force(tmp_path, monkeypatch):
    """`--out .` in a folder with other files: refused without force; with force the files
    land beside them and no staging folder is left (none beside the folder either)."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "data.bin").write_bytes(b"\x00")
    monkeypatch.chdir(work)
    with pytest.raises(InputError, match="data.bin"):
        write_output_dir(".", _writer({"a.csv": "1"}))
    write_output_dir(".", _writer({"a.csv": "1"}), force=True)
    assert sorted(p.name for p in work.iterdir()) == [MANIFEST_NAME, "a.csv", "data.bin"]
    assert [p.name for p in tmp_path.iterdir()] == ["work"]


def test_staging_left_by_a_killed_run_is_removed_at_the_next_check(tmp_path):
    """A marked staging folder whose process is gone is removed; an unmarked hidden folder
    and one of a running process are kept."""
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    leaked = tmp_path / f"{STAGING_PREFIX}out.{dead}.abcd"
    leaked.mkdir()
    (leaked / STAGING_MARK).write_text(dead)
    (leaked / "kernels.csv").write_text("partial")
    live = tmp_path / f"{STAGING_PREFIX}out.{os.getpid()}.ef01"
    live.mkdir()
    (live / STAGING_MARK).write_text(str(os.getpid()))
    users = tmp_path / f"{STAGING_PREFIX}mine"
    users.mkdir()
    check_output_dir(tmp_path / "out")
    assert not leaked.exists()
    assert live.exists() and users.exists()


def test_killed_run_leaves_the_earlier_output_and_is_cleaned_later(tmp_path):
    """A process killed while staging (SIGKILL) leaves the earlier output whole; the next
    write removes its staging folder."""
    out = write_output_dir(tmp_path / "out", _writer({"a.csv": "1"}))
    code = ("import os, signal\n"
            "from reports.output_dir import write_output_dir\n"
            "def write(folder):\n"
            "    (folder / 'a.csv').write_text('half')\n"
            "    os.kill(os.getpid(), signal.SIGKILL)\n"
            f"write_output_dir({str(out)!r}, write)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True)
    assert proc.returncode == -9
    assert (out / "a.csv").read_text() == "1"
    assert len(list(tmp_path.iterdir())) == 2          # the output and the dead staging
    write_output_dir(out, _writer({"a.csv": "2"}))
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
    assert (out / "a.csv").read_text() == "2"


def test_report_command_refuses_a_user_folder_before_simulating(tmp_path, capsys):
    """`ptxsim report --out DIR` on a folder with a user's file exits 2 naming it; the file
    stays."""
    out = tmp_path / "mine"
    out.mkdir()
    (out / "keep.me").write_text("precious")
    assert main(["report", "saxpy", "--out", str(out)]) == 2
    assert "keep.me" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == ["keep.me"]


def test_no_package_reads_a_pickle():
    """Nothing ptxsim reads back is a pickle: no pickle/shelve/marshal loads, no
    `allow_pickle`, no `read_pickle` in the packages' sources."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    pattern = re.compile(r"pickle\.loads?\(|read_pickle|allow_pickle\s*=\s*True|"
                         r"shelve\.open|marshal\.loads?\(|import pickle")
    hits = [f"{path.relative_to(root)}:{n}" for package in
            ("isa", "models", "simulator", "workloads", "reports")
            for path in sorted((root / package).rglob("*.py"))
            for n, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]
    assert hits == []
