"""A workload result keeps each node's launch series; the report puts them on one time axis."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import models
import simulator
from isa.errors import InputError
from reports.workload_timeline import kernel_shares, workload_timeline
from workloads.graph import KernelGraph
from workloads.layers import ops as L

ROWS, HIDDEN = 64, 256


def small_graph() -> KernelGraph:
    nodes = [
        L.elementwise("norm", "rmsnorm", rows=ROWS, cols=HIDDEN, dtype="bf16"),
        L.gemm("up", m=ROWS, n=HIDDEN, k=HIDDEN, dtype="bf16", out_dtype="bf16",
               deps=("norm",)),
        L.alltoall("dispatch", "alltoall_dispatch", tokens=ROWS, hidden=HIDDEN, topk=8, ep=64,
                   dtype="bf16", deps=("norm",)),
        L.elementwise("act", "swiglu", rows=ROWS, cols=HIDDEN, out_cols=HIDDEN // 2,
                      dtype="bf16", deps=("up",)),
        L.elementwise("act_again", "swiglu", rows=ROWS, cols=HIDDEN, out_cols=HIDDEN // 2,
                      dtype="bf16", deps=("act", "dispatch")),
    ]
    return KernelGraph("small", tuple(nodes), {"model": "llama3-8b", "phase": "prefill"})


@pytest.fixture(scope="module")
def h800():
    return models.load_preset("h800_sxm")


@pytest.fixture(scope="module")
def result(h800):
    return simulator.simulate_workload(small_graph(), config=h800, fidelity="sampled")


def test_every_timed_node_keeps_its_launch_series(result, h800):
    """One table per node that ran launches; a reused node shares its op's table; with
    timeline=False none are kept and the kernel table is the same."""
    series = result.kernel_timelines
    timed = result.kernels[result.kernels["model"] == "simulated"]["name"]
    assert set(series) == set(timed)
    assert series["act_again"] is series["act"]
    for frame in series.values():
        assert {"launch", "weight", "component", "stat", "value"} <= set(frame.columns)
        assert (frame[frame["stat"] == "utilization"]["value"].between(0, 1)).all()
    bare = simulator.simulate_workload(small_graph(), config=h800, timeline=False)
    assert bare.kernel_timelines == {}
    pd.testing.assert_frame_equal(bare.kernels, result.kernels)


def test_layer_series_carry_every_node_bytes_and_fit_the_makespan(result):
    """Bytes per level summed over the bins equal the kernel table's; bins tile [0, makespan];
    link bytes are the link-timed nodes'; the mean SM series is the mean of the SMs'."""
    tl = workload_timeline(result, bins=40)
    k = result.kernels
    hbm = tl[(tl["component"] == "memory.hbm") & (tl["stat"] == "bytes")]
    assert len(hbm) == 40
    assert hbm["value"].sum() == pytest.approx(k["hbm_bytes"].fillna(0).sum(), rel=1e-9)
    l2 = tl[(tl["component"] == "memory.l2") & (tl["stat"] == "bytes")]
    assert l2["value"].sum() == pytest.approx(k["l2_bytes"].fillna(0).sum(), rel=1e-9)
    link = tl[(tl["component"] == "memory.link") & (tl["stat"] == "bytes")]
    assert link["value"].sum() == pytest.approx(k["link_bytes"].fillna(0).sum(), rel=1e-9)
    assert hbm["start_us"].iloc[0] == 0
    assert hbm["end_us"].iloc[-1] == pytest.approx(result.time_us)
    assert np.allclose(hbm["start_us"].to_numpy()[1:], hbm["end_us"].to_numpy()[:-1])
    per_sm = tl[tl["component"].str.fullmatch(r"sm\.\d+")]
    grid = per_sm.pivot_table(index="component", columns="end_us", values="value")
    mean = tl[tl["component"] == "sm"].set_index("end_us")["value"]
    assert np.allclose(grid.mean(axis=0).to_numpy(), mean.loc[grid.columns].to_numpy())
    assert (per_sm["value"] >= 0).all()


def _only(result, name: str, frame: pd.DataFrame):
    """`result` reduced to node `name`, with `frame` as its launch series."""
    return type(result)(result.graph, result.kernels[result.kernels["name"] == name],
                        result.stats, result.timeline, result.time_us, result.config,
                        result.fidelity, result.meta, {name: frame})


def _busy_us(frame: pd.DataFrame) -> float:
    util = frame[frame["component"].str.fullmatch(r"sm\.\d+")
                 & (frame["stat"] == "utilization")]
    return float((util["value"] * (util["end_us"] - util["start_us"])).sum())


def test_a_launch_timed_as_it_is_keeps_its_own_pace_after_the_launch_overheads(result, h800):
    """A node of one launch timed in full: on the layer axis its SMs are busy for as long as
    in the launch's series (not stretched), and idle for the launch overheads first."""
    node = result.kernels.set_index("name").loc["up"]
    frame = result.kernel_timelines["up"]
    tl = workload_timeline(_only(result, "up", frame), bins=400)
    sm = tl[tl["component"].str.fullmatch(r"sm\.\d+")]
    assert float((sm["value"] * (sm["end_us"] - sm["start_us"])).sum()) == pytest.approx(
        _busy_us(frame), rel=1e-6)
    lead = h800.launch.kernel_overhead_us + h800.launch.kernel_front_end_us
    # The series' last bucket ends up to one bucket past the kernel's span (buckets are whole
    # cycle ranges), so the launch fills the node from up to one bucket before start + lead.
    util = frame[frame["component"].str.fullmatch(r"sm\.\d+") & (frame["stat"] == "utilization")]
    bucket_us = float((util["end_us"] - util["start_us"]).max())
    assert 0 < bucket_us < 0.05
    early = sm[sm["end_us"] <= node["start_us"] + lead - bucket_us]
    assert len(early) and (early["value"] == 0).all()


