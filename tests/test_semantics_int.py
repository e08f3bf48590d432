"""Integer arithmetic semantics against Python-integer references, through PTX snippets.

Covers add/sub/mul (.lo/.hi/.wide), mad, .sat, div/rem, min/max, abs/neg
(`isa/semantics/int_arith.py`); bit operations, compares and moves are in
`test_semantics_logic.py`.

Each hypothesis example is one 256-lane launch; operands mix range edges (MIN, MAX,
0, +-1, powers of two and their neighbours), small values and full-range random
ones. References follow the PTX ISA pseudo-code with unbounded Python integers and
wrap modulo 2^n where PTX does. Division by zero (unspecified by PTX) is not tested;
signed MIN / -1 is checked to wrap to MIN with remainder 0, the model's choice.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from semantics_reference import (
    FEW,
    INT_DTYPES,
    SEEDS,
    assert_same_ints,
    expect,
    int_values,
    ints,
    is_signed,
    run_int,
    type_bits,
)

# -- add, sub, mul, mad ---------------------------------------------------------------------

@pytest.mark.parametrize("op", ["add", "sub", "mul.lo"])
@pytest.mark.parametrize("ty", ["s16", "u16", "s32", "u32", "s64", "u64"])
@given(seed=SEEDS)
@FEW
def test_add_sub_mul_lo_wrap_modulo_two_to_the_n(ty, op, seed):
    """add/sub/mul.lo wrap modulo 2^n."""
    rng = np.random.default_rng(seed)
    a, b = int_values(rng, ty), int_values(rng, ty)
    got = run_int(f"{op}.{ty} {{d}}, {{a}}, {{b}};", ty, a, b)
    f = {"add": lambda x, y: x + y, "sub": lambda x, y: x - y, "mul.lo": lambda x, y: x * y}[op]
    assert_same_ints(got, expect(map(f, ints(a), ints(b)), ty), a, b, what=f"{op}.{ty}")


@pytest.mark.parametrize("ty", ["s16", "u16", "s32", "u32", "s64", "u64"])
@given(seed=SEEDS)
@FEW
def test_mul_hi_is_the_upper_half_of_the_full_product(ty, seed):
    """mul.hi gives bits [2n-1:n] of the exact (signed or unsigned) product."""
    rng = np.random.default_rng(seed)
    a, b = int_values(rng, ty), int_values(rng, ty)
    got = run_int(f"mul.hi.{ty} {{d}}, {{a}}, {{b}};", ty, a, b)
    want = expect(((x * y) >> type_bits(ty) for x, y in zip(ints(a), ints(b), strict=True)), ty)
    assert_same_ints(got, want, a, b, what=f"mul.hi.{ty}")


@pytest.mark.parametrize("ty", ["s16", "u16", "s32", "u32"])
@given(seed=SEEDS)
@FEW
def test_mul_wide_gives_the_double_width_product(ty, seed):
    """mul.wide.{s,u}{16,32} gives the exact product in a register of twice the width."""
    rng = np.random.default_rng(seed)
    a, b = int_values(rng, ty), int_values(rng, ty)
    wide = f"{ty[0]}{2 * type_bits(ty)}"
    got = run_int(f"mul.wide.{ty} {{d}}, {{a}}, {{b}};", wide, a, b)
    want = expect((x * y for x, y in zip(ints(a), ints(b), strict=True)), wide)
    assert_same_ints(got, want, a, b, what=f"mul.wide.{ty}")


@pytest.mark.parametrize("part", ["lo", "hi", "wide"])
@pytest.mark.parametrize("ty", ["s32", "u32", "s64", "u64"])
@given(seed=SEEDS)
@FEW
def test_mad_adds_c_to_the_selected_product_part(ty, part, seed):
    """mad.lo/.hi/.wide: (a*b)[part] + c, modulo the destination width."""
    if part == "wide" and type_bits(ty) == 64:
        return
    rng = np.random.default_rng(seed)
    a, b = int_values(rng, ty), int_values(rng, ty)
    out = f"{ty[0]}{2 * type_bits(ty)}" if part == "wide" else ty
    c = int_values(rng, out)
    got = run_int(f"mad.{part}.{ty} {{d}}, {{a}}, {{b}}, {{c}};", out, a, b, c)
    n = type_bits(ty)
    sel = {"lo": lambda p: p, "hi": lambda p: p >> n, "wide": lambda p: p}[part]
    want = expect((sel(x * y) + z for x, y, z in zip(ints(a), ints(b), ints(c), strict=True)),
                  out)
    assert_same_ints(got, want, a, b, c, what=f"mad.{part}.{ty}")


@pytest.mark.parametrize("op", ["add", "sub"])
@given(seed=SEEDS)
@FEW
def test_sat_s32_clamps_instead_of_wrapping(op, seed):
    """add.sat.s32/sub.sat.s32 clamp to [-2^31, 2^31 - 1]."""
    rng = np.random.default_rng(seed)
    a, b = int_values(rng, "s32"), int_values(rng, "s32")
    got = run_int(f"{op}.sat.s32 {{d}}, {{a}}, {{b}};", "s32", a, b)
    f = (lambda x, y: x + y) if op == "add" else (lambda x, y: x - y)
    want = np.array([min(max(f(x, y), -2 ** 31), 2 ** 31 - 1)
                     for x, y in zip(ints(a), ints(b), strict=True)], np.int32)
    assert_same_ints(got, want, a, b, what=f"{op}.sat")


# -- div, rem ---------------------------------------------------------------------------------

def _trunc_div(x: int, y: int) -> int:
    q = abs(x) // abs(y)
    return q if (x < 0) == (y < 0) else -q


@pytest.mark.parametrize("ty", ["s16", "u16", "s32", "u32", "s64", "u64"])
@given(seed=SEEDS)
@FEW
def test_div_rem_truncate_toward_zero(ty, seed):
    """div truncates toward zero; rem has the sign of the dividend; MIN / -1 wraps to MIN."""
    rng = np.random.default_rng(seed)
    a, b = int_values(rng, ty), int_values(rng, ty)
    b = np.where(b == 0, INT_DTYPES[ty](3), b).astype(INT_DTYPES[ty])
    q = run_int(f"div.{ty} {{d}}, {{a}}, {{b}};", ty, a, b)
    r = run_int(f"rem.{ty} {{d}}, {{a}}, {{b}};", ty, a, b)
    pairs = list(zip(ints(a), ints(b), strict=True))
    assert_same_ints(q, expect((_trunc_div(x, y) for x, y in pairs), ty), a, b, what="div")
    assert_same_ints(r, expect((x - y * _trunc_div(x, y) for x, y in pairs), ty), a, b,
                     what="rem")


# -- min, max, abs, neg -----------------------------------------------------------------------

@pytest.mark.parametrize("ty", ["s16", "u16", "s32", "u32", "s64", "u64"])
@given(seed=SEEDS)
@FEW
def test_min_max_abs_neg_follow_the_type_signedness(ty, seed):
    """min/max compare signed or unsigned by type; abs/neg wrap (abs(MIN) = MIN)."""
    rng = np.random.default_rng(seed)
    a, b = int_values(rng, ty), int_values(rng, ty)
    pairs = list(zip(ints(a), ints(b), strict=True))
    for op, f in (("min", min), ("max", max)):
        got = run_int(f"{op}.{ty} {{d}}, {{a}}, {{b}};", ty, a, b)
        assert_same_ints(got, expect((f(x, y) for x, y in pairs), ty), a, b, what=op)
    if is_signed(ty):
        got = run_int(f"abs.{ty} {{d}}, {{a}};", ty, a)
        assert_same_ints(got, expect(map(abs, ints(a)), ty), a, what="abs")
        got = run_int(f"neg.{ty} {{d}}, {{a}};", ty, a)
        assert_same_ints(got, expect((-x for x in ints(a)), ty), a, what="neg")
