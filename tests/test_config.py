"""Rules of config loading: unknown keys and bad values name the key; overrides apply."""

from __future__ import annotations

import tomllib

import pytest

import models
from isa.errors import InputError
from models import ConfigError, GpuConfig
from simulator.framework.config import build_spec, resolve_bases


@pytest.fixture(scope="module")
def h100() -> GpuConfig:
    return models.load_preset("h100_sxm")


def test_config_error_is_an_input_error():
    """ConfigError is reported by the CLI like any other bad input."""
    assert issubclass(ConfigError, InputError)


@pytest.mark.parametrize(
    ("overrides", "key", "accepted"),
    [
        ({"l2.size_mb": 50}, "l2.size_mb", "size_bytes"),
        ({"sm.count": -4}, "sm.count", "> 0"),
        ({"chip.clock_ghz": 0}, "chip.clock_ghz", "> 0"),
        ({"sm.count": "many"}, "sm.count", "int"),
        ({"sm.count": True}, "sm.count", "int"),
        ({"l1.associativity": 12}, "l1.associativity", "power of two"),
        ({"sm.scheduler_policy": "fifo"}, "sm.scheduler_policy", "'gto' | 'lrr'"),
        ({"sm.comm_count": 132}, "sm.comm_count", "< sm.count"),
        ({"sm.max_shared_memory_bytes": 300_000}, "sm.max_shared_memory_bytes",
         "unified_l1_shared_bytes"),
        ({"l2.far_hit_latency_cycles": 100}, "l2.far_hit_latency_cycles",
         "near_hit_latency_cycles"),
        ({"hbm.latency_cycles": 300}, "hbm.latency_cycles", "slowest cache hit"),
        ({"l3.enabled": True}, "l3.size_bytes", "when enabled"),
        ({"noc": 5}, "noc", "table"),
    ],
)
def test_bad_override_names_key_value_and_what_is_accepted(overrides, key, accepted):
    """Each impossible override raises ConfigError naming the dotted key and the accepted."""
    with pytest.raises(ConfigError) as info:
        models.load_preset("h100_sxm", overrides)
    assert info.value.key == key
    assert key in str(info.value) and accepted in str(info.value)
    if key in overrides:
        assert repr(overrides[key]) in str(info.value)


def test_unknown_key_in_file_data_is_refused(h100):
    """An unknown key inside a table is refused with its dotted name."""
    data = h100.to_dict()
    data["hbm"]["stack_count"] = 5
    with pytest.raises(ConfigError, match=r"hbm\.stack_count"):
        build_spec(GpuConfig, data)


def test_missing_key_is_refused(h100):
    """A required key absent from the data is named."""
    data = h100.to_dict()
    del data["l2"]["slices"]
    with pytest.raises(ConfigError, match=r"l2\.slices.*missing"):
        build_spec(GpuConfig, data)


def test_overrides_apply_and_leave_the_rest(h100):
    """Overriding L2 size and SM count changes those two values and nothing else."""
    cfg = models.load_preset("h100_sxm", {"l2.size_bytes": 64 << 20, "sm.count": 112})
    assert (cfg.l2.size_bytes, cfg.sm.count) == (64 << 20, 112)
    assert cfg.hbm == h100.hbm and cfg.units == h100.units


def test_with_overrides_matches_load_preset_overrides(h100):
    """cfg.with_overrides(x) equals load_preset(name, x)."""
    overrides = {"sm.comm_count": 20, "l1.hit_latency_cycles": 40}
    assert h100.with_overrides(overrides) == models.load_preset("h100_sxm", overrides)


def test_config_is_frozen(h100):
    """A loaded config cannot be changed in place."""
    with pytest.raises(AttributeError):
        h100.sm.count = 1  # type: ignore[misc]


def test_resolved_config_round_trips_through_toml(h100):
    """to_toml() of a resolved config reads back to an equal config."""
    enabled = h100.with_overrides({"l3.enabled": True, "l3.size_bytes": 128 << 20,
                                   "l3.hit_latency_cycles": 560})
    for cfg in (h100, enabled):
        assert build_spec(GpuConfig, tomllib.loads(cfg.to_toml())) == cfg


def test_base_chain_merges_child_over_parent():
    """A child table overrides single keys of its base and keeps the others."""
    files = {"child": {"base": "parent", "a": {"x": 2}}, "parent": {"a": {"x": 1, "y": 3}}}
    assert resolve_bases("child", files.__getitem__) == {"a": {"x": 2, "y": 3}}


def test_base_cycle_is_refused():
    """Presets that inherit from each other in a loop raise ConfigError naming the cycle."""
    files = {"a": {"base": "b"}, "b": {"base": "a"}}
    with pytest.raises(ConfigError, match="cycle a -> b -> a"):
        resolve_bases("a", files.__getitem__)


def test_unknown_preset_lists_the_known_ones():
    """Asking for a preset that does not exist names the ones that do."""
    with pytest.raises(ConfigError, match="h100_sxm"):
        models.load_preset("h999")
