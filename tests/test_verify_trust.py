"""The verifier refuses duplicate labels, out-of-range immediates and swapped operands.

Each case was cross-checked with `ptxas -arch=sm_90a` (CUDA 13.0) on a small .ptx file;
the docstrings quote what ptxas says. Every error is an `isa.PtxError` at file:line:col
of the offending token, saying what was wrong and what is accepted, raised before any
thread runs.
"""

import numpy as np
import pytest

import isa

HEADER = ".version 9.0\n.target sm_90\n.address_size 64\n"
DECLS = """.visible .entry k(.param .u64 out)
{
.reg .pred %p<3>;
.reg .b16 %rs<4>;
.reg .b32 %r<8>;
.reg .f32 %f<8>;
.reg .b64 %rd<8>;
"""
LINE = 11   # line of the instruction under test


def kernel(instr: str) -> str:
    return f"{HEADER}{DECLS}{instr}\nret;\n}}\n"


def error_of(ptx: str, entry: str = "k") -> isa.PtxError:
    with pytest.raises(isa.PtxError) as info:
        isa.compile_kernel(ptx, entry, file="t.ptx")
    return info.value


def column(instr: str, token: str) -> int:
    return instr.index(token) + 1


# -- labels --------------------------------------------------------------------------------
def test_duplicate_label_in_one_function_is_rejected():
    """ptxas: "Duplicate definition of label 'L1'"; here the second definition is named."""
    ptx = f"{HEADER}{DECLS}mov.u32 %r1, 1;\nL1:\nadd.u32 %r1, %r1, 1;\nL1:\nbra L1;\n}}\n"
    err = error_of(ptx)
    assert err.message == ("label 'L1' is defined twice in function 'k' (first at line 12, "
                           "column 1)")
    assert (err.file, err.line, err.col) == ("t.ptx", 14, 1)
    assert "one definition of each label per function" in err.expected


def test_same_label_in_two_functions_is_accepted():
    """ptxas accepts a label name reused in another function; labels are per function."""
    ptx = HEADER + (".func f()\n{\nL1:\nret;\n}\n"
                    ".visible .entry k()\n{\nL1:\ncall f, ();\nret;\n}\n")
    isa.compile_kernel(ptx, "k")


def test_repeated_label_in_separate_blocks_reaches_its_own_block():
    """ptxas accepts WAIT: repeated in separate { } blocks (inline asm does that) and scopes
    each to its block: the first loop counts to 3, the second adds 10 until 20."""
    body = ("mov.u32 %r1, 0;\nmov.u32 %r2, 0;\n"
            "{\n.reg .pred p;\nWAIT:\nadd.u32 %r1, %r1, 1;\nsetp.lt.u32 p, %r1, 3;\n"
            "@p bra WAIT;\n}\n"
            "{\n.reg .pred p;\nWAIT:\nadd.u32 %r2, %r2, 10;\nsetp.lt.u32 p, %r2, 20;\n"
            "@p bra WAIT;\n}\n"
            "add.u32 %r3, %r1, %r2;\nld.param.u64 %rd1, [out];\n"
            "cvta.to.global.u64 %rd2, %rd1;\nst.global.u32 [%rd2], %r3;\n")
    out = np.zeros(1, dtype=np.uint32)
    isa.run_kernel(f"{HEADER}{DECLS}{body}ret;\n}}\n", "k", grid=1, block=1, args=[out])
    assert out[0] == 3 + 20


def test_label_repeated_in_one_block_is_rejected():
    """ptxas: "Duplicate definition of label" within one { } block; named at the second."""
    body = "{\nWAIT:\nmov.u32 %r1, 1;\nWAIT:\nbra WAIT;\n}\n"
    err = error_of(f"{HEADER}{DECLS}{body}ret;\n}}\n")
    assert err.message == "label 'WAIT' is defined twice in one block (first at line 12, " \
                          "column 1)"
    assert (err.line, err.col) == (14, 1)


def test_committed_ptx_with_block_scoped_labels_compiles():
    """The L2 bandwidth probe repeats WAIT: in eight inline-asm blocks of one function."""
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks/hardware/l2_bandwidth_hw.ptx"
    isa.compile_kernel(path.read_text(), "bulk_read", file=str(path))


# -- operand kinds -------------------------------------------------------------------------
@pytest.mark.parametrize("instr, near, what", [
    ("selp.u32 {%r1, %r2}, 1, 0, %p1;", "{", "is a {vector}"),
    ("setp.ne.s32 %p2, {%r1, %r2}, 0;", "{", "is a {vector}"),
    ("cvta.to.global.u64 %rd3, L0;", "L0", "label 'L0' used as operand 1"),
    ("mov.u32 %r4, L0;", "L0", "label 'L0' used as operand 1"),
    ("cvt.s64.s32 %rd1, _;", "_", "'_' (a discarded result) used as source operand 1"),
    ("fma.rn.f32 %f4, _, %f1, %f3;", "_", "'_' (a discarded result) used as source operand 1"),
])
def test_operand_of_the_wrong_kind_is_refused_before_running(instr, near, what):
    """ptxas: "Arguments mismatch" for a vector, label or `_` where a value belongs; here
    a located error instead of a crash when the instruction runs."""
    err = error_of(f"{HEADER}{DECLS}L0:\n{instr}\nret;\n}}\n")
    assert what in err.message
    assert (err.line, err.col) == (12, column(instr, near))


