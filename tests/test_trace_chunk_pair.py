"""DeepSeek-V3 chunk pair: the trace side, the pairing rules and the resumable op cache.

The full simulation of the pair takes the better part of an hour of CPU and is not run
here; the simulated side is a stand-in kernels table built from the real layer-pair graph
(its times are the node's issue index, so every pairing can be traced back)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import models
import simulator
from isa.errors import InputError
from workloads.graph import KernelGraph
from workloads.layers import ops as L
from workloads.node_ops import node_op
from workloads.traces import chunk_pair as cp
from workloads.traces.distinct_ops import check_config, fill_op_cache, load, part, save, without
from workloads.traces.overlap import stream_overlap

pytestmark = pytest.mark.skipif(not cp.REFERENCE.exists(),
                                reason=f"reference trace not found at {cp.REFERENCE}")


@pytest.fixture(scope="module")
def trace():
    return cp.trace_kernels()


@pytest.fixture(scope="module")
def graph():
    return cp.chunk_pair_graph()


@pytest.fixture(scope="module")
def stand_in(graph):
    """A WorkloadResult-like object: node k takes k + 1 us, back to back on its stream."""
    free: dict[str, float] = {}
    rows = []
    for k, node in enumerate(graph.nodes):
        start = free.get(node.stream, 0.0)
        free[node.stream] = start + k + 1.0
        rows.append({"name": node.name, "op": node.op, "kind": node_op(node, graph.meta).kind,
                     "stream": node.stream, "role": node.role, "start_us": start,
                     "end_us": start + k + 1.0, "time_us": k + 1.0})

    class Result:
        kernels = pd.DataFrame(rows)
        fidelity = "sampled"
    return Result()


def test_every_trace_kernel_gets_a_pass_and_a_class(trace):
    """983 activities; forward only where DualPipe's annotation says (F); every mapped rule
    has a class or is `other`, and only rules with no simulated op are `other`."""
    assert len(trace) == 983
    assert set(trace["pass"]) == {"forward", "backward"}
    forward = trace[trace["pass"] == "forward"]
    assert forward["annotation"].str.endswith("(F)").all()
    other_rules = set(trace.loc[trace["class"] == "other", "rule"].dropna())
    assert not other_rules & set(cp.TRACE_CLASSES)
    assert {"deepgemm_fp8", "flash_attn_fwd", "deepep_dispatch"} <= set(trace["rule"])
    assert (trace["end_us"] >= trace["start_us"]).all()


def test_graph_is_one_deepseek_moe_layer_pair(graph):
    """Forward of one micro-batch and backward of the other; comm nodes on the comm
    stream; the config reserves DeepSeek's 20 SMs and spans EP64."""
    assert graph.meta["model"] == "deepseek-v3" and graph.meta["ep"] == cp.EP
    assert graph.meta["tokens"] == cp.TOKENS and graph.meta["layer_kind"] == "moe"
    roles = {n.role for n in graph.nodes}
    assert {"forward", "dgrad", "wgrad"} <= roles
    assert {n.stream for n in graph.nodes if n.op.startswith("alltoall")} == {"comm"}
    config = cp.chunk_pair_config()
    assert config.sm.comm_count == cp.COMM_SMS
    check_config(graph, config)
    with pytest.raises(InputError, match="links.nodes"):
        check_config(graph, config.with_overrides({"links.nodes": 1}))


