"""`ptxsim run` reports the error of its co-design units beside the time: a `rel_err` column
in the printed kernels table, error columns in kernels.csv/.parquet, a `numerics` section in
run.json, a Numerics section in report.html and `reports.load_run`; a stock run says the
error was not computed; switching the units off adds no error. Sparse GEMM ops count the
FLOPs they issue. With the ZCE on, the run times the activation sparsity it measures on the
reduced layer at `units.zce.threshold` (`units.zce.activation_sparsity_source` "measured")
or the typed one ("config"). A BERT-base layer of 32 tokens keeps each run to seconds."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pandas as pd
import pytest

import models
import reports
from models.roofline import roofline_time_us
from simulator.app.cli import main
from workloads.codesign import numerics as N
from workloads.codesign import run_numerics as R
from workloads.ops import build_op
from workloads.ops.registry import issued_work

THRESHOLD = 0.25
SPARSITY = 0.5


def _run(tmp_path_factory, name: str, args: list[str]) -> tuple[str, dict, object]:
    out = tmp_path_factory.mktemp("runs") / name
    text, js = io.StringIO(), io.StringIO()
    base = ["run", "--workload", "bert-base", "--tokens", "32", "--out", str(out), "--quiet",
            *args]
    with contextlib.redirect_stdout(js):
        assert main([*base, "--json"]) == 0
    with contextlib.redirect_stdout(text):
        assert main([*base, "--force"]) == 0
    return text.getvalue(), json.loads(js.getvalue()), out


@pytest.fixture(scope="module")
def threshold_run(tmp_path_factory):
    return _run(tmp_path_factory, "zce", [
        "--model", "deepseek_codesign", "--set", f"units.zce.threshold={THRESHOLD}",
        "--set", "units.zce.activation_sparsity_source=config",
        "--set", f"units.zce.activation_sparsity={SPARSITY}",
        "--set", f"units.zce.weight_sparsity={SPARSITY}"])


@pytest.fixture(scope="module")
def measured_run(tmp_path_factory):
    return _run(tmp_path_factory, "measured", [
        "--model", "deepseek_codesign", "--set", f"units.zce.threshold={THRESHOLD}"])


@pytest.fixture(scope="module")
def stock_run(tmp_path_factory):
    return _run(tmp_path_factory, "h800", [])


def test_codesign_run_puts_error_beside_time_in_every_output(threshold_run):
    """The GEMM kernels carry the gemm category's error, attention the attention one's,
    other kernels none; the same figures in stdout, kernels.csv/.parquet, run.json,
    report.html and reports.load_run."""
    text, report, out = threshold_run
    numerics = report["numerics"]
    assert numerics["computed"] and numerics["reference"] == "fp64" and numerics["seed"] == 0
    assert "1/4 width" in numerics["reduction"]
    cats = {c["category"]: c for c in numerics["categories"]}
    assert set(cats) == {"gemm", "attention", "layer"}
    assert cats["gemm"]["rel_error"] > 0.01 and cats["layer"]["activation_zeros"] > 0.1
    assert 0 < cats["attention"]["rel_error"] < 1e-3
    for name in ("kernels.csv", "kernels.parquet"):
        table = (pd.read_csv(out / name, keep_default_na=False, na_values=[""])
                 if name.endswith("csv") else pd.read_parquet(out / name))
        gemm = table[table["op"] == "gemm"]
        assert list(gemm["rel_error"]) == pytest.approx([cats["gemm"]["rel_error"]] * len(gemm))
        attention = table[table["op"] == "attention"]
        assert list(attention["rel_error_vs_stock"]) == pytest.approx(
            [cats["attention"]["rel_error_vs_stock"]] * len(attention))
        assert table.loc[table["op"] == "layernorm", "rel_error"].isna().all()
    kernels = {k["name"]: k for k in report["kernels"]}
    assert kernels["qkv_proj"]["rel_error"] == cats["gemm"]["rel_error"]
    assert "rel_err" in text.splitlines()[3]
    assert any(line.startswith("qkv_proj") and f"{cats['gemm']['rel_error']:8.1e}" in line
               for line in text.splitlines())
    assert "numerics vs FP64" in text and f"ZCE threshold {THRESHOLD:g} zeroes" in text
    html = (out / "report.html").read_text()
    assert "Numerics (error beside time)" in html and numerics["reduction"] in html
    loaded = reports.load_run(out)
    assert loaded.numerics == numerics
    errors = loaded.errors()
    assert list(errors["category"]) == ["gemm", "attention", "layer"]
    assert errors.attrs["reduction"] == numerics["reduction"]
    assert "rel_error" in loaded.kernels.columns


def test_sparse_run_counts_the_flops_its_gemms_issue(threshold_run):
    """A ZCE run's GEMM kernels: TFLOP/s and roofline from the products done and the
    operands as stored, so none passes the peak or runs under its roofline."""
    _, report, out = threshold_run
    table = pd.read_csv(out / "kernels.csv")
    gemm = table[table["op"] == "gemm"]
    assert (gemm["issued_flops"] < 0.5 * gemm["flops"]).all()
    assert (gemm["achieved_tflops"] <= gemm["peak_tflops"]).all()
    assert (gemm["roofline_gap"] >= 1).all()
    again = roofline_time_us(gemm["issued_flops"], gemm["roofline_bytes"],
                             gemm["peak_tflops"], gemm["peak_hbm_gbps"])
    assert np.allclose(again, gemm["roofline_us"], rtol=1e-12)
    kernels = {k["name"]: k for k in report["kernels"]}
    for row in gemm.itertuples():
        assert kernels[row.kernel]["tflops"] == pytest.approx(row.achieved_tflops, rel=1e-12)


def test_stock_run_says_error_not_computed(stock_run):
    """h800_sxm turns on no unit that changes numerics: the default (auto) computes nothing
    and says so; the error columns exist, empty."""
    text, report, out = stock_run
    assert not report["numerics"]["computed"]
    assert report["numerics"]["reason"].startswith("stock precision, error not computed")
    assert "numerics: stock precision, error not computed" in text
    table = pd.read_csv(out / "kernels.csv")
    assert table["rel_error"].isna().all()
    assert reports.load_run(out).errors().empty
    assert "Not computed: stock precision" in (out / "report.html").read_text()


def _codesign(**overrides):
    return models.load_preset("deepseek_codesign", overrides or None)


def test_switching_the_units_off_adds_no_error():
    """deepseek_codesign with its units off errs exactly as h800_sxm (the stock precision)
    against FP64, and 0 against the stock precision; the ZCE at threshold 0 skips exact
    zeros only, so it adds nothing either."""
    on = R.NumericsSettings(mode="on")
    off = _codesign(**dict.fromkeys(R.NUMERICS_SWITCHES, False))
    stock = R.run_numerics(models.load_preset("h800_sxm"), "bert-base", 32, on)
    for config in (off, _codesign(**{"units.lut_exp.enabled": False})):
        numerics = R.run_numerics(config, "bert-base", 32, on)
        for mine, theirs in zip(numerics["categories"], stock["categories"], strict=True):
            assert mine["rel_error_vs_stock"] == 0 and mine["argmax_change_vs_stock"] == 0
            assert mine["rel_error"] == theirs["rel_error"] > 0     # fp16 against FP64
    lut = R.run_numerics(_codesign(), "bert-base", 32)
    cats = {c["category"]: c for c in lut["categories"]}
    assert cats["gemm"]["rel_error_vs_stock"] == 0
    bound = N.linear_interpolation_bound(_codesign().units.lut_exp.entries)
    assert 0 < cats["layer"]["softmax_rel_error"] <= bound


def test_threshold_error_is_the_gemm_category_and_grows_with_the_threshold():
    """Thresholding activations acts on the GEMMs only; a higher threshold errs more."""
    errors = []
    for threshold in (0.1, 0.5):
        n = R.run_numerics(_codesign(**{"units.zce.threshold": threshold}), "bert-base", 32)
        cats = {c["category"]: c for c in n["categories"]}
        assert cats["gemm"]["rel_error_vs_stock"] > 10 * cats["attention"]["rel_error_vs_stock"]
        errors.append(cats["layer"]["rel_error"])
    assert errors[0] < errors[1]


def test_numerics_mode_auto_skips_stock_and_off_skips_all():
    """auto: computed only with a unit of NUMERICS_SWITCHES on; off: never."""
    h800 = models.load_preset("h800_sxm")
    assert R.switches_on(h800) == []
    assert not R.run_numerics(h800, "bert-base", 32)["computed"]
    two_four = models.load_preset("h800_sxm", {"units.tensor.sparse_2_4": True})
    assert R.switches_on(two_four) == ["units.tensor.sparse_2_4"]
    assert R.run_numerics(two_four, "bert-base", 32)["computed"]
    assert not R.run_numerics(two_four, "bert-base", 32, R.NumericsSettings("off"))["computed"]


def test_category_shortcuts_keep_only_their_fields():
    """`only` keeps a category's fields and leaves the rest at the FP64 reference."""
    sc = N.Shortcuts(gemm_precision="e4m3", attention_precision="bf16", zce=True,
                     zce_threshold=0.5, lut=(64, "linear"))
    gemm, attention = R.only(sc, "gemm"), R.only(sc, "attention")
    assert (gemm.gemm_precision, gemm.zce_threshold, gemm.attention_precision, gemm.lut) == \
        ("e4m3", 0.5, "fp64", None)
    assert (attention.gemm_precision, attention.zce, attention.attention_precision,
            attention.lut) == ("fp64", False, "bf16", (64, "linear"))
    assert R.only(sc, R.LAYER) is sc


