"""The deepseek_codesign preset: h800_sxm plus the co-design units, all marked what-if."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

import models
import simulator
from simulator.app.commands import models as models_command
from workloads.codesign.exp_kernels import ex2_loop_kernel

OFF = {"units.vpcu.enabled": False, "units.lut_exp.enabled": False, "units.zce.enabled": False,
       "l3.enabled": False, "sm.max_shared_memory_bytes": 233472,
       "sm.shared_carveout_options_bytes": [0, 8192, 16384, 32768, 65536, 102400, 135168,
                                            167936, 200704, 233472]}
CODESIGN_KEYS = {("chip", "name"), ("sm", "max_shared_memory_bytes"),
                 ("sm", "shared_carveout_options_bytes"), ("units", "vpcu"),
                 ("units", "lut_exp"), ("units", "zce"), ("l3", None)}


def _value_lines():
    text = models.preset_path("deepseek_codesign").read_text().splitlines()
    return [line for line in text if "=" in line and not line.lstrip().startswith(("#", "["))]


def test_ptxsim_models_lists_the_codesign_preset(capsys):
    """`ptxsim models --json` has a deepseek_codesign row with the H800's SMs and clock."""
    parser = argparse.ArgumentParser()
    models_command.add_arguments(parser)
    assert models_command.run(parser.parse_args(["--json"])) == 0
    rows = {row["preset"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["deepseek_codesign"]["sms"] == rows["h800_sxm"]["sms"] == 132


def test_every_added_value_is_marked_what_if():
    """Each value line except the `base` key says `# source: what-if:`."""
    unmarked = [line for line in _value_lines()
                if not line.startswith("base") and "# source: what-if:" not in line]
    assert unmarked == []


def test_codesign_differs_from_h800_only_in_the_codesign_keys():
    """Every measured H800 value is inherited; only the units, L3 and carve-out change."""
    h800 = models.load_preset("h800_sxm").to_dict()
    codesign = models.load_preset("deepseek_codesign").to_dict()
    changed = set()
    for block, fields in h800.items():
        for key, value in fields.items():
            if codesign[block][key] != value:
                changed.add((block, key) if block != "l3" else ("l3", None))
    assert changed == CODESIGN_KEYS


def _ex2_run(config):
    out = np.zeros(256 * 8, np.float32)
    return simulator.simulate_kernel(ex2_loop_kernel(8, 8), "ex2_loop", 1, 256, [out, 4],
                                     config=config), out


def test_units_off_reproduce_the_h800_numbers_exactly():
    """With every co-design unit off, cycles and all stats equal the h800_sxm run."""
    base, _ = _ex2_run(models.load_preset("h800_sxm"))
    off, _ = _ex2_run(models.load_preset("deepseek_codesign", OFF))
    assert off.cycles == base.cycles
    assert off.stats.value.tolist() == base.stats.value.tolist()


def test_lut_exp_of_the_preset_speeds_up_ex2_without_changing_results():
    """The preset's LUT exp makes the ex2 loop faster; the values are the same."""
    base, out_base = _ex2_run(models.load_preset("h800_sxm"))
    fast, out_fast = _ex2_run(models.load_preset("deepseek_codesign"))
    assert fast.cycles < base.cycles
    assert np.array_equal(out_base, out_fast)


@pytest.mark.parametrize("precision", ["fp16", "bf16", "e4m3", "tf32"])
def test_vpcu_rates_equal_the_stock_tensor_rates_where_hopper_has_them(precision):
    """The what-if VPCU keeps the stock FLOP/clk/SM for the precisions Hopper has."""
    config = models.load_preset("deepseek_codesign")
    stock = {"fp16": "fp16", "bf16": "bf16", "e4m3": "fp8", "tf32": "tf32"}[precision]
    assert config.units.vpcu.flop_per_clk_per_sm(precision) == \
        2 * config.units.tensor.fma_per_clk_per_sm(stock)