def test_kernels_pair_only_where_counts_agree(trace, graph, stand_in):
    """Forward dense GEMMs: 7 per layer on both sides, paired in order, 4 layers over;
    backward dense GEMMs (trace recomputes 2 per layer) are not paired; the errors are
    (simulated - measured) / measured."""
    nodes = cp.simulated_nodes(stand_in)
    kernels = cp.per_kernel(trace, nodes)
    assert len(kernels) == len(trace)
    assert kernels["measured_us"].sum() == pytest.approx(trace["dur_us"].sum())
    fwd_gemm = kernels[(kernels["pass"] == "forward") & (kernels["class"] == "gemm")]
    sim_gemm = nodes[(nodes["pass"] == "forward") & (nodes["class"] == "gemm")]
    assert len(fwd_gemm) == len(sim_gemm) * cp.LAYERS and fwd_gemm["matched"].all()
    assert list(fwd_gemm["node"]) == list(sim_gemm["node"]) * cp.LAYERS
    assert list(sim_gemm["node"].str.removeprefix("mb1/")[:2]) == ["q_a_proj", "kv_a_proj"]
    bwd_gemm = kernels[(kernels["pass"] == "backward") & (kernels["class"] == "gemm")]
    assert len(bwd_gemm) and not bwd_gemm["matched"].any()
    assert kernels.loc[kernels["class"] == "other", "matched"].sum() == 0
    paired = kernels[kernels["matched"]]
    expected = 100 * (paired["simulated_us"] - paired["measured_us"]) / paired["measured_us"]
    assert np.allclose(paired["error_pct"], expected)
    assert cp.mape(kernels) == pytest.approx(expected.abs().mean())


def test_forward_swiglu_pairs_by_the_traces_order(trace, stand_in):
    """In every layer the trace issues the routed experts' SwiGLU (one CTA per routed
    row: more CTAs than tokens) before the shared expert's (one per token); the pairing
    follows it."""
    kernels = cp.per_kernel(trace, cp.simulated_nodes(stand_in))
    rows = kernels[(kernels["pass"] == "forward") & (kernels["class"] == "swiglu")]
    assert rows["matched"].all()
    assert list(rows["node"].str.removeprefix("mb1/")) == \
        ["experts.swiglu", "shared_expert.swiglu"] * cp.LAYERS
    fwd = trace[(trace["pass"] == "forward") & (trace["class"] == "swiglu")]
    ctas = [int(str(g).strip("()").split(",")[0]) for g in fwd["grid"]]
    assert all(c > cp.TOKENS for c in ctas[::2]) and all(c == cp.TOKENS for c in ctas[1::2])


def test_category_and_class_sums_keep_both_sides(trace, stand_in):
    """Measured sums over categories and classes equal the trace's total; simulated sums are
    the layer pair's x 4."""
    nodes = cp.simulated_nodes(stand_in)
    categories = cp.per_category(trace, nodes)
    assert categories["measured_us"].sum() == pytest.approx(trace["dur_us"].sum())
    assert categories["simulated_us"].sum() == pytest.approx(
        cp.LAYERS * stand_in.kernels["time_us"].sum())
    gemm = categories.set_index("category").loc["gemm"]
    gemm_classes = trace["class"].isin(["gemm", "grouped_gemm", "wgrad_gemm"])
    assert gemm["measured_us"] == pytest.approx(trace.loc[gemm_classes, "dur_us"].sum())
    assert gemm["measured_us"] < trace.loc[trace["category"] == "gemm", "dur_us"].sum()
    assert gemm["covered_measured_us"] == pytest.approx(gemm["measured_us"])
    assert gemm["covered_simulated_us"] == pytest.approx(gemm["simulated_us"])
    classes = cp.per_class(trace, nodes)
    assert classes["measured_us"].sum() == pytest.approx(trace["dur_us"].sum())
    assert classes["simulated_us"].sum() == pytest.approx(
        cp.LAYERS * stand_in.kernels["time_us"].sum())


def test_unsimulated_nodes_are_listed_not_dropped(trace, graph, stand_in):
    name = next(n.name for n in graph.nodes if n.name.endswith("attention.bwd"))
    nodes = cp.simulated_nodes(stand_in, {name: "not modelled"}, graph)
    row = nodes[nodes["reason"] == "not modelled"].iloc[0]
    assert row["class"] == "attention_bwd" and np.isnan(row["simulated_us"])
    classes = cp.per_class(trace, nodes).set_index(["pass", "class"])
    assert classes.loc[("backward", "attention_bwd"), "unsimulated"] == cp.LAYERS
    attention = cp.per_category(trace, nodes).set_index("category").loc["attention"]
    forward = trace[trace["class"] == "attention"]["dur_us"].sum()
    assert attention["covered_measured_us"] == pytest.approx(forward)
    assert attention["measured_us"] > forward


