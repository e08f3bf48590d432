"""`cvt` semantics against exact references, through PTX snippets.

Float -> int rounds (.rni/.rzi/.rmi/.rpi), clamps to the destination range and maps
NaN to 0 (f32 source, destination of at most 32 bits: the case PTX specifies; NaN in
the other cases is not asserted). Int -> float and float -> float round once under
.rn/.rz/.rm/.rp (`fractions.Fraction` references), `.satfinite` clamps to the largest
finite value and keeps NaN, `.relu` clamps negatives to +0. Packed conversions put the
first source in the upper half. Integer conversions extend by the source type,
truncate or (with .sat) clamp, and the destination register is extended by the
destination type.
"""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given
from ptx_snippets import run_instruction
from semantics_reference import (
    FEW,
    FORMATS,
    INT_DTYPES,
    N_LANES,
    SEEDS,
    assert_same_floats,
    assert_same_ints,
    exact,
    int_values,
    ints,
    mixed,
    round_exact,
    wrap,
)

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

F32 = np.dtype(np.float32)
E4M3, E5M2 = np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2)
INT_RANGE = {"s8": (-128, 127), "u8": (0, 255), "s16": (-2 ** 15, 2 ** 15 - 1),
             "u16": (0, 2 ** 16 - 1), "s32": (-2 ** 31, 2 ** 31 - 1), "u32": (0, 2 ** 32 - 1),
             "s64": (-2 ** 63, 2 ** 63 - 1), "u64": (0, 2 ** 64 - 1)}
# register-width numpy dtype holding each integer type (8-bit types sit in 16-bit registers)
REG_DTYPE = {"s8": np.int16, "u8": np.uint16, **INT_DTYPES}


def _float_inputs(rng, dt, n: int = N_LANES) -> np.ndarray:
    """Random floats, values near integers and halves, and huge values past every range."""
    base = mixed(rng, dt, n).astype(np.float64)
    near = rng.integers(-300, 300, n) / 2 + rng.choice([0.0, 1e-3, -1e-3, 0.25], n)
    huge = rng.choice([1, -1], n) * np.ldexp(1.0, rng.integers(14, 70, n))
    kind = rng.random(n)
    return np.where(kind < 0.4, base, np.where(kind < 0.7, near, huge)).astype(dt)


def _round_int(q: Fraction, mode: str) -> int:
    if mode == "rzi":
        return math.trunc(q)
    if mode == "rmi":
        return math.floor(q)
    if mode == "rpi":
        return math.ceil(q)
    return round(q)          # Fraction rounds half to even


@pytest.mark.parametrize("dst_ty", ["s32", "u32", "s64", "u64", "s16", "u8"])
@pytest.mark.parametrize("mode", ["rni", "rzi", "rmi", "rpi"])
@pytest.mark.parametrize("src_ty", ["f32", "f64"])
@given(seed=SEEDS)
@FEW
def test_float_to_int_rounds_then_saturates(src_ty, mode, dst_ty, seed):
    """cvt.{rni,rzi,rmi,rpi}.int.float rounds to an integer and clamps to the range."""
    dt = FORMATS[src_ty].dtype
    a = _float_inputs(np.random.default_rng(seed), dt)
    got = run_instruction(f"cvt.{mode}.{dst_ty}.{src_ty} {{d}}, {{a}};", REG_DTYPE[dst_ty], a)
    lo, hi = INT_RANGE[dst_ty]
    nan_to_zero = src_ty == "f32" and dst_ty not in ("s64", "u64")
    keep = ~np.isnan(a.astype(np.float64)) | nan_to_zero
    want = []
    for x in a.astype(np.float64).tolist():
        if math.isnan(x):
            want.append(0)
        elif math.isinf(x):
            want.append(hi if x > 0 else lo)
        else:
            want.append(min(max(_round_int(exact(x), mode), lo), hi))
    want = np.array(want, dtype=REG_DTYPE[dst_ty])
    assert_same_ints(got[keep], want[keep], a[keep], what=f"cvt.{mode}.{dst_ty}.{src_ty}")


