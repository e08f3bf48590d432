"""The verifier rejects, before running, what the interpreter would otherwise mis-execute.

Registers are raw bits to the interpreter, so an operand of the wrong width would be
silently truncated or extended, a float constant in an integer slot silently truncated,
a `cvt` without its rounding silently given a default. Each rule here was checked
against `ptxas` (CUDA 13, sm_90): the rejected forms are ones `ptxas` rejects, and the
accepted forms in `test_forms_ptxas_accepts_pass_the_verifier` are ones it accepts.
Every error is checked for message, line, column and the `expected` text.
"""

from pathlib import Path

import pytest

import isa
from isa.parser import parse

ROOT = Path(__file__).resolve().parents[1]
HEADER = ".version 9.0\n.target sm_90\n.address_size 64\n"
DECLS = """.global .align 4 .u32 gtab[4];
.visible .entry k(.param .u64 out)
{
.reg .pred %p<3>;
.reg .b16 %rs<3>;
.reg .b32 %r<4>;
.reg .f32 %f<4>;
.reg .b64 %rd<4>;
.reg .f64 %fd<2>;
"""
LINE = 13   # line of the instruction under test


def kernel(instr: str) -> str:
    return f"{HEADER}{DECLS}{instr}\nL:\nret;\n}}\n"


def verify_error(instr: str) -> isa.PtxError:
    with pytest.raises(isa.PtxError) as info:
        isa.compile_kernel(kernel(instr), "k", file="v.ptx")
    return info.value


def check(instr: str, message: str, col: int, expected: str) -> None:
    """`instr` is rejected with `message` at v.ptx:LINE:col, naming what is `expected`."""
    err = verify_error(instr)
    assert message in err.message, err
    assert (err.file, err.line, err.col) == ("v.ptx", LINE, col), err
    assert expected in err.expected, err


# -- conversions and comparisons -----------------------------------------------------------
def test_narrowing_float_cvt_without_rounding_is_rejected():
    """f32 -> f16 must say how to round."""
    check("cvt.f16.f32 %rs1, %f1;", "narrowing float conversion from .f32 to .f16 without a "
          "rounding modifier", 1, ".rn, .rz, .rm or .rp")


def test_int_float_cvt_without_rounding_is_rejected():
    """Integer -> float needs .rn-style rounding; float -> integer needs .rzi-style."""
    check("cvt.f32.s32 %f1, %r1;", "conversion from .s32 to .f32 without a rounding modifier",
          1, ".rn, .rz, .rm or .rp")
    check("cvt.s32.f32 %r1, %f1;", "conversion from .f32 to .s32 without a rounding modifier",
          1, ".rni, .rzi, .rmi or .rpi")


def test_cvt_rounding_of_the_wrong_family_is_rejected():
    """`.rn` on float -> int, and any rounding on int -> int, are not PTX."""
    check("cvt.rn.s32.f32 %r1, %f1;", "rounding '.rn' is not allowed for a conversion from "
          ".f32 to .s32", 1, ".rni, .rzi, .rmi or .rpi")
    check("cvt.rzi.u32.s32 %r1, %r2;", "rounding '.rzi' is not allowed", 1,
          "no rounding modifier")


def test_packed_cvt_requires_rounding():
    """f32 pair -> f16x2 rounds, so it must say how."""
    check("cvt.f16x2.f32 %r1, %f1, %f2;", "without a rounding modifier", 1, ".rn")


def test_setp_without_comparison_is_rejected():
    """`setp.s32` lacks the comparison."""
    check("setp.s32 %p1, %r1, %r2;", "'setp.s32' lacks a comparison", 1, ".eq, .ne, .lt")


def test_setp_comparison_must_suit_the_type():
    """Unsigned comparisons are for integers, unordered ones for floats, .b only eq/ne."""
    check("setp.lo.f32 %p1, %f1, %f2;", "comparison '.lo' does not apply to .f32", 1, ".ltu")
    check("setp.equ.s32 %p1, %r1, %r2;", "comparison '.equ' does not apply to .s32", 1, ".lo")
    check("setp.lt.b32 %p1, %r1, %r2;", "comparison '.lt' does not apply to .b32", 1,
          "one of: .eq, .ne")


def test_missing_type_is_rejected():
    """`add` with no type modifier cannot be executed."""
    check("add %r1, %r2, %r3;", "'add' lacks a type", 1, "add.u32")


# -- destinations ----------------------------------------------------------------------------
@pytest.mark.parametrize("instr, col", [("add.s32 5, %r1, %r2;", 9),
                                        ("mov.u32 %tid.x, %r1;", 9),
                                        ("mov.u32 gtab, %r1;", 9),
                                        ("ld.global.u32 [%rd1], %rd1;", 1)])
def test_unwritable_destination_is_rejected(instr, col):
    """An immediate, special register, variable or address cannot be written."""
    check(instr, "is not writable", col, "a register, {vector}, d|p or _")


