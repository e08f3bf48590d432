"""Sweep kinds op, layer and step: every example file runs, a point records its metrics and
its per-kernel table, keys route to the kind's parameters or to the config, bad keys and
values are refused before anything runs, and a killed layer sweep resumes exactly."""

import io
import re
import shutil
import textwrap
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

import models
from reports import load_sweep, load_sweep_kernels
from simulator.app.cli import main
from simulator.app.points import (
    CATEGORIES,
    KERNEL_PREFIX,
    POINT_RUNNERS,
    RECORD_COLUMN,
    execute_point,
)
from simulator.app.sweep import (
    SWEEP_FORMAT,
    SweepError,
    expand_points,
    load_sweep_spec,
    parse_sweep,
)
from simulator.app.sweep_runner import run_sweep

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted(p for p in (ROOT / "workloads" / "sweeps").glob("*.toml")
                  if not p.name.startswith("tune_"))   # ptxsim tune's spaces: test_tune.py
CATEGORY_TIMES = [f"{c}_time_us" for c in (*CATEGORIES, "other")]
EXAMPLE_OUT: dict[str, Path] = {}   # example file name -> the folder the fixture ran it into


def _run(sweep, out, **kw):
    return run_sweep(sweep, out, workers=1, progress=io.StringIO(), **kw)


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    """Each example file run once in-process, on demand: name -> (points, kernels)."""
    done = {}

    def get(name: str):
        if name not in done:
            out = tmp_path_factory.mktemp(Path(name).stem)
            outcome = _run(ROOT / "workloads" / "sweeps" / name, out)
            points = load_sweep(out)
            assert outcome.errors == 0 and outcome.lost == (), list(points["error"])
            done[name] = (points, load_sweep_kernels(out))
            EXAMPLE_OUT[name] = out
        return done[name]

    return get


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_sweep_runs_every_point_and_names_a_column_per_axis(path, example):
    """Every point of each workloads/sweeps file is ok, with one column per axis holding the
    axis's values and every metric of its kind filled in."""
    spec = load_sweep_spec(path)
    points, kernels = example(path.name)
    assert len(points) == len(expand_points(spec)) and (points["status"] == "ok").all()
    for axis in spec.axes:
        assert set(points[axis.key]) == set(axis.values)
    metrics = POINT_RUNNERS[spec.kind].metrics
    assert points.attrs["metrics"] == list(metrics)
    assert points[list(metrics)].notna().all().all()
    assert (points["time_us"] > 0).all()
    assert kernels["point_id"].drop_duplicates().tolist() == points["point_id"].tolist()


@pytest.mark.parametrize("path", [p for p in EXAMPLES if load_sweep_spec(p).kind != "kernel"],
                         ids=lambda p: p.stem)
def test_point_metrics_add_up_from_its_kernel_table(path, example):
    """kernel_time_us is the per-kernel times summed and splits into the categories;
    hidden + exposed communication is the communication time; the makespan is at most the
    summed kernel time."""
    points, kernels = example(path.name)
    per_point = kernels.groupby("point_id", sort=False)
    summed = per_point["time_us"].sum()[points["point_id"]].to_numpy()
    assert points["kernel_time_us"].to_numpy(dtype=float) == pytest.approx(summed, rel=1e-9)
    assert (per_point.size()[points["point_id"]].to_numpy() == points["kernel_count"]).all()
    assert points[CATEGORY_TIMES].sum(axis=1).to_numpy(dtype=float) == pytest.approx(
        points["kernel_time_us"].to_numpy(dtype=float), rel=1e-9)
    assert (points["comm_hidden_us"] + points["comm_exposed_us"]).to_numpy(dtype=float) == \
        pytest.approx(points["comm_time_us"].to_numpy(dtype=float), abs=1e-9)
    assert (points["time_us"] <= points["kernel_time_us"] * (1 + 1e-12)).all()
    hbm = per_point["hbm_bytes"].sum()[points["point_id"]].to_numpy()
    assert points["hbm_bytes"].to_numpy(dtype=float) == pytest.approx(hbm, rel=1e-9)