# -- immediates ----------------------------------------------------------------------------
def test_integer_constant_beyond_64_bits_is_rejected():
    """ptxas: "Constant overflow" for shl.b32 %r1, %r2, 99999999999999999999999."""
    instr = "shl.b32 %r1, %r2, 99999999999999999999999;"
    err = error_of(kernel(instr))
    assert "integer constant 99999999999999999999999 does not fit" in err.message
    assert (err.file, err.line, err.col) == ("t.ptx", LINE, column(instr, "9999"))


@pytest.mark.parametrize("instr, constant, bits", [
    ("add.u32 %r1, %r2, 4294967296;", "4294967296", 32),
    ("shl.b32 %r1, %r2, 4294967296;", "4294967296", 32),
    ("add.s32 %r1, %r2, -2147483649;", "-2147483649", 32),
    ("add.u16 %rs1, %rs2, 70000;", "70000", 16),
    ("st.global.u8 [%rd1], 300;", "300", 8),
    ("shfl.sync.bfly.b32 %r1, %r2, 1, 31, 0x1FFFFFFFF;", "0x1FFFFFFFF", 32),
])
def test_integer_constant_wider_than_its_operand_is_rejected(instr, constant, bits):
    """ptxas takes these without a word (it refuses only constants past 64 bits) and the
    PTX ISA does not say which value results; here an N-bit operand takes -2^(N-1) ..
    2^N - 1."""
    err = error_of(kernel(instr))
    assert f"does not fit the {bits}-bit operand" in err.message
    assert (err.line, err.col) == (LINE, column(instr, constant))
    assert f"an integer from {-(1 << (bits - 1))} to {(1 << bits) - 1}" in err.expected


@pytest.mark.parametrize("instr", [
    "add.u32 %r1, %r2, -1;",
    "and.b32 %r1, %r2, 0xFFFFFFFF;",
    "add.s32 %r1, %r2, -2147483648;",
    "mov.b64 %rd1, 0xFFFFFFFFFFFFFFFF;",
    "mov.u64 %rd1, -9223372036854775808;",
    "add.u16 %rs1, %rs2, 65535;",
    "mul.wide.u32 %rd1, %r1, 4294967295;",
    "mov.f32 %f1, 0f3F800000;",
    "shfl.sync.bfly.b32 %r1, %r2, 1, 31, -1;",
    "bfe.u32 %r1, %r2, 255, 255;",
])
def test_constants_ptxas_accepts_in_range_pass(instr):
    """ptxas accepts each of these (-1 for .u32, hex all-ones, float bit patterns)."""
    isa.compile_kernel(kernel(instr), "k")


@pytest.mark.parametrize("instr, constant, what", [
    ("bfe.u32 %r1, %r2, 4000, 8;", "4000", "position"),
    ("bfe.u32 %r1, %r2, -1, 8;", "-1", "position"),
    ("bfi.b32 %r1, %r2, %r3, 3, 300;", "300", "length"),
])
def test_bit_field_operand_beyond_255_is_rejected(instr, constant, what):
    """ptxas: "Argument 2 of instruction 'bfe': value '4000' out of range, expected to be in
    range [0..255]" (likewise '-1', and argument 4 of 'bfi' for 300)."""
    err = error_of(kernel(instr))
    assert f"bit-field {what} {constant} of" in err.message
    assert (err.line, err.col) == (LINE, column(instr, constant))
    assert err.expected == "an immediate in 0..255"


# -- operand positions ---------------------------------------------------------------------
@pytest.mark.parametrize("instr, k, token, form", [
    ("st.global.f32 %f4, [%rd7];", 0, "%f4", "st.global.f32 [addr], a"),
    ("atom.global.add.u32 %r1, %r2, [%rd1];", 1, "%r2", "atom.global.add.u32 d, [addr], a, b"),
    ("red.global.add.u32 %r2, [%rd1];", 0, "%r2", "red.global.add.u32 [addr], a"),
])
def test_value_where_the_address_belongs_is_rejected(instr, k, token, form):
    """ptxas: "Arguments mismatch for instruction 'st'" (and 'atom', 'red'); this used to
    pass the verifier and raise AttributeError when run."""
    err = error_of(kernel(instr))
    assert err.message == f"operand {k} of '{instr.split()[0]}' must be an [address]; the " \
        "operands look swapped"
    assert (err.line, err.col) == (LINE, column(instr, token))
    assert err.expected == form


@pytest.mark.parametrize("instr, k", [
    ("add.u32 %r1, [%rd1], 1;", 1),
    ("st.global.u32 [%rd1], [%rd1];", 1),
    ("mov.u32 %r1, [%rd1];", 1),
])
def test_address_where_a_value_belongs_is_rejected(instr, k):
    """ptxas: "Arguments mismatch for instruction 'add'" ('mov'), and for st "Argument 1 of
    instruction 'st': must be register"."""
    err = error_of(kernel(instr))
    assert f"operand {k} of '{instr.split()[0]}' is an [address]" in err.message
    assert (err.line, err.col) == (LINE, instr.index("[", instr.index(",")) + 1)


def test_swapped_store_is_refused_before_running():
    """The launch raises the verifier's PtxError; no thread runs, the output is untouched."""
    out = np.full(4, 7.0, np.float32)
    with pytest.raises(isa.PtxError, match="must be an"):
        isa.run_kernel(kernel("st.global.f32 %f4, [%rd7];"), "k", 1, 32, [out])
    np.testing.assert_array_equal(out, 7.0)
