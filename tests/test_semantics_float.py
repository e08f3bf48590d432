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
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from ptx_snippets import run_instruction
from semantics_reference import (
    FEW,
    FORMATS,
    N_LANES,
    SEEDS,
    assert_same_floats,
    exact,
    fma_triples,
    mixed,
    moderate,
    related,
    round_exact,
    specials,
    ulp_distance,
)

# inputs include signaling NaNs and overflowing casts on purpose
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

SOME = settings(max_examples=12, derandomize=True, deadline=None, database=None)
MODES = [None, "rn", "rz", "rm", "rp"]
F32, F64, F16 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.float16)


def _mods(*mods) -> str:
    return "".join(f".{m}" for m in mods if m)


def _signbit(x: float) -> bool:
    return math.copysign(1.0, x) < 0


def _sum_zero_is_negative(x: float, y: float, mode: str) -> bool:
    """IEEE 754 sign of an exact zero sum x + y."""
    if mode == "rm":
        return _signbit(x) or _signbit(y)
    return _signbit(x) and _signbit(y)


def _special_case(op: str, f: list) -> float:
    """Results with an infinite or NaN operand (or x/0) are exact in float64."""
    with np.errstate(all="ignore"):
        r = {"add": lambda: f[0] + f[1], "sub": lambda: f[0] - f[1],
             "mul": lambda: f[0] * f[1], "div": lambda: f[0] / f[1],
             "fma": lambda: f[0] * f[1] + f[2]}[op]()
    return float(r)


def ref_arith(op: str, fmt_name: str, mode: str | None, *xs) -> np.ndarray:
    """Lane-wise exact add/sub/mul/fma/div rounded once to the format."""
    fmt, mode = FORMATS[fmt_name], mode or "rn"
    out = []
    for vals in zip(*(np.asarray(x).astype(np.float64) for x in xs), strict=True):
        v = [float(x) for x in vals]
        if not all(math.isfinite(x) for x in v) or (op == "div" and v[1] == 0):
            out.append(_special_case(op, [np.float64(x) for x in v]))
            continue
        q = [exact(x) for x in v]
        if op in ("add", "sub"):
            y = v[1] if op == "add" else -v[1]
            val, neg = q[0] + exact(y), _sum_zero_is_negative(v[0], y, mode)
        elif op == "mul":
            val, neg = q[0] * q[1], _signbit(v[0]) != _signbit(v[1])
        elif op == "div":
            val, neg = q[0] / q[1], _signbit(v[0]) != _signbit(v[1])
        else:
            p = q[0] * q[1]
            p_sign = math.copysign(1.0, v[0]) * math.copysign(1.0, v[1])
            p_zero = math.copysign(0.0 if p == 0 else 1.0, p_sign)
            val, neg = p + q[2], _sum_zero_is_negative(p_zero, v[2], mode)
        out.append(round_exact(val, fmt, mode, negative_zero=neg))
    return np.array(out, dtype=np.float64).astype(fmt.dtype)


def _flush(x: np.ndarray) -> np.ndarray:
    tiny = np.finfo(x.dtype).smallest_normal
    return np.where(np.abs(x) < tiny, np.copysign(np.zeros_like(x), x), x).astype(x.dtype)


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
    got = run_instruction(f"{op}{_mods(mode)}.f32 {{d}}, {{a}}, {{b}};", F32, a, b)
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
    want = _flush(ref_arith(op, "f32", "rn", *(_flush(x) for x in srcs)))
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
    got = run_instruction(f"{op}{_mods(mode)}.f64 {{d}}, {ops};", F64, *srcs)
    assert_same_floats(got, ref_arith(op, "f64", mode, *srcs), *srcs, what=f"{op}.{mode}.f64")


# -- division, reciprocal, square root ------------------------------------------------------

def _sqrt_exact(x: float) -> Fraction:
    """sqrt(x) as a rational rounded to odd on a grid far finer than any target's."""
    k = 700
    q = Fraction(x) * 4 ** k
    n = q.numerator // q.denominator
    s = math.isqrt(n)
    inexact = s * s != n or q.denominator != 1
    return Fraction(2 * s + inexact, 2 ** (k + 1))


