"""Float arithmetic semantics against exact references, through real PTX snippets.

Each hypothesis example is one kernel launch of 256 lanes (`tests/ptx_snippets.py`)
whose inputs mix special values, subnormals, random bit patterns, cancellation,
wide exponent gaps and products that sit on rounding midpoints
(`tests/fp_reference.py`). Correctly rounded operations are compared bit for bit
with `fractions.Fraction` arithmetic rounded once; approximate ones with the error
bounds the PTX ISA states. Not covered here: mixed-precision forms (`add.f32.f16`)
and `.rs` rounding.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from float_arith_reference import F32, F64, MODES, flush, mods, ref_arith, signbit
from hypothesis import given, settings
from ptx_snippets import run_instruction
from semantics_reference import (
    FEW,
    FORMATS,
    N_LANES,
    SEEDS,
    assert_same_floats,
    fma_triples,
    mixed,
    moderate,
    related,
    specials,
)

# inputs include signaling NaNs and overflowing casts on purpose
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
SOME = settings(max_examples=12, derandomize=True, deadline=None, database=None)

SOME = settings(max_examples=12, derandomize=True, deadline=None, database=None)
# -- correctly rounded f32 / f64 ------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", ["add", "sub", "mul"])
@given(seed=SEEDS)
@SOME
def test_f32_add_sub_mul_round_once_in_each_mode(op, mode, seed):
    """add/sub/mul.f32 with .rn/.rz/.rm/.rp (or none) equal the exact result rounded once."""
    rng = np.random.default_rng(seed)
    a = mixed(rng, F32)
    b = related(rng, a)
    got = run_instruction(f"{op}{mods(mode)}.f32 {{d}}, {{a}}, {{b}};", F32, a, b)
    assert_same_floats(got, ref_arith(op, "f32", mode, a, b), a, b, what=f"{op}.{mode}")


@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
@given(seed=SEEDS)
@SOME
def test_f32_fma_is_fused_and_rounds_once_in_each_mode(mode, seed):
    """fma.{rn,rz,rm,rp}.f32 equals a*b + c computed exactly and rounded once."""
    rng = np.random.default_rng(seed)
    a, b, c = fma_triples(rng, F32)
    got = run_instruction(f"fma.{mode}.f32 {{d}}, {{a}}, {{b}}, {{c}};", F32, a, b, c)
    assert_same_floats(got, ref_arith("fma", "f32", mode, a, b, c), a, b, c, what=f"fma.{mode}")


def test_f32_fma_rn_breaks_float64_double_rounding_ties():
    """fma.rn.f32 rounds a*b + c once where float64 a*b + c lands on an f32 midpoint."""
    a = np.full(4, 1 + 2.0 ** -12, np.float32)         # a*a = 1 + 2^-11 + 2^-24, a midpoint
    c = np.array([2.0 ** -80, -(2.0 ** -80), 2.0 ** -60, 0.0], np.float32)
    got = run_instruction("fma.rn.f32 {d}, {a}, {b}, {c};", F32, a, a, c)
    want = ref_arith("fma", "f32", "rn", a, a, c)
    assert_same_floats(got, want, a, c, what="fma ties")
    assert got[0] != got[1]


def test_f32_directed_overflow_saturates_toward_zero():
    """A finite overflow rounds to MAX where rounding goes toward zero, to inf otherwise."""
    big = np.float32(np.finfo(np.float32).max)
    a = np.array([big, -big], np.float32)
    for mode in ("rn", "rz", "rm", "rp"):
        got = run_instruction(f"add.{mode}.f32 {{d}}, {{a}}, {{b}};", F32, a, a)
        assert_same_floats(got, ref_arith("add", "f32", mode, a, a), a, what=mode)


def test_exact_zero_sum_is_negative_zero_only_when_rounding_down():
    """x + (-x) is +0 under .rn/.rz/.rp and -0 under .rm (IEEE 754 §6.3)."""
    a = np.array([1.5, -2.0, 0.0, -0.0], np.float32)
    b = np.array([-1.5, 2.0, -0.0, -0.0], np.float32)
    for mode in ("rn", "rz", "rm", "rp"):
        got = run_instruction(f"add.{mode}.f32 {{d}}, {{a}}, {{b}};", F32, a, b)
        assert np.signbit(got).tolist() == [mode == "rm", mode == "rm", mode == "rm", True]


@pytest.mark.parametrize("op", ["add", "mul", "fma"])
@given(seed=SEEDS)
@FEW
def test_f32_ftz_flushes_subnormal_inputs_and_results(op, seed):
    """.ftz treats subnormal inputs as signed zero and flushes subnormal results."""
    rng = np.random.default_rng(seed)
    tiny = np.ldexp(rng.random((3, N_LANES)) + 0.5, rng.integers(-150, -120, (3, N_LANES)))
    a, b, c = (np.where(rng.random(N_LANES) < 0.5, t, moderate(rng, F32, N_LANES))
               .astype(F32) for t in tiny)
    if op == "mul":
        b = np.where(rng.random(N_LANES) < 0.5, np.ldexp(b, -100), b).astype(F32)
    srcs = (a, b, c) if op == "fma" else (a, b)
    ops = ", ".join("{" + k + "}" for k in "abc"[:len(srcs)])
    got = run_instruction(f"{op}{'.rn' if op == 'fma' else ''}.ftz.f32 {{d}}, {ops};", F32,
                          *srcs)
    want = flush(ref_arith(op, "f32", "rn", *(flush(x) for x in srcs)))
    assert_same_floats(got, want, *srcs, what=f"{op}.ftz")


@pytest.mark.parametrize("op", ["add", "mul", "fma"])
@given(seed=SEEDS)
@FEW
def test_f32_sat_clamps_to_unit_interval_and_nan_to_zero(op, seed):
    """.sat clamps the rounded result to [+0, 1] and turns NaN into +0."""
    rng = np.random.default_rng(seed)
    a, b, c = fma_triples(rng, F32)
    srcs = (a, b, c) if op == "fma" else (a, b)
    ops = ", ".join("{" + k + "}" for k in "abc"[:len(srcs)])
    got = run_instruction(f"{op}.rn.sat.f32 {{d}}, {ops};", F32, *srcs)
    r = ref_arith(op, "f32", "rn", *srcs)
    want = np.where(r > 0, np.minimum(r, 1), 0).astype(F32)
    assert_same_floats(got, want, *srcs, what=f"{op}.sat")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", ["add", "mul", "fma"])
@given(seed=SEEDS)
@FEW
def test_f64_add_mul_fma_round_once(op, mode, seed):
    """f64 add/mul/fma equal the exact result rounded once (fma: exponents within +-60)."""
    if op == "fma" and mode is None:
        mode = "rn"
    rng = np.random.default_rng(seed)
    a, b, c = fma_triples(rng, F64, extremes=op != "fma")
    srcs = (a, b, c) if op == "fma" else (a, related(rng, a))
    ops = ", ".join("{" + k + "}" for k in "abc"[:len(srcs)])
    got = run_instruction(f"{op}{mods(mode)}.f64 {{d}}, {ops};", F64, *srcs)
    assert_same_floats(got, ref_arith(op, "f64", mode, *srcs), *srcs, what=f"{op}.{mode}.f64")


# -- min / max -------------------------------------------------------------------------------

def ref_minmax(op: str, a, b, nan_flag: bool) -> np.ndarray:
    out = []
    for x, y in zip(a.astype(np.float64).tolist(), b.astype(np.float64).tolist(), strict=True):
        if math.isnan(x) or math.isnan(y):
            out.append(float("nan") if nan_flag or (math.isnan(x) and math.isnan(y))
                       else (y if math.isnan(x) else x))
        elif x == 0 and y == 0:
            neg = (signbit(x) or signbit(y)) if op == "min" else (signbit(x) and signbit(y))
            out.append(-0.0 if neg else 0.0)
        else:
            out.append(min(x, y) if op == "min" else max(x, y))
    return np.array(out)


@pytest.mark.parametrize("nan_flag", [False, True])
@pytest.mark.parametrize("op", ["min", "max"])
@pytest.mark.parametrize("ty", ["f32", "f64", "f16", "bf16"])
@given(seed=SEEDS)
@FEW
def test_min_max_suppress_nan_and_order_signed_zeros(ty, op, nan_flag, seed):
    """min/max return the non-NaN operand (.NaN: NaN), and -0 < +0."""
    dt = FORMATS[ty].dtype
    rng = np.random.default_rng(seed)
    a = mixed(rng, dt)
    b = np.where(rng.random(N_LANES) < 0.3, np.negative(a), mixed(rng, dt)).astype(dt)
    text = f"{op}{'.NaN' if nan_flag else ''}.{ty} {{d}}, {{a}}, {{b}};"
    got = run_instruction(text, dt, a, b)
    assert_same_floats(got, ref_minmax(op, a, b, nan_flag), a, b, what=text)


# -- half precision, scalar and packed --------------------------------------------------------

def _pack(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return lo.view(np.uint16).astype(np.uint32) | (hi.view(np.uint16).astype(np.uint32) << 16)


def _unpack(v: np.ndarray, dt) -> tuple[np.ndarray, np.ndarray]:
    return ((v & 0xFFFF).astype(np.uint16).view(dt), (v >> 16).astype(np.uint16).view(dt))


@pytest.mark.parametrize("op", ["add", "sub", "mul", "fma"])
@pytest.mark.parametrize("ty", ["f16", "bf16"])
@given(seed=SEEDS)
@FEW
def test_half_scalar_arithmetic_rounds_once(ty, op, seed):
    """add/sub/mul/fma.rn on f16 and bf16 equal the exact result rounded once."""
    dt = FORMATS[ty].dtype
    rng = np.random.default_rng(seed)
    a, b, c = fma_triples(rng, dt)
    if op != "fma":
        b = related(rng, a)
    srcs = (a, b, c) if op == "fma" else (a, b)
    ops = ", ".join("{" + k + "}" for k in "abc"[:len(srcs)])
    got = run_instruction(f"{op}.rn.{ty} {{d}}, {ops};", dt, *srcs)
    assert_same_floats(got, ref_arith(op, ty, "rn", *srcs), *srcs, what=f"{op}.{ty}")


@pytest.mark.parametrize("op", ["add", "mul", "fma", "max", "min"])
@pytest.mark.parametrize("ty", ["f16", "bf16"])
@given(seed=SEEDS)
@FEW
def test_packed_half_ops_work_per_half(ty, op, seed):
    """.f16x2/.bf16x2 add/mul/fma.rn and min/max act on each half on its own."""
    dt = FORMATS[ty].dtype
    rng = np.random.default_rng(seed)
    lo, hi = fma_triples(rng, dt), fma_triples(rng, dt)
    n = 3 if op == "fma" else 2
    srcs = [_pack(lo[k], hi[k]) for k in range(n)]
    ops = ", ".join("{" + k + "}" for k in "abc"[:n])
    rnd = ".rn" if op in ("add", "mul", "fma") else ""
    got = run_instruction(f"{op}{rnd}.{ty}x2 {{d}}, {ops};", np.uint32, *srcs)
    for k, half in enumerate(_unpack(got, dt)):
        part = (lo, hi)[k][:n]
        if op in ("min", "max"):
            want = ref_minmax(op, part[0], part[1], False).astype(dt)
        else:
            want = ref_arith(op, ty, "rn", *part)
        assert_same_floats(half, want, *part, what=f"{op}.{ty}x2 half {k}")


def test_fma_relu_clamps_negative_and_keeps_nan():
    """fma.rn.relu.f16x2 clamps negative results to +0 and gives canonical NaN for NaN."""
    a = np.array([1.0, -1.0, np.nan, 2.0], np.float16)
    got = run_instruction("fma.rn.relu.f16x2 {d}, {a}, {b}, {c};", np.uint32,
                          _pack(a, a), _pack(np.ones(4, np.float16), a),
                          _pack(np.zeros(4, np.float16), a))
    lo, hi = _unpack(got, np.float16)
    assert_same_floats(lo, np.array([1.0, 0.0, np.nan, 2.0], np.float16), a, what="relu lo")
    assert hi.view(np.uint16)[2] == 0x7FFF and hi.view(np.uint16)[1] == 0


# -- comparisons, sign and classification ------------------------------------------------------

CMPS = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
        "gt": np.greater, "ge": np.greater_equal}


@pytest.mark.parametrize("cmp", [*CMPS, *(c + "u" for c in CMPS), "num", "nan"])
@pytest.mark.parametrize("ty", ["f32", "f64", "f16"])
@given(seed=SEEDS)
@FEW
def test_setp_ordered_false_and_unordered_true_on_nan(ty, cmp, seed):
    """Ordered setp comparisons are false on NaN, unordered (…u, nan) true; num = no NaN."""
    dt = FORMATS[ty].dtype
    rng = np.random.default_rng(seed)
    a = mixed(rng, dt)
    b = np.where(rng.random(N_LANES) < 0.3, a, mixed(rng, dt)).astype(dt)
    got = run_instruction(f"setp.{cmp}.{ty} {{d}}, {{a}}, {{b}};", np.bool_, a, b)
    x, y = a.astype(np.float64), b.astype(np.float64)
    nan = np.isnan(x) | np.isnan(y)
    with np.errstate(invalid="ignore"):
        if cmp == "num":
            want = ~nan
        elif cmp == "nan":
            want = nan
        elif cmp.endswith("u") and cmp[:-1] in CMPS:
            want = CMPS[cmp[:-1]](x, y) | nan
        else:
            want = CMPS[cmp](x, y) & ~nan
    assert (got == want).all(), cmp


@given(seed=SEEDS)
@FEW
def test_copysign_takes_sign_of_first_operand(seed):
    """copysign.f32 d, a, b gives |b| with the sign bit of a (NaN payloads kept)."""
    rng = np.random.default_rng(seed)
    a, b = mixed(rng, F32), mixed(rng, F32)
    got = run_instruction("copysign.f32 {d}, {a}, {b};", F32, a, b)
    want = (b.view(np.uint32) & 0x7FFFFFFF) | (a.view(np.uint32) & 0x80000000)
    assert (got.view(np.uint32) == want).all()


@pytest.mark.parametrize("op", ["abs", "neg"])
@given(seed=SEEDS)
@FEW
def test_abs_neg_change_only_the_sign_bit(op, seed):
    """abs/neg.f32 clear/flip the sign bit, NaN and zero included."""
    a = mixed(np.random.default_rng(seed), F32)
    got = run_instruction(f"{op}.f32 {{d}}, {{a}};", F32, a).view(np.uint32)
    bits = a.view(np.uint32)
    assert (got == (bits & 0x7FFFFFFF if op == "abs" else bits ^ 0x80000000)).all()


@pytest.mark.parametrize("cls", ["finite", "infinite", "number", "notanumber", "normal",
                                 "subnormal"])
@pytest.mark.parametrize("ty", ["f32", "f64"])
def test_testp_classifies_each_special_value(ty, cls):
    """testp.{finite,infinite,number,notanumber,normal,subnormal} match IEEE classes."""
    dt = FORMATS[ty].dtype
    x = specials(dt)
    got = run_instruction(f"testp.{cls}.{ty} {{d}}, {{a}};", np.bool_, x)
    v = x.astype(np.float64)
    tiny = np.finfo(dt).smallest_normal
    want = {"finite": np.isfinite(v), "infinite": np.isinf(v), "number": ~np.isnan(v),
            "notanumber": np.isnan(v), "normal": np.isfinite(v) & (np.abs(v) >= tiny),
            "subnormal": (v != 0) & (np.abs(v) < tiny)}[cls]
    assert (got == want).all()
