"""The notebooks run top to bottom (nbclient) and their key numbers hold.

Each notebook's last cell prints one JSON object of key numbers; the tests parse it and
check relations that must hold whatever the model's calibration (sums agree, bounds are
respected, every kernel is accounted for), not figures copied from a run.
Only the notebooks named in `NOTEBOOKS` are run here.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOK_DIR = Path(__file__).parents[1] / "notebooks"
NOTEBOOKS = ("quickstart", "whatif_sweep", "reference_compare", "utilization")


def execute_notebook(name: str, cell_timeout_s: int = 300) -> nbformat.NotebookNode:
    """notebooks/<name>.ipynb executed in its folder, outputs filled in."""
    nb = nbformat.read(NOTEBOOK_DIR / f"{name}.ipynb", as_version=4)
    NotebookClient(nb, timeout=cell_timeout_s, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOK_DIR)}}).execute()
    return nb


def key_numbers(nb: nbformat.NotebookNode) -> dict:
    """The JSON object the executed notebook's last code cell printed."""
    last = [c for c in nb.cells if c.cell_type == "code"][-1]
    text = "".join(o.get("text", "") for o in last.outputs if o.output_type == "stream")
    return json.loads(text.strip().splitlines()[-1])


def shows_png(cell) -> bool:
    """The executed cell displayed an image inline (an image/png output)."""
    return any("image/png" in o.get("data", {}) for o in cell.outputs)


def run_notebook(name: str, cell_timeout_s: int = 300) -> dict:
    """Execute notebooks/<name>.ipynb in its folder; the JSON its last cell printed."""
    return key_numbers(execute_notebook(name, cell_timeout_s))


@pytest.fixture(scope="module")
def utilization() -> nbformat.NotebookNode:
    return execute_notebook("utilization", cell_timeout_s=900)


def test_every_listed_notebook_exists_and_has_no_stored_outputs():
    """The notebooks are committed as sources: no outputs, no execution counts."""
    for name in NOTEBOOKS:
        nb = nbformat.read(NOTEBOOK_DIR / f"{name}.ipynb", as_version=4)
        nbformat.validate(nb)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert code and all(not c.outputs and c.execution_count is None for c in code)


def test_quickstart_op_report_and_timeline():
    """The op is no faster than its roofline, the report has its files, and the timeline's
    HBM bytes equal the stats table's."""
    numbers = run_notebook("quickstart")
    assert numbers["op_time_us"] >= numbers["op_roofline_us"] > 0
    assert 0 < numbers["kernel_time_us"] < numbers["time_us"]
    assert {"report.html", "trace.json", "stats.parquet", "kernels.csv", "roofline.png",
            "sm_utilization.png", "bandwidth.png"} <= set(numbers["files"])
    assert numbers["timeline_hbm_bytes"] == pytest.approx(numbers["stats_hbm_bytes"])
    assert numbers["stats_hbm_bytes"] > 0


def test_whatif_sweep_runs_every_point_and_fewer_sms_are_not_faster():
    """All six points finish; at the large size, reserving SMs never makes saxpy faster."""
    numbers = run_notebook("whatif_sweep")
    assert numbers["points"] == numbers["ok"] == 6
    times = [numbers["time_us_big_by_comm_sms"][k] for k in ("0", "20", "66")]
    assert times[0] <= times[1] <= times[2]
    assert times[0] < times[2]


def test_reference_compare_accounts_for_every_kernel():
    """LLaMA-3-8B decode trace: all 104 kernels counted, at least 95 % of the measured time
    simulated, MAPE within 2 points of the stored baseline; the stored prefill figures meet
    the same coverage."""
    numbers = run_notebook("reference_compare")
    assert numbers["kernels"] == 104
    assert numbers["simulated"] + numbers["not_simulated"] == 104
    assert sum(numbers["status_counts"].values()) == 104
    assert numbers["coverage"] >= 0.95 and numbers["prefill_coverage"] >= 0.95
    assert 0 < numbers["mape_pct"] <= numbers["baseline_mape_pct"] + 2
    assert numbers["simulated_sum_us"] > 0 and -1 <= numbers["pearson_r"] <= 1


def test_utilization_accounts_for_the_layer_time_and_places_every_kernel(utilization):
    """DeepSeek-V3 layer (64 tokens): shares sum to 1, the makespan is the last node's end,
    every kernel with FLOPs and HBM bytes sits on the side of the ridge its bound says and
    is no faster than its roofline, the heatmap covers the SMs and carries the layer's HBM
    bytes, stall fractions sum to 1 per kernel."""
    numbers = key_numbers(utilization)
    assert numbers["kernel_rows"] == numbers["nodes"] > 20
    assert numbers["share_sum"] == pytest.approx(1.0)
    assert numbers["makespan_us"] == pytest.approx(numbers["last_end_us"])
    assert numbers["placed"] >= numbers["nodes"] // 2
    assert numbers["bound_consistent"] == numbers["placed"]
    assert numbers["slower_than_roofline"] == numbers["placed"]
    assert numbers["timeline_hbm_bytes"] == pytest.approx(numbers["kernels_hbm_bytes"],
                                                          rel=1e-6)
    assert 0 < numbers["sms_in_heatmap"] <= numbers["sm_count"]
    assert 0 < numbers["max_sm_utilization"] <= 1.0 + 1e-9
    assert numbers["stall_sums_min"] == pytest.approx(1.0)
    assert numbers["stall_sums_max"] == pytest.approx(1.0)
    assert 0 < numbers["top_op_share"] <= 1


def test_utilization_renders_every_plot_inline(utilization):
    """Each cell that calls a `plot_*` function shows its figure as an inline PNG (six:
    roofline, stalls, unit utilization, SM heatmap, bandwidth, Gantt)."""
    plots = [c for c in utilization.cells if c.cell_type == "code"
             and any(line.startswith("plot_") for line in c.source.splitlines())]
    assert len(plots) == 6
    assert all(shows_png(c) for c in plots)
