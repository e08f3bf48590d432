"""Bitwise, shift, bit-field, compare, select and move semantics through PTX snippets.

Each hypothesis example is one 256-lane launch of `isa/semantics/logic.py` code
against Python-integer references written from the PTX ISA pseudo-code (bfe, bfi,
prmt, lop3, dp4a, bfind, shf). Shift amounts and bit-field positions include values
at and far past the register width.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from ptx_snippets import run_instruction
from semantics_reference import (
    FEW,
    INT_DTYPES,
    N_LANES,
    SEEDS,
    assert_same_ints,
    expect,
    int_values,
    ints,
    is_signed,
    run_int,
    type_bits,
)

# -- bitwise logic ------------------------------------------------------------------------------

@pytest.mark.parametrize("ty", ["b16", "b32", "b64"])
@given(seed=SEEDS)
@FEW
def test_and_or_xor_not_cnot_act_bitwise(ty, seed):
    """and/or/xor/not work bit by bit; cnot gives 1 for 0 and 0 otherwise."""
    rng = np.random.default_rng(seed)
    vty = ty.replace("b", "u")
    a, b = int_values(rng, vty), int_values(rng, vty)
    pairs = list(zip(ints(a), ints(b), strict=True))
    for op, f in (("and", lambda x, y: x & y), ("or", lambda x, y: x | y),
                  ("xor", lambda x, y: x ^ y)):
        got = run_int(f"{op}.{ty} {{d}}, {{a}}, {{b}};", vty, a, b)
        assert_same_ints(got, expect((f(x, y) for x, y in pairs), vty), a, b, what=op)
    got = run_int(f"not.{ty} {{d}}, {{a}};", vty, a)
    assert_same_ints(got, expect((~x for x in ints(a)), vty), a, what="not")
    got = run_int(f"cnot.{ty} {{d}}, {{a}};", vty, a)
    assert_same_ints(got, expect((int(x == 0) for x in ints(a)), vty), a, what="cnot")


@given(seed=SEEDS)
@FEW
def test_predicate_logic(seed):
    """and/or/xor/not.pred combine predicates lane by lane."""
    rng = np.random.default_rng(seed)
    p, q = rng.random(N_LANES) < 0.5, rng.random(N_LANES) < 0.5
    for op, want in (("and", p & q), ("or", p | q), ("xor", p ^ q)):
        got = run_instruction(f"{op}.pred {{d}}, {{a}}, {{b}};", np.bool_, p, q)
        assert (got == want).all(), op
    assert (run_instruction("not.pred {d}, {a};", np.bool_, p) == ~p).all()


# -- shifts and bit manipulation -----------------------------------------------------------------

def _amounts(rng, n: int = N_LANES) -> np.ndarray:
    small = rng.integers(0, 70, n)
    return np.where(rng.random(n) < 0.8, small, rng.integers(0, 2 ** 32, n)).astype(np.uint32)


@pytest.mark.parametrize("ty", ["b16", "b32", "b64", "u32", "s16", "s32", "s64", "u64"])
@given(seed=SEEDS)
@FEW
def test_shifts_clamp_amounts_at_the_register_width(ty, seed):
    """shl/shr clamp the (u32) amount at the width; shr.s* fills with the sign bit."""
    rng = np.random.default_rng(seed)
    vty = ty.replace("b", "u")
    a, n = int_values(rng, vty), _amounts(rng)
    width = type_bits(ty)
    for op in ("shl", "shr"):
        got = run_int(f"{op}.{ty} {{d}}, {{a}}, {{b}};", vty, a, n)
        amts = [min(int(k), width) for k in n]
        if op == "shl":
            want = (x << k for x, k in zip(ints(a), amts, strict=True))
        else:   # Python >> on a signed int is arithmetic, on a non-negative one logical
            want = (x >> k for x, k in zip(ints(a), amts, strict=True))
        assert_same_ints(got, expect(want, vty), a, n, what=f"{op}.{ty}")


@pytest.mark.parametrize("mode", ["clamp", "wrap"])
@pytest.mark.parametrize("direction", ["l", "r"])
@given(seed=SEEDS)
@FEW
def test_shf_funnel_shifts_the_pair(direction, mode, seed):
    """shf.l/.r shift {b, a} by min(c, 32) (.clamp) or c & 31 (.wrap), keep high/low word."""
    rng = np.random.default_rng(seed)
    a, b = int_values(rng, "u32"), int_values(rng, "u32")
    c = _amounts(rng)
    got = run_int(f"shf.{direction}.{mode}.b32 {{d}}, {{a}}, {{b}}, {{c}};", "u32", a, b, c)
    want = []
    for x, y, k in zip(ints(a), ints(b), ints(c), strict=True):
        n = min(k, 32) if mode == "clamp" else k & 31
        pair = (y << 32) | x
        want.append((pair << n) >> 32 if direction == "l" else pair >> n)
    assert_same_ints(got, expect(want, "u32"), a, b, c, what=f"shf.{direction}.{mode}")


@pytest.mark.parametrize("ty", ["b32", "b64"])
@given(seed=SEEDS)
@FEW
def test_popc_clz_brev_count_and_reverse_bits(ty, seed):
    """popc counts ones, clz leading zeros (width for 0), brev reverses bit order."""
    rng = np.random.default_rng(seed)
    vty = ty.replace("b", "u")
    a = int_values(rng, vty)
    width = type_bits(ty)
    popc = run_int(f"popc.{ty} {{d}}, {{a}};", "u32", a)
    clz = run_int(f"clz.{ty} {{d}}, {{a}};", "u32", a)
    brev = run_int(f"brev.{ty} {{d}}, {{a}};", vty, a)
    xs = ints(a)
    assert_same_ints(popc, expect((bin(x).count("1") for x in xs), "u32"), a, what="popc")
    assert_same_ints(clz, expect((width - x.bit_length() for x in xs), "u32"), a, what="clz")
    rev = (int(format(x, f"0{width}b")[::-1], 2) for x in xs)
    assert_same_ints(brev, expect(rev, vty), a, what="brev")


@pytest.mark.parametrize("ty", ["u32", "s32", "u64", "s64"])
@given(seed=SEEDS)
@FEW
def test_bfind_finds_the_most_significant_non_sign_bit(ty, seed):
    """bfind gives the top non-sign bit index (0xFFFFFFFF if none); .shiftamt width-1-it."""
    rng = np.random.default_rng(seed)
    a = int_values(rng, ty)
    width = type_bits(ty)
    idx = [(~x if x < 0 else x).bit_length() - 1 for x in ints(a)]
    got = run_int(f"bfind.{ty} {{d}}, {{a}};", "u32", a)
    assert_same_ints(got, expect(idx, "u32"), a, what="bfind")
    got = run_int(f"bfind.shiftamt.{ty} {{d}}, {{a}};", "u32", a)
    assert_same_ints(got, expect((width - 1 - i if i >= 0 else -1 for i in idx), "u32"), a,
                     what="bfind.shiftamt")


def _bfe_ref(a: int, pos: int, ln: int, ty: str) -> int:
    """PTX bfe pseudo-code."""
    msb = type_bits(ty) - 1
    pos, ln = pos & 0xFF, ln & 0xFF
    ua = a & ((1 << (msb + 1)) - 1)
    sbit = (ua >> min(pos + ln - 1, msb)) & 1 if is_signed(ty) and ln != 0 else 0
    d = 0
    for i in range(msb + 1):
        bit = (ua >> (pos + i)) & 1 if i < ln and pos + i <= msb else sbit
        d |= bit << i
    return d


def _bfi_ref(a: int, b: int, pos: int, ln: int, ty: str) -> int:
    """PTX bfi pseudo-code."""
    msb = type_bits(ty) - 1
    pos, ln = pos & 0xFF, ln & 0xFF
    f = b & ((1 << (msb + 1)) - 1)
    for i in range(ln):
        if pos + i > msb:
            break
        f = (f & ~(1 << (pos + i))) | (((a >> i) & 1) << (pos + i))
    return f


def _fields(rng, n: int = N_LANES) -> tuple[np.ndarray, np.ndarray]:
    pos = np.where(rng.random(n) < 0.8, rng.integers(0, 70, n), rng.integers(0, 2 ** 32, n))
    ln = np.where(rng.random(n) < 0.8, rng.integers(0, 70, n), rng.integers(0, 2 ** 32, n))
    return pos.astype(np.uint32), ln.astype(np.uint32)


@pytest.mark.parametrize("ty", ["u32", "s32", "u64", "s64"])
@given(seed=SEEDS)
@FEW
def test_bfe_extracts_and_extends_like_the_ptx_pseudocode(ty, seed):
    """bfe fills bits past the msb and past len with a[min(pos+len-1, msb)] (signed) or 0."""
    rng = np.random.default_rng(seed)
    a = int_values(rng, ty)
    pos, ln = _fields(rng)
    got = run_int(f"bfe.{ty} {{d}}, {{a}}, {{b}}, {{c}};", ty, a, pos, ln)
    want = expect((_bfe_ref(x, int(p), int(k), ty)
                   for x, p, k in zip(ints(a), pos, ln, strict=True)), ty)
    assert_same_ints(got, want, a, pos, ln, what=f"bfe.{ty}")


@pytest.mark.parametrize("ty", ["b32", "b64"])
@given(seed=SEEDS)
@FEW
def test_bfi_inserts_the_low_bits_of_a_into_b(ty, seed):
    """bfi copies a[0..len) into b at pos, stopping at the msb."""
    rng = np.random.default_rng(seed)
    vty = ty.replace("b", "u")
    a, b = int_values(rng, vty), int_values(rng, vty)
    pos, ln = _fields(rng)
    got = run_int(f"bfi.{ty} {{d}}, {{a}}, {{b}}, {{c}}, {{e}};", vty, a, b, pos, ln)
    want = expect((_bfi_ref(x, y, int(p), int(k), ty)
                   for x, y, p, k in zip(ints(a), ints(b), pos, ln, strict=True)), vty)
    assert_same_ints(got, want, a, b, pos, ln, what=f"bfi.{ty}")


_PRMT_MODES = {   # byte indices for d.b0..d.b3, per selector value c[1:0]
    "f4e": [[0, 1, 2, 3], [1, 2, 3, 4], [2, 3, 4, 5], [3, 4, 5, 6]],
    "b4e": [[0, 7, 6, 5], [1, 0, 7, 6], [2, 1, 0, 7], [3, 2, 1, 0]],
    "rc8": [[0, 0, 0, 0], [1, 1, 1, 1], [2, 2, 2, 2], [3, 3, 3, 3]],
    "ecl": [[0, 1, 2, 3], [1, 1, 2, 3], [2, 2, 2, 3], [3, 3, 3, 3]],
    "ecr": [[0, 0, 0, 0], [0, 1, 1, 1], [0, 1, 2, 2], [0, 1, 2, 3]],
    "rc16": [[0, 1, 0, 1], [2, 3, 2, 3], [0, 1, 0, 1], [2, 3, 2, 3]],
}


def _prmt_ref(a: int, b: int, c: int, mode: str | None) -> int:
    pool = [(((b << 32) | a) >> (8 * k)) & 0xFF for k in range(8)]
    d = 0
    for k in range(4):
        if mode is None:
            sel = (c >> (4 * k)) & 0xF
            byte = pool[sel & 7]
            if sel & 8:
                byte = 0xFF if byte & 0x80 else 0
        else:
            byte = pool[_PRMT_MODES[mode][c & 3][k]]
        d |= byte << (8 * k)
    return d


@pytest.mark.parametrize("mode", [None, *_PRMT_MODES])
@given(seed=SEEDS)
@FEW
def test_prmt_selects_bytes_from_the_pair(mode, seed):
    """prmt.b32 picks bytes of {b, a} by selector nibbles (msb = replicate sign) or by mode."""
    rng = np.random.default_rng(seed)
    a, b, c = (int_values(rng, "u32") for _ in range(3))
    text = f"prmt.b32{'.' + mode if mode else ''} {{d}}, {{a}}, {{b}}, {{c}};"
    got = run_int(text, "u32", a, b, c)
    want = expect((_prmt_ref(x, y, z, mode)
                   for x, y, z in zip(ints(a), ints(b), ints(c), strict=True)), "u32")
    assert_same_ints(got, want, a, b, c, what=text)


@pytest.mark.parametrize("lut", [0x00, 0xFF, 0x96, 0xE8, 0xF0, 0xCC, 0xAA, 0x80, 0xCA, 0x1E])
@given(seed=SEEDS)
@FEW
def test_lop3_applies_the_truth_table(lut, seed):
    """lop3.b32 d = LUT[a_i b_i c_i] bitwise, with a as the most significant LUT index bit."""
    rng = np.random.default_rng(seed)
    a, b, c = (int_values(rng, "u32") for _ in range(3))
    got = run_int(f"lop3.b32 {{d}}, {{a}}, {{b}}, {{c}}, {lut};", "u32", a, b, c)
    want = []
    for x, y, z in zip(ints(a), ints(b), ints(c), strict=True):
        want.append(sum(((lut >> ((((x >> i) & 1) << 2) | (((y >> i) & 1) << 1) | ((z >> i) & 1)))
                         & 1) << i for i in range(32)))
    assert_same_ints(got, expect(want, "u32"), a, b, c, what=f"lop3 {lut:#x}")


@pytest.mark.parametrize("types", ["u32.u32", "s32.s32", "s32.u32", "u32.s32"])
@given(seed=SEEDS)
@FEW
def test_dp4a_sums_byte_products_into_c(types, seed):
    """dp4a: c + sum of the four byte products, bytes signed by their operand's type."""
    rng = np.random.default_rng(seed)
    a, b = int_values(rng, "u32"), int_values(rng, "u32")
    c = int_values(rng, "s32")
    ta, tb = types.split(".")
    got = run_int(f"dp4a.{types} {{d}}, {{a}}, {{b}}, {{c}};", "u32", a, b, c)

    def byte(x: int, k: int, signed: bool) -> int:
        v = (x >> (8 * k)) & 0xFF
        return v - 256 if signed and v >= 128 else v

    want = [z + sum(byte(x, k, ta[0] == "s") * byte(y, k, tb[0] == "s") for k in range(4))
            for x, y, z in zip(ints(a), ints(b), ints(c), strict=True)]
    assert_same_ints(got, expect(want, "u32"), a, b, c, what=f"dp4a.{types}")


