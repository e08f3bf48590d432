"""`simulator.simulate_workload`: nodes become ops, scheduled on streams after their deps.

A tiny hand-built graph (RMSNorm -> GEMM -> SwiGLU twice -> residual add, with an
all-to-all on the comm stream, simulated as a collective kernel) keeps the tests to
seconds; a whole layer runs only where every op it needs is registered (else the test is
skipped naming the missing op).
"""

from __future__ import annotations

import math

import pytest

import models
import simulator
import workloads
from isa.errors import InputError
from workloads.graph import KernelGraph
from workloads.layers import ops as L
from workloads.node_ops import MissingOpError, node_op

ROWS, HIDDEN = 64, 256


def tiny_graph(ep: int = 8) -> KernelGraph:
    nodes = [
        L.elementwise("norm", "rmsnorm", rows=ROWS, cols=HIDDEN, dtype="bf16"),
        L.gemm("up", m=ROWS, n=HIDDEN, k=HIDDEN, dtype="bf16", out_dtype="bf16",
               deps=("norm",)),
        L.alltoall("dispatch", "alltoall_dispatch", tokens=ROWS, hidden=HIDDEN, topk=8, ep=ep,
                   dtype="bf16", deps=("norm",)),
        L.elementwise("act", "swiglu", rows=ROWS, cols=HIDDEN, out_cols=HIDDEN // 2,
                      dtype="bf16", deps=("up",)),
        L.elementwise("act_again", "swiglu", rows=ROWS, cols=HIDDEN, out_cols=HIDDEN // 2,
                      dtype="bf16", deps=("act", "dispatch")),
        L.elementwise("res", "residual_add", rows=ROWS, cols=HIDDEN, dtype="bf16", inputs=2,
                      deps=("act_again",)),
    ]
    return KernelGraph("tiny", tuple(nodes), {"model": "llama3-8b", "phase": "prefill"})


@pytest.fixture(scope="module")
def h800():
    return models.load_preset("h800_sxm")


@pytest.fixture(scope="module")
def tiny(h800):
    """The tiny graph with 20 SMs reserved for communication."""
    return simulator.simulate_workload(tiny_graph(), config=h800, fidelity="sampled",
                                       comm_sms=20)


def test_node_starts_when_its_deps_end_and_its_stream_is_free(tiny):
    """start = max(end of deps, end of the previous node on the same stream)."""
    k = tiny.kernels.set_index("name")
    stream_end: dict[str, float] = {}
    for _name, row in k.iterrows():
        deps = [d for d in row["deps"].split(",") if d]
        ready = max([k.loc[d, "end_us"] for d in deps], default=0.0)
        assert row["start_us"] == pytest.approx(max(ready, stream_end.get(row["stream"], 0.0)))
        assert row["end_us"] == pytest.approx(row["start_us"] + row["time_us"])
        stream_end[row["stream"]] = row["end_us"]
    assert tiny.time_us == pytest.approx(k["end_us"].max())


def test_comm_stream_runs_beside_compute(tiny):
    """The all-to-all overlaps the GEMM (both wait only for the norm): makespan < sum."""
    k = tiny.kernels.set_index("name")
    assert k.loc["dispatch", "stream"] == "comm"
    assert k.loc["dispatch", "start_us"] == pytest.approx(k.loc["up", "start_us"])
    assert k.loc["dispatch", "time_us"] > 0 and k.loc["up", "time_us"] > 0
    assert tiny.time_us < k["time_us"].sum()


def test_dispatch_node_is_the_simulated_alltoall_kernel(h800):
    """Without contention a dispatch node takes exactly the alltoall op's simulated time
    (ranks = the node's ep, bf16, 256 experts for a model without MoE)."""
    from workloads.ops import build_op, simulate_op

    res = simulator.simulate_workload(tiny_graph(), config=h800, comm_sms=20,
                                      contention=False)
    row = res.kernels.set_index("name").loc["dispatch"]
    plan = build_op("alltoall", h800.with_overrides({"sm.comm_count": 20}), kind="dispatch",
                    ranks=8, tokens=ROWS, hidden=HIDDEN, topk=8, experts=256, dtype="bf16",
                    comm_sms=20)
    assert row["time_us"] == pytest.approx(simulate_op(plan, h800, "sampled")["time_us"])
    assert row["model"] == "simulated" and row["link_bytes"] > 0


def test_no_reserved_sms_put_collectives_on_the_compute_stream(h800):
    """With sm.comm_count = 0 the dispatch kernel takes the compute SMs: no overlap."""
    res = simulator.simulate_workload(tiny_graph(), config=h800, fidelity="sampled")
    k = res.kernels.set_index("name")
    assert set(k["stream"]) == {"compute"}
    assert res.time_us == pytest.approx(k["time_us"].sum())
    assert len(res.meta["contention"]) == 0