def test_gemm_op_point_counts_2mnk_and_runs_faster_on_more_sms(example):
    """The GEMM op sweep: flops = 2·M·N·K, tflops = flops / time, the whole time is GEMM
    time, compute-bound, and 132 SMs beat 66."""
    points, kernels = example("op_gemm_sm_count.toml")
    by_sms = points.set_index("sm.count")
    assert (points["flops"] == 2 * 4096 ** 3).all()
    assert points["tflops"].to_numpy(dtype=float) == pytest.approx(
        (points["flops"] / (points["time_us"] * 1e6)).to_numpy(dtype=float))
    assert (points["gemm_time_us"] == points["time_us"]).all()
    assert (points["bound"] == "compute").all()
    assert by_sms.loc[132, "time_us"] < by_sms.loc[66, "time_us"]
    assert set(kernels["name"]) == {"gemm"} and (kernels["launches"] == 1).all()
    assert points["fidelity_method"].notna().all()
    assert list(points["params.m"]) == [4096, 4096] and list(points["op"]) == ["gemm"] * 2


def test_op_parameter_axis_and_preset_axis_vary_what_they_name(example):
    """params.rows and preset are axes: 8192 rows take longer than 1024 on either preset."""
    points, _ = example("op_rmsnorm_presets.toml")
    table = points.pivot(index="preset", columns="params.rows", values="time_us")
    assert sorted(table.index) == ["h100_sxm", "h800_sxm"]
    assert (table[8192] > table[1024]).all()
    assert (points["norm_time_us"] == points["time_us"]).all()


def test_layer_decode_is_faster_with_more_hbm_bandwidth(example):
    """An hbm.* preset key as an axis: 1.5x the channel bandwidth shortens a decode layer."""
    points, _ = example("layer_llama_decode_hbm.toml")
    times = points.set_index("hbm.channel_bandwidth_gbps")["time_us"]
    assert times[62.856] < times[41.904]
    assert set(points["phase"]) == {"decode"} and set(points["kv_len"]) == {1024}


def test_dualpipe_step_hides_communication_the_sequential_step_exposes(example):
    """The TP2 training step: DualPipe hides all-reduce time behind the other micro-batch and
    finishes sooner; the same kernels run in both."""
    points, kernels = example("step_bert_dualpipe.toml")
    by = points.set_index("schedule")
    assert by.loc["dualpipe", "comm_hidden_us"] > by.loc["sequential", "comm_hidden_us"]
    assert by.loc["dualpipe", "time_us"] < by.loc["sequential", "time_us"]
    assert by.loc["dualpipe", "comm_time_us"] > 0
    names = kernels.groupby("schedule")["name"].apply(
        lambda s: sorted(n.split("/", 1)[-1] for n in s))
    assert names["dualpipe"] == names["sequential"]


def test_kernel_sweep_part_holds_its_kernel_row(example):
    """A kernel sweep's per-kernel table is one row per point with the point's cycles."""
    points, kernels = example("saxpy_sm_count.toml")
    assert len(kernels) == len(points)
    merged = kernels.merge(points[["point_id", "cycles"]], on="point_id", suffixes=("", "_p"))
    assert (merged["cycles"] == merged["cycles_p"]).all()


# ---- keys, routing and validation (nothing runs) -----------------------------------------

OP = """\
[base]
kind = "op"
preset = "h100_sxm"
op = "gemm"
params = { m = 256, n = 256, k = 256 }
"""

LAYER = """\
[base]
kind = "layer"
preset = "h800_sxm"
workload = "bert-base"
batch = 1
seqlen = 128
"""

STEP = LAYER.replace('"layer"', '"step"')


def _points(text: str):
    return expand_points(parse_sweep(text, "t.toml"))


def _refused(text: str) -> SweepError:
    with pytest.raises(SweepError) as info:
        _points(text)
    return info.value


