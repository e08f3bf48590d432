"""Kernel graphs: validation, order, streams, roles, shapes and argument errors."""

import pickle

import pytest

from isa.errors import InputError
from workloads import MODELS, KernelGraph, KernelNode, layer
from workloads.graph import COMM_OPS, GraphError


def _node(name, deps=()):
    return KernelNode(name, "rmsnorm", {"rows": 1, "cols": 1}, deps=deps, flops=4,
                      bytes_min=8)


def _graphs():
    for name in MODELS:
        phases = ("prefill", "train") if name == "bert-base" else ("prefill", "decode", "train")
        for phase in phases:
            yield pytest.param(name, phase, id=f"{name}-{phase}")


def test_duplicate_node_names_are_rejected():
    """Two nodes with one name raise GraphError naming it."""
    with pytest.raises(GraphError, match="'a'"):
        KernelGraph("g", (_node("a"), _node("a")))


def test_unknown_dependency_is_rejected():
    """A dependency on a missing node raises GraphError naming it."""
    with pytest.raises(GraphError, match="'ghost'"):
        KernelGraph("g", (_node("a", deps=("ghost",)),))


def test_dependency_cycle_is_rejected():
    """A cycle raises GraphError listing the nodes in it; GraphError is an InputError."""
    with pytest.raises(InputError, match="cycle"):
        KernelGraph("g", (_node("a", deps=("b",)), _node("b", deps=("a",))))


def test_unknown_op_stream_or_role_is_rejected():
    """Node fields outside the documented choices raise GraphError listing them."""
    with pytest.raises(GraphError, match="gemm"):
        KernelNode("x", "matmul", {})
    with pytest.raises(GraphError, match="wgrad"):
        KernelNode("x", "gemm", {}, stream="copy")
    with pytest.raises(GraphError, match="dgrad"):
        KernelNode("x", "gemm", {}, role="backward")


def test_topological_order_follows_dependencies_and_keeps_issue_order():
    """Each node comes after its dependencies; independent nodes keep issue order."""
    g = KernelGraph("g", (_node("c", deps=("b",)), _node("a"), _node("b", deps=("a",))))
    assert [n.name for n in g.topological_order()] == ["a", "b", "c"]


@pytest.mark.parametrize("model, phase", list(_graphs()))
def test_layer_graphs_are_dags_in_issue_order(model, phase):
    """Every layer graph validates and lists each node after its dependencies."""
    g = layer(model, phase=phase)
    seen = set()
    for n in g.nodes:
        assert set(n.deps) <= seen, n.name
        seen.add(n.name)
    assert len(g.topological_order()) == len(g)


@pytest.mark.parametrize("model, phase", list(_graphs()))
def test_streams_follow_the_op_kind(model, phase):
    """Communication runs on `comm`, weight gradients on `wgrad`, the rest on `compute`."""
    kw = {"ep": 8} if model == "deepseek-v3" else {"tp": 2}
    for n in layer(model, phase=phase, **kw):
        expected = "comm" if n.op in COMM_OPS else "wgrad" if n.role == "wgrad" else "compute"
        assert n.stream == expected, n.name


def test_communication_nodes_say_they_are_link_bandwidth_only():
    """Dispatch, combine and all-reduce nodes carry bytes and the link-bandwidth note."""
    comm = layer("deepseek-v3", ep=8, tp=2).select(stream="comm")
    assert {n.op for n in comm} == set(COMM_OPS)
    for n in comm:
        assert n.args["link_bytes"] > 0 and n.bytes_min > 0
        assert "link bandwidth" in n.note


def test_train_has_one_dgrad_and_one_wgrad_per_forward_gemm():
    """Each forward GEMM gets a dgrad (compute) and a wgrad (wgrad stream) node."""
    g = layer("deepseek-v3", phase="train", ep=8)
    fwd = [n for n in g if n.role == "forward" and n.op in ("gemm", "grouped_gemm")]
    for n in fwd:
        dgrad, wgrad = g.node(f"{n.name}.dgrad"), g.node(f"{n.name}.wgrad")
        assert (dgrad.role, wgrad.role, wgrad.stream) == ("dgrad", "wgrad", "wgrad")
        assert dgrad.op == wgrad.op == n.op
    assert len(g.select(role="wgrad")) == len(fwd)
    assert g.node("attention.bwd").role == "dgrad"


