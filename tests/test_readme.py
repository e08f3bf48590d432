"""The README is a short front page that stays true: its set-up commands, its examples and the
accuracy figures it quotes; README.md and docs/*.md hold no history and link only to files in
the repository."""

from __future__ import annotations

import json
import re
import shlex
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
CI = ROOT / ".ci" / "run"
CALIBRATION = ROOT / "workloads" / "calibration"
SETUP = ["pip install -e . && ptxsim run", "pip install -e '.[test]' && python -m pytest"]
MAX_LINES = 200
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")
STOP_HISTORY = re.compile(
    r"\b(first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth"
    r"|\w+teenth|\w+tieth|\d+(st|nd|rd|th)|this|that|last|previous|next|each|every) stops?\b",
    re.IGNORECASE)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _code_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


def test_readme_starts_with_the_two_setup_commands():
    """The first code block holds exactly the install-and-run and install-and-test lines."""
    assert _code_blocks(README.read_text(), "")[0].strip().splitlines() == SETUP


def test_ci_runs_the_readme_test_command():
    """`.ci/run` calls the README's test command verbatim."""
    assert SETUP[1] in CI.read_text()


def test_readme_is_a_short_front_page():
    """The README fits in 200 lines."""
    assert len(README.read_text().splitlines()) <= MAX_LINES


def test_readme_and_docs_hold_no_history():
    """No dates and no references to past rounds of work ("the fifth stop") in the README or
    docs/; history belongs in CHANGELOG.md."""
    for path in [README, *DOCS]:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            assert not DATE.search(line), f"{path.name}:{number}: a date: {line}"
            assert not STOP_HISTORY.search(line), f"{path.name}:{number}: history: {line}"


def test_links_stay_inside_the_repository():
    """Every relative link of README.md, CHANGELOG.md and docs/*.md names a file or folder of
    the repository, and none reaches outside it (such as the shared checkout beside it)."""
    checked = 0
    for path in [README, ROOT / "CHANGELOG.md", *DOCS]:
        text = path.read_text()
        assert "../shared" not in text, f"{path.name} names a path outside the repository"
        for target in LINK.findall(text):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue
            resolved = (path.parent / target.split("#")[0]).resolve()
            assert resolved.is_relative_to(ROOT), f"{path.name}: {target} leaves the repository"
            assert resolved.exists(), f"{path.name}: {target} does not exist"
            checked += 1
    assert checked


def test_readme_python_examples_run():
    """Every ```python block of the README runs and its asserts hold."""
    blocks = _code_blocks(README.read_text(), "python")
    assert blocks
    for block in blocks:
        exec(compile(textwrap.dedent(block), str(README), "exec"), {})


def test_readme_op_example_prints_what_the_readme_shows(capsys):
    """Each `$ ptxsim op ...` example of the README times the op to the microsecond and cycle
    count its output shows."""
    from simulator.app.cli import main

    examples = 0
    for block in _code_blocks(README.read_text(), "console"):
        lines = block.splitlines()
        for i, line in enumerate(lines):
            if not line.startswith("$ ptxsim op "):
                continue
            shown = next(s for s in lines[i + 1:] if s.startswith("time_us "))
            time_us, cycles = re.match(r"time_us\s+([\d.]+) us\s+\(with launch overhead; "
                                       r"cycles (\d+), the SM span\)", shown).groups()
            capsys.readouterr()
            assert main(shlex.split(line[2:])[1:] + ["--json"]) == 0
            result = json.loads(capsys.readouterr().out)
            assert f"{result['time_us']:.3f}" == time_us and result["cycles"] == int(cycles)
            examples += 1
    assert examples


def _table_row(text: str, label: str) -> str:
    rows = [line for line in text.splitlines() if line.startswith(f"| {label}")]
    assert len(rows) == 1, f"one table row starting with {label!r}"
    return rows[0]


def test_accuracy_tables_quote_the_stored_baselines():
    """The accuracy figures of the README and docs/accuracy.md are those of the baselines the
    accuracy tests hold the simulator to (`workloads/calibration/*_baseline.json`)."""
    def metrics(name: str) -> dict:
        return json.loads((CALIBRATION / f"{name}_accuracy_baseline.json").read_text())["metrics"]

    gemm, attention, vidur = metrics("gemm"), metrics("attention"), metrics("vidur")
    expected = {
        "GEMM bf16": [f"{gemm['bf16']['mape_pct']:.1f} %", f"{gemm['bf16']['pearson_r']:.3f}"],
        "GEMM fp8,": [f"{gemm['fp8']['mape_pct']:.1f} %", f"{gemm['fp8']['pearson_r']:.3f}"],
        "GEMM fp8_block": [f"{gemm['fp8_block']['mape_pct']:.1f} %",
                           f"{gemm['fp8_block']['pearson_r']:.3f}"],
        "decode attention": [f"{attention['all']['mape_pct']:.1f} % /",
                             f"{attention['all']['pearson_r']:.3f} /"],
        "LLaMA-2-7B GEMMs": [f"{vidur['gemm']['mape_pct']:.1f} %",
                             f"{vidur['gemm']['pearson_r']:.3f}"],
        "LLaMA-2-7B RMSNorm": [" / ".join(f"{vidur[f]['mape_pct']:.1f}"
                                          for f in ("rmsnorm", "swiglu", "rope", "add")) + " %"],
    }
    for path in (README, ROOT / "docs" / "accuracy.md"):
        text = path.read_text()
        for label, figures in expected.items():
            row = _table_row(text, label)
            for figure in figures:
                assert figure in row, f"{path.name}: {label} row lacks {figure}: {row}"