@pytest.mark.parametrize("text, path, words", [
    (OP.replace("k = 256", "kk = 256"), "base.params.kk", "params of ptxsim op gemm: m, n, k"),
    (OP.replace("k = 256", 'k = "x"'), "base.params.k", "an integer"),
    (OP.replace("k = 256 ", 'k = 256, layout = "diagonal" '), "base.params.layout",
     "contiguous, masked"),
    (OP.replace("k = 256 ", "").replace("n = 256,", "n = 256"), "base.params.k",
     "missing required"),
    (OP.replace('"gemm"', '"gemn"'), "base.op", "attention"),
    (OP + '[[axis]]\n"params.m" = [256, 0]\n', "axis[0].params.m[1]", "--m 0"),
    (OP + '[[axis]]\n"params.k" = [256, 12]\n', "axis[0].params.k[1]", "--k"),
    (OP + '[[axis]]\nfidelity = ["sampled", "exact"]\n', "axis[0].fidelity[1]", "full"),
    (LAYER.replace("bert-base", "bert-huge"), "base.workload", "llama3-8b"),
    (LAYER + "tokens = 100\n", "base.tokens", "tokens=100"),
    (LAYER + "layer_index = 12\n", "base.layer_index", "layers 0..11"),
    (LAYER + "colour = 1\n", "base.colour", "workload, phase, tokens"),
    (LAYER + '[[axis]]\n"l2.size_byte" = [1, 2]\n', "axis[0].l2.size_byte[0]", "unknown key"),
    (LAYER + '[[axis]]\nphase = ["prefill", "decode"]\n', "axis[0].phase[1]", "encoder"),
    (STEP + 'schedule = "zigzag"\n', "base.schedule", "sequential, dualpipe"),
    (STEP + 'phase = "train"\n', "base.phase", "schedule, deployment"),
    (LAYER + '"deployment.batch.micro_batches" = 2\n', "base.deployment.batch.micro_batches",
     "deployment = NAME"),
])
def test_bad_keys_and_values_name_file_axis_and_what_is_accepted(text, path, words):
    """Unknown op parameters, wrong types and values the op builder or the layer refuses are
    a SweepError at the key's path, before any point runs."""
    err = _refused(text)
    assert err.file == "t.toml" and err.path == path and err.line > 0
    assert words in str(err)


def test_a_key_of_the_kind_is_a_parameter_and_any_other_a_config_key():
    """`fidelity` is the layer's parameter; `fidelity.<key>` and `sm.count` are config keys
    (overrides), checked against the resolved config."""
    axes = '[[axis]]\nfidelity = ["sampled", "full"]\n[[axis]]\n"sm.count" = [66, 132]\n'
    points = _points(LAYER + axes)
    assert [p.target["fidelity"] for p in points] == ["sampled"] * 2 + ["full"] * 2
    assert [p.overrides for p in points] == [{"sm.count": 66}, {"sm.count": 132}] * 2
    config = models.load_preset("h800_sxm").to_dict()
    if "fidelity" in config:      # the [fidelity] policy block is config
        key = next(iter(config["fidelity"]))
        value = config["fidelity"][key]
        point = _points(LAYER + f'[[axis]]\n"fidelity.{key}" = [{str(value).lower()}]\n')[0]
        assert point.overrides == {f"fidelity.{key}": value}
        assert point.target["fidelity"] == "sampled"


def test_two_spellings_of_one_layer_or_op_are_one_point():
    """tokens = batch x seqlen given or left out, and a flag spelled with a dash or an
    underscore, resolve to the same completed target and point id."""
    (a,) = _points(LAYER)
    (b,) = _points(LAYER.replace("seqlen = 128", "tokens = 128"))
    assert a.point_id == b.point_id
    assert a.target == {"workload": "bert-base", "phase": "prefill", "tokens": 128, "batch": 1,
                        "seqlen": 128, "kv_len": 0, "ep": 1, "tp": 1, "layer_index": 0,
                        "fidelity": "sampled"}
    attention = OP.replace('"gemm"', '"attention"').replace(
        "m = 256, n = 256, k = 256", "batch = 1, heads = 8, seqlen = 128, KV = 2")
    (c,) = _points(attention.replace("KV", "kv_heads"))
    (d,) = _points(attention.replace("KV", '"kv-heads"'))
    assert c.point_id == d.point_id and c.target["params.kv_heads"] == 2


def test_an_op_point_id_follows_the_built_launches_config():
    """An op built on another SM count (another tile plan) is another point."""
    points = _points(OP + '[[axis]]\n"sm.count" = [66, 132]\n')
    assert len({p.point_id for p in points}) == 2