def test_overlapping_collective_is_stretched_by_the_measured_contention(tiny, h800):
    """The dispatch beside the GEMM gets (comm_stretch - 1) x its overlap added to its time
    alone, as the concurrent measurement of the pair says; the measurement compares the
    dispatch alone and beside at the same progress, over the window both ran."""
    pairs = tiny.meta["contention"]
    assert list(pairs["comm_node"]) == ["dispatch"] and list(pairs["partner"]) == ["up"]
    pair = pairs.iloc[0]
    assert pair["comm_beside_us"] > pair["comm_alone_us"]
    assert pair["measured_overlap_us"] == pytest.approx(min(pair["comm_beside_us"],
                                                            pair["compute_beside_us"]))
    alone = simulator.simulate_workload(tiny_graph(), config=h800, fidelity="sampled",
                                        comm_sms=20, contention=False)
    k = tiny.kernels.set_index("name")
    expected = (alone.kernels.set_index("name").loc["dispatch", "time_us"]
                + (pair["comm_stretch"] - 1) * pair["overlap_us"])
    assert k.loc["dispatch", "time_us"] == pytest.approx(expected)
    assert "contention" in k.loc["dispatch", "note"]


def test_allreduce_across_nodes_is_timed_by_link_bandwidth(h800):
    """No collective kernel spans nodes for an all-reduce: link_bytes / network GB/s."""
    graph = KernelGraph("ar", (L.allreduce("grad", elements=1 << 20, dtype="bf16",
                                           ranks=16),), {"phase": "train"})
    res = simulator.simulate_workload(graph, config=h800)
    row = res.kernels.iloc[0]
    gbps = h800.to_dict()["links"]["network_achieved_gbps"]
    assert row["model"] == "link bandwidth"
    assert row["time_us"] == pytest.approx(row["link_bytes"] / (gbps * 1e3))


def test_identical_nodes_are_simulated_once(h800, monkeypatch):
    """Two SwiGLU nodes of one shape cost one simulation; the second reuses its figures."""
    import workloads.ops as ops_pkg

    calls = []
    real = ops_pkg.simulate_op
    monkeypatch.setattr(ops_pkg, "simulate_op",
                        lambda plan, *a, **kw: calls.append(plan.kind) or real(plan, *a, **kw))
    res = simulator.simulate_workload(tiny_graph(), config=h800, fidelity="full")
    assert sorted(calls) == ["alltoall", "gemm", "residual-add", "rmsnorm", "swiglu"]
    k = res.kernels.set_index("name")
    assert k.loc["act_again", "reused"] and not k.loc["act", "reused"]
    assert k.loc["act_again", "time_us"] == k.loc["act", "time_us"]
    per_kernel = res.stats.groupby("kernel").size()
    assert per_kernel["act_again"] == per_kernel["act"]


def test_op_cache_shares_results_between_calls(h800, monkeypatch):
    """A second call with the same op_cache and config simulates nothing and gives the same
    table; another comm_sms is another config and simulates again."""
    import pandas as pd

    import workloads.ops as ops_pkg

    cache: dict = {}
    first = simulator.simulate_workload(tiny_graph(), config=h800, comm_sms=20,
                                        contention=False, op_cache=cache)
    calls = []
    real = ops_pkg.simulate_op
    monkeypatch.setattr(ops_pkg, "simulate_op",
                        lambda plan, *a, **kw: calls.append(plan.kind) or real(plan, *a, **kw))
    again = simulator.simulate_workload(tiny_graph(), config=h800, comm_sms=20,
                                        contention=False, op_cache=cache)
    assert calls == []
    pd.testing.assert_frame_equal(again.kernels, first.kernels)
    simulator.simulate_workload(tiny_graph(), config=h800, comm_sms=8, contention=False,
                                op_cache=cache)
    assert "alltoall" in calls


def test_result_carries_stats_per_node_and_a_bandwidth_timeline(tiny):
    """One run_id; stats for every simulated node; link GB/s in the timeline while the
    dispatch runs."""
    assert set(tiny.stats["run_id"]) == {"tiny"}
    assert set(tiny.stats["kernel"]) == {"norm", "up", "dispatch", "act", "act_again", "res"}
    link = tiny.timeline[tiny.timeline["component"] == "memory.link"]
    k = tiny.kernels.set_index("name")
    during = link[(link["start_us"] >= k.loc["dispatch", "start_us"])
                  & (link["end_us"] <= k.loc["dispatch", "end_us"])]
    assert not during.empty
    assert during["value"].max() == pytest.approx(k.loc["dispatch", "link_bytes"]
                                                  / k.loc["dispatch", "time_us"] / 1e3)
    assert tiny.cycles == round(tiny.time_us * 1e3 * tiny.config.chip.clock_ghz)


def test_report_reads_a_workload_result(tiny, tmp_path):
    """write_report takes the result: one kernel row per node, the Gantt drawn."""
    import pandas as pd

    import reports

    out = reports.write_report(tiny, tmp_path / "run")
    table = pd.read_csv(out / "kernels.csv")
    assert list(table["kernel"]) == list(tiny.kernels["name"])
    assert (out / "gantt.png").is_file() and (out / "trace.json").is_file()