@pytest.mark.parametrize("instr, message, col, expected", [
    ("add.s32 %rs1, %r1, %r2;", "destination '%rs1' of 'add.s32' is .b16", 9, "a 32-bit"),
    ("add.s32 %rd1, %r1, %r2;", "destination '%rd1' of 'add.s32' is .b64", 9, "a 32-bit"),
    ("add.s32 %r1, %rd1, %r2;", "operand 1 '%rd1' of 'add.s32' is .b64", 14, "a 32-bit"),
    ("add.s32 %r1, %r2, %p1;", "operand 2 '%p1' of 'add.s32' is .pred", 19, "a 32-bit"),
    ("and.pred %p1, %r1, %p2;", "operand 1 '%r1' of 'and.pred' is .b32", 15, "a .pred"),
    ("setp.eq.s32 %r1, %r2, %r3;", "destination '%r1' of 'setp.eq.s32' is .b32", 13, ".pred"),
    ("mul.wide.s32 %r1, %r2, %r3;", "destination '%r1' of 'mul.wide.s32' is .b32", 14,
     "a 64-bit"),
    ("shl.b32 %r1, %r1, %rd1;", "operand 2 '%rd1' of 'shl.b32' is .b64", 19, "a 32-bit"),
    ("popc.b64 %rd1, %rd2;", "destination '%rd1' of 'popc.b64' is .b64", 10, "a 32-bit"),
    ("ld.global.u32 %rs1, [%rd1];", "destination '%rs1' of 'ld.global.u32' is .b16", 15,
     "at least 32 bits"),
    ("st.global.u32 [%rd1], %rs1;", "operand 1 '%rs1' of 'st.global.u32' is .b16", 23,
     "at least 32 bits"),
    ("cvt.u32.u16 %rs1, %rs2;", "destination '%rs1' of 'cvt.u32.u16' is .b16", 13,
     "at least 32 bits"),
    ("atom.global.add.u32 %rd1, [%rd1], %r1;", "destination '%rd1'", 21, "a 32-bit"),
    ("shfl.sync.bfly.b32 %rd1|%p1, %r1, 1, 31, -1;", "destination '%rd1'", 20, "a 32-bit"),
    ("selp.b32 %r1, %r2, %r3, %r1;", "operand 3 '%r1' of 'selp.b32' is .b32", 25, "a .pred"),
])
def test_register_width_must_match_the_instruction_type(instr, message, col, expected):
    """Operands must have the type's width (at least it for ld/st/cvt, twice for .wide)."""
    check(instr, message, col, expected)


# -- immediates, special registers, variables ---------------------------------------------
@pytest.mark.parametrize("instr, message, col, expected", [
    ("add.s32 %r1, %r1, 1.5;", "float constant 1.5 used as a .s32 operand", 19,
     "an integer constant for .s32"),
    ("mov.u32 %r1, 0f3F800000;", "float constant 0f3F800000 used as a .u32 operand", 14,
     "an integer constant"),
    ("add.f32 %f1, %f1, 1;", "integer constant 1 used as a .f32 operand", 19,
     "a float constant such as 1.0 or 0f3F800000"),
    ("fma.rn.f32 %f1, %f2, %f3, 2;", "integer constant 2 used as a .f32 operand", 27,
     "a float constant"),
    ("mov.b16 %rs1, 0f3F800000;", "float constant 0f3F800000 used as a .b16 operand", 15,
     "a 16-bit float bit pattern"),
    ("shl.b32 %r1, %r1, 1.0;", "operand 2 of 'shl.b32' is a float constant", 19, "an integer"),
])
def test_immediate_kind_must_match_the_operand_type(instr, message, col, expected):
    """Float constants are not silently truncated into integer operands, nor vice versa."""
    check(instr, message, col, expected)


def test_special_register_only_feeds_mov_or_cvt():
    """`add.s32 %r1, %tid.x, 1` must first move %tid.x into a register."""
    check("add.s32 %r1, %tid.x, 1;", "special register '%tid.x' used as an operand of 'add'",
          14, "mov.u32 %r, %tid.x first")


def test_variable_name_is_not_a_value_outside_mov():
    """`add.u64 %rd1, gtab, 4` uses a variable where a register is needed."""
    check("add.u64 %rd1, gtab, 4;", "variable 'gtab' used as a value in 'add'", 15,
          "mov.u64 %rd, gtab gives its address")


# -- guards, addresses, vectors, barriers -------------------------------------------------
def test_guard_must_be_a_predicate_register():
    """`@%r1 bra` would test raw bits; PTX needs a predicate."""
    check("@%r1 bra L;", "guard '%r1' is not a predicate register", 2, "@%p or @!%p")


def test_address_register_must_be_an_integer_register():
    """`[%f1]` is a float register used as an address."""
    check("ld.global.u32 %r1, [%f1];", "address register '%f1' is .f32", 21,
          "a 32- or 64-bit integer register")


def test_memory_operation_needs_an_address():
    """`ld.global.u32 %r1, %rd1` has no brackets."""
    check("ld.global.u32 %r1, %rd1;", "'ld.global.u32' needs an address operand", 1,
          "[reg], [reg+imm] or [var]")


