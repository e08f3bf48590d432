"""Float division, reciprocal and square root semantics against exact references, through
real PTX snippets (see `tests/test_semantics_float.py` for the inputs and method)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from float_arith_reference import F32, ref_arith
from hypothesis import given, settings
from ptx_snippets import run_instruction
from semantics_reference import (
    FEW,
    FORMATS,
    N_LANES,
    SEEDS,
    assert_same_floats,
    mixed,
    round_exact,
    ulp_distance,
)

# inputs include signaling NaNs and overflowing casts on purpose

# inputs include signaling NaNs and overflowing casts on purpose
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
SOME = settings(max_examples=12, derandomize=True, deadline=None, database=None)


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


