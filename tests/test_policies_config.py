"""Policies are config: the shortcuts of sampled fidelity and the op builders' kernel choices
are `[fidelity]` / `[kernels]` keys of every resolved config (overridable, validated,
sweepable, saved), and no module global switches behaviour."""

from __future__ import annotations

import argparse
import dataclasses
import re
import tomllib
from pathlib import Path

import numpy as np
import pytest

import models
import simulator
from models import ConfigError
from simulator.app.commands.models import config_from_args
from simulator.app.sweep import expand_points, parse_sweep
from simulator.framework.config import build_spec
from simulator.framework.policy_spec import FidelitySpec, KernelsSpec
from workloads.ops import build_op

ROOT = Path(__file__).resolve().parents[1]
FORMER_SWITCHES = {
    "fidelity": ("chip_slicing", "chip_slice_factors", "chip_slice_min_sms",
                 "chip_slice_min_waves", "chip_slice_max_slice_waves",
                 "chip_slice_footprint_tolerance_fraction", "trace_synthesis",
                 "trace_synthesis_first_ctas", "trace_synthesis_wrap", "work_synthesis",
                 "work_synthesis_probe_units",
                 "work_synthesis_max_traced_fraction", "wave_sampling_min_waves",
                 "wave_sampling_start_waves", "wave_sampling_max_waves",
                 "wave_sampling_steady_tolerance_fraction", "snapshot_growth",
                 "snapshot_lead_waves", "steady_l2_preconditioning", "contention_window_us",
                 "l2_start"),
    "kernels": ("attention_split_combine", "attention_packed_decode_ctas_per_sm",
                "attention_packed_decode_whole_pages", "attention_kv_page_keys",
                "gemm_tile_rule", "comm_cache_hints", "gemm_epilogue",
                "gemm_l2_policy", "decode_attention", "attention_schedule",
                "gemm_sm80_k_tile"),
}
"""Every key of the two tables: the former module switches, and the keys added since."""


def test_no_module_global_is_a_behaviour_switch():
    """No `NAME = True/False` at module level in simulator, workloads or models."""
    switch = re.compile(r"^[A-Z_]* = (True|False)", re.M)
    found = [f"{path.relative_to(ROOT)}: {m.group(0)}"
             for folder in ("simulator", "workloads", "models")
             for path in sorted((ROOT / folder).rglob("*.py"))
             for m in switch.finditer(path.read_text())]
    assert not found, found


@pytest.mark.parametrize("name", models.list_presets())
def test_every_former_switch_is_a_key_of_the_resolved_config(name):
    """Each preset resolves the `[fidelity]` and `[kernels]` tables with every key, and its
    TOML (what `config.json` holds) reads back to the same config."""
    config = models.load_preset(name)
    data = config.to_dict()
    for section, keys in FORMER_SWITCHES.items():
        assert set(keys) == set(data[section]), section
    assert build_spec(models.GpuConfig, tomllib.loads(config.to_toml())) == config


def test_every_field_has_a_reason():
    """Each default states the measurement or argument it rests on (its `source`)."""
    for spec in (FidelitySpec, KernelsSpec):
        for f in dataclasses.fields(spec):
            assert f.metadata["help"] and f.metadata["source"], f.name


def _args(*overrides: str) -> argparse.Namespace:
    return argparse.Namespace(model="h800_sxm", overrides=list(overrides))


def test_set_overrides_a_fidelity_and_a_kernels_key():
    """`--set fidelity.chip_slicing=false --set kernels.gemm_tile_rule="n128"` reaches the
    config and the GEMM op's tile rule."""
    config = config_from_args(_args("fidelity.chip_slicing=false",
                                    'kernels.gemm_tile_rule="n128"'))
    assert config.fidelity.chip_slicing is False
    plan = build_op("gemm", config, m=256, n=256, k=256)
    assert plan.launches[0].detail["rule"] == "n128"
    assert build_op("gemm", config, m=256, n=256, k=256, rule="fill") \
        .launches[0].detail["rule"] == "fill"


@pytest.mark.parametrize(("key", "value", "accepted"), [
    ("fidelity.chip_slicing", "maybe", "true or false"),
    ("fidelity.trace_synthesis", 1, "true or false"),
    ("kernels.gemm_tile_rule", "biggest", "'last_wave_pairs'"),
    ("kernels.attention_split_combine", "both", "'kernel' | 'inline'"),
    ("kernels.attention_kv_page_keys", 24, "0 or a multiple of 16"),
    ("kernels.attention_packed_decode_ctas_per_sm", 3, "<= 2"),
    ("fidelity.chip_slice_factors", [4, 1], ">= 2"),
    ("fidelity.wave_sampling_steady_tolerance_fraction", 2.0, "<= 1"),
    ("fidelity.wave_sampling_min_waves", 4.0, "> wave_sampling_start_waves"),
    ("fidelity.wave_sampling_max_waves", 5, ">= 4"),
])
def test_bad_policy_value_is_a_config_error_naming_key_value_and_accepted(key, value,
                                                                           accepted):
    """A bad boolean, choice or number is refused with the key, the value and what is
    accepted."""
    overrides = {key: value}
    if key == "fidelity.wave_sampling_max_waves":
        overrides["fidelity.wave_sampling_start_waves"] = 6
        accepted = ">= wave_sampling_start_waves"
    with pytest.raises(ConfigError) as info:
        models.load_preset("h800_sxm", overrides)
    assert info.value.key == key and info.value.value == (
        tuple(value) if isinstance(value, list) else value)
    assert accepted in info.value.accepted


def test_a_sweep_varies_a_fidelity_key():
    """A sweep axis over `fidelity.chip_slicing` expands to two points whose resolved
    configs differ (the sweep's axes are preset keys)."""
    spec = parse_sweep("""
[base]
kind = "kernel"
preset = "h800_sxm"
kernel = "saxpy"
size = { n = 4096, block = 128 }
seed = 0

[[axis]]
"fidelity.chip_slicing" = [true, false]
""")
    points = expand_points(spec)
    assert [p.overrides for p in points] == [{"fidelity.chip_slicing": True},
                                             {"fidelity.chip_slicing": False}]
    assert len({p.point_id for p in points}) == 2


def test_kernel_result_saves_the_policies_with_its_config():
    """A result's config (what `config.json` is written from) holds the policies run."""
    from workloads.kernels.case import load_ptx
    from workloads.kernels.catalog import KERNELS

    spec = KERNELS["saxpy"]
    case = spec.build(np.random.default_rng(0), **spec.variants[0])
    config = models.load_preset("h100_sxm", {"fidelity.snapshot_lead_waves": 0.25})
    result = simulator.simulate_kernel(load_ptx(case.file), case.entry, case.grid,
                                       case.block, case.args, config)
    assert result.config["fidelity"]["snapshot_lead_waves"] == 0.25
    assert result.config["kernels"] == KernelsSpec().to_dict()