@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
@pytest.mark.parametrize("types", ["f32.s32", "f32.u32", "f32.s64", "f32.u64", "f64.s64",
                                   "f64.u64", "f16.s32", "f16.u16"])
@given(seed=SEEDS)
@FEW
def test_int_to_float_rounds_once(types, mode, seed):
    """cvt.{rn,rz,rm,rp}.float.int is the integer rounded once (f16 overflows to inf/max)."""
    dst_ty, src_ty = types.split(".")
    a = int_values(np.random.default_rng(seed), src_ty)
    fmt = FORMATS[dst_ty]
    got = run_instruction(f"cvt.{mode}.{types} {{d}}, {{a}};", fmt.dtype, a)
    want = np.array([round_exact(Fraction(x), fmt, mode) for x in ints(a)]).astype(fmt.dtype)
    assert_same_floats(got, want, a.astype(np.float64), what=f"cvt.{mode}.{types}")


def ref_narrow(a: np.ndarray, fmt_name: str, mode: str, satfinite: bool = False,
               relu: bool = False) -> np.ndarray:
    fmt = FORMATS[fmt_name]
    out = []
    for x in a.astype(np.float64).tolist():
        if math.isnan(x):
            out.append(math.nan)
            continue
        if relu and math.copysign(1.0, x) < 0:      # negatives and -0 become +0
            x = 0.0
        if math.isinf(x):
            r = x if fmt.has_inf else math.nan
        else:
            r = round_exact(exact(x), fmt, mode, negative_zero=math.copysign(1, x) < 0)
        if satfinite and (math.isinf(r) or math.isnan(r) or abs(r) > fmt.max_finite):
            r = math.copysign(fmt.max_finite, x)
        out.append(r)
    return np.array(out).astype(fmt.dtype)


@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
@pytest.mark.parametrize("types", ["f16.f32", "bf16.f32", "f32.f64", "f16.f64", "bf16.f64"])
@given(seed=SEEDS)
@FEW
def test_float_narrowing_rounds_once(types, mode, seed):
    """cvt.{rn,rz,rm,rp} from f32/f64 to f32/f16/bf16 rounds once with IEEE overflow."""
    dst_ty, src_ty = types.split(".")
    a = mixed(np.random.default_rng(seed), FORMATS[src_ty].dtype)
    fmt = FORMATS[dst_ty]
    got = run_instruction(f"cvt.{mode}.{types} {{d}}, {{a}};", fmt.dtype, a)
    assert_same_floats(got, ref_narrow(a, dst_ty, mode), a, what=f"cvt.{mode}.{types}")


@pytest.mark.parametrize("dst_ty", ["f16", "bf16"])
@given(seed=SEEDS)
@FEW
def test_relu_and_satfinite_narrowing(dst_ty, seed):
    """cvt.rn.relu.T.f32 clamps negatives (and -0) to +0; .satfinite clamps overflow to +-max."""
    a = mixed(np.random.default_rng(seed), F32)
    fmt = FORMATS[dst_ty]
    got = run_instruction(f"cvt.rn.relu.{dst_ty}.f32 {{d}}, {{a}};", fmt.dtype, a)
    assert_same_floats(got, ref_narrow(a, dst_ty, "rn", relu=True), a, what="relu")
    got = run_instruction(f"cvt.rn.satfinite.{dst_ty}.f32 {{d}}, {{a}};", fmt.dtype, a)
    assert_same_floats(got, ref_narrow(a, dst_ty, "rn", satfinite=True), a, what="satfinite")