def test_a_node_left_out_pairs_no_kernel(trace, graph):
    """A forward GEMM node with no simulated time: its 4 trace kernels keep the node's
    name but are not matched and carry no error; the other forward GEMMs still pair."""
    dropped = "mb1/q_a_proj"

    class Partial:
        kernels = pd.DataFrame([{"name": n.name, "op": n.op,
                                 "kind": node_op(n, graph.meta).kind, "stream": n.stream,
                                 "role": n.role, "start_us": 0.0, "end_us": 10.0,
                                 "time_us": 10.0} for n in graph.nodes if n.name != dropped])
    nodes = cp.simulated_nodes(Partial, {dropped: "left out"}, graph)
    kernels = cp.per_kernel(trace, nodes)
    rows_q = kernels[kernels["node"] == dropped]
    assert len(rows_q) == cp.LAYERS and not rows_q["matched"].any()
    assert rows_q["error_pct"].isna().all()
    fwd_gemm = kernels[(kernels["pass"] == "forward") & (kernels["class"] == "gemm")]
    assert fwd_gemm["matched"].sum() == len(fwd_gemm) - cp.LAYERS
    assert kernels.loc[kernels["matched"], "simulated_us"].notna().all()


def test_overlap_table_reads_both_timelines(trace, stand_in):
    """The measured column is the trace's stream_overlap; the simulated one the stand-in's
    x 4 (its streams run side by side, so the union is below the summed busy time)."""
    table = cp.overlaps(trace, stand_in).set_index("what")
    measured = stream_overlap(trace[["stream", "start_us", "dur_us"]])
    assert table.loc["overlap (2+ streams busy)", "measured_us"] == pytest.approx(
        measured.overlap_us)
    busy = table[table.index.str.endswith("busy")]["simulated_us"].sum()
    union = table.loc["union (any stream busy)", "simulated_us"]
    overlap = table.loc["overlap (2+ streams busy)", "simulated_us"]
    assert 0 < overlap and union < busy


def _small_graph() -> KernelGraph:
    nodes = (
        L.elementwise("a", "rmsnorm", rows=64, cols=256, dtype="bf16"),
        L.elementwise("b", "swiglu", rows=64, cols=256, out_cols=128, dtype="bf16",
                      deps=("a",)),
        L.elementwise("c", "swiglu", rows=64, cols=256, out_cols=128, dtype="bf16",
                      deps=("b",)),
        L.elementwise("d", "residual_add", rows=64, cols=256, dtype="bf16", inputs=2,
                      deps=("c",)),
    )
    return KernelGraph("small", nodes, {"model": "llama3-8b", "phase": "prefill"})


def test_op_cache_resumes_and_feeds_simulate_workload(tmp_path, monkeypatch):
    """Distinct ops are simulated once into the JSON cache; a second fill simulates
    nothing; simulate_workload from the cache gives the same table as a fresh run; a node
    whose op fails is recorded and can be taken out of the graph."""
    import workloads.ops as ops_pkg

    config = models.load_preset("h800_sxm")
    graph = _small_graph()
    path = tmp_path / "ops.json"
    calls = []
    real = ops_pkg.simulate_op
    monkeypatch.setattr(ops_pkg, "simulate_op",
                        lambda plan, *a, **kw: calls.append(plan.kind) or real(plan, *a, **kw))
    first = fill_op_cache(graph, config, "sampled", path)
    assert sorted(calls) == ["residual-add", "rmsnorm", "swiglu"]
    assert set(first.cpu_s) == {"a", "b", "d"} and not first.unsimulated
    calls.clear()
    again = fill_op_cache(graph, config, "sampled", path)
    assert calls == [] and set(again.cpu_s) == set(first.cpu_s)
    cached = simulator.simulate_workload(graph, config=config, timeline=False,
                                         op_cache=load(path).op_cache)
    assert calls == []
    fresh = simulator.simulate_workload(graph, config=config, timeline=False)
    cols = ["name", "start_us", "end_us", "time_us", "hbm_bytes"]
    pd.testing.assert_frame_equal(cached.kernels[cols], fresh.kernels[cols])
    trimmed = without(graph, {"c"})
    assert trimmed.node("d").deps == ("b",) and "c" not in trimmed.names()


