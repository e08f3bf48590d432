"""The on-disk op result cache (`workloads.op_result_cache`): a re-run is read from the cache
and equals the computed run exactly; the key follows every config value, op parameter and
the code version; concurrent writers leave whole entries; files the cache did not write are
misses and stay; `--no-cache` simulates afresh and writes nothing; sweep points share the
cache under the sweep folder."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

import models
from reports import load_sweep, load_sweep_kernels
from simulator.app.cli import main
from simulator.app.sweep_runner import run_sweep
from workloads.execute import simulate_workload
from workloads.graph import KernelGraph
from workloads.layers import ops as L
from workloads.op_result_cache import (
    OP,
    RESULT_FORMAT,
    WORKLOAD_OP,
    OpResultCache,
    default_cache_dir,
    simulate_op_cached,
)
from workloads.ops import build_op

ROOT = Path(__file__).resolve().parents[1]
LAYER = ["run", "--workload", "bert-base", "--phase", "prefill", "--batch", "1", "--seqlen",
         "128", "--model", "h800_sxm", "--json", "--quiet"]
GEMM = {"m": 128, "n": 128, "k": 256, "dtype": "bf16"}


def _run(capsys, out: Path, *extra: str) -> dict:
    assert main([*LAYER, "--out", str(out), *extra]) == 0
    return json.loads(capsys.readouterr().out)


def _listing(folder: Path) -> dict[str, int]:
    return {p.name: p.stat().st_mtime_ns for p in sorted(folder.iterdir())}


def _comparable(report: dict) -> dict:
    """run.json less what names the folder or the cache."""
    report = {k: v for k, v in report.items() if k not in ("out", "op_cache", "out_unchanged")}
    report["kernels"] = [{k: v for k, v in row.items() if k != "cached"}
                         for row in report["kernels"]]
    return report


def test_rerun_is_read_from_the_cache_and_equals_the_computed_run(tmp_path, capsys):
    """A second `ptxsim run` of one layer reads every op from $XDG_CACHE_HOME/ptxsim/op-cache
    and writes the same kernels, stats and trace; `--no-cache` simulates every op again,
    reads and writes nothing, and gets the same times."""
    first = _run(capsys, tmp_path / "a")
    folder = Path(os.environ["XDG_CACHE_HOME"]) / "ptxsim" / "op-cache"
    assert first["op_cache"]["dir"] == str(folder) == str(default_cache_dir())
    assert not any(k["cached"] for k in first["kernels"])
    assert first["op_cache"]["written"] == first["op_cache"]["missed"] > 0

    second = _run(capsys, tmp_path / "b")
    assert all(k["cached"] for k in second["kernels"])
    assert second["op_cache"]["missed"] == second["op_cache"]["written"] == 0
    assert _comparable(second) == _comparable(first)
    kernels_a = pd.read_parquet(tmp_path / "a" / "kernels.parquet")
    kernels_b = pd.read_parquet(tmp_path / "b" / "kernels.parquet")
    assert not kernels_a["cached"].any() and kernels_b["cached"].all()
    pd.testing.assert_frame_equal(kernels_a.drop(columns="cached"),
                                  kernels_b.drop(columns="cached"))
    for name in ("stats.parquet", "trace.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()

    before = _listing(folder)
    fresh = _run(capsys, tmp_path / "c", "--no-cache")
    assert fresh["op_cache"] is None and not any(k["cached"] for k in fresh["kernels"])
    assert _comparable(fresh) == _comparable(first)
    assert _listing(folder) == before


def test_rerun_into_its_own_folder_keeps_the_report(tmp_path, capsys):
    """A re-run into the folder of a finished run (every op read from the cache) finds the
    same report digest as the run that simulated them and keeps the folder: no file is
    rewritten and run.json still says the ops were simulated. A file changed by hand, or
    `--no-cache`, makes the run write the folder again."""
    out = tmp_path / "run"
    first = _run(capsys, out)
    assert first["out_unchanged"] is False
    written = _listing(out)
    run_json = (out / "run.json").read_text()
    second = _run(capsys, out)
    assert second["out_unchanged"] is True and all(k["cached"] for k in second["kernels"])
    assert _listing(out) == written and (out / "run.json").read_text() == run_json
    assert main([*LAYER[:-2], "--out", str(out), "--quiet"]) == 0
    assert "kept " in capsys.readouterr().out

    (out / "report.html").write_text("edited")
    third = _run(capsys, out)
    assert third["out_unchanged"] is False
    assert (out / "report.html").read_text() != "edited"
    assert _run(capsys, out)["out_unchanged"] is True
    assert _run(capsys, out, "--no-cache")["out_unchanged"] is False
    assert _run(capsys, out, "--set", "l2.size_bytes=26214400")["out_unchanged"] is False


def _comm_graph() -> KernelGraph:
    """RMSNorm -> GEMM -> SwiGLU, an all-to-all beside the GEMM on the comm stream."""
    rows, hidden = 64, 256
    return KernelGraph("comm", (
        L.elementwise("norm", "rmsnorm", rows=rows, cols=hidden, dtype="bf16"),
        L.gemm("up", m=rows, n=hidden, k=hidden, dtype="bf16", out_dtype="bf16",
               deps=("norm",)),
        L.alltoall("dispatch", "alltoall_dispatch", tokens=rows, hidden=hidden, topk=8, ep=8,
                   dtype="bf16", deps=("norm",)),
        L.elementwise("act", "swiglu", rows=rows, cols=hidden, out_cols=hidden // 2,
                      dtype="bf16", deps=("up", "dispatch")),
    ), {"model": "llama3-8b", "phase": "prefill"})


def test_contention_pairs_are_cached_with_the_ops(tmp_path):
    """With communication SMs reserved, a second `simulate_workload` reads every op and the
    measured collective/compute pair from the cache: nothing simulated, the same kernels
    table (but `cached`), the same contention table and makespan."""
    config = models.load_preset("h800_sxm")
    runs = [simulate_workload(_comm_graph(), config, comm_sms=20, timeline=False,
                              result_cache=OpResultCache(tmp_path)) for _ in range(2)]
    first, second = (r.meta["op_cache"] for r in runs)
    assert first["read"] == 0 and first["written"] == first["missed"] == 5   # 4 ops, 1 pair
    assert second["read"] == 5 and second["missed"] == second["written"] == 0
    assert len(runs[0].meta["contention"]) == 1 and runs[1].kernels["cached"].all()
    pd.testing.assert_frame_equal(runs[0].meta["contention"], runs[1].meta["contention"])
    pd.testing.assert_frame_equal(runs[0].kernels.drop(columns="cached"),
                                  runs[1].kernels.drop(columns="cached"))
    assert runs[0].time_us == runs[1].time_us


def test_key_changes_with_a_config_value_an_op_parameter_and_the_code(tmp_path):
    """Entries are apart when one config value, one op parameter, the fidelity or the code
    version differs, and the same when all are equal (key order aside)."""
    cache = OpResultCache(tmp_path)
    config = models.load_preset("h800_sxm")
    bigger_l2 = config.with_overrides({"l2.size_bytes": 2 * config.l2.size_bytes})

    def path(cfg=config, m=128, fidelity="sampled", code=cache.code):
        own = OpResultCache(tmp_path, code)
        return own.path(own.key(OP, op="gemm", params={**GEMM, "m": m, "seed": 0},
                                config=cfg.to_dict(), fidelity=fidelity))

    base = path()
    assert base == path(models.load_preset("h800_sxm"))
    assert base == cache.path(cache.key(OP, fidelity="sampled", config=config.to_dict(),
                                        params={"seed": 0, **GEMM}, op="gemm"))
    assert len({base, path(bigger_l2), path(m=256), path(fidelity="full"),
                path(code=cache.code + "-edited")}) == 5


def test_op_result_is_read_back_exactly_and_missed_on_another_config(tmp_path):
    """`simulate_op_cached`: the second call reads the result and per-launch stats the first
    saved, equal but for `cached`; the same op on a config with one value changed is
    simulated."""
    cache = OpResultCache(tmp_path)
    config = models.load_preset("h800_sxm")
    plan = build_op("gemm", config, seed=0, **GEMM)
    runs, again = [], []
    first = simulate_op_cached("gemm", {"seed": 0, **GEMM}, plan, config, None, cache, runs)
    second = simulate_op_cached("gemm", {"seed": 0, **GEMM}, plan, config, None, cache, again)
    assert (first["cached"], second["cached"]) == (False, True)
    assert json.dumps({**first, "cached": None}, sort_keys=True, default=str) == \
        json.dumps({**second, "cached": None}, sort_keys=True, default=str)
    assert [w for w, _, _ in runs] == [w for w, _, _ in again]
    for (_, _, a), (_, _, b) in zip(runs, again, strict=True):
        pd.testing.assert_frame_equal(a.reset_index(drop=True), b)
    other = config.with_overrides({"l2.size_bytes": 2 * config.l2.size_bytes})
    third = simulate_op_cached("gemm", {"seed": 0, **GEMM}, plan, other, None, cache)
    assert third["cached"] is False


def test_op_command_reads_the_cache_and_no_cache_bypasses_it(tmp_path, capsys):
    """`ptxsim op --cache-dir DIR` twice: the second result is read from DIR and equal;
    `--no-cache` says so and writes nothing."""
    argv = ["op", "gemm", "--m", "128", "--n", "128", "--k", "256", "--dtype", "bf16",
            "--model", "h800_sxm", "--json", "--cache-dir", str(tmp_path / "c")]

    def run(*extra):
        assert main([*argv, *extra]) == 0
        return json.loads(capsys.readouterr().out)

    first, second = run(), run()
    assert (first["cached"], second["cached"]) == (False, True)
    assert second["op_cache"] == str(tmp_path / "c")
    assert {**first, "cached": True} == second
    before = _listing(tmp_path / "c")
    fresh = run("--no-cache")
    assert fresh["cached"] is False and fresh["op_cache"] is None
    assert fresh["time_us"] == first["time_us"] and _listing(tmp_path / "c") == before


WRITER = textwrap.dedent("""
    import sys
    import pandas as pd
    from workloads.op_result_cache import OpResultCache
    cache = OpResultCache(sys.argv[1], "test-code")
    table = pd.DataFrame({"stat": ["bytes"] * 20000, "value": [float(i) for i in range(20000)]})
    for _ in range(int(sys.argv[2])):
        for i in range(8):
            key = cache.key("workload-op", op={"kind": "gemm", "kwargs": {"m": i}})
            assert cache.save(key, {"timed": {"time_us": i + 0.5}, "stats": table,
                                    "series": None})