@pytest.mark.parametrize("src_ty", ["f16", "bf16", "f32"])
@given(seed=SEEDS)
@FEW
def test_float_widening_is_exact(src_ty, seed):
    """cvt.f32.f16/bf16 and cvt.f64.f32 keep the value (NaN stays NaN)."""
    dt = FORMATS[src_ty].dtype
    a = mixed(np.random.default_rng(seed), dt)
    dst = "f64" if src_ty == "f32" else "f32"
    got = run_instruction(f"cvt.{dst}.{src_ty} {{d}}, {{a}};", FORMATS[dst].dtype, a)
    assert_same_floats(got, a.astype(FORMATS[dst].dtype), a, what=f"cvt.{dst}.{src_ty}")


@given(seed=SEEDS)
@FEW
def test_tf32_rna_rounds_half_away_from_zero(seed):
    """cvt.rna.tf32.f32 keeps 10 fraction bits, ties away from zero, low 13 bits zero."""
    a = mixed(np.random.default_rng(seed), F32)
    got = run_instruction("cvt.rna.tf32.f32 {d}, {a};", F32, a)
    assert_same_floats(got, ref_narrow(a, "tf32", "rna"), a, what="tf32")
    finite = np.isfinite(got)
    assert (got.view(np.uint32)[finite] & 0x1FFF == 0).all()


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("fp8", ["e4m3", "e5m2"])
@given(seed=SEEDS)
@FEW
def test_fp8x2_packs_a_high_and_saturates_finite(fp8, relu, seed):
    """e4m3x2/e5m2x2.f32 d, a, b: a in d[15:8]; NaN stays NaN, overflow clamps to +-max."""
    rng = np.random.default_rng(seed)
    a, b = (np.where(rng.random(N_LANES) < 0.5, mixed(rng, F32),
                     rng.standard_normal(N_LANES) * 10.0 ** rng.integers(-3, 6, N_LANES))
            .astype(F32) for _ in range(2))
    mods = ".relu" if relu else ""
    got = run_instruction(f"cvt.rn.satfinite{mods}.{fp8}x2.f32 {{d}}, {{a}}, {{b}};",
                          np.uint16, a, b)
    dt = FORMATS[fp8].dtype
    hi, lo = (got >> 8).astype(np.uint8).view(dt), (got & 0xFF).astype(np.uint8).view(dt)
    assert_same_floats(hi, ref_narrow(a, fp8, "rn", True, relu), a, what="upper byte = a")
    assert_same_floats(lo, ref_narrow(b, fp8, "rn", True, relu), b, what="lower byte = b")


@pytest.mark.parametrize("fp8", ["e4m3", "e5m2"])
@given(seed=SEEDS)
@FEW
def test_fp8x2_from_f16x2_keeps_half_order(fp8, seed):
    """cvt.rn.satfinite.e4m3x2.f16x2 converts the upper half into the upper byte."""
    rng = np.random.default_rng(seed)
    lo_h, hi_h = mixed(rng, np.float16), mixed(rng, np.float16)
    packed = lo_h.view(np.uint16).astype(np.uint32) | (hi_h.view(np.uint16).astype(np.uint32)
                                                       << 16)
    got = run_instruction(f"cvt.rn.satfinite.{fp8}x2.f16x2 {{d}}, {{a}};", np.uint16, packed)
    dt = FORMATS[fp8].dtype
    assert_same_floats((got >> 8).astype(np.uint8).view(dt), ref_narrow(hi_h, fp8, "rn", True),
                       hi_h, what="upper")
    assert_same_floats((got & 0xFF).astype(np.uint8).view(dt), ref_narrow(lo_h, fp8, "rn", True),
                       lo_h, what="lower")


@pytest.mark.parametrize("fp8", ["e4m3", "e5m2"])
def test_f16x2_from_fp8x2_widens_each_byte_exactly(fp8):
    """cvt.rn.f16x2.e4m3x2 d, a: the low byte becomes the low half, exactly."""
    raw = np.arange(2 ** 16, dtype=np.uint32).astype(np.uint16)
    got = run_instruction(f"cvt.rn.f16x2.{fp8}x2 {{d}}, {{a}};", np.uint32, raw)
    dt = FORMATS[fp8].dtype
    lo = (raw & 0xFF).astype(np.uint8).view(dt).astype(np.float16)
    hi = (raw >> 8).astype(np.uint8).view(dt).astype(np.float16)
    assert_same_floats((got & 0xFFFF).astype(np.uint16).view(np.float16), lo, what="low half")
    assert_same_floats((got >> 16).astype(np.uint16).view(np.float16), hi, what="high half")