@pytest.mark.parametrize("half", ["lo", "hi"])
@pytest.mark.parametrize("types", ["u32.u32", "s32.s32", "s32.u32", "u32.s32"])
@given(seed=SEEDS)
@FEW
def test_dp2a_sums_half_by_byte_products_into_c(half, types, seed):
    """dp2a.lo/.hi: c + a.h0 * b.b(0|2) + a.h1 * b.b(1|3), signedness by operand type."""
    rng = np.random.default_rng(seed)
    a, b = int_values(rng, "u32"), int_values(rng, "u32")
    c = int_values(rng, "s32")
    ta, tb = types.split(".")
    got = run_int(f"dp2a.{half}.{types} {{d}}, {{a}}, {{b}}, {{c}};", "u32", a, b, c)

    def part(x: int, k: int, bits: int, signed: bool) -> int:
        v = (x >> (bits * k)) & ((1 << bits) - 1)
        return v - (1 << bits) if signed and v >= 1 << (bits - 1) else v

    first = 2 if half == "hi" else 0
    want = [z + sum(part(x, k, 16, ta[0] == "s") * part(y, first + k, 8, tb[0] == "s")
                    for k in range(2))
            for x, y, z in zip(ints(a), ints(b), ints(c), strict=True)]
    assert_same_ints(got, expect(want, "u32"), a, b, c, what=f"dp2a.{half}.{types}")


