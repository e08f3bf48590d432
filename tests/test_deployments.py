"""Deployments: the bundled files load and cite their sources, bad files are refused with the
key, and `ptxsim run`'s defaults build the deployed graphs (graphs only; one small simulated
decode run checks the per-micro-batch overlap end to end)."""

from __future__ import annotations

import argparse
import contextlib
import io
import json

import pandas as pd
import pytest

import workloads
from isa.errors import InputError
from simulator.app.commands import run as run_command
from workloads.deployments import (
    PHASE_DEPLOYMENTS,
    deployment_path,
    list_deployments,
    load_deployment,
    micro_batch_overlap,
)
from workloads.layers.dualpipe import dualpipe_pair, micro_batch
from workloads.layers.micro_batches import micro_batches
from workloads.node_ops import LINK, node_op


def _resolve(*argv):
    """What `ptxsim run ARGV` would simulate: (deployment, config, graph), no simulation."""
    parser = argparse.ArgumentParser()
    run_command.add_arguments(parser)
    args = parser.parse_args(list(argv))
    deployment = run_command._deployment(args)
    return deployment, run_command._config(args, deployment), run_command._graph(args, deployment)


def _write(tmp_path, text: str):
    path = tmp_path / "mine.toml"
    path.write_text(text)
    return path


def _replace(key_line: str, new_line: str) -> str:
    text = deployment_path("deepseek-v3-prefill").read_text()
    assert key_line in text
    return text.replace(key_line, new_line)


@pytest.mark.parametrize("name", list_deployments())
def test_bundled_deployments_load_and_cite_a_source_for_every_value(name):
    """Every value of a bundled deployment has its `# source:` comment, kept by the loader."""
    d = load_deployment(name)
    missing = [key for key in d.values() if not d.sources.get(key)]
    assert missing == []
    assert d.file == f"workloads/deployments/{name}.toml"


def test_the_phases_name_the_deepseek_deployments():
    """prefill, decode and train each have a bundled DeepSeek-V3 deployment of that phase."""
    for phase, name in PHASE_DEPLOYMENTS.items():
        d = load_deployment(name)
        assert (d.model, d.phase) == ("deepseek-v3", phase)


@pytest.mark.parametrize(("old", "new", "words"), [
    ("ep = 32 ", "epp = 32 ", ("parallel.epp", "parallel.ep", ":17:")),
    ("ep = 32 ", "ep = 0 ", ("parallel.ep", "an integer >= 1")),
    ("ep = 32 ", "ep = \"32\" ", ("parallel.ep", "an integer >= 1")),
    ('routing = "balanced"', 'routing = "skewed"', ("communication.routing", "balanced")),
    ('routing = "balanced"', "routing = [1, 2]", ("communication.routing", "32")),
    ("holds_sms = true", "holds_sms = 1", ("communication.holds_sms", "true or false")),
    ('overlap = "micro-batches"', 'overlap = "none"', ("schedule.overlap", "'none'")),
    ('phase = "prefill"', 'phase = "decode"', ("batch.tokens_per_gpu", "requests_per_gpu")),
    ("micro_batches = 2 ", "micro_batches = 3 ", ("batch.tokens_per_gpu", "micro_batches")),
    ('model = "deepseek-v3"', 'model = "gpt-5"', ("'model'", "deepseek-v3")),
    ('preset = "h800_sxm"', 'preset = "h900"', ("'preset'", "h800_sxm")),
    ("[schedule]", "[timing]", ("[timing]", "[schedule]")),
    ("tokens_per_gpu = 16384 ", "# tokens_per_gpu = 16384 ", ("batch.tokens_per_gpu",
                                                              "missing")),
])
def test_a_bad_deployment_file_is_refused_naming_file_key_and_accepted(tmp_path, old, new,
                                                                       words):
    """An unknown key or table, a value of the wrong kind or range, a key of another phase,
    a batch the micro-batches cannot split, a missing key, an unknown model or preset: an
    InputError naming the file, the key and what is accepted."""
    path = _write(tmp_path, _replace(old, new))
    with pytest.raises(InputError) as info:
        load_deployment(path)
    message = str(info.value)
    assert str(path) in message
    for word in words:
        assert word in message, (word, message)