def test_kernel_error_columns_map_ops_to_categories():
    """gemm and grouped_gemm take the gemm category, attention and mla_decode the attention
    one, the rest NaN; not computed: every row NaN."""
    kernels = pd.DataFrame({"op": ["gemm", "grouped_gemm", "attention", "mla_decode",
                                   "rmsnorm"]})
    numerics = {"categories": [{"category": c, "rel_error": e, "max_abs_error": e,
                                "argmax_change": 0.0, "rel_error_vs_stock": e / 2}
                               for c, e in (("gemm", 0.1), ("attention", 0.01),
                                            ("layer", 0.2))]}
    table = R.kernel_error_columns(kernels, numerics)
    assert list(table["error_category"]) == ["gemm", "gemm", "attention", "attention", ""]
    assert list(table["rel_error"][:4]) == [0.1, 0.1, 0.01, 0.01]
    assert np.isnan(table["rel_error"].iloc[4])
    empty = R.kernel_error_columns(kernels, {"categories": []})
    assert empty["rel_error"].isna().all()


def test_sparse_gemm_counts_the_flops_it_issues():
    """A ZCE or 2:4 GEMM issues flops x the share of products done, and its roofline bytes
    are the operands as stored; a stock GEMM's are its flops and bytes exactly."""
    sizes = {"m": 4096, "n": 4096, "k": 4096}
    stock = build_op("gemm", models.load_preset("h800_sxm"), **sizes)
    assert issued_work(stock) == (stock.flops, stock.bytes)
    zce = build_op("gemm", _codesign(**{"units.zce.activation_sparsity": 0.5,
                                        "units.zce.weight_sparsity": 0.5}), **sizes)
    issued, nbytes = issued_work(zce)
    assert issued == pytest.approx(zce.flops * zce.sizes["mac_share"], rel=1e-12)
    assert issued < 0.5 * zce.flops and nbytes < zce.bytes
    two_four = build_op("gemm", models.load_preset("h800_sxm", {"units.tensor.sparse_2_4":
                                                                True}), **sizes)
    assert issued_work(two_four)[0] == pytest.approx(two_four.flops / 2, rel=1e-12)


