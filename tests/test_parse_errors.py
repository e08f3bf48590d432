"""Malformed PTX is rejected before anything runs, with what, where and what would do.

Each case compiles a small kernel with one mistake and checks the error's message, its
file, line and column (1-based, pointing at the offending token, or where a missing one
belongs), and the `expected` text; `str(err)` reads `file:line:col: message: 'line'
(expected ...)` so the CLI can print it as one line.
"""

import pytest

import isa

HEADER = ".version 9.0\n.target sm_90\n.address_size 64\n"
PRELUDE = """.visible .entry k(.param .u64 out)
{
.reg .b32 %r<4>;
.reg .b64 %rd<4>;
.reg .pred %p<2>;
.reg .f32 %f<3>;
"""
BODY_LINE = 10        # line of the first body statement in `kernel(...)`


def kernel(body: str, decls: str = "") -> str:
    """A kernel whose first body line is line 10 (with no `decls`)."""
    return f"{HEADER}{decls}{PRELUDE}{body}\nret;\n}}\n"


def compile_error(text: str, entry: str = "k") -> isa.PtxError:
    with pytest.raises(isa.PtxError) as info:
        isa.compile_kernel(text, entry, file="bad.ptx")
    return info.value


def check(err: isa.PtxError, message: str, line: int, col: int, expected: str) -> None:
    """The error says `message` at bad.ptx:line:col and names what is `expected`."""
    assert message in err.message, err
    assert (err.file, err.line, err.col) == ("bad.ptx", line, col), err
    assert expected in err.expected, err
    assert str(err).startswith(f"bad.ptx:{line}:{col}: {err.message}")


def test_unexpected_character_is_located_at_the_character():
    """A character no PTX token starts with is reported at its own column."""
    err = compile_error(kernel("add.s32 %r1, %r2, #3;"))
    check(err, "unexpected character '#'", BODY_LINE, 19, "a PTX token")


def test_unknown_opcode_names_itself_and_suggests_a_near_one():
    """`addd.s32` is unknown; the error names it and suggests `add`."""
    err = compile_error(kernel("  addd.s32 %r1, %r2, %r3;"))
    check(err, "unknown opcode 'addd.s32'", BODY_LINE, 3, "an opcode listed in isa.opcodes.TABLE")
    assert "did you mean add?" in err.expected


def test_unknown_modifier_lists_the_accepted_ones():
    """`.foo` on add is rejected with add's modifiers listed."""
    err = compile_error(kernel("add.s32.foo %r1, %r2, %r3;"))
    check(err, "unknown modifier '.foo' for 'add'", BODY_LINE, 1, "one of: ")
    assert all(m in err.expected for m in (".rn", ".sat", ".wide", ".lo", "or a type"))


def test_wrong_operand_count_says_how_many_are_taken():
    """`add` with two operands: it takes three."""
    err = compile_error(kernel("add.s32 %r1, %r2;"))
    check(err, "'add' takes 3 operands, got 2", BODY_LINE, 1, "3 operands")


def test_undeclared_register_is_located_at_its_use():
    """An undeclared `%r9` is reported at its column."""
    err = compile_error(kernel("add.s32 %r1, %r9, %r2;"))
    check(err, "undeclared register '%r9'", BODY_LINE, 14, "declared with .reg")


def test_register_declared_in_a_closed_scope_is_undeclared_after_it():
    """A `.reg` inside `{ }` is gone after the closing brace."""
    err = compile_error(kernel("{ .reg .b32 t; mov.u32 t, 1; }\nmov.u32 %r1, t;"))
    assert "undefined symbol 't'" in err.message
    assert (err.line, err.col) == (BODY_LINE + 1, 14)


def test_undefined_label_names_the_function_and_near_labels():
    """`bra` to a missing label: the error names the function and a close label."""
    err = compile_error(kernel("$L__BB0_1:\nbra $L__BB0_9;"))
    check(err, "undefined label '$L__BB0_9' in function 'k'", BODY_LINE + 1, 5,
          "a label of this function")
    assert "$L__BB0_1" in err.expected


def test_undefined_symbol_in_an_address_is_located_at_the_name():
    """`[nosuch]` names a variable that does not exist."""
    err = compile_error(kernel("ld.global.u32 %r1, [nosuch];"))
    check(err, "undefined symbol 'nosuch' in address", BODY_LINE, 21, "declared in scope")


def test_unterminated_body_points_at_the_end_and_the_open_brace():
    """A body without its closing `}` is reported at the end of input."""
    text = f"{HEADER}.visible .entry k()\n{{\n.reg .b32 %r<2>;\nmov.u32 %r1, 0;\n"
    err = compile_error(text)
    check(err, "body of function 'k' is not closed", 7, 16,
          "'}' matching the '{' at line 5, column 1")


def test_unbalanced_inner_brace_leaves_the_body_unclosed():
    """An inner `{` left open takes the body's `}`, so the body is reported unclosed."""
    text = f"{HEADER}.visible .entry k()\n{{\n.reg .b32 %r<2>;\n  {{ mov.u32 %r1, 0;\n}}\n"
    err = compile_error(text)
    check(err, "body of function 'k' is not closed", 8, 2,
          "'}' matching the '{' at line 5, column 1")


