"""The variable-precision tensor unit: vpcu.setprec and vmma, functional and timing."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import isa
import models
import simulator
from isa.errors import InputError
from isa.semantics.tensor_mma import layouts
from isa.semantics.vpcu import NUMPY_DTYPES, PRECISION_CODES, PRECISIONS, SHAPES
from workloads.codesign import vpcu_kernels as vk

RATES = {"fp32": 1024, "tf32": 2048, "fp16": 4096, "bf16": 4096, "e4m3": 8192, "e5m2": 8192}
SWITCH_CYCLES = 40


def vpcu_config(**extra):
    overrides = {"units.vpcu.enabled": True, "units.vpcu.switch_cycles": SWITCH_CYCLES}
    overrides |= {f"units.vpcu.{p}_flop_per_clk_per_sm": r for p, r in RATES.items()}
    return models.load_preset("h800_sxm", overrides | extra)


def _rounded(values: np.ndarray, precision: str) -> np.ndarray:
    """Values rounded to `precision` with ml_dtypes (tf32: f32 with 13 low bits cleared)."""
    if precision == "tf32":
        bits = values.astype(np.float32).view(np.uint32)
        return ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)
    return values.astype(NUMPY_DTYPES[precision])


def _run_vmma(shape, precision, a, b, c):
    aw, bw = vk.pack_fragments(shape, precision, a, b)
    lc = layouts(shape, 32, 32)[2]
    cw = c.reshape(-1)[lc.forward].reshape(32, 4)
    d = np.zeros((32, 4), np.float32)
    isa.run_kernel(vk.fragment_kernel(shape), "vmma_fragment", 1, 32,
                   [aw, bw, cw, d, PRECISION_CODES[precision]])
    out = np.empty(128, np.float32)
    out[lc.forward] = d.reshape(-1)
    return out.reshape(16, 8)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("precision", PRECISIONS)
def test_vmma_equals_numpy_matmul_of_inputs_rounded_to_the_register_precision(shape, precision):
    """D = A @ B + C on ml_dtypes-rounded inputs, accumulated in f32, for every precision."""
    rng = np.random.default_rng(PRECISION_CODES[precision])
    k = vk.shape_k(shape)
    a = _rounded(rng.standard_normal((16, k)), precision)
    b = _rounded(rng.standard_normal((k, 8)), precision)
    c = rng.standard_normal((16, 8)).astype(np.float32)
    d = _run_vmma(shape, precision, a, b, c)
    ref = (a.astype(np.float64) @ b.astype(np.float64) + c).astype(np.float32)
    np.testing.assert_allclose(d, ref, rtol=2e-7, atol=1e-6)


def test_rounding_to_fp8_changes_the_product_as_ml_dtypes_says():
    """Values off the e4m3 grid are rounded by ml_dtypes before the multiply (0.3 -> 0.3125)."""
    a = np.full((16, 32), 0.3)
    b = np.eye(32, 8)
    c = np.zeros((16, 8), np.float32)
    d = _run_vmma("m16n8k32", "e4m3", _rounded(a, "e4m3"), _rounded(b, "e4m3"), c)
    assert float(ml_dtypes.float8_e4m3fn(0.3)) == 0.3125
    assert (d == 0.3125).all()


def test_vmma_at_fp16_matches_stock_mma_f16_bit_for_bit():
    """The dyn form at code fp16 computes what mma.m16n8k16.f32.f16.f16.f32 computes."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal((16, 16)).astype(np.float16)
    b = rng.standard_normal((16, 8)).astype(np.float16)
    c = rng.standard_normal((16, 8)).astype(np.float32)
    d = _run_vmma("m16n8k16", "fp16", a, b, c)
    ptx = vk.fragment_kernel("m16n8k16").replace(
        "vmma.sync.aligned.m16n8k16.row.col.f32.dyn.dyn.f32", "mma.sync.aligned.m16n8k16"
        ".row.col.f32.f16.f16.f32").replace("{%a0, %a1, %a2, %a3, %a4, %a5, %a6, %a7}",
                                            "{%a0, %a1, %a2, %a3}").replace(
        "{%b0, %b1, %b2, %b3}", "{%b0, %b1}").replace("}, %prec;", "};")
    aw, bw = vk.pack_fragments("m16n8k16", "fp16", a, b)
    lc = layouts("m16n8k16", 32, 32)[2]
    out = np.zeros((32, 4), np.float32)
    isa.run_kernel(ptx, "vmma_fragment", 1, 32, [aw, bw, c.reshape(-1)[lc.forward]
                                                 .reshape(32, 4), out, 2])
    stock = np.empty(128, np.float32)
    stock[lc.forward] = out.reshape(-1)
    assert np.array_equal(d.view(np.uint32), stock.reshape(16, 8).view(np.uint32))