def test_measured_source_times_the_sparsity_the_threshold_makes(measured_run):
    """Source "measured": the share timed (run.json, config.json, the numerics' layer row)
    is the reduced layer's zero share at the threshold, rounded; with dense weights the
    GEMMs skip MACs only through it; the printed line names it."""
    text, report, out = measured_run
    z = report["zce_activation_sparsity"]
    layer = {c["category"]: c for c in report["numerics"]["categories"]}["layer"]
    assert z["source"] == "measured" and z["threshold"] == THRESHOLD and z["typed"] == 0
    assert z["measured"] == layer["activation_zeros"] > 0.1
    assert z["activation_sparsity"] == round(z["measured"], R.SPARSITY_DECIMALS)
    assert z["reduction"] == report["numerics"]["reduction"]
    timed = json.loads((out / "config.json").read_text())["units"]["zce"]
    assert timed["activation_sparsity"] == z["activation_sparsity"]
    assert timed["activation_sparsity_source"] == "measured"
    assert layer["activation_sparsity"] == z["activation_sparsity"]
    assert layer["activation_sparsity_source"] == "measured"
    assert "activations pruned" not in layer["shortcuts"]        # the threshold made them
    gemm = pd.read_csv(out / "kernels.csv").query("op == 'gemm'")
    assert (gemm["macs_skipped"] > 0).all()
    assert f"ZCE activation sparsity {z['activation_sparsity']:g} measured" in text