def test_extrapolated_work_runs_at_the_nodes_remaining_average_rate(result):
    """A node whose launch series is a sample of a longer op (its kernels table says 4x the
    bytes in 4x the time): the launch's buckets keep their rates, the rest of the node
    carries the remaining bytes evenly, and no bin is scaled above the launch's rates."""
    node = result.kernels[result.kernels["name"] == "up"].copy()
    frame = result.kernel_timelines["up"]
    launch_us = float(frame[frame["stat"] != "cta_span"]["end_us"].max())
    hbm_launch = float(frame[(frame["component"] == "memory.hbm")
                             & (frame["stat"] == "bytes")]["value"].sum())
    extra_us = 3 * launch_us
    node["end_us"] += extra_us
    node["time_us"] += extra_us
    node["hbm_bytes"] = 4 * hbm_launch
    longer = type(result)(result.graph, node, result.stats, result.timeline,
                          float(node["end_us"].iloc[0]), result.config, result.fidelity,
                          result.meta, {"up": frame})
    tl = workload_timeline(longer, bins=1)
    moved = tl[(tl["component"] == "memory.hbm") & (tl["stat"] == "bytes")]["value"].sum()
    assert moved == pytest.approx(4 * hbm_launch, rel=1e-9)
    fine = workload_timeline(longer, bins=200)
    bw = fine[(fine["component"] == "memory.hbm") & (fine["stat"] == "bandwidth_gbps")]
    launch_bw = frame[(frame["component"] == "memory.hbm")
                      & (frame["stat"] == "bandwidth_gbps")]["value"]
    assert bw["value"].max() <= max(launch_bw.max(),
                                     3 * hbm_launch / (extra_us * 1e3)) * (1 + 1e-9)


def test_shares_sum_to_one_and_bad_bins_are_rejected(result):
    shares = kernel_shares(result)
    assert shares["share"].sum() == pytest.approx(1.0)
    assert list(shares["time_us"]) == sorted(shares["time_us"], reverse=True)
    with pytest.raises(InputError, match="bins=0"):
        workload_timeline(result, bins=0)


def test_report_of_a_workload_draws_the_heatmap_and_bandwidth(result, tmp_path):
    """write_report on a workload result draws the per-SM heatmap and bandwidth plots from
    the nodes' series, and its timeline.csv holds the layer-wide bins."""
    from reports import write_report

    out = tmp_path / "rep"
    write_report(result, out)
    names = {p.name for p in out.iterdir()}
    assert {"sm_utilization.png", "bandwidth.png", "gantt.png", "timeline.csv"} <= names
    tl = pd.read_csv(out / "timeline.csv")
    assert tl["component"].str.fullmatch(r"sm\.\d+").any()
    assert "memory.link" in set(tl["component"])


def test_nodes_of_one_op_share_their_buckets_with_the_same_series(result):
    """Nodes sharing their op's series table have its buckets prepared once; the series are
    those of every node prepared from its own copy of the table."""
    import dataclasses

    assert result.kernel_timelines["act_again"] is result.kernel_timelines["act"]
    apart = dataclasses.replace(result, kernel_timelines={
        name: frame.copy() for name, frame in result.kernel_timelines.items()})
    pd.testing.assert_frame_equal(workload_timeline(result), workload_timeline(apart))