def test_setprec_rejects_an_undefined_precision_code():
    """Code 9 is no precision: the fault names the accepted codes."""
    z = np.zeros((32, 16), np.uint32)
    with pytest.raises(isa.PtxError, match="precision code 9.*4 \\(e4m3\\)"):
        isa.run_kernel(vk.fragment_kernel("m16n8k32"), "vmma_fragment", 1, 32,
                       [z, z[:, :8].copy(), np.zeros((32, 4), np.float32),
                        np.zeros((32, 4), np.float32), 9])


def test_verifier_rejects_a_vmma_fragment_of_the_wrong_size():
    """A vmma with a 4-register A fragment for m16n8k16 is refused before running."""
    ptx = vk.fragment_kernel("m16n8k16").replace(
        "{%a0, %a1, %a2, %a3, %a4, %a5, %a6, %a7}", "{%a0, %a1, %a2, %a3}")
    with pytest.raises(isa.PtxError, match="A fragment has 4 registers"):
        isa.compile_kernel(ptx, "vmma_fragment")


def _cycles_per_iteration(config, precisions, threads=512, iters=(8, 16)):
    ptx = vk.loop_kernel("m16n8k32", precisions)
    cycles = []
    for n in iters:
        out = np.zeros(threads, np.float32)
        cycles.append(simulator.simulate_kernel(ptx, "vmma_loop", 1, threads, [out, n],
                                                config=config).cycles)
    return (cycles[1] - cycles[0]) / (iters[1] - iters[0])


def _closed_form(config, precisions, warps_per_subpartition=4, chains=8):
    """Cycles per loop iteration of a tensor-bound vmma loop (models.vpcu docstring)."""
    fmas, subs = 16 * 8 * 32, config.sm.subpartitions
    switch = config.units.vpcu.switch_cycles if len(precisions) > 1 else 0
    per_prec = [switch + chains * int(np.ceil(fmas / (RATES[p] / 2 / subs)))
                for p in precisions]
    return warps_per_subpartition * sum(per_prec)


@pytest.mark.parametrize(("precisions", "switch_cycles"), [
    (("e4m3",), SWITCH_CYCLES), (("fp32",), SWITCH_CYCLES), (("bf16", "e4m3"), SWITCH_CYCLES),
    (("bf16", "e4m3"), 2 * SWITCH_CYCLES), (("fp16", "fp32", "e5m2"), 3)])
def test_vmma_loop_time_matches_the_closed_form(precisions, switch_cycles):
    """Per-iteration cycles = warps * sum(switch + chains * FMAs / rate per sub-partition),
    within 1 % (the two loop lengths do not start and end their last warps identically)."""
    config = vpcu_config(**{"units.vpcu.switch_cycles": switch_cycles})
    expected = _closed_form(config, precisions)
    assert _cycles_per_iteration(config, precisions) == pytest.approx(expected, rel=0.01)


def test_timing_a_vmma_without_the_vpcu_is_an_input_error():
    """A config whose units.vpcu.enabled is false refuses to time vmma, naming the key."""
    out = np.zeros(128, np.float32)
    with pytest.raises(InputError, match="units.vpcu.enabled"):
        simulator.simulate_kernel(vk.loop_kernel("m16n8k32", ("e4m3",)), "vmma_loop", 1, 128,
                                  [out, 1], config=models.load_preset("h800_sxm"))


def test_an_enabled_vpcu_needs_every_rate():
    """Enabling the unit without a rate is a config error naming the missing key."""
    with pytest.raises(models.ConfigError, match="fp32_flop_per_clk_per_sm"):
        models.load_preset("h800_sxm", {"units.vpcu.enabled": True})