def test_a_deployment_layer_takes_its_comm_sms_unless_the_sweep_sets_them():
    """deployment = NAME sets sm.comm_count to its communication SMs; an sm.comm_count axis
    wins; its keys are swept as deployment.<table>.<key>; shape keys beside it are refused."""
    deployments = pytest.importorskip("workloads.deployments")
    name = "deepseek-v3-prefill"
    comm_sms = deployments.load_deployment(name).comm_sms
    base = f'[base]\nkind = "layer"\npreset = "h800_sxm"\ndeployment = "{name}"\n'
    axis = '[[axis]]\n"deployment.batch.micro_batches" = [1, 2]\n'
    points = _points(base + axis)
    assert [p.overrides for p in points] == [{"sm.comm_count": comm_sms}] * 2
    assert [p.target["deployment.batch.micro_batches"] for p in points] == [1, 2]
    swept = _points(base + axis + '[[axis]]\n"sm.comm_count" = [16, 24]\n')
    assert [p.overrides["sm.comm_count"] for p in swept] == [16, 24, 16, 24]
    err = _refused(base + "tokens = 4096\n")
    assert err.path == "base.tokens" and "deployment.<key>" in str(err)
    err = _refused(base.replace('"layer"', '"step"'))
    assert err.path == "base.deployment" and "train deployment" in str(err)


def _format_examples() -> list[str]:
    blocks = re.findall(r"\n  # [^\n]*\n((?:  [^\n]*\n)+)", SWEEP_FORMAT + "\n")
    return [textwrap.dedent(block) for block in blocks]


def test_help_documents_every_kind_and_its_examples_are_valid_sweeps(capsys):
    """`ptxsim sweep --help` shows the format with an example per kind; each expands."""
    with pytest.raises(SystemExit):
        main(["sweep", "--help"])
    text = capsys.readouterr().out
    assert SWEEP_FORMAT.splitlines()[0] in text
    examples = _format_examples()
    kinds = [parse_sweep(block, "help.toml").kind for block in examples]
    assert sorted(kinds) == sorted(POINT_RUNNERS)
    for block in examples:
        assert len(_points(block)) == 2


# ---- parts: old ones stay readable, a killed layer sweep resumes --------------------------

def old_format_part(point_data):
    """A part as sweeps wrote them before per-kernel tables: stats rows only, no `record`."""
    frame = execute_point(point_data)
    frame = frame[frame[RECORD_COLUMN] == "stat"]
    return frame.drop(columns=[RECORD_COLUMN, *(c for c in frame.columns
                                                if c.startswith(KERNEL_PREFIX))])


def test_parts_without_kernel_tables_stay_readable(tmp_path):
    """A kernel sweep whose parts predate per-kernel tables loads as before; its per-kernel
    table is empty and says how many parts had none."""
    path = tmp_path / "old.toml"
    path.write_text('[base]\nkind = "kernel"\npreset = "h100_sxm"\nkernel = "saxpy"\n'
                    'size = { n = 64, block = 32 }\n[[axis]]\n"sm.count" = [16, 132]\n')
    _run(path, tmp_path / "out", execute=old_format_part)
    assert RECORD_COLUMN not in pq.read_schema(next((tmp_path / "out" / "parts").iterdir()))
    points = load_sweep(tmp_path / "out")
    assert list(points["sm.count"]) == [16, 132] and (points["cycles"] > 0).all()
    stats = load_sweep(tmp_path / "out", stats=True)
    assert set(stats["point_id"]) == set(points["point_id"]) and stats["stat"].notna().all()
    kernels = load_sweep_kernels(tmp_path / "out")
    assert kernels.empty and kernels.attrs["without_kernels"] == 2


def stop_at_point_one(point_data):
    """Runs points as a worker does, and is stopped (as by Ctrl-C) in point 1."""
    if point_data["index"] == 1:
        raise KeyboardInterrupt
    return execute_point(point_data)


def test_killed_layer_sweep_resumes_with_nothing_lost_or_duplicated(tmp_path):
    """A layer sweep stopped in its second point keeps the first part; --resume runs the
    other two and leaves the first alone: three parts, one per point, all ok."""
    path = tmp_path / "layers.toml"
    path.write_text(LAYER + '[[axis]]\nseqlen = [32, 64, 128]\n')
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        _run(path, out, execute=stop_at_point_one)
    (first,) = (out / "parts").glob("*.parquet")
    written = first.read_bytes()
    resumed = _run(path, out, resume=True)
    assert resumed.skipped == 1 and len(resumed.ran) == 2 and first.stem not in resumed.ran
    assert first.read_bytes() == written
    parts = sorted(p.stem for p in (out / "parts").iterdir())
    points = load_sweep(out)
    assert parts == sorted(points["point_id"]) and len(parts) == 3
    assert list(points["seqlen"]) == [32, 64, 128] and (points["status"] == "ok").all()
    assert points.attrs["missing"] == 0
    kernels = load_sweep_kernels(out)
    assert (kernels.groupby("point_id").size() == 10).all()
    assert pd.Series(points["kernel_count"]).eq(10).all()