def test_a_failing_op_is_recorded_and_the_walk_goes_on(tmp_path, monkeypatch):
    """A builder that rejects its sizes: the node is listed with the error, later nodes
    still run, the record survives a reload; a file that is not a cache is refused."""
    import workloads.ops as ops_pkg

    real = ops_pkg.build_op

    def rejecting(kind, config, **kwargs):
        if kind == "swiglu":
            raise InputError("swiglu: sizes rejected for this test")
        return real(kind, config, **kwargs)

    monkeypatch.setattr(ops_pkg, "build_op", rejecting)
    config = models.load_preset("h800_sxm")
    cache = fill_op_cache(_small_graph(), config, "sampled", tmp_path / "c.json")
    assert set(cache.unsimulated) == {"b", "c"} and "sizes rejected" in cache.unsimulated["c"]
    assert {"a", "d"} <= set(cache.cpu_s)
    assert "c" in load(tmp_path / "c.json").unsimulated
    assert without(_small_graph(), cache.unsimulated).node("d").deps == ("a",)
    (tmp_path / "junk.pkl").write_bytes(b"\x80\x04K\x01.")
    with pytest.raises(InputError, match="not an op cache"):
        load(tmp_path / "junk.pkl")
    (tmp_path / "other.json").write_text('{"format": "something else"}')
    with pytest.raises(InputError, match="not an op cache"):
        load(tmp_path / "other.json")


def test_workers_and_budget_give_the_same_cache_and_stop_early(tmp_path):
    """Two worker processes, largest first, fill the same op results as one process; a zero
    budget simulates nothing and `missing` names every node."""
    from workloads.traces.distinct_ops import missing

    config = models.load_preset("h800_sxm")
    graph = _small_graph()
    none = fill_op_cache(graph, config, "sampled", budget_s=0.0)
    assert none.cpu_s == {} and missing(graph, config, none) == list(graph.names())
    serial = fill_op_cache(graph, config, "sampled")
    pooled = fill_op_cache(graph, config, "sampled", tmp_path / "p.json", workers=2,
                           largest_first=True)
    assert set(pooled.cpu_s) == set(serial.cpu_s) and missing(graph, config, pooled) == []
    a = simulator.simulate_workload(graph, config=config, timeline=False,
                                    op_cache=serial.op_cache)
    b = simulator.simulate_workload(graph, config=config, timeline=False,
                                    op_cache=load(tmp_path / "p.json").op_cache)
    pd.testing.assert_frame_equal(a.kernels, b.kernels)
    with pytest.raises(InputError, match="workers=0"):
        fill_op_cache(graph, config, workers=0)


