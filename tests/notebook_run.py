"""Running a notebook of `notebooks/` in the tests: execute it top to bottom in its folder
(nbclient), read the JSON of key numbers its last code cell prints, tell whether a cell
showed a plot inline. The notebooks are committed as sources (no outputs, no execution
counts); `execute_notebook` checks that before running one."""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOK_DIR = Path(__file__).parents[1] / "notebooks"


def code_cells(nb: nbformat.NotebookNode) -> list:
    """The notebook's code cells, in order."""
    return [c for c in nb.cells if c.cell_type == "code"]


def execute_notebook(name: str, cell_timeout_s: int = 300) -> nbformat.NotebookNode:
    """notebooks/<name>.ipynb, committed without outputs, executed in its folder, outputs
    filled in."""
    nb = nbformat.read(NOTEBOOK_DIR / f"{name}.ipynb", as_version=4)
    assert all(not c.outputs and c.execution_count is None for c in code_cells(nb)), name
    NotebookClient(nb, timeout=cell_timeout_s, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOK_DIR)}}).execute()
    return nb


def key_numbers(nb: nbformat.NotebookNode) -> dict:
    """The JSON object the executed notebook's last code cell printed."""
    last = code_cells(nb)[-1]
    text = "".join(o.get("text", "") for o in last.outputs if o.output_type == "stream")
    return json.loads(text.strip().splitlines()[-1])


def shows_png(cell) -> bool:
    """The executed cell displayed an image inline (an image/png output)."""
    return any("image/png" in o.get("data", {}) for o in cell.outputs)