# -- compare, select, pack --------------------------------------------------------------------

_CMP = {"eq": lambda x, y: x == y, "ne": lambda x, y: x != y, "lt": lambda x, y: x < y,
        "le": lambda x, y: x <= y, "gt": lambda x, y: x > y, "ge": lambda x, y: x >= y,
        "lo": lambda x, y: x < y, "ls": lambda x, y: x <= y, "hi": lambda x, y: x > y,
        "hs": lambda x, y: x >= y}


@pytest.mark.parametrize("ty", ["s16", "u16", "s32", "u32", "s64", "u64"])
@given(seed=SEEDS)
@FEW
def test_setp_compares_signed_or_unsigned_by_type(ty, seed):
    """setp.{eq..ge}.sN compare signed, .uN (and lo/ls/hi/hs) unsigned."""
    rng = np.random.default_rng(seed)
    a = int_values(rng, ty)
    b = np.where(rng.random(N_LANES) < 0.3, a, int_values(rng, ty)).astype(INT_DTYPES[ty])
    cmps = ["eq", "ne", "lt", "le", "gt", "ge"]
    cmps += [] if is_signed(ty) else ["lo", "ls", "hi", "hs"]
    for cmp in cmps:
        got = run_instruction(f"setp.{cmp}.{ty} {{d}}, {{a}}, {{b}};", np.bool_, a, b)
        want = [_CMP[cmp](x, y) for x, y in zip(ints(a), ints(b), strict=True)]
        assert (got == np.array(want)).all(), cmp