def test_backward_starts_after_the_forward_pass():
    """The first backward node waits for the layer's last forward node."""
    g = layer("llama3-8b", phase="train")
    first = g.select(role="dgrad")[0]
    assert first.deps == ("ffn_residual",)


@pytest.mark.parametrize("model", ["deepseek-v3", "llama3-8b", "llama3-70b", "gpt3-175b"])
def test_decode_gemms_have_m_equal_batch(model):
    """In decode every weight GEMM has one row per sequence."""
    g = layer(model, phase="decode", batch=48, kv_len=1024)
    gemms = [n for n in g.select(op="gemm")]
    assert gemms and all(n.args["m"] == 48 for n in gemms)


def test_deepseek_decode_uses_absorbed_mla():
    """DeepSeek-V3 decode has an mla_decode node over the cache and no kv_b GEMM."""
    g = layer("deepseek-v3", phase="decode", batch=32, kv_len=2048)
    mla = g.node("mla_decode")
    assert (mla.args["batch"], mla.args["kv_len"], mla.args["heads"]) == (32, 2048, 128)
    assert "kv_b_proj" not in g.names() and not g.select(op="attention")


def test_deepseek_dense_layers_have_no_moe_nodes():
    """Layers below 3 build a dense SwiGLU MLP; layer 3 builds the MoE block."""
    dense, moe = layer("deepseek-v3", layer_index=0), layer("deepseek-v3", layer_index=3)
    assert not dense.select(op="grouped_gemm") and not dense.select(op="moe_gating")
    assert dense.node("mlp.gate_up_proj").args["n"] == 2 * 18432
    assert {"moe_gating", "alltoall_dispatch", "grouped_gemm", "alltoall_combine"} <= \
        set(moe.to_frame()["op"])
    assert (dense.meta["layer_kind"], moe.meta["layer_kind"]) == ("dense", "moe")


def test_deepseek_recipe_runs_gemms_in_fp8_and_attention_in_bf16():
    """Weight GEMMs are e4m3 with quantize nodes; attention and norms stay bf16."""
    g = layer("deepseek-v3")
    assert {n.args["dtype"] for n in g.select(op="grouped_gemm")} == {"e4m3"}
    assert g.node("o_proj").args["dtype"] == "e4m3"
    assert g.node("attention").args["dtype"] == "bf16"
    assert g.node("attn_norm").args["dtype"] == "bf16"
    assert g.select(op="quantize")


def test_dtype_override_changes_gemms_only():
    """dtype='bf16' makes DeepSeek GEMMs bf16, drops quantize nodes, keeps attention bf16."""
    g = layer("deepseek-v3", dtype="bf16")
    assert {n.args["dtype"] for n in g.select(op="gemm")} == {"bf16"}
    assert not g.select(op="quantize")
    assert g.node("dispatch").args["dtype"] == "bf16"


@pytest.mark.parametrize("ep", [1, 8, 64])
def test_expert_parallelism_spreads_tokens_x_topk_rows_over_local_experts(ep):
    """With ep ranks each holds 256/ep experts receiving tokens x 8 rows in all."""
    up = layer("deepseek-v3", tokens=4096, ep=ep).node("experts.gate_up_proj")
    assert up.args["groups"] == 256 // ep
    assert up.args["m_total"] == 4096 * 8
    assert up.args["m"] == 4096 * 8 * ep // 256