def test_an_unknown_deployment_name_lists_the_bundled_ones():
    """A name that is neither bundled nor a file: InputError listing the bundled names."""
    with pytest.raises(InputError, match="deepseek-v3-prefill"):
        load_deployment("deepseek-v4")


def test_default_run_is_the_ep32_prefill_in_two_micro_batches_with_20_comm_sms():
    """No flags: EP32, two micro-batches of 8192 tokens (two 4K prompts each), 9 experts per
    GPU (8 + 1 redundant) receiving 8192 x 8 rows, dispatch and combine of each micro-batch
    on the comm stream with bytes to send, simulated as all-to-all kernels on the 20 comm
    SMs of h800_sxm."""
    d, config, g = _resolve()
    assert (d.name, d.preset, config.sm.comm_count) == ("deepseek-v3-prefill", "h800_sxm", 20)
    assert (g.meta["ep"], g.meta["tp"], g.meta["tokens"], g.meta["micro_batches"]) == \
        (32, 1, 16384, 2)
    assert {micro_batch(n) for n in g.names()} == {"mb0", "mb1"}
    for mb in ("mb0", "mb1"):
        attention = g.node(f"{mb}/attention").args
        assert (attention["batch"], attention["seqlen_q"]) == (2, 4096)
        up = g.node(f"{mb}/experts.gate_up_proj").args
        assert (up["groups"], up["m_total"]) == (9, 8192 * 8)
        for name in ("dispatch", "combine"):
            node = g.node(f"{mb}/{name}")
            assert node.stream == "comm" and node.args["link_bytes"] > 0
            op = node_op(node, {**g.meta, "comm_sms": config.sm.comm_count})
            assert op.kind == "alltoall" and op.kwargs["ranks"] == 32
            assert op.kwargs["comm_sms"] == 20
    assert d.peer_rows() == 8192 * 8 // 32


def test_each_micro_batch_keeps_its_own_dependencies():
    """micro_batches(g, 2): every node twice, prefixed, each copy depending on its own copies."""
    g = workloads.layer("llama3-8b", tokens=64)
    two = micro_batches(g, 2)
    assert len(two) == 2 * len(g)
    for node in two:
        assert all(micro_batch(dep) == micro_batch(node.name) for dep in node.deps)
    assert micro_batches(g, 1) is g


def test_decode_is_ep128_with_an_all_to_all_that_holds_no_sms():
    """--phase decode: EP128, two micro-batches of 64 requests at a 4096-key cache, no SM
    reserved, dispatch/combine on the comm stream timed by link bandwidth (they hold no
    SMs)."""
    d, config, g = _resolve("--phase", "decode")
    assert d.name == "deepseek-v3-decode" and config.sm.comm_count == 0
    assert (g.meta["ep"], g.meta["micro_batches"], g.meta["batch"]) == (128, 2, 128)
    assert {n.args["kv_len"] for n in g.select(op="mla_decode")} == {4096}
    for name in ("mb0/dispatch", "mb1/combine"):
        node = g.node(name)
        assert node.stream == "comm" and node.args["holds_sms"] is False
        assert node_op(node, g.meta).kind == LINK


def test_train_is_the_ep64_dualpipe_pair():
    """--phase train: DualPipe's pair (forward of mb1 beside backward of mb0) of 4096-token
    micro-batches at EP64, as the chunk-pair comparison builds it, with 20 comm SMs."""
    d, config, g = _resolve("--phase", "train")
    pair = dualpipe_pair(workloads.layer("deepseek-v3", phase="train", tokens=4096, ep=64))
    assert g.nodes == pair.nodes and config.sm.comm_count == 20
    assert (g.meta["micro_batches"], g.meta["tokens"]) == (2, 8192)


