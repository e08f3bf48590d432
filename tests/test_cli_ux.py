"""What the user sees: `--version`, help on bare `ptxsim`, Ctrl-C, help of every op, seed
range, the per-kernel progress bar, the compile notice, and legible plots and HTML figures.

The progress callback must not change results: a small graph is simulated with and without
it and the tables compared. The Ctrl-C test sends a real SIGINT to a running command.
"""

from __future__ import annotations

import importlib.metadata
import io
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

import models
import simulator
from models import jit_cache
from reports.html_report import Section, _cell, format_figure, render_html, round_decimals
from reports.kernel_table import UNITS
from reports.plot_kernels import MAX_FIGURE_INCHES, MAX_KERNELS, plot_unit_utilization
from simulator.app.cli import main
from simulator.app.commands.models import SEED_MAX, seed_value
from simulator.app.progress import progress_bar
from workloads.graph import KernelGraph
from workloads.layers import ops as L
from workloads.ops import OPS


class Terminal(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


# -- entry point ---------------------------------------------------------------------------
def test_version_flag_prints_the_installed_package_version(capsys):
    """`ptxsim --version` prints `ptxsim <version of the installed distribution>`."""
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"ptxsim {importlib.metadata.version('ptxsim')}"


def test_bare_ptxsim_prints_help_listing_the_commands_and_exits_0(capsys):
    """No command: the help (usage and every command) on stdout, exit status 0."""
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: ptxsim")
    assert all(name in out for name in ("run", "op", "kernel", "compare", "models"))


def test_ctrl_c_in_a_command_exits_130_with_one_line_on_stderr(capsys, monkeypatch):
    """KeyboardInterrupt inside a command: exit 130, one stderr line naming it, no
    traceback."""
    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr("simulator.app.commands.opcodes.run", interrupted)
    assert main(["opcodes"]) == 130
    err = capsys.readouterr().err
    assert err.splitlines() == ["ptxsim opcodes: interrupted"]


def test_ctrl_c_while_the_parser_is_built_exits_130(capsys, monkeypatch):
    """An interrupt before any command runs (importing the commands) is handled alike."""
    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr("simulator.app.cli.build_parser", interrupted)
    assert main(["models"]) == 130
    assert capsys.readouterr().err.splitlines() == ["ptxsim: interrupted"]


def test_sigint_to_a_running_simulation_exits_130_without_a_traceback():
    """A real SIGINT while `ptxsim op` simulates: status 130, one line on stderr."""
    # The parser is built once before "ready" (importing every command takes a second or
    # more on a loaded machine), so the signal lands in the simulation, not in the imports.
    script = ("import sys; from simulator.app.cli import build_parser, main; build_parser(); "
              "print('ready', flush=True); "
              "sys.exit(main(['op', 'softmax', '--rows', '8192', '--cols', '8192', "
              "'--fidelity', 'full', '--quiet']))")
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            cwd=os.path.dirname(os.path.dirname(__file__)))
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130
    assert err.splitlines() == ["ptxsim op: interrupted"]