def ref_sqrt(a: np.ndarray, fmt_name: str, mode: str) -> np.ndarray:
    fmt = FORMATS[fmt_name]
    out = []
    for x in a.astype(np.float64).tolist():
        if not math.isfinite(x) or x <= 0:      # NaN, -x -> NaN; +-0 -> +-0; inf -> inf
            out.append(x if x == 0 or x == math.inf else math.nan)
            continue
        out.append(round_exact(_sqrt_exact(x), fmt, mode))
    return np.array(out).astype(fmt.dtype)


@pytest.mark.parametrize("ty", ["f32", "f64"])
@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
@given(seed=SEEDS)
@FEW
def test_div_is_correctly_rounded(ty, mode, seed):
    """div.{rn,rz,rm,rp}.{f32,f64} equals the exact quotient rounded once."""
    dt = FORMATS[ty].dtype
    rng = np.random.default_rng(seed)
    a, b = mixed(rng, dt), mixed(rng, dt)
    got = run_instruction(f"div.{mode}.{ty} {{d}}, {{a}}, {{b}};", dt, a, b)
    assert_same_floats(got, ref_arith("div", ty, mode, a, b), a, b, what=f"div.{mode}.{ty}")


@pytest.mark.parametrize("ty", ["f32", "f64"])
@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
@given(seed=SEEDS)
@FEW
def test_sqrt_is_correctly_rounded(ty, mode, seed):
    """sqrt.{rn,rz,rm,rp} equals the exact square root rounded once (NaN below zero)."""
    dt = FORMATS[ty].dtype
    rng = np.random.default_rng(seed)
    a = mixed(rng, dt)
    got = run_instruction(f"sqrt.{mode}.{ty} {{d}}, {{a}};", dt, a)
    assert_same_floats(got, ref_sqrt(a, ty, mode), a, what=f"sqrt.{mode}.{ty}")


@pytest.mark.parametrize("ty", ["f32", "f64"])
@pytest.mark.parametrize("mode", ["rn", "rz", "rm", "rp"])
@given(seed=SEEDS)
@FEW
def test_rcp_is_correctly_rounded(ty, mode, seed):
    """rcp.{rn,rz,rm,rp} equals 1/a rounded once; rcp(+-0) = +-inf, rcp(+-inf) = +-0."""
    dt = FORMATS[ty].dtype
    rng = np.random.default_rng(seed)
    a = mixed(rng, dt)
    got = run_instruction(f"rcp.{mode}.{ty} {{d}}, {{a}};", dt, a)
    want = ref_arith("div", ty, mode, np.ones_like(a), a)
    assert_same_floats(got, want, a, what=f"rcp.{mode}.{ty}")


def _normal_range(rng, lo_exp: int, hi_exp: int, n: int = N_LANES) -> np.ndarray:
    x = np.ldexp(rng.random(n) + 1.0, rng.integers(lo_exp, hi_exp, n))
    return (x * np.where(rng.random(n) < 0.5, -1.0, 1.0)).astype(F32)


@given(seed=SEEDS)
@FEW
def test_rcp_approx_within_one_ulp(seed):
    """rcp.approx.f32 and rcp.approx.ftz.f32 are within 1 ulp of 1/a (normal range)."""
    a = _normal_range(np.random.default_rng(seed), -125, 125)
    want = (1.0 / a.astype(np.float64)).astype(F32)
    for text in ("rcp.approx.f32", "rcp.approx.ftz.f32"):
        got = run_instruction(text + " {d}, {a};", F32, a)
        assert ulp_distance(got, want).max() <= 1, text


@given(seed=SEEDS)
@FEW
def test_div_full_and_approx_within_two_ulp(seed):
    """div.full.f32 and div.approx.f32 are within 2 ulp for |b| in [2^-126, 2^126]."""
    rng = np.random.default_rng(seed)
    a, b = _normal_range(rng, -60, 60), _normal_range(rng, -60, 60)
    want = (a.astype(np.float64) / b.astype(np.float64)).astype(F32)
    for text in ("div.full.f32", "div.approx.f32", "div.approx.ftz.f32"):
        got = run_instruction(text + " {d}, {a}, {b};", F32, a, b)
        assert ulp_distance(got, want).max() <= 2, text