def test_report_folder_has_its_tables_and_the_command(tmp_path, graph, stand_in):
    """The writer puts every table and a README naming the command and the nodes left out;
    the headline figures agree with the tables."""
    from workloads.traces.chunk_pair_report import write

    name = next(n.name for n in graph.nodes if n.name.endswith("attention.bwd"))
    figures = write(tmp_path / "rep", stand_in, {name: "not modelled here"}, graph,
                    {"x": 1.0}, "python -m workloads.traces.chunk_pair_report --out X", False)
    files = {p.name for p in (tmp_path / "rep").iterdir()}
    assert files == {"kernels.csv", "classes.csv", "categories.csv", "overlap.csv",
                     "simulated_nodes.csv", "README.md"}
    text = (tmp_path / "rep" / "README.md").read_text()
    assert "python -m workloads.traces.chunk_pair_report --out X" in text
    assert name in text and "not modelled here" in text
    kernels = pd.read_csv(tmp_path / "rep" / "kernels.csv")
    assert figures["paired_kernels"] == int(kernels["matched"].sum())
    assert figures["trace_kernels"] == len(kernels) == 983
    gemm = kernels[kernels["matched"] & (kernels["category"] == "gemm")]
    assert figures["paired_mape_pct_by_category"]["gemm"] == pytest.approx(
        gemm["error_pct"].abs().mean())
    assert figures["distinct_ops_simulated"] == figures["distinct_ops"] - 1
    assert f"({figures['distinct_ops_simulated']} of the layer pair's " \
        f"{figures['distinct_ops']} distinct ops)" in text.replace("\n", " ")
    causes = text.split("## Why attention and communication read low")[1].split("##")[0]
    notify = kernels[kernels["class"] == "comm_notify"]
    assert f"notify kernels, {len(notify)} of them, {notify['measured_us'].sum():.0f} us" \
        in causes
    assert "no simulated time (not modelled here)" in causes

    class WithPairs:
        kernels = stand_in.kernels
        fidelity = "sampled"
        meta = {"contention": pd.DataFrame([{
            "comm_node": "mb1/dispatch", "partner": "mb1/o_proj", "beside": 3,
            "overlap_us": 80.0, "compute_alone_us": 40.0, "compute_beside_us": 42.0,
            "comm_alone_us": 200.0, "comm_beside_us": 210.0, "compute_stretch": 1.05,
            "comm_stretch": 1.238}])}
    write(tmp_path / "pairs", WithPairs, {}, graph, {}, "cmd", True)
    text = (tmp_path / "pairs" / "README.md").read_text()
    assert "| mb1/dispatch | mb1/o_proj | 3 | 80.0 |" in text and "1.238" in text
    assert len(pd.read_csv(tmp_path / "pairs" / "contention.csv")) == 1
    attn = pd.read_csv(tmp_path / "pairs" / "categories.csv").set_index("category")
    attn = attn.loc["attention"]
    classes = pd.read_csv(tmp_path / "pairs" / "classes.csv")
    bwd = classes[classes["class"] == "attention_bwd"]
    fwd_measured = attn["measured_us"] - bwd["measured_us"].sum()
    fwd_simulated = attn["simulated_us"] - bwd["simulated_us"].sum()
    assert "is simulated as" in text
    assert (f"Forward attention alone: "
            f"{100 * (fwd_simulated - fwd_measured) / fwd_measured:+.1f} % "
            f"({fwd_simulated:.0f} us simulated vs {fwd_measured:.0f} us measured)") in text


def test_simulate_lists_ops_not_reached_without_keeping_them(tmp_path, monkeypatch):
    """With one op's result missing and no time left, `simulate` lists its node as not
    reached and schedules the rest; the saved cache (with contention, the pairs are saved)
    does not keep that listing, so a rerun with time simulates it."""
    from workloads.traces import chunk_pair_report as report

    config, graph = models.load_preset("h800_sxm"), _small_graph()
    monkeypatch.setattr(cp, "chunk_pair_config", lambda: config)
    monkeypatch.setattr(cp, "chunk_pair_graph", lambda: graph)
    path = tmp_path / "ops.json"
    cache = fill_op_cache(graph, config, "sampled", path)
    done = part(cache, config, "sampled")
    swiglu = next(key for key in done if key[0] == "swiglu")
    del done[swiglu]
    save(cache, path)
    result, unsimulated, _, _ = report.simulate(path, contention=True, budget_s=0.0)
    assert set(unsimulated) == {"b", "c"} and unsimulated["b"] == report.NOT_YET
    assert list(result.kernels["name"]) == ["a", "d"]
    assert result.kernels.set_index("name").loc["d", "deps"] == "a"
    assert load(path).unsimulated == {}
    again, unsimulated, _, _ = report.simulate(path, contention=False)
    assert unsimulated == {} and list(again.kernels["name"]) == ["a", "b", "c", "d"]
