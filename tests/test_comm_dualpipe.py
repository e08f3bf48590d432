"""DualPipe chunk pairs: the forward of one micro-batch beside the backward of another, so
that one's all-to-all overlaps the other's computation (`workloads.layers.dualpipe`,
scheduled by `simulator.simulate_workload`)."""

from __future__ import annotations

import pytest

import models
import simulator
import workloads
from workloads.graph import GraphError, KernelGraph
from workloads.layers import ops as L
from workloads.layers.dualpipe import dualpipe_pair, micro_batch, moe_block

T, H = 64, 256
A2A = {"tokens": T, "hidden": H, "topk": 8, "ep": 8, "dtype": "bf16"}


def tiny_train() -> KernelGraph:
    """norm -> dispatch -> GEMM -> combine -> add, and the backward of each."""
    nodes = [
        L.elementwise("norm", "rmsnorm", rows=T, cols=H, dtype="bf16"),
        L.alltoall("dispatch", "alltoall_dispatch", **A2A, deps=("norm",)),
        L.gemm("up", m=T, n=H, k=H, dtype="bf16", out_dtype="bf16", deps=("dispatch",)),
        L.alltoall("combine", "alltoall_combine", **A2A, deps=("up",)),
        L.elementwise("res", "residual_add", rows=T, cols=H, dtype="bf16", inputs=2,
                      deps=("combine",)),
        L.elementwise("res.bwd", "residual_add", rows=T, cols=H, dtype="bf16", inputs=2,
                      deps=("res",), backward=True, role="dgrad"),
        L.alltoall("combine.bwd", "alltoall_dispatch", **A2A, deps=("res.bwd",), role="dgrad"),
        L.gemm("up.dgrad", m=T, n=H, k=H, dtype="bf16", out_dtype="bf16",
               deps=("combine.bwd",), role="dgrad"),
        L.alltoall("dispatch.bwd", "alltoall_combine", **A2A, deps=("up.dgrad",),
                   role="dgrad"),
        L.elementwise("norm.bwd", "rmsnorm", rows=T, cols=H, dtype="bf16",
                      deps=("dispatch.bwd",), backward=True, role="dgrad"),
    ]
    return KernelGraph("tiny_train", tuple(nodes), {"model": "llama3-8b", "phase": "train"})


def test_pair_prefixes_micro_batches_and_drops_forward_deps_of_the_backward():
    """mb1 holds the forward, mb0 the backward; mb0's first node no longer waits for mb1."""
    pair = dualpipe_pair(tiny_train())
    names = pair.names()
    assert [micro_batch(n) for n in names] == ["mb1"] * 5 + ["mb0"] * 5
    assert pair.node("mb0/res.bwd").deps == ()
    assert pair.node("mb0/up.dgrad").deps == ("mb0/combine.bwd",)
    assert pair.node("mb1/up").deps == ("mb1/dispatch",)
    assert micro_batch("plain") == ""


def test_pair_needs_a_train_graph():
    """A prefill graph has no backward to pair with: GraphError saying how to build one."""
    with pytest.raises(GraphError, match="phase='train'"):
        dualpipe_pair(workloads.layer("llama3-8b", "prefill", tokens=64))


@pytest.fixture(scope="module")
def pair_result():
    cfg = models.load_preset("h800_sxm")
    return simulator.simulate_workload(dualpipe_pair(tiny_train()), config=cfg, comm_sms=20)


def test_one_micro_batch_communicates_while_the_other_computes(pair_result):
    """Some all-to-all of one micro-batch overlaps a compute kernel of the other."""
    k = pair_result.kernels
    comm = k[k["stream"] == "comm"]
    compute = k[k["stream"] == "compute"]
    overlaps = [(c["name"], g["name"]) for _, c in comm.iterrows() for _, g in compute.iterrows()
                if micro_batch(c["name"]) != micro_batch(g["name"])
                and min(c["end_us"], g["end_us"]) > max(c["start_us"], g["start_us"])]
    assert overlaps
    assert pair_result.time_us < k["time_us"].sum()


def test_each_micro_batch_keeps_its_own_order_per_stream(pair_result):
    """Within a micro-batch, nodes of one stream run in issue order and after their deps."""
    k = pair_result.kernels.set_index("name")
    for mb in ("mb0", "mb1"):
        for stream in ("compute", "comm"):
            mine = k.index.map(micro_batch) == mb
            rows = k[mine & (k["stream"] == stream)]
            assert list(rows["start_us"]) == sorted(rows["start_us"])
    for _name, row in k.iterrows():
        for d in filter(None, row["deps"].split(",")):
            assert row["start_us"] >= k.loc[d, "end_us"] - 1e-9


def test_moe_block_keeps_the_ffn_part_and_its_backward():
    """moe_block of a DeepSeek-V3 train layer: dispatch/combine and the expert GEMMs with
    their backward nodes, no attention node, no dependency outside the block."""
    graph = moe_block(workloads.layer("deepseek-v3", "train", tokens=64, ep=64,
                                      layer_index=5))
    names = set(graph.names())
    assert {"dispatch", "combine", "combine.bwd", "dispatch.bwd", "experts.gate_up_proj",
            "experts.down_proj.wgrad", "ffn_norm.bwd"} <= names
    assert not any(n.startswith(("attention", "q_", "kv_", "o_proj")) for n in names)
    assert all(d in names for n in graph for d in n.deps)
    with pytest.raises(GraphError, match="no MoE block"):
        moe_block(workloads.layer("deepseek-v3", "train", tokens=64, layer_index=0))