def test_approx_special_values_follow_the_ptx_tables():
    """ex2/lg2/rcp/rsqrt/sqrt/sin approx specials: -inf->+0, -0->-inf, +-0->+-inf, inf->NaN..."""
    x = np.array([-np.inf, -0.0, 0.0, np.inf, np.nan, -1.0], np.float32)
    table = {
        "ex2.approx.f32": [0.0, 1.0, 1.0, np.inf, np.nan, 0.5],
        "lg2.approx.f32": [np.nan, -np.inf, -np.inf, np.inf, np.nan, np.nan],
        "rcp.approx.f32": [-0.0, -np.inf, np.inf, 0.0, np.nan, -1.0],
        "rsqrt.approx.f32": [np.nan, -np.inf, np.inf, 0.0, np.nan, np.nan],
        "sqrt.approx.f32": [np.nan, -0.0, 0.0, np.inf, np.nan, np.nan],
        "sin.approx.f32": [np.nan, -0.0, 0.0, np.nan, np.nan, np.sin(-1.0)],
        "cos.approx.f32": [np.nan, 1.0, 1.0, np.nan, np.nan, np.cos(-1.0)],
    }
    for text, want in table.items():
        got = run_instruction(text + " {d}, {a};", F32, x)
        assert_same_floats(got, np.array(want, np.float32), x, what=text)


@given(seed=SEEDS)
@FEW
def test_ex2_approx_within_two_ulp(seed):
    """ex2.approx.f32 is within 2 ulp of the correctly rounded 2^a over the full range."""
    rng = np.random.default_rng(seed)
    a = np.concatenate([rng.uniform(-150, 128, N_LANES // 2),
                        rng.uniform(-2, 2, N_LANES // 2)]).astype(F32)
    got = run_instruction("ex2.approx.f32 {d}, {a};", F32, a)
    want = np.exp2(a.astype(np.float64)).astype(F32)
    assert ulp_distance(got, want).max() <= 2


@given(seed=SEEDS)
@FEW
def test_lg2_approx_absolute_error_in_half_to_two(seed):
    """lg2.approx.f32 has absolute error at most 2^-22 for a in (0.5, 2)."""
    a = np.random.default_rng(seed).uniform(0.5, 2.0, N_LANES).astype(F32)
    got = run_instruction("lg2.approx.f32 {d}, {a};", F32, a).astype(np.float64)
    assert np.abs(got - np.log2(a.astype(np.float64))).max() <= 2.0 ** -22


@pytest.mark.parametrize("fn", ["sin", "cos"])
@given(seed=SEEDS)
@FEW
def test_sin_cos_approx_absolute_error_on_minus_pi_to_pi(fn, seed):
    """sin/cos.approx.f32 have absolute error at most 2^-20.5 on [-pi, pi]."""
    a = np.random.default_rng(seed).uniform(-np.pi, np.pi, N_LANES).astype(F32)
    got = run_instruction(f"{fn}.approx.f32 {{d}}, {{a}};", F32, a).astype(np.float64)
    want = getattr(np, fn)(a.astype(np.float64))
    assert np.abs(got - want).max() <= 2.0 ** -20.5


@given(seed=SEEDS)
@FEW
def test_rsqrt_and_tanh_approx_relative_error(seed):
    """rsqrt.approx.f32 relative error <= 2^-22.9; tanh.approx.f32 relative <= 2^-11."""
    rng = np.random.default_rng(seed)
    a = np.abs(_normal_range(rng, -120, 120))
    got = run_instruction("rsqrt.approx.f32 {d}, {a};", F32, a).astype(np.float64)
    want = 1.0 / np.sqrt(a.astype(np.float64))
    assert (np.abs(got - want) / want).max() <= 2.0 ** -22.9
    t = rng.uniform(-10, 10, N_LANES).astype(F32)
    got = run_instruction("tanh.approx.f32 {d}, {a};", F32, t).astype(np.float64)
    want = np.tanh(t.astype(np.float64))
    assert (np.abs(got - want) <= 2.0 ** -11 * np.abs(want)).all()


# -- min / max -------------------------------------------------------------------------------

def ref_minmax(op: str, a, b, nan_flag: bool) -> np.ndarray:
    out = []
    for x, y in zip(a.astype(np.float64).tolist(), b.astype(np.float64).tolist(), strict=True):
        if math.isnan(x) or math.isnan(y):
            out.append(float("nan") if nan_flag or (math.isnan(x) and math.isnan(y))
                       else (y if math.isnan(x) else x))
        elif x == 0 and y == 0:
            neg = (_signbit(x) or _signbit(y)) if op == "min" else (_signbit(x) and _signbit(y))
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
