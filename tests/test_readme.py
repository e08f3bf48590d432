"""The README's set-up commands and Python examples stay true."""

from __future__ import annotations

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
CI = Path(__file__).resolve().parents[1] / ".ci" / "run"


def test_readme_starts_with_the_two_setup_commands():
    """The first code block holds exactly the install-and-run and install-and-test lines."""
    first = re.search(r"```\n(.*?)```", README.read_text(), re.S).group(1).strip().splitlines()
    assert first == ["pip install -e . && ptxsim run",
                     "pip install -e '.[test]' && python -m pytest"]


def test_ci_runs_the_readme_test_command():
    """`.ci/run` calls the README's test command verbatim."""
    assert "pip install -e '.[test]' && python -m pytest" in CI.read_text()


def test_readme_python_examples_run():
    """Every ```python block of the README runs and its asserts hold."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks
    for block in blocks:
        code = "\n".join(line[2:] if line.startswith("  ") else line
                         for line in block.splitlines())
        exec(compile(code, str(README), "exec"), {})