def test_unregistered_op_is_named_before_anything_runs(h800, monkeypatch):
    """A node whose op is missing raises MissingOpError naming node and op; nothing ran."""
    import workloads.ops as ops_pkg

    monkeypatch.delitem(ops_pkg.OPS, "swiglu")
    monkeypatch.setattr(ops_pkg, "simulate_op", lambda *a, **kw: pytest.fail("ran"))
    with pytest.raises(MissingOpError, match=r"'act'.*'swiglu'"):
        simulator.simulate_workload(tiny_graph(), config=h800)


@pytest.mark.parametrize(("graph", "kwargs", "match"), [
    ("not a graph", {}, "KernelGraph"),
    (None, {"fidelity": "exact"}, "fidelity"),
])
def test_bad_input_is_rejected(h800, graph, kwargs, match):
    """A non-graph or an unknown fidelity is an InputError naming it."""
    with pytest.raises(InputError, match=match):
        simulator.simulate_workload(tiny_graph() if graph is None else graph, config=h800,
                                    **kwargs)


def test_deepseek_nodes_map_to_fp8_deepseek_gemms_and_masked_decode():
    """DeepSeek-V3 e4m3 GEMMs run as fp8 with DeepSeek scaling; decode experts are masked."""
    prefill = workloads.layer("deepseek-v3", "prefill", tokens=256)
    op = node_op(prefill.node("o_proj"), prefill.meta)
    assert op.kwargs["dtype"] == "fp8" and op.kwargs["scaling"] == "deepseek"
    experts = node_op(prefill.node("experts.gate_up_proj"), prefill.meta)
    assert experts.kwargs["layout"] == "contiguous" and experts.kwargs["groups"] == 256
    decode = workloads.layer("deepseek-v3", "decode", batch=16)
    masked = node_op(decode.node("experts.gate_up_proj"), decode.meta)
    assert masked.kwargs["layout"] == "masked"
    assert masked.kwargs["valid_m"] == 16 * 8
    rope = node_op(prefill.node("rope"), prefill.meta)
    assert rope.kwargs["rot_dim"] == 64 and rope.kwargs["cols"] % 64 == 0


def _needs(*kinds):
    from workloads.ops import OPS

    missing = [k for k in kinds if k not in OPS]
    if missing:
        pytest.skip(f"op(s) {', '.join(missing)} not registered in workloads.ops yet")


def test_bert_layer_full_and_sampled_agree(h800):
    """A BERT-base prefill layer runs at both fidelities; sampled within 3 % of full."""
    _needs("gemm", "attention", "layernorm", "gelu", "residual-add")
    graph = workloads.layer("bert-base", "prefill", tokens=64)
    full = simulator.simulate_workload(graph, config=h800, fidelity="full")
    sampled = simulator.simulate_workload(graph, config=h800, fidelity="sampled")
    assert list(full.kernels["name"]) == list(graph.names())
    assert (full.kernels["time_us"] > 0).all()
    assert math.isclose(sampled.time_us, full.time_us, rel_tol=0.03)
    assert (sampled.fidelity, full.fidelity) == ("sampled", "full")


def test_same_graph_same_config_gives_identical_tables(tiny, h800):
    """Simulating the same graph again reproduces the kernels and stats tables exactly."""
    import pandas as pd

    again = simulator.simulate_workload(tiny_graph(), config=h800, fidelity="sampled",
                                        comm_sms=20)
    pd.testing.assert_frame_equal(again.kernels, tiny.kernels)
    pd.testing.assert_frame_equal(again.stats.reset_index(drop=True),
                                  tiny.stats.reset_index(drop=True))


def test_kernels_table_carries_each_ops_sm_clock(h800, tiny):
    """`sm_clock_ghz` is the clock `simulate_op` ran each node's launches at: the preset's
    where nothing binds; under a power cap low enough to bind, the GEMM's sustained clock
    (below the preset's, the same as the op alone) while kernels without tensor work keep
    the preset's."""
    from workloads.ops import build_op, simulate_op

    preset_ghz = h800.chip.clock_ghz
    k = tiny.kernels.set_index("name")
    assert (k["sm_clock_ghz"] == preset_ghz).all()
    capped = models.load_preset("h800_sxm", {"chip.power_cap_clock_ghz": 0.05})
    res = simulator.simulate_workload(tiny_graph(), config=capped, fidelity="sampled",
                                      timeline=False, comm_sms=20)
    k = res.kernels.set_index("name")
    alone = simulate_op(build_op("gemm", res.config, m=ROWS, n=HIDDEN, k=HIDDEN,
                                 dtype="bf16"), res.config, "sampled")
    assert k.loc["up", "sm_clock_ghz"] == pytest.approx(alone["sm_clock_ghz"])
    assert k.loc["up", "sm_clock_ghz"] < preset_ghz
    assert (k.drop(index="up")["sm_clock_ghz"] == preset_ghz).all()