@pytest.mark.parametrize("half", ["f16", "bf16"])
@given(seed=SEEDS)
@FEW
def test_half2_from_two_f32_puts_a_in_the_upper_half(half, seed):
    """cvt.rn.f16x2.f32 d, a, b: d[31:16] = rn(a), d[15:0] = rn(b)."""
    rng = np.random.default_rng(seed)
    a, b = mixed(rng, F32), mixed(rng, F32)
    got = run_instruction(f"cvt.rn.{half}x2.f32 {{d}}, {{a}}, {{b}};", np.uint32, a, b)
    dt = FORMATS[half].dtype
    assert_same_floats((got >> 16).astype(np.uint16).view(dt), ref_narrow(a, half, "rn"), a,
                       what="upper = a")
    assert_same_floats((got & 0xFFFF).astype(np.uint16).view(dt), ref_narrow(b, half, "rn"), b,
                       what="lower = b")


@given(seed=SEEDS)
@FEW
def test_sat_f32_clamps_to_unit_interval_and_integer_rounding_stays_float(seed):
    """cvt.sat.f32.f32 clamps to [+0, 1] with NaN -> +0; cvt.r*i.f32.f32 round to integers."""
    a = _float_inputs(np.random.default_rng(seed), F32)
    got = run_instruction("cvt.sat.f32.f32 {d}, {a};", F32, a)
    want = np.where(a > 0, np.minimum(a, 1), 0).astype(F32)
    assert_same_floats(got, want, a, what="cvt.sat")
    for mode, fn in (("rni", np.rint), ("rzi", np.trunc), ("rmi", np.floor), ("rpi", np.ceil)):
        got = run_instruction(f"cvt.{mode}.f32.f32 {{d}}, {{a}};", F32, a)
        assert_same_floats(got, fn(a), a, what=f"cvt.{mode}.f32.f32")


_INT_PAIRS = ["s64.s32", "u64.u32", "u64.s32", "s32.s64", "u16.u32", "s16.s32", "u32.s16",
              "s32.u16", "u32.u8", "s32.s8", "s8.s32", "u8.u32", "s16.u8"]


@pytest.mark.parametrize("sat", [False, True])
@pytest.mark.parametrize("types", _INT_PAIRS + ["u32.s64", "s32.u32", "u64.s64", "s64.u64",
                                                "u8.s32", "s8.u32"])
@given(seed=SEEDS)
@FEW
def test_int_conversions_extend_by_source_and_wrap_or_clamp(types, sat, seed):
    """cvt.int.int extends by source type, then truncates (.sat: clamps) to the destination."""
    dst_ty, src_ty = types.split(".")
    src_vals = int_values(np.random.default_rng(seed), src_ty.replace("8", "16"))
    lo, hi = INT_RANGE[src_ty]
    src_vals = np.clip(src_vals, lo, hi).astype(src_vals.dtype) if "8" in src_ty else src_vals
    text = f"cvt{'.sat' if sat else ''}.{dst_ty}.{src_ty} {{d}}, {{a}};"
    got = run_instruction(text, REG_DTYPE[dst_ty], src_vals)
    dlo, dhi = INT_RANGE[dst_ty]
    reg = "s16" if dst_ty == "s8" else "u16" if dst_ty == "u8" else dst_ty
    want = [wrap(wrap(min(max(x, dlo), dhi) if sat else x, dst_ty), reg)
            for x in ints(src_vals)]
    assert_same_ints(got, np.array(want, dtype=REG_DTYPE[dst_ty]), src_vals, what=text)
