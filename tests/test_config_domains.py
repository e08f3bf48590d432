"""Config domains: every numeric key accepts only finite values in its unit's range; fields
the launch cannot honour refuse it; results serialize as strict JSON."""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import typing

import numpy as np
import pytest

import isa
import models
import simulator
from isa.errors import InputError
from models import ConfigError, GpuConfig
from simulator.app.commands.models import config_from_args
from simulator.framework.config import field_domain, json_safe, strict_json
from workloads.ops import build_op, simulate_op

STORE_TID = """
.version 8.0
.target sm_90
.address_size 64

.visible .entry store_tid(.param .u64 out)
{
  .reg .b32 %r<2>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  cvta.to.global.u64 %rd2, %rd1;
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 4;
  add.s64 %rd2, %rd2, %rd3;
  st.global.u32 [%rd2], %r1;
  ret;
}
"""


def _numeric_fields(cls: type, prefix: str = ""):
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        key, tp = f"{prefix}{f.name}", hints[f.name]
        if dataclasses.is_dataclass(tp):
            yield from _numeric_fields(tp, f"{key}.")
            continue
        domain = field_domain(f.name, tp, f.metadata)
        if domain is not None:
            yield key, domain


def test_every_numeric_config_key_has_a_finite_lower_and_upper_bound():
    """No numeric key is open-ended: each has a lower bound and a finite ceiling."""
    domains = dict(_numeric_fields(GpuConfig))
    assert len(domains) > 100
    for key, domain in domains.items():
        assert domain.low is not None and math.isfinite(domain.low), key
        assert domain.high is not None and math.isfinite(domain.high), key
        assert domain.high > domain.low, key


def test_every_preset_value_lies_inside_its_domain():
    """The presets load under the domains, each value inside its key's range."""
    domains = dict(_numeric_fields(GpuConfig))
    for name in models.list_presets():
        flat = _flatten(models.load_preset(name).to_dict())
        for key, domain in domains.items():
            values = flat[key] if isinstance(flat[key], list) else [flat[key]]
            assert all(domain.problem(v) == "" for v in values), (name, key, flat[key])


