"""The notebooks run top to bottom (nbclient) and their key numbers hold.

Each notebook's last cell prints one JSON object of key numbers; the tests parse it and
check relations that must hold whatever the model's calibration (sums agree, bounds are
respected, every kernel is accounted for), not figures copied from a run.
Only the notebooks named in `NOTEBOOKS` are run here.
"""

from __future__ import annotations

from itertools import pairwise

import nbformat
import pytest
from notebook_run import NOTEBOOK_DIR, execute_notebook, key_numbers, shows_png

NOTEBOOKS = ("quickstart", "whatif_sweep", "reference_compare", "utilization")


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


@pytest.fixture(scope="module")
def whatif_sweep() -> nbformat.NotebookNode:
    return execute_notebook("whatif_sweep")


def test_whatif_sweep_finds_where_the_decode_layer_stops_being_memory_bound(whatif_sweep):
    """LLaMA-3-8B decode over SM count x HBM bandwidth: all six points finish, no point beats
    its roofline, more bandwidth or more SMs never slow the layer, the bound changes inside
    the grid and only toward fewer SMs and more bandwidth, and doubling HBM saves the full
    chip (memory-bound) at least 5 % and more than it saves any SM count compute-bound at
    both bandwidths."""
    numbers = key_numbers(whatif_sweep)
    assert numbers["points"] == numbers["ok"] == 6
    assert numbers["kernel_rows"] == numbers["kernel_count"] > 0
    sms, (low, high) = numbers["sm_counts"], numbers["hbm_tbps"]
    time = {(s, b): numbers["time_us"][str(s)][b] for s in sms for b in (low, high)}
    bound = {(s, b): numbers["bound"][str(s)][b] for s in sms for b in (low, high)}
    assert all(time[p] >= numbers["roofline_us"][str(p[0])][p[1]] > 0 for p in time)
    for s in sms:
        assert time[s, high] <= time[s, low]
    for b in (low, high):
        assert all(time[few, b] >= time[more, b] for few, more in pairwise(sms))
    assert set(bound.values()) == {"memory", "compute"}
    for (s, b), kind in bound.items():
        if kind == "compute":   # the compute roof only drops with fewer SMs, more bandwidth
            assert all(bound[s2, b2] == "compute" for s2 in sms if s2 <= s
                       for b2 in (low, high) if b2 >= b)
    full = max(sms)
    assert bound[full, low] == "memory"
    saved = {s: 1 - time[s, high] / time[s, low] for s in sms}
    assert saved[full] >= 0.05
    assert all(saved[full] > saved[s] for s in sms
               if bound[s, low] == bound[s, high] == "compute")


def test_whatif_sweep_shows_its_plots_and_a_computed_conclusion(whatif_sweep):
    """The line plot, heatmap and category bars show inline as PNGs, and the conclusion is
    Markdown the notebook printed from the table (the full chip's row among it)."""
    code = [c for c in whatif_sweep.cells if c.cell_type == "code"]
    plots = [c for c in code if "plot_sweep_" in c.source and "show(" in c.source]
    assert len(plots) == 3 and all(shows_png(c) for c in plots)
    shown = ["".join(o["data"]["text/markdown"]) for c in code for o in c.outputs
             if "text/markdown" in o.get("data", {})]
    numbers = key_numbers(whatif_sweep)
    full = str(max(numbers["sm_counts"]))
    row = f"| {full} | {numbers['time_us'][full][numbers['hbm_tbps'][0]]:.1f} |"
    assert len(shown) == 1 and row in shown[0] and "-bound" in shown[0]


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