""")


def test_concurrent_writers_leave_whole_entries(tmp_path):
    """Two processes writing the same entries over and over while this one reads them: every
    read is a miss or the whole entry, and afterwards every entry is whole and no temp file
    is left."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), "6"], env=env,
                                stderr=subprocess.PIPE) for _ in range(2)]
    cache = OpResultCache(tmp_path, "test-code")
    keys = [cache.key(WORKLOAD_OP, op={"kind": "gemm", "kwargs": {"m": i}}) for i in range(8)]
    reads = 0
    while any(w.poll() is None for w in writers):
        for i, key in enumerate(keys):
            found = cache.load(key)
            if found is not None:
                reads += 1
                assert found["timed"] == {"time_us": i + 0.5} and len(found["stats"]) == 20000
    for w in writers:
        assert w.wait() == 0, w.stderr.read().decode()
    for i, key in enumerate(keys):
        found = cache.load(key)
        assert found["timed"] == {"time_us": i + 0.5}
        assert found["stats"]["value"].tolist() == [float(v) for v in range(20000)]
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".json"] * 8


def test_foreign_and_partial_files_are_misses_and_left_in_place(tmp_path):
    """Junk at an entry's name, a truncated entry, an entry of another key and an unrelated
    file: each read is a miss, nothing raises, and the cache never replaces or deletes a
    file it did not write (its own truncated entry it does replace)."""
    cache = OpResultCache(tmp_path)
    key = cache.key(OP, op="gemm", params={"m": 1})
    value = {"result": {"time_us": 1.5, "gap": float("nan")}, "stats": []}
    (tmp_path / "notes.txt").write_text("mine")
    cache.path(key).write_text("not json at all")
    assert cache.load(key) is None
    assert cache.save(key, value) is False
    assert cache.path(key).read_text() == "not json at all"

    cache.path(key).write_text(json.dumps({"format": "someone-else/1", "key": key}))
    assert cache.load(key) is None and cache.save(key, value) is False

    cache.path(key).unlink()
    assert cache.save(key, value) is True
    whole = cache.path(key).read_text()
    cache.path(key).write_text(whole[: len(whole) // 2])
    assert cache.load(key) is None
    other = cache.key(OP, op="gemm", params={"m": 2})
    cache.path(other).write_text(whole)
    assert cache.load(other) is None
    assert cache.save(key, value) is True
    found = cache.load(key)
    assert found["result"]["time_us"] == 1.5 and found["result"]["gap"] != found["result"]["gap"]
    assert (tmp_path / "notes.txt").read_text() == "mine"
    assert json.loads(cache.path(key).read_text())["format"] == RESULT_FORMAT


def test_sweep_points_share_the_cache_under_the_sweep_folder(tmp_path):
    """Two layer points with the same ops on one config (BERT layers 0 and 1): the second
    point's kernels are read from <out>/op-cache and its metrics equal the first's; with
    op_cache=False there is no such folder and nothing is read."""
    sweep = tmp_path / "layers.toml"
    sweep.write_text(textwrap.dedent("""
        [base]
        kind = "layer"
        preset = "h800_sxm"
        workload = "bert-base"
        phase = "prefill"
        batch = 1
        seqlen = 128
        [[axis]]
        layer_index = [0, 1]
    """))
    out = tmp_path / "out"
    outcome = run_sweep(sweep, out, workers=1, progress=open(os.devnull, "w"))
    assert outcome.errors == 0
    points = load_sweep(out).sort_values("layer_index")
    kernels = load_sweep_kernels(out)
    cached = kernels.groupby("layer_index")["cached"].agg(["all", "any"])
    assert not cached.loc[0, "any"] and cached.loc[1, "all"]
    assert points["time_us"].nunique() == 1
    assert any((out / "op-cache").glob("*.json"))

    plain = tmp_path / "plain"
    run_sweep(sweep, plain, workers=1, progress=open(os.devnull, "w"), op_cache=False)
    assert not (plain / "op-cache").exists()
    assert not load_sweep_kernels(plain)["cached"].any()


@pytest.mark.parametrize("home", ["", "/elsewhere"])
def test_default_folder_follows_xdg_cache_home(home):
    """`default_cache_dir`: $XDG_CACHE_HOME/ptxsim/op-cache, else ~/.cache/ptxsim/op-cache."""
    environ = {"XDG_CACHE_HOME": home} if home else {}
    base = Path(home) if home else Path.home() / ".cache"
    assert default_cache_dir(environ) == base / "ptxsim" / "op-cache"