def test_category_bars_stack_to_each_points_kernel_time(example, tmp_path):
    """One bar per point; its stacked categories reach the point's kernel_time_us."""
    from reports.sweep_plots import CATEGORY_COLUMNS, plot_sweep_categories

    points, _ = example("step_bert_dualpipe.toml")
    fig = plot_sweep_categories(points)
    bars = fig.axes[0].patches
    assert len(bars) == len(CATEGORY_COLUMNS) * len(points)
    tops = [max(b.get_y() + b.get_height() for b in bars if round(b.get_x() + b.get_width() / 2)
                == i) for i in range(len(points))]
    assert tops == pytest.approx(points["kernel_time_us"].to_numpy(dtype=float), rel=1e-9)
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == [
        "schedule=sequential", "schedule=dualpipe"]
    fig.savefig(tmp_path / "bars.png")


def test_docs_sweeps_example_runs(example, tmp_path, monkeypatch):
    """The python example of docs/sweeps.md runs from a checkout and its asserts hold; its op
    results are read from the example run's op cache (the same ops on the same configs)."""
    example("layer_llama_decode_hbm_sms.toml")
    text = (ROOT / "docs" / "sweeps.md").read_text()
    (block,) = re.findall(r"```python\n(.*?)```", text, re.S)
    (tmp_path / "workloads").symlink_to(ROOT / "workloads")
    out = tmp_path / "out" / "llama_hbm_sms"
    shutil.copytree(EXAMPLE_OUT["layer_llama_decode_hbm_sms.toml"] / "op-cache",
                    out / "op-cache")
    monkeypatch.chdir(tmp_path)
    exec(compile(block, "docs/sweeps.md", "exec"), {})
    for plot in ("lines.png", "heatmap.png", "categories.png"):
        assert (out / plot).stat().st_size > 0
    assert load_sweep_kernels(out)["cached"].all()


def _shown_table(text: str, header: str) -> list[list[str]]:
    """The rows a ```pycon or ```text block of `text` shows under the line starting with
    `header`."""
    for block in re.findall(r"```(?:pycon|text)\n(.*?)```", text, re.S):
        lines = block.splitlines()
        starts = [i for i, line in enumerate(lines) if line.strip().startswith(header)]
        if starts:
            rows = lines[starts[0] + 1:]
            return [r.split() for r in rows[:next((i for i, r in enumerate(rows)
                                                   if r.startswith(">>>")), len(rows))]]
    raise AssertionError(f"no ```pycon or ```text table headed {header!r}")


@pytest.mark.parametrize("doc", ["README.md", "docs/sweeps.md"])
def test_documented_layer_sweep_table_is_what_the_example_loads(doc, example):
    """The LLaMA-3-8B decode sweep of the README and docs/sweeps.md is the example file: its
    TOML block has the file's points, and its table is the one `load_sweep` gives for them
    (every point, its axis values and bound, its times to 5 %)."""
    points, _ = example("layer_llama_decode_hbm_sms.toml")
    text = (ROOT / doc).read_text()
    (block,) = [b for b in re.findall(r"```toml\n(.*?)```", text, re.S)
                if '"sm.count" = [33, 66, 132]' in b]
    assert [p.point_id for p in expand_points(parse_sweep(block, doc))] == list(
        points["point_id"])
    rows = _shown_table(text, "sm.count  hbm.channel_bandwidth_gbps")
    assert len(rows) == len(points)
    for row, (_, point) in zip(rows, points.iterrows(), strict=True):
        index, sms, hbm, time_us, gemm_us, bound = row
        assert (int(index), int(sms), bound) == (point["index"], point["sm.count"],
                                                 point["bound"])
        assert float(hbm) == pytest.approx(point["hbm.channel_bandwidth_gbps"], abs=0.05)
        assert float(time_us) == pytest.approx(point["time_us"], rel=0.05)
        assert float(gemm_us) == pytest.approx(point["gemm_time_us"], rel=0.05)