# -- flags ---------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", sorted(OPS))
def test_every_op_kind_help_prints_usage_and_exits_0(kind, capsys):
    """`ptxsim op KIND --help` works for every registered op (a `%` in help text is kept)."""
    with pytest.raises(SystemExit) as exit_:
        main(["op", kind, "--help"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: ptxsim op {kind}")


def test_allreduce_help_shows_the_percent_sign_as_written(capsys):
    """The `--compress` help says "top 10 %" (argparse would read a bare % as a format)."""
    with pytest.raises(SystemExit):
        main(["op", "allreduce", "--help"])
    assert "10 %" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("argv", [
    ["op", "softmax", "--rows", "4", "--cols", "4", "--seed", "-1"],
    ["kernel", "x.ptx", "--grid", "1", "--block", "1", "--seed", str(2**32)],
])
def test_seed_outside_0_to_2_pow_32_is_a_usage_error_naming_the_range(argv, capsys):
    """A negative or too large `--seed` is refused before anything runs: exit 2, the
    accepted range in the message."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--seed" in err and f"0 to {SEED_MAX}" in err and "Traceback" not in err


def test_seed_type_accepts_the_whole_32_bit_range_only():
    """0 and 2**32 - 1 are seeds; -1, 2**32, 1.5 and words are not."""
    import argparse

    assert seed_value("0") == 0 and seed_value(str(2**32 - 1)) == 2**32 - 1
    for text in ("-1", str(2**32), "1.5", "abc", ""):
        with pytest.raises(argparse.ArgumentTypeError, match="0 to 4294967295"):
            seed_value(text)


# -- progress ------------------------------------------------------------------------------
def test_progress_bar_draws_on_a_terminal_and_ends_at_the_total():
    """On a terminal the bar shows the description and the node in flight, and its last
    state counts every step."""
    stream = Terminal()
    with progress_bar(3, "simulating", stream=stream) as step:
        for index, name in enumerate(("norm", "gemm", "act")):
            step(index, 3, name)
    text = stream.getvalue()
    assert "simulating" in text and "act" in text and "3/3" in text


@pytest.mark.parametrize("quiet, stream", [(True, Terminal()), (False, io.StringIO())])
def test_progress_bar_is_silent_when_quiet_or_not_a_terminal(quiet, stream):
    """`--quiet`, or stderr redirected to a file or pipe: nothing is written."""
    with progress_bar(2, "simulating", quiet=quiet, stream=stream) as step:
        step(0, 2, "a")
        step(1, 2, "b")
    assert stream.getvalue() == ""


def test_workload_progress_sees_each_node_once_in_order_and_changes_nothing():
    """`simulate_workload(progress=)` is called once per node, before it, with (index,
    total, name); the kernel table is the same as without it."""
    rows, hidden = 64, 256
    graph = KernelGraph("small", (
        L.elementwise("norm", "rmsnorm", rows=rows, cols=hidden, dtype="bf16"),
        L.elementwise("act", "swiglu", rows=rows, cols=hidden, out_cols=hidden // 2,
                      dtype="bf16", deps=("norm",)),
        L.elementwise("again", "swiglu", rows=rows, cols=hidden, out_cols=hidden // 2,
                      dtype="bf16", deps=("act",)),
    ), {"model": "llama3-8b", "phase": "prefill"})
    config = models.load_preset("h800_sxm")
    calls = []
    seen = simulator.simulate_workload(graph, config=config,
                                       progress=lambda *call: calls.append(call))
    plain = simulator.simulate_workload(graph, config=config)
    assert calls == [(0, 3, "norm"), (1, 3, "act"), (2, 3, "again")]
    pd.testing.assert_frame_equal(seen.kernels, plain.kernels)
    assert seen.time_us == plain.time_us


# -- compile notice ------------------------------------------------------------------------
def _cache_folder(tmp_path, monkeypatch):
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.delenv("NUMBA_DISABLE_JIT", raising=False)
    monkeypatch.setattr(jit_cache, "ROOT", tmp_path)
    folder = tmp_path / "models" / "__pycache__"
    folder.mkdir(parents=True)
    return folder


def test_compile_notice_when_the_cache_is_empty_or_stale_not_when_ready(tmp_path, monkeypatch):
    """No stamp or no compiled SM loop: "empty"; a stamp of other sources: "stale"; both
    present and current: "ready", and only then no notice."""
    folder = _cache_folder(tmp_path, monkeypatch)
    assert jit_cache.cache_state() == "empty"
    (folder / jit_cache.STAMP).write_text(jit_cache.sources_hash())
    assert jit_cache.cache_state() == "empty"
    (folder / "sm_core._run-380.py311.nbi").write_bytes(b"")
    assert jit_cache.cache_state() == "ready" and jit_cache.compile_notice() is None
    (folder / jit_cache.STAMP).write_text("0" * 40)
    assert jit_cache.cache_state() == "stale"
    notice = jit_cache.compile_notice()
    assert notice.startswith("compiling the simulator's kernels, once per install, about ")


def test_compile_notice_is_unknown_when_numba_caches_elsewhere(tmp_path, monkeypatch):
    """With `NUMBA_CACHE_DIR` set the folder is not the cache: no claim, no notice."""
    _cache_folder(tmp_path, monkeypatch)
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "elsewhere"))
    assert jit_cache.cache_state() == "unknown" and jit_cache.compile_notice() is None


@pytest.mark.parametrize("argv, shown", [
    (["golden"], True),
    (["op", "softmax", "--rows", "4", "--cols", "4"], True),
    (["op", "softmax", "--rows", "4", "--cols", "4", "--quiet"], False),
    (["models"], False),
    (["opcodes"], False),
    (["kernel", "x.ptx", "--grid", "1", "--block", "1"], False),
    (["kernel", "x.ptx", "--grid", "1", "--block", "1", "--model", "h100_sxm"], True),
])
def test_compile_notice_goes_to_stderr_before_simulating_commands_only(argv, shown, capsys,
                                                                        monkeypatch):
    """One stderr line when compiled code first loads in a command that simulates (not
    `models`, `opcodes`, a functional `kernel`, nor with `--quiet`)."""
    monkeypatch.setattr(jit_cache, "compile_notice", lambda: "compiling (test)")
    monkeypatch.setattr(jit_cache, "refresh", lambda: False)
    jit_cache.ensure_fresh.cache_clear()
    for name in ("golden", "op", "models", "opcodes", "kernel"):
        monkeypatch.setattr(f"simulator.app.commands.{name}.run",
                            lambda args: int(jit_cache.ensure_fresh()))
    try:
        assert main(argv) == 0
    finally:
        jit_cache.ensure_fresh.cache_clear()
    err = capsys.readouterr().err
    assert err.splitlines() == ([f"ptxsim {argv[0]}: compiling (test)"] if shown else [])


def test_command_refused_before_simulating_says_nothing_about_compiling(tmp_path, capsys,
                                                                        monkeypatch):
    """A sweep file refused while it is read is one error line, even when the kernels
    would compile: the notice waits for compiled code to load."""
    monkeypatch.setattr(jit_cache, "compile_notice", lambda: "compiling (test)")
    jit_cache.ensure_fresh.cache_clear()
    bad = tmp_path / "bad.toml"
    bad.write_text("[base]\nkind = 'nothing'\n")
    try:
        assert main(["sweep", str(bad), "--out", str(tmp_path / "out")]) == 2
    finally:
        jit_cache.ensure_fresh.cache_clear()
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "compiling" not in err


# -- plots and HTML ------------------------------------------------------------------------
def _utilization_table(kernels: int) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    table = pd.DataFrame({"kernel": [f"layer/kernel_{k}" for k in range(kernels)],
                          "time_us": rng.uniform(1.0, 100.0, kernels)})
    for unit in UNITS:
        table[f"util_{unit}"] = rng.uniform(0.0, 0.9, kernels) if unit in ("fp32", "tensor",
                                                                           "lsu") else np.nan
    return table


@pytest.mark.parametrize("kernels", [1, 12, 500])
def test_unit_utilization_is_a_capped_heatmap_with_a_colorbar_at_any_kernel_count(kernels):
    """Kernels x units, one row per kernel up to `MAX_KERNELS` (the longest), a colorbar,
    and a figure no larger than `MAX_FIGURE_INCHES` either way."""
    table = _utilization_table(kernels)
    fig = plot_unit_utilization(table)
    width, height = fig.get_size_inches()
    assert width <= MAX_FIGURE_INCHES and height <= MAX_FIGURE_INCHES
    heatmap, colorbar = fig.axes
    rows = min(kernels, MAX_KERNELS)
    assert heatmap.images[0].get_array().shape == (rows, 3)
    assert [t.get_text() for t in heatmap.get_xticklabels()] == ["fp32", "lsu", "tensor"]
    assert colorbar.get_ylabel().startswith("busy fraction")
    if kernels > MAX_KERNELS:
        assert f"longest {MAX_KERNELS} of {kernels} kernels" in heatmap.get_title()
        longest = set(table.nlargest(MAX_KERNELS, "time_us")["kernel"])
        assert {t.get_text() for t in heatmap.get_yticklabels()} == longest


@pytest.mark.parametrize("value, unit, text", [
    (9.374591, "us", "9.375 us"), (0.0001574123, "", "0.0001574"), (3352.0, "GB/s",
                                                                      "3352 GB/s"),
    (152345.0, "FLOP", "152.3 kFLOP"), (16261120.0, "B", "16.26 MB"), (9999.7, "", "10 k"),
    (-12345.6, "", "-12.35 k"), (1e30, "", "1e+30"), (float("inf"), "us", "inf us"),
])
def test_figures_have_four_significant_digits_and_a_thousands_prefix(value, unit, text):
    """4 significant digits; from 10,000 up a k/M/G/... prefix joined to the unit."""
    assert format_figure(value, unit) == text


def test_html_cells_round_floats_and_keep_counts_exact():
    """Float cells are rounded (numpy floats too), integer cells exact with separators,
    NaN empty."""
    assert _cell(np.float32(1.23456789)) == ("1.235", "")
    assert _cell(16261120.25) == ("16.26 M", "")
    assert _cell(np.int64(16261120)) == ("16,261,120", "")
    assert _cell(float("nan")) == ("", "")


def test_html_notes_round_long_decimals_and_leave_short_ones():
    """A note's "9.374591 us" prints as "9.375 us"; "1.83 GHz", counts and versions stay."""
    assert round_decimals("7365 cycles, 9.374591 us at 1.83 GHz (v0.1.0)") == \
        "7365 cycles, 9.375 us at 1.83 GHz (v0.1.0)"
    page = render_html("t", [Section("Summary", ("Simulated: 9.374591 us.",))])
    assert "9.375 us" in page and "9.374591" not in page


@pytest.mark.parametrize("argv", [
    ["run", "--workload", "bert-base", "--batch", "1", "--seqlen", "128", "--quiet"],
    ["run", "--workload", "bert-base", "--batch", "1", "--seqlen", "128"],
    ["compare", "--reference", "workloads/reference/deepseek_v3_trace_excerpt.json",
     "--model", "h800_sxm"],
])
def test_run_and_compare_draw_a_kernel_progress_bar_on_a_terminal(argv, tmp_path, capsys,
                                                                  monkeypatch):
    """On a terminal, `run` and `compare` draw a per-kernel bar on stderr that ends at its
    total; `--quiet` draws none."""
    from pathlib import Path

    import simulator.app.progress

    monkeypatch.setattr(simulator.app.progress, "shows_progress",
                        lambda quiet, stream=None: not quiet)
    repo = Path(__file__).resolve().parents[1]
    argv = [str(repo / a) if a.endswith(".json") else a for a in argv]
    out = ["--out", str(tmp_path / "out")] if argv[0] == "run" else []
    assert main([*argv, *out]) == 0
    err = capsys.readouterr().err
    if "--quiet" in argv:
        assert "simulating kernels" not in err
    else:
        assert "simulating kernels" in err and "100%" in err


def test_an_interrupt_numba_wraps_in_a_system_error_exits_130(monkeypatch, capsys):
    """Ctrl-C while a compiled function runs or loads reaches the CLI as numba's SystemError
    whose cause is the KeyboardInterrupt: status 130 and one line, as a plain interrupt; any
    other SystemError still raises."""
    import simulator.app.commands.op as op_command

    def interrupted(_args):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as exc:
            raise SystemError("CPUDispatcher(<function _lowest>) returned a result with an "
                              "exception set") from exc

    monkeypatch.setattr(op_command, "run", interrupted)
    assert main(["op", "softmax", "--rows", "8", "--cols", "8"]) == 130
    assert capsys.readouterr().err.splitlines() == ["ptxsim op: interrupted"]

    def broken(_args):
        raise SystemError("not an interrupt")

    monkeypatch.setattr(op_command, "run", broken)
    with pytest.raises(SystemError, match="not an interrupt"):
        main(["op", "softmax", "--rows", "8", "--cols", "8"])