def test_redundant_experts_add_groups_but_not_rows():
    """8 + 1 redundant experts per rank at EP32: 9 groups share the same tokens x 8 rows."""
    up = layer("deepseek-v3", tokens=8192, batch=2, ep=32,
               redundant_experts=1).node("experts.gate_up_proj")
    assert up.args["groups"] == 9
    assert up.args["m_total"] == 8192 * 8
    assert up.args["m"] == -(-8192 * 8 // 9)


def test_a_routing_table_sets_the_all_to_all_link_bytes_and_reaches_the_backward():
    """Tokens sent to each of 8 ranks (this rank first): the peers' sum x row bytes crosses the
    links, dispatch and combine carry the table, and so do their backward all-to-alls."""
    table = (100, 50, 0, 30, 20, 10, 5, 1)
    g = layer("deepseek-v3", phase="train", tokens=256, ep=8, routing=table)
    dispatch = g.node("dispatch")
    assert dispatch.args["routing"] == table
    assert dispatch.args["link_bytes"] == sum(table[1:]) * dispatch.args["row_bytes"]
    assert g.node("combine").args["routing"] == table
    assert g.node("dispatch.bwd").args["routing"] == table


def test_an_all_to_all_holding_no_sms_is_marked_on_its_nodes():
    """comm_holds_sms=False marks dispatch and combine; the default graph has no such key."""
    g = layer("deepseek-v3", phase="decode", batch=64, ep=128, comm_holds_sms=False)
    assert g.node("dispatch").args["holds_sms"] is False
    assert g.node("combine").args["holds_sms"] is False
    assert "holds_sms" not in layer("deepseek-v3", ep=8).node("dispatch").args


@pytest.mark.parametrize("kwargs, word", [
    ({"redundant_experts": -1}, "redundant_experts"),
    ({"redundant_experts": 1}, "ep > 1"),
    ({"ep": 8, "routing": (1, 2, 3)}, "8 token counts"),
    ({"ep": 2, "tokens": 64, "routing": (1, 65)}, "0 .. 64"),
    ({"comm_holds_sms": "no"}, "comm_holds_sms"),
])
def test_bad_moe_options_raise_input_error_naming_them(kwargs, word):
    """Redundant experts on one rank, a routing table of the wrong length or range, a
    non-boolean comm_holds_sms: InputError saying what is accepted."""
    with pytest.raises(InputError, match=word):
        layer("deepseek-v3", **kwargs)


def test_tensor_parallelism_splits_heads_and_adds_allreduces():
    """tp=8 gives 1/8 of the heads per rank and an all-reduce after o_proj and the MLP."""
    g = layer("llama3-70b", tp=8)
    assert (g.node("attention").args["heads"], g.node("attention").args["kv_heads"]) == (8, 1)
    assert {n.name for n in g.select(op="allreduce")} == {"o_proj.allreduce", "mlp.allreduce"}


def test_bert_is_bidirectional_and_has_no_decode():
    """BERT attention is not causal; asking for decode is an InputError."""
    assert layer("bert-base", seqlen=128, batch=4).node("attention").args["causal"] is False
    with pytest.raises(InputError, match="encoder"):
        layer("bert-base", phase="decode")


@pytest.mark.parametrize("kwargs, word", [
    ({"phase": "generate"}, "phase"),
    ({"tokens": 0}, "tokens"),
    ({"tokens": -5}, "tokens"),
    ({"batch": 0}, "batch"),
    ({"ep": 3}, "ep"),
    ({"tp": 3}, "tp"),
    ({"layer_index": 61}, "layer_index"),
    ({"dtype": "int4"}, "dtype"),
    ({"tokens": 100, "batch": 3}, "tokens"),
    ({"phase": "decode", "tokens": 7, "batch": 8}, "tokens"),
    ({"phase": "decode", "kv_len": 10**6}, "kv_len"),
])
def test_bad_arguments_raise_input_error_naming_the_argument(kwargs, word):
    """Bad layer() arguments raise InputError naming the argument."""
    with pytest.raises(InputError, match=word):
        layer("deepseek-v3", **kwargs)


def test_expert_parallelism_on_a_dense_model_is_rejected():
    """ep > 1 on a model without experts is an InputError."""
    with pytest.raises(InputError, match="ep=2"):
        layer("llama3-8b", ep=2)


def test_totals_by_op_add_up_to_the_graph_totals():
    """Per-op totals sum to the graph's flops, bytes and node count."""
    g = layer("deepseek-v3", phase="train", ep=64)
    t = g.totals_by_op()
    assert (t["flops"].sum(), t["bytes_min"].sum(), t["count"].sum()) == \
        (g.flops, g.bytes_min, len(g))
    assert set(g.totals("role").index) == {"forward", "dgrad", "wgrad"}


def test_to_frame_has_one_row_per_node():
    """to_frame lists every node once with its shape args."""
    g = layer("llama3-8b")
    frame = g.to_frame()
    assert list(frame["name"]) == list(g.names())
    assert frame.set_index("name").loc["attention", "args"]["seqlen_q"] == 4096


def test_graphs_survive_pickling():
    """Graphs cross process boundaries unchanged (sweeps use process pools)."""
    g = layer("deepseek-v3", phase="train", ep=64)
    assert pickle.loads(pickle.dumps(g)) == g


def test_nodes_and_graphs_are_hashable():
    """Nodes and graphs can key dicts and sets although their args are dicts."""
    g = layer("llama3-8b")
    assert len(set(g.nodes)) == len(g) and {g: 1}[layer("llama3-8b")] == 1