def test_config_source_times_the_typed_sparsity(threshold_run):
    """Source "config": the typed share is timed (config.json) and pruned on the error
    side; the note gives the threshold's zeros beside it."""
    text, report, out = threshold_run
    z = report["zce_activation_sparsity"]
    assert z == {"source": "config", "threshold": THRESHOLD, "typed": SPARSITY,
                 "activation_sparsity": SPARSITY}
    timed = json.loads((out / "config.json").read_text())["units"]["zce"]
    assert timed["activation_sparsity"] == SPARSITY
    layer = {c["category"]: c for c in report["numerics"]["categories"]}["layer"]
    assert layer["activation_sparsity"] == SPARSITY
    assert f"activations pruned {SPARSITY:g}" in layer["shortcuts"]
    assert f"ZCE activation sparsity {SPARSITY:g} as typed" in text
    assert "the typed units.zce.activation_sparsity" in text


def test_threshold_zero_measures_exact_zeros_only():
    """At threshold 0 the measured share counts exact zeros: BERT's GELU outputs at fp16
    hold none, so the run times no activation zeros; a ReLU FFN's are its down projection's
    input share of the MACs (1/3 at BERT's FFN = 4 x hidden) x about half."""
    z = R.zce_sparsity(_codesign(), "bert-base", 32)
    assert z["source"] == "measured" and z["measured"] == 0 and z["activation_sparsity"] == 0
    assert R.timed_config(_codesign(), z).units.zce.activation_sparsity == 0
    relu = N.layer_error(_codesign(), N.reduced_layer("bert-base", 32, activation="relu"))
    assert relu["activation_zeros"] == pytest.approx(1 / 3 * 0.5, abs=0.02)


def test_zce_off_and_config_source_leave_the_config_alone():
    """ZCE off: nothing measured; source "config": the typed value, the config unchanged."""
    assert R.zce_sparsity(models.load_preset("h800_sxm"), "bert-base", 32) is None
    typed = _codesign(**{"units.zce.activation_sparsity_source": "config",
                         "units.zce.activation_sparsity": 0.3})
    z = R.zce_sparsity(typed, "bert-base", 32)
    assert z["activation_sparsity"] == 0.3 and R.timed_config(typed, z) is typed


def test_typed_sparsity_with_measured_source_is_refused(tmp_path, capsys):
    """A --set activation sparsity the run would replace by the measured one: exit 2 before
    simulating, naming the key and what is accepted."""
    code = main(["run", "--workload", "bert-base", "--tokens", "32", "--out",
                 str(tmp_path / "r"), "--quiet", "--model", "deepseek_codesign",
                 "--set", "units.zce.activation_sparsity=0.5"])
    assert code == 2
    err = capsys.readouterr().err
    assert "units.zce.activation_sparsity=0.5" in err
    assert "activation_sparsity_source=config" in err
    assert not (tmp_path / "r").exists()