def _flatten(data: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in data.items():
        if isinstance(v, dict):
            out.update(_flatten(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


@pytest.mark.parametrize(("key", "value"), [
    ("launch.kernel_overhead_us", math.nan),
    ("chip.power_cap_clock_ghz", math.nan),
    ("chip.clock_ghz", math.inf),
    ("hbm.channel_bandwidth_gbps", -math.inf),
    ("units.vpcu.grad_norm", math.nan),
])
def test_non_finite_value_is_a_config_error_naming_key_value_and_domain(key, value):
    """NaN and infinities are refused everywhere, with the key, the value and the domain."""
    with pytest.raises(ConfigError) as info:
        models.load_preset("h100_sxm", {key: value})
    message = str(info.value)
    assert info.value.key == key and info.value.problem == "not a finite number"
    assert key in message and repr(value) in message and "<=" in message


@pytest.mark.parametrize(("key", "value", "accepted"), [
    ("chip.clock_ghz", 11.0, "> 0 and <= 10"),
    ("sm.count", 10 ** 6, "<= 65536"),
    ("l2.size_bytes", 1 << 60, "<= 1125899906842624"),
    ("launch.kernel_overhead_us", 2e6, "<= 1000000"),
    ("units.zce.weight_sparsity", 1.5, ">= 0 and <= 1"),
    ("chip.clock_ghz", 10 ** 400, "> 0 and <= 10"),
])
def test_value_above_its_units_ceiling_is_refused(key, value, accepted):
    """Each key has a ceiling (by its unit suffix or its own); beyond it is a ConfigError."""
    with pytest.raises(ConfigError) as info:
        models.load_preset("h100_sxm", {key: value})
    assert info.value.key == key and accepted in str(info.value)


@pytest.mark.parametrize(("key", "value"), [
    ("chip.clock_ghz", 0), ("hbm.channel_bandwidth_gbps", 0.0), ("sm.count", 0),
    ("l1.hit_latency_cycles", 0), ("links.nodes", 0), ("limits.host_memory_bytes", 0),
])
def test_zero_is_refused_where_the_unit_needs_a_positive_value(key, value):
    """A clock, a bandwidth, a count or a latency of 0 cannot act: refused as too small."""
    with pytest.raises(ConfigError, match="too small") as info:
        models.load_preset("h100_sxm", {key: value})
    assert info.value.key == key and "> 0" in str(info.value)


@pytest.mark.parametrize(("key", "value"), [
    ("sm.comm_count", 0), ("chip.power_cap_clock_ghz", 0.0),
    ("units.tensor.fp8_fma_per_clk_per_sm", 0), ("launch.kernel_overhead_us", 0.0),
    ("l3.size_bytes", 0), ("noc.latency_cycles", 0), ("l2.same_address_atomic_ns", 0.0),
])
def test_zero_is_accepted_where_it_means_off_or_absent(key, value):
    """0 keeps its documented meaning (no reserved SM, power model off, no FP8, ...)."""
    assert _flatten(models.load_preset("h100_sxm", {key: value}).to_dict())[key] == value


def test_set_of_an_infinite_clock_is_an_input_error_not_an_overflow():
    """`--set chip.clock_ghz=inf` is reported as a bad `--set`, naming key and domain."""
    args = argparse.Namespace(model="h100_sxm", overrides=["chip.clock_ghz=inf"])
    with pytest.raises(InputError, match=r"--set: .*chip\.clock_ghz = inf.*> 0 and <= 10"):
        config_from_args(args)


def test_host_memory_budget_is_a_config_key_with_a_default():
    """`limits.host_memory_bytes` exists on every preset (16 GiB) and can be overridden."""
    assert {models.load_preset(n).limits.host_memory_bytes
            for n in models.list_presets()} == {16 << 30}
    assert models.load_preset("h100_sxm", {"limits.host_memory_bytes": 1 << 20}) \
        .limits.host_memory_bytes == 1 << 20


def _store_tid(block, config, shared_bytes=0):
    out = np.zeros(int(np.prod(block)), np.uint32)
    return simulator.simulate_kernel(STORE_TID, "store_tid", 1, block, [out], config,
                                     shared_bytes=shared_bytes), out


def test_cta_above_max_threads_per_cta_refuses_the_launch():
    """A 384-thread CTA on a part allowing 128 is a LaunchError naming kernel, size and key."""
    small = models.load_preset("h100_sxm", {"sm.max_threads_per_cta": 128})
    with pytest.raises(isa.LaunchError) as info:
        _store_tid((384, 1, 1), small)
    message = str(info.value)
    assert "store_tid" in message and "384" in message
    assert "sm.max_threads_per_cta = 128" in message
    res, out = _store_tid((128, 1, 1), small)
    assert res.cycles > 0 and np.array_equal(out, np.arange(128))


def test_shared_memory_above_the_per_cta_limit_refuses_the_launch_naming_the_kernel():
    """Dynamic shared memory beyond `sm.max_shared_memory_per_cta_bytes` is refused."""
    config = models.load_preset("h100_sxm", {"sm.max_shared_memory_per_cta_bytes": 16384})
    with pytest.raises(isa.LaunchError, match=r"store_tid.*32768 B.*"
                       r"sm\.max_shared_memory_per_cta_bytes \(16384\)"):
        _store_tid((32, 1, 1), config, shared_bytes=32768)


def test_tensor_instruction_of_a_precision_with_rate_zero_refuses_the_launch():
    """A bf16 GEMM on a part whose bf16 tensor rate is 0 is refused, not timed at 1 FMA/clk."""
    config = models.load_preset("h100_sxm", {"units.tensor.bf16_fma_per_clk_per_sm": 0})
    plan = build_op("gemm", config, m=128, n=128, k=128)
    with pytest.raises(isa.LaunchError, match=r"units\.tensor\.bf16_fma_per_clk_per_sm = 0"):
        simulate_op(plan, config)


def test_wgmma_on_a_part_without_wgmma_refuses_the_launch():
    """A part whose wgmma latency is 0 says it has none: the Hopper GEMM launch is refused
    (a100_sxm, which also has 0, is refused earlier by its ISA target: test_isa_target)."""
    config = models.load_preset("h100_sxm", {"units.tensor.wgmma_latency_cycles": 0})
    plan = build_op("gemm", config, m=128, n=128, k=128)
    with pytest.raises(isa.LaunchError, match=r"wgmma_latency_cycles = 0"):
        simulate_op(plan, config)


def _refuse_constants(text: str):
    raise AssertionError(f"{text} in strict JSON")


def test_strict_json_writes_nan_and_infinities_as_null_with_their_reason():
    """NaN/inf become null, the table holding them names each under `null_reasons`."""
    data = {"time_us": math.nan, "rows": [1.0, math.inf, np.float32("nan")],
            "inner": {"gap": -math.inf, "n": np.int64(3)}, "shape": (1, 2)}
    text = strict_json(data, reasons={"time_us": "no launch ran"})
    back = json.loads(text, parse_constant=_refuse_constants)
    assert back["time_us"] is None and back["rows"] == [1.0, None, None]
    assert back["null_reasons"] == {"time_us": "no launch ran", "rows[1]": "not finite (inf)",
                                    "rows[2]": "not a number (nan)"}
    assert back["inner"] == {"gap": None, "n": 3,
                             "null_reasons": {"gap": "not finite (-inf)"}}
    assert back["shape"] == [1, 2]


def test_json_safe_keeps_reasons_the_data_already_gives():
    """An op result's own `null_reasons` survive and merge with the ones found."""
    safe = json_safe({"tflops": math.nan, "gap": math.nan,
                      "null_reasons": {"tflops": "time_us is 0"}})
    assert safe == {"tflops": None, "gap": None,
                    "null_reasons": {"tflops": "time_us is 0",
                                     "gap": "not a number (nan)"}}


def test_finite_results_serialize_unchanged():
    """Data without NaN or infinities reads back equal, with no `null_reasons`."""
    data = {"op": "gemm", "time_us": 12.5, "kernel": [{"grid": [132, 1, 1]}]}
    assert json.loads(strict_json(data)) == data