@given(seed=SEEDS)
@FEW
def test_setp_with_bool_op_writes_both_predicates(seed):
    """setp.lt.and.s32 p|q, a, b, c gives p = (a<b) & c and q = !(a<b) & c."""
    rng = np.random.default_rng(seed)
    a, b = int_values(rng, "s32"), int_values(rng, "s32")
    c = rng.random(N_LANES) < 0.5
    p, q = run_instruction("setp.lt.and.s32 {d0}|{d1}, {a}, {b}, {c};", (np.bool_, np.bool_),
                           a, b, c)
    lt = a < b
    assert (p == (lt & c)).all() and (q == (~lt & c)).all()


@given(seed=SEEDS)
@FEW
def test_set_writes_all_ones_or_one_point_zero(seed):
    """set.lt.u32.s32 writes 0xFFFFFFFF or 0; set.lt.f32.s32 writes 1.0 or 0.0."""
    rng = np.random.default_rng(seed)
    a, b = int_values(rng, "s32"), int_values(rng, "s32")
    lt = a < b
    got = run_instruction("set.lt.u32.s32 {d}, {a}, {b};", np.uint32, a, b)
    assert (got == np.where(lt, 0xFFFFFFFF, 0)).all()
    got = run_instruction("set.lt.f32.s32 {d}, {a}, {b};", np.float32, a, b)
    assert (got == np.where(lt, 1.0, 0.0)).all()


