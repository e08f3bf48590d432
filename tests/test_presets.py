"""Rules of the presets: all load, every value cites a source, peaks match published figures."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pandas as pd
import pytest

import models
from simulator.app.commands import models as models_command

REFERENCE_CSV = Path(__file__).resolve().parents[2] / "shared" / "reference" / "hopper_params.csv"
CSV_CITATION = re.compile(r'csv (\S+) "([^"]+)"')
PRESETS = models.list_presets()


def _value_lines(name: str) -> list[tuple[int, str]]:
    text = models.preset_path(name).read_text()
    return [(number, line) for number, line in enumerate(text.splitlines(), 1)
            if line.strip() and not line.lstrip().startswith(("#", "["))]


def test_the_three_reference_presets_exist():
    """h100_sxm, h800_sxm and a100_sxm are listed."""
    assert {"h100_sxm", "h800_sxm", "a100_sxm"} <= set(PRESETS)


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_loads_and_validates(name):
    """Each preset file resolves its base chain and passes validation."""
    assert isinstance(models.load_preset(name), models.GpuConfig)


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_value_line_has_a_source_comment(name):
    """Each `key = value` line of a preset ends in a `# source:` comment."""
    missing = [f"{name}.toml:{n}: {line}" for n, line in _value_lines(name)
               if "# source:" not in line]
    assert missing == []


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_states_its_clock(name):
    """Each preset's header says which clock it assumes and why."""
    assert "# Clock:" in models.preset_path(name).read_text()


@pytest.mark.parametrize("name", PRESETS)
def test_csv_citations_name_existing_reference_rows(name):
    """Every `csv GPU "parameter"` citation matches a row of hopper_params.csv."""
    if not REFERENCE_CSV.is_file():
        pytest.skip(f"reference table not present at {REFERENCE_CSV}")
    table = pd.read_csv(REFERENCE_CSV, comment="#")
    rows = set(zip(table["gpu"], table["parameter"], strict=True))
    cited = [m.groups() for _, line in _value_lines(name) for m in CSV_CITATION.finditer(line)]
    assert cited, "no csv citations found"
    assert [c for c in cited if c not in rows] == []


def test_h100_bf16_dense_peak_is_989_tflops():
    """132 SMs x 2048 BF16 FMA/clk x 2 FLOP x 1.83 GHz = 989.4 TFLOPS (datasheet 989.4)."""
    cfg = models.load_preset("h100_sxm")
    closed_form = 132 * 2048 * 2 * 1.83e9 / 1e12
    assert cfg.peak_tensor_tflops("bf16") == pytest.approx(closed_form)
    assert cfg.peak_tensor_tflops("bf16") == pytest.approx(989.4, rel=1e-3)
    # 2:4 at the rate an H100 measured (mma.sp 1770 / mma.sync 1217), not the datasheet's 2x
    assert cfg.peak_tensor_tflops("fp8", sparse=True) == pytest.approx(
        2 * 989.4 * 1770 / 1217, rel=1e-3)


def test_a100_bf16_dense_peak_is_312_tflops():
    """108 SMs x 1024 BF16 FMA/clk x 2 FLOP x 1.41 GHz = 311.9 TFLOPS (datasheet 312)."""
    assert models.load_preset("a100_sxm").peak_tensor_tflops("bf16") == pytest.approx(312, rel=2e-3)


def test_hbm_peaks_match_datasheets():
    """Channels x channel bandwidth gives 3.35 TB/s (H100/H800) and 1.555 TB/s (A100 40GB)."""
    assert models.load_preset("h100_sxm").hbm_peak_tbps == pytest.approx(3.35, rel=1e-3)
    assert models.load_preset("h800_sxm").hbm_peak_tbps == pytest.approx(3.35, rel=1e-3)
    assert models.load_preset("a100_sxm").hbm_peak_tbps == pytest.approx(1.555, rel=1e-3)


def test_h800_differs_from_h100_only_in_name_fp64_and_links():
    """The H800 inherits the H100's SMs and memory; only the export cuts change."""
    h100 = models.load_preset("h100_sxm").to_dict()
    h800 = models.load_preset("h800_sxm").to_dict()
    changed = {block for block in h100 if h100[block] != h800[block]}
    assert changed == {"chip", "units", "links"}
    assert h800["links"]["nvlink_bandwidth_per_direction_gbps"] == 200.0
    assert h800["chip"]["clock_ghz"] == h100["chip"]["clock_ghz"]


def test_models_command_lists_presets_with_key_figures(capsys):
    """`ptxsim models --json` lists every preset with SMs, clock, HBM, L2 and BF16 peak."""
    parser = argparse.ArgumentParser()
    models_command.add_arguments(parser)
    assert models_command.run(parser.parse_args(["--json"])) == 0
    rows = {row["preset"]: row for row in json.loads(capsys.readouterr().out)}
    assert set(rows) == set(PRESETS)
    assert rows["h100_sxm"]["bf16_dense_tflops"] == pytest.approx(989.4, abs=0.1)
    assert rows["h100_sxm"]["l2_mib"] == 50.0 and rows["a100_sxm"]["sms"] == 108


def test_models_command_prints_one_preset_resolved_with_overrides(capsys):
    """`ptxsim models h800_sxm --set sm.count=112` prints TOML with the override applied."""
    parser = argparse.ArgumentParser()
    models_command.add_arguments(parser)
    models_command.run(parser.parse_args(["h800_sxm", "--set", "sm.count=112"]))
    assert "count = 112" in capsys.readouterr().out


def test_models_command_lists_every_config_key_with_help(capsys):
    """`ptxsim models --fields --json` documents each leaf key of the config with its help."""
    parser = argparse.ArgumentParser()
    models_command.add_arguments(parser)
    models_command.run(parser.parse_args(["--fields", "--json"]))
    docs = {d["key"]: d for d in json.loads(capsys.readouterr().out)}
    assert "l2.size_bytes" in docs and "sm.scheduler_policy" in docs
    assert all(d["help"] for d in docs.values())