def test_missing_semicolon_is_reported_where_it_belongs():
    """`mov.u32 %r1, 0` without `;`: the error points just past the `0`."""
    err = compile_error(kernel("mov.u32 %r1, 0\nmov.u32 %r2, 1;"))
    check(err, "missing ';' after 'mov.u32'", BODY_LINE, 15, "';' ending the instruction")


def test_missing_semicolon_after_an_operandless_instruction():
    """`ret` followed by `}` on the next line lacks its `;`."""
    text = f"{HEADER}.visible .entry k()\n{{\nret\n}}\n"
    check(compile_error(text), "missing ';' after 'ret'", 6, 4, "';' ending the instruction")


def test_missing_semicolon_after_a_declaration():
    """A `.shared` declaration running into the next line lacks its `;`."""
    err = compile_error(kernel(".shared .align 4 .b8 sbuf[64]\nmov.u32 %r1, 0;"))
    check(err, "missing ';' after the declaration of 'sbuf'", BODY_LINE, 30,
          "';' ending the declaration")


def test_unknown_directive_in_a_body_lists_the_accepted_ones():
    """`.rge` (a typo of `.reg`) is not a directive."""
    err = compile_error(kernel(".rge .b32 %x;"))
    check(err, "unknown directive '.rge' in a function body", BODY_LINE, 1, ".reg, .shared")


def test_missing_comma_between_operands_on_one_line():
    """Two operands without a comma: a ',' or ';' was expected."""
    err = compile_error(kernel("add.s32 %r1, %r2 %r3;"))
    check(err, "expected ',' or ';' after an operand, found '%r3'", BODY_LINE, 18,
          "',' between operands or ';'")


@pytest.mark.parametrize("literal, col", [("0f3F80", 14), ("0d3FF0", 14), ("12ab", 14)])
def test_malformed_number_lists_the_number_forms(literal, col):
    """A float bit pattern of the wrong length, or digits running into letters."""
    err = compile_error(kernel(f"mov.f32 %f1, {literal};"))
    check(err, f"malformed number '{literal}'", BODY_LINE, col, "0f plus 8 hex digits")


def test_negated_float_bit_pattern_is_rejected():
    """`-0f3F800000` has no meaning (the sign is part of the bit pattern)."""
    err = compile_error(kernel("mov.f32 %f1, -0f3F800000;"))
    check(err, "negated float bit pattern", BODY_LINE, 15, "an immediate")


def test_unterminated_string_and_comment():
    """An open string or block comment is reported at its start."""
    check(compile_error(kernel('.pragma "nounroll;')), "unterminated string", BODY_LINE, 9,
          "'\"' closing the string")
    check(compile_error(kernel("/* comment")), "unterminated comment", BODY_LINE, 1,
          "'*/' closing the comment")


def test_duplicate_function_points_at_the_second_definition():
    """Two bodies for `k`: the second is rejected and the first one's line given."""
    text = kernel("ret;") + ".visible .entry k()\n{\nret;\n}\n"
    check(compile_error(text), "function 'k' defined twice (first at line 4)", 13, 17,
          "one definition per function name")


def test_prototype_then_definition_is_not_a_duplicate():
    """A `.func` declared without a body may be defined later."""
    text = (HEADER + ".func f();\n.visible .entry k()\n{\ncall.uni f, ();\nret;\n}\n"
            ".func f()\n{\nret;\n}\n")
    assert isa.compile_kernel(text, "k").entry == "k"


def test_missing_entry_lists_the_available_entries():
    """Asking for an entry the module lacks lists the entries it has."""
    text = kernel("ret;") + ".visible .entry other()\n{\nret;\n}\n"
    check(compile_error(text, "kk"), "no .entry named 'kk'", 1, 1, "one of: k, other")


def test_a_func_is_not_an_entry():
    """Launching a `.func` by name says it is not an entry."""
    text = HEADER + ".func f()\n{\nret;\n}\n" + kernel("ret;").removeprefix(HEADER)
    check(compile_error(text, "f"), "'f' is a .func, not an .entry", 4, 7, "one of: k")


def test_recursive_call_names_the_cycle():
    """f -> g -> f is reported at the call that closes the cycle."""
    text = (HEADER + ".func f()\n{\ncall.uni g, ();\nret;\n}\n.func g()\n{\ncall.uni f, ();\n"
            "ret;\n}\n.visible .entry k()\n{\ncall.uni f, ();\nret;\n}\n")
    check(compile_error(text), "recursive call to 'f' (f -> g -> f)", 11, 10,
          "a call graph without cycles")


def test_call_to_undefined_function():
    """A call to a function the module does not define."""
    err = compile_error(kernel("call.uni nowhere, ();"))
    check(err, "call to undefined function 'nowhere'", BODY_LINE, 10,
          "a .func defined in this module")


def test_vector_register_declarations_are_rejected():
    """`.reg .v4 .f32 %v` declares vector registers, which PTX code from nvcc never does."""
    err = compile_error(kernel(".reg .v4 .f32 %v;"))
    check(err, "vector registers are not supported", BODY_LINE, 1, "scalar .reg declarations")


def test_unknown_module_statement_lists_the_accepted_ones():
    """A stray word at module scope is not a declaration."""
    err = compile_error(HEADER + "bogus\n" + PRELUDE + "ret;\n}\n")
    check(err, "unknown module-level statement 'bogus'", 4, 1, ".entry, .func")