@pytest.mark.parametrize("argv", [("--deployment", "single-gpu"), ("--ep", "1")])
def test_single_gpu_is_the_plain_layer_graph_with_no_comm_sm(argv):
    """--deployment single-gpu (or --ep 1) builds exactly workloads.layer("deepseek-v3") on
    h800_sxm with no SM reserved."""
    d, config, g = _resolve(*argv)
    assert d.name == "single-gpu"
    assert g == workloads.layer("deepseek-v3")
    assert config.sm.comm_count == 0


def test_flags_override_the_deployment_and_say_so():
    """--ep, --tokens and --set win over the deployment's values; the overrides are kept
    with the flag that set them."""
    d, config, g = _resolve("--ep", "64", "--tokens", "8192", "--set", "sm.comm_count=8")
    assert (g.meta["ep"], g.meta["tokens"], config.sm.comm_count) == (64, 8192, 8)
    assert g.node("mb0/attention").args["seqlen_q"] == 2048   # 4 sequences per GPU kept
    assert d.overrides["parallel.ep"] == {"value": 64, "set_by": "--ep"}
    assert d.overrides["batch.tokens_per_gpu"]["set_by"] == "--tokens"


def test_overlap_counts_communication_under_any_computation():
    """Closed form: mb0's collective [10, 30] beside compute [0, 20] is half hidden; mb1's
    [30, 40] beside nothing is exposed; compute sums per micro-batch."""
    kernels = pd.DataFrame([
        ("mb0/attention", "attention", 0.0, 10.0), ("mb0/dispatch", "alltoall_dispatch", 10.0,
                                                    30.0),
        ("mb1/attention", "attention", 10.0, 20.0), ("mb1/combine", "alltoall_combine", 30.0,
                                                     40.0)],
        columns=["name", "op", "start_us", "end_us"]).assign(
            time_us=lambda t: t["end_us"] - t["start_us"])
    mb0, mb1 = micro_batch_overlap(kernels)
    assert (mb0.compute_us, mb0.comm_us, mb0.hidden_us, mb0.hidden_share) == (10, 20, 10, 0.5)
    assert (mb1.hidden_us, mb1.exposed_us, mb1.hidden_share) == (0, 10, 0)


def test_decode_run_reports_the_deployment_and_hidden_communication(tmp_path):
    """`ptxsim run --phase decode` (the EP128 deployment, about 30 s of CPU): run.json carries
    the deployment with its sources, and per micro-batch the compute, the link-timed
    communication (dispatch + combine on the comm stream) and a hidden share between 0 and 1
    (mb0's all-to-all runs under mb1's computation)."""
    from simulator.app.cli import main

    out = tmp_path / "decode"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["run", "--phase", "decode", "--out", str(out), "--quiet"]) == 0
    report = json.loads((out / "run.json").read_text())
    deployment = report["deployment"]
    assert (deployment["name"], deployment["comm_sms"]) == ("deepseek-v3-decode", 0)
    assert deployment["values"]["parallel.ep"] == 128 and deployment["overrides"] == {}
    assert "profile-data" in deployment["sources"]["parallel.ep"]
    rows = {m["micro_batch"]: m for m in report["micro_batches"]}
    assert set(rows) == {"mb0", "mb1"}
    kernels = {k["name"]: k for k in report["kernels"]}
    for mb, m in rows.items():
        comm = sum(kernels[f"{mb}/{n}"]["time_us"] for n in ("dispatch", "combine"))
        assert m["comm_us"] == pytest.approx(comm) and comm > 0
        assert kernels[f"{mb}/dispatch"]["stream"] == "comm"
        assert kernels[f"{mb}/dispatch"]["model"] == "link bandwidth"
        assert m["compute_us"] > 0
    assert 0 < rows["mb0"]["hidden_share"] <= 1
    assert rows["mb0"]["hidden_us"] + rows["mb0"]["exposed_us"] == pytest.approx(
        rows["mb0"]["comm_us"])