@given(seed=SEEDS)
@FEW
def test_slct_picks_a_when_c_is_non_negative(seed):
    """slct.b32.s32 d, a, b, c is c >= 0 ? a : b."""
    rng = np.random.default_rng(seed)
    a, b, c = int_values(rng, "u32"), int_values(rng, "u32"), int_values(rng, "s32")
    got = run_instruction("slct.b32.s32 {d}, {a}, {b}, {c};", np.uint32, a, b, c)
    assert (got == np.where(c >= 0, a, b)).all()


@given(seed=SEEDS)
@FEW
def test_selp_picks_a_when_the_predicate_holds(seed):
    """selp.b64 d, a, b, p is p ? a : b."""
    rng = np.random.default_rng(seed)
    a, b = int_values(rng, "u64"), int_values(rng, "u64")
    p = rng.random(N_LANES) < 0.5
    got = run_instruction("selp.b64 {d}, {a}, {b}, {c};", np.uint64, a, b, p)
    assert (got == np.where(p, a, b)).all()


@given(seed=SEEDS)
@FEW
def test_mov_packs_first_element_into_the_low_bits(seed):
    """mov.b32 d, {a, b} = a | b << 16; mov.b64 {lo, hi}, d splits low half first."""
    rng = np.random.default_rng(seed)
    a, b = int_values(rng, "u16"), int_values(rng, "u16")
    got = run_instruction("mov.b32 {d}, {{{a}, {b}}};", np.uint32, a, b)
    assert (got == (a.astype(np.uint32) | (b.astype(np.uint32) << 16))).all()
    w = int_values(rng, "u64")
    lo, hi = run_instruction("mov.b64 {{{d0}, {d1}}}, {a};", (np.uint32, np.uint32), w)
    assert (lo == (w & 0xFFFFFFFF)).all() and (hi == (w >> 32)).all()
    x, y = run_instruction("mov.b32 {{{d0}, {d1}}}, {a};", (np.uint16, np.uint16), got)
    assert (x == a).all() and (y == b).all()