@pytest.mark.parametrize("instr, message, expected", [
    ("ld.global.v4.f32 {%f1, %f2}, [%rd1];", "moves 4 element(s) per thread but the vector "
     "operand has 2", "{...} with 4 registers"),
    ("ld.global.f32 {%f1, %f2}, [%rd1];", "moves 1 element(s) per thread but the vector "
     "operand has 2", ".v2 on the opcode"),
    ("st.global.v2.f32 [%rd1], %f1;", "needs a {vector} operand of 2 registers",
     "{%r1, ..., %r2}"),
])
def test_vector_operand_must_match_the_vector_width(instr, message, expected):
    """`.vN` and the `{...}` operand agree on the element count."""
    check(instr, message, 1, expected)


def test_pack_mov_parts_must_add_up_to_the_type():
    """`mov.b64 {%r1, %rs1}, %rd1` mixes widths; two 32-bit parts make a .b64."""
    check("mov.b64 {%r1, %rs1}, %rd1;", "packs 2 registers of 16/32 bits into 64 bits", 1,
          "2 registers of 32 bits each")


def test_pipe_second_half_must_be_a_predicate():
    """`d|p` needs a predicate after the bar."""
    check("shfl.sync.bfly.b32 %r1|%r2, %r3, 1, 31, -1;", "the second half of d|p must be a "
          "predicate register", 1, "d|%p")


def test_barrier_id_and_count_are_checked():
    """Barrier ids are 0..15; a thread count is a positive multiple of the warp size."""
    check("bar.sync 16;", "barrier id 16 out of range", 10, "0..15")
    check("bar.sync 0, 33;", "barrier thread count 33 is not a positive multiple of 32", 13,
          "whole warps")


# -- what must keep passing ------------------------------------------------------------------
@pytest.mark.parametrize("instr", [
    "ld.global.u8 %r1, [%rd1];",            # destination wider than the type
    "ld.global.f32 %rd1, [%rd1];",
    "st.global.u8 [%rd1], %r1;",            # stored register wider than the type
    "st.global.u32 [%rd1], %rd2;",
    "cvt.u32.u16 %r1, %r2;",                # cvt source wider than its type
    "cvt.u8.u32 %r1, %r1;",
    "cvt.rn.f32.f64 %f1, 1.5;",
    "cvt.rzi.f32.f32 %f1, %f2;",
    "cvt.sat.f32.f32 %f1, %f2;",
    "cvt.rn.f32.bf16 %f1, %rs1;",
    "cvt.rn.satfinite.e4m3x2.f32 %rs1, %f1, %f2;",
    "mov.b32 %r1, 0f3F800000;",             # bit pattern of the type's width
    "mov.f32 %f1, 0d3FF0000000000000;",
    "mov.u16 %rs1, %tid.x;",
    "mov.u64 %rd1, gtab;",
    "mov.b32 {%rs1, %rs2}, %r1;",
    "mov.b64 %rd1, {%r1, %r2};",
    "mov.pred %p1, 0;",
    "abs.f32 %f1, %r1;",                    # a .b32 register holds an f32
    "add.f32 %r1, %f1, %f2;",
    "and.pred %p1, !%p1, %p2;",
    "selp.b32 %r1, %r2, %r3, !%p1;",
    "mad.wide.s32 %rd1, %r1, %r2, %rd3;",
    "shl.b64 %rd1, %rd2, %r1;",
    "shl.b16 %rs1, %rs1, %r1;",
    "bar.sync %r1;",
    "bar.sync 0, 64;",
    "setp.num.f32 %p1, %f1, %f2;",
    "shfl.sync.bfly.b32 %r1|%p1, %f1, 1, 31, -1;",
    "vote.sync.any.pred %p1, %p2, %r1;",
    "vote.sync.ballot.b32 %r1, %p2, -1;",
    "atom.global.cas.b32 %r1, [%rd1], %r2, %r3;",
    "add.s64 %rd1, %rd1, -1;",
    "ld.global.u32 %r1, [gtab+4];",
])
def test_forms_ptxas_accepts_pass_the_verifier(instr):
    """Relaxed widths for ld/st/cvt, bit-size registers, packs and negated predicates."""
    assert isa.compile_kernel(kernel(instr), "k").instrs


def _committed_entries():
    for path in sorted((ROOT / "workloads" / "kernels").glob("*.ptx")) + sorted(
            (ROOT / "tests" / "fixtures").glob("*.ptx")):
        for name, fn in parse(path.read_text(), path.name).functions.items():
            if fn.is_entry:
                yield pytest.param(path, name, id=f"{path.name}-{name}")


@pytest.mark.parametrize("path, entry", list(_committed_entries()))
def test_every_committed_nvcc_kernel_passes_the_verifier(path, entry):
    """No false alarms on real nvcc output."""
    assert isa.compile_kernel(path.read_text(), entry, file=path.name).entry == entry
