"""Inputs that once crashed the readers are `InputError`s naming where and what is accepted.

PTX (`isa.parse`, `isa.compile_kernel`): bytes that are not UTF-8, a file cut after an
operand comma, integers, address offsets and arrays that do not fit 64 bits, floats that
overflow f64, braces nested 100,000 deep, oversized register declarations. Reference traces
(`read_kineto`, `read_kernel_csv`): non-numeric or non-finite times, negative durations,
JSON nested past the reader's depth, non-UTF-8 files. Each error is checked for its
location (`file:line:col` for PTX and text, `traceEvents[i]` and the field for events) and
for the accepted form; the CLI prints it as one line with exit status 2.
"""

from __future__ import annotations

import contextlib
import io
import json
import math

import pytest

import isa
from isa.parser import MAX_REGISTERS
from simulator.app.cli import main
from workloads.traces import TraceFormatError, read_kernel_csv, read_kineto

HEADER = ".version 9.0\n.target sm_90\n.address_size 64\n"
PRELUDE = """.visible .entry k(.param .u64 out)
{
.reg .b32 %r<4>;
.reg .b64 %rd<4>;
.reg .f32 %f<3>;
"""
BODY_LINE = 9         # line of the first body statement in `kernel(...)`


def kernel(body: str) -> str:
    return f"{HEADER}{PRELUDE}{body}\nret;\n}}\n"


def ptx_error(source, entry: str = "k") -> isa.PtxError:
    with pytest.raises(isa.PtxError) as info:
        isa.compile_kernel(source, entry, file="bad.ptx")
    return info.value


def located(err: isa.PtxError, line: int, col: int) -> None:
    assert (err.file, err.line, err.col) == ("bad.ptx", line, col), err
    assert str(err).startswith(f"bad.ptx:{line}:{col}: ")


# -- PTX text ---------------------------------------------------------------------------
def test_non_utf8_bytes_are_an_error_at_the_byte():
    """A 0xff byte in a comment is reported at its line and column, UTF-8 named."""
    data = kernel("add.s32 %r1, %r2, %r3; // caf\xe9").encode("latin-1")
    err = ptx_error(data)
    located(err, BODY_LINE, len("add.s32 %r1, %r2, %r3; // caf") + 1)
    assert "0xe9 is not UTF-8" in err.message and "UTF-8" in err.expected


def test_utf8_bytes_parse_like_text_and_a_byte_order_mark_is_dropped():
    """The same source as str, as UTF-8 bytes and with a BOM gives the same instructions."""
    text = kernel("add.s32 %r1, %r2, %r3; // café")
    bodies = [isa.parse(src).functions["k"].body
              for src in (text, text.encode(), b"\xef\xbb\xbf" + text.encode())]
    assert [ins.opcode for ins in bodies[0]] == ["add", "ret"]
    assert bodies[0] == bodies[1] == bodies[2]


def test_file_cut_after_an_operand_comma_is_reported_where_the_operand_belongs():
    """`add.s32 %r1, %r2,` then EOF: an error just past the comma naming operand forms."""
    err = ptx_error(f"{HEADER}{PRELUDE}add.s32 %r1, %r2,")
    located(err, BODY_LINE, len("add.s32 %r1, %r2,") + 1)
    assert "end of input" in err.message and "register, immediate" in err.expected


@pytest.mark.parametrize("cut", [
    ".visible .entry k(", ".visible .entry k(.param .u64 a", "{\nld.global.f32 %f1, [",
    "{\nld.global.f32 %f1, [%rd1+", "{\ncall f, ", "{\nst.global.f32 [%rd1], {%f1,",
])
def test_file_cut_anywhere_is_a_located_error(cut):
    """Input ending inside a parameter list, an address, a call or a vector is a PtxError."""
    text = HEADER + (cut if cut.startswith(".visible") else
                     PRELUDE.split("{")[0] + cut.replace("{\n", "{\n.reg .f32 %f<3>;\n"
                                                             ".reg .b64 %rd<3>;\n"))
    with pytest.raises(isa.PtxError, match=r"^bad\.ptx:\d+:\d+: "):
        isa.parse(text, "bad.ptx")


def test_address_offset_of_2_63_is_refused_at_the_offset():
    """[%rd1+2^63] does not fit a signed 64-bit address: the offset's column, the range."""
    line = "ld.global.f32 %f1, [%rd1+9223372036854775808];"
    err = ptx_error(kernel(line))
    located(err, BODY_LINE, line.index("9223") + 1)
    assert "does not fit a 64-bit address" in err.message
    assert "-9223372036854775808 to 9223372036854775807" in err.expected


def test_address_offsets_at_the_int64_limits_parse():
    """2^63 - 1 and -2^63 are the extreme offsets accepted."""
    for offset in ("+9223372036854775807", "-9223372036854775808"):
        module = isa.parse(kernel(f"ld.global.f32 %f1, [%rd1{offset}];"))
        assert module.functions["k"].body[0].operands[1].offset == int(offset)


def test_offset_terms_summing_past_int64_are_refused():
    """Two in-range terms whose sum leaves int64 are refused at the second."""
    line = "ld.global.f32 %f1, [%rd1+9223372036854775807+1];"
    err = ptx_error(kernel(line))
    located(err, BODY_LINE, line.index("+1]") + 2)


@pytest.mark.parametrize("literal", ["18446744073709551616", "0x10000000000000000",
                                     "99999999999999999999999", "9" * 5000, "0x" + "f" * 5000])
def test_integer_constant_wider_than_64_bits_is_refused_with_the_range(literal):
    """An integer that needs 65 bits or more (even 5000 digits) is a PtxError at itself."""
    line = f"add.s32 %r1, %r2, {literal};"
    err = ptx_error(kernel(line))
    located(err, BODY_LINE, line.index(literal) + 1)
    assert "does not fit in 64 bits" in err.message
    assert "18446744073709551615" in err.expected
    assert len(str(err)) < 500


def test_64_bit_integer_limits_and_leading_zeros_parse():
    """2^64 - 1 (decimal and hex) and a zero-padded 1 are accepted as written."""
    for literal, value in (("18446744073709551615", 2**64 - 1),
                           ("0xFFFFFFFFFFFFFFFF", 2**64 - 1), ("0" * 40 + "1", 1)):
        ins = isa.parse(kernel(f"add.u64 %rd1, %rd2, {literal};")).functions["k"].body[0]
        assert ins.operands[2].value == value


def test_float_constant_overflowing_f64_is_refused():
    """1e999 is not an f64; the error says how infinity is written instead."""
    line = "add.f32 %f1, %f2, 1e999;"
    err = ptx_error(kernel(line))
    located(err, BODY_LINE, line.index("1e999") + 1)
    assert "overflows f64" in err.message and "0d7FF0000000000000" in err.expected


def test_hundred_thousand_unclosed_braces_are_an_error_not_a_recursion_error():
    """`{` x 100000 without `}`: the innermost scope is reported unclosed, briefly."""
    err = ptx_error(f"{HEADER}{PRELUDE}" + "{" * 100_000)
    assert err.line == BODY_LINE and err.col == 100_001
    assert "is not closed" in err.message and "'}' matching the '{'" in err.expected
    assert len(str(err)) < 500


def test_hundred_thousand_balanced_scopes_parse():
    """Scopes nested 100000 deep around one instruction parse; the body is flat."""
    module = isa.parse(kernel("{" * 100_000 + "add.s32 %r1, %r2, %r3;" + "}" * 100_000))
    assert [ins.opcode for ins in module.functions["k"].body] == ["add", "ret"]


def test_deeply_nested_initializer_is_flattened_without_recursion():
    """An initializer inside 50000 braces reads as its values, a negative one included."""
    decl = ".global .s32 g[2] = " + "{" * 50_000 + "1, -2" + "}" * 50_000 + ";\n"
    assert isa.parse(HEADER + decl).globals[0].init == (1, -2)


def test_oversized_register_declaration_is_refused_before_allocating():
    """%r<100000000> is refused at its count, naming the per-function limit."""
    line = ".reg .b32 %q<100000000>;"
    err = ptx_error(kernel(line))
    located(err, BODY_LINE, line.index("100000000") + 1)
    assert f"at most {MAX_REGISTERS} virtual registers" in err.expected


def test_array_larger_than_the_address_space_is_refused_at_its_size():
    """`g[2^63][2]` of .b8 (2^64 bytes) is refused at the dimension that overflows."""
    line = ".global .b8 g[9223372036854775807][2];"
    with pytest.raises(isa.PtxError) as info:
        isa.parse(HEADER + line, "bad.ptx")
    located(info.value, 4, line.index("2]") + 1)
    assert "does not fit a 64-bit address space" in info.value.message


def test_long_lines_are_shown_as_an_excerpt_around_the_error():
    """A 200,000-character line is quoted as about 120 characters around the column."""
    err = ptx_error(kernel(" " * 200_000 + "add.s32 %r1, %r2, #;"))
    assert err.col == 200_000 + len("add.s32 %r1, %r2, ") + 1
    assert "%r2, #" in str(err) and len(str(err)) < 400


def test_tensor_coordinates_must_be_a_vector():
    """`[map, [map, ...` is refused at the second '[' instead of recursing."""
    line = "ld.global.f32 %f1, [%rd1, [%rd1, [%rd1]]];"
    err = ptx_error(kernel(line))
    located(err, BODY_LINE, line.index("[%rd1, [") + len("[%rd1, ") + 1)
    assert "{vector}" in err.message


# -- reference traces -------------------------------------------------------------------
def _event(**fields) -> dict:
    event = {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": 100,
             "dur": 5, "args": {"stream": 7, "correlation": 1, "device": 0}}
    event.update(fields)
    return event


def _kineto(tmp_path, events, name="t.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"traceEvents": events}))
    return path


@pytest.mark.parametrize("field, value, expected", [
    ("ts", "abc", "a finite number of microseconds"),
    ("ts", None, "a finite number of microseconds"),
    ("dur", math.nan, "a finite number of microseconds >= 0"),
    ("dur", math.inf, "a finite number of microseconds >= 0"),
    ("dur", -1, "a finite number of microseconds >= 0"),
    ("dur", True, "a finite number of microseconds >= 0"),
    ("args", [1, 2], "an object"),
    ("name", 5, "a string"),
])
def test_kineto_bad_event_field_names_the_event_field_and_form(tmp_path, field, value,
                                                                expected):
    """The second event's bad field: `traceEvents[1] (kernel 'gemm'): field is ...`."""
    path = _kineto(tmp_path, [_event(), _event(**{field: value})])
    with pytest.raises(TraceFormatError) as info:
        read_kineto(path)
    message = str(info.value)
    assert message.startswith(f"{path}: traceEvents[1] (kernel ")
    assert f": {field} is {value!r}" in message and f"(expected {expected})" in message


@pytest.mark.parametrize("args, field", [
    ({"grid": 4}, "args.grid"), ({"grid": [1, -2]}, "args.grid"),
    ({"block": [1, 2, 3, 4]}, "args.block"), ({"stream": "s7"}, "args.stream"),
    ({"correlation": [1]}, "args.correlation"), ({"bytes": -8}, "args.bytes"),
    ({"registers per thread": 1.5}, "args.registers per thread"),
])
def test_kineto_bad_integer_argument_names_its_field(tmp_path, args, field):
    """Integer arguments that are not integers (or negative sizes) name `args.<field>`."""
    path = _kineto(tmp_path, [_event(args={"stream": 7, "correlation": 1, **args})])
    with pytest.raises(TraceFormatError, match=r"traceEvents\[0\] \(kernel 'gemm'\): "
                       + field.replace(".", r"\.") + " is "):
        read_kineto(path)


def test_kineto_launch_and_cpu_op_times_are_checked_too(tmp_path):
    """A launch call whose ts is a string and a CPU op with NaN dur are named."""
    launch = {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
              "tid": 1, "ts": "10", "dur": 1, "args": {"correlation": 1}}
    with pytest.raises(TraceFormatError, match=r"traceEvents\[1\] \(cuda_runtime "
                       r"'cudaLaunchKernel'\): ts is '10'"):
        read_kineto(_kineto(tmp_path, [_event(), launch]))
    op = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0,
          "dur": math.nan, "args": {}}
    with pytest.raises(TraceFormatError, match=r"traceEvents\[1\] \(cpu_op 'aten::mm'\): "
                       r"dur is nan"):
        read_kineto(_kineto(tmp_path, [_event(), op]))


def test_kineto_zero_length_memset_is_accepted(tmp_path):
    """Real traces hold memsets of dur 0; they are rows, not errors."""
    df = read_kineto(_kineto(tmp_path, [_event(cat="gpu_memset", dur=0)]))
    assert list(df["dur_us"]) == [0.0]


def test_kineto_json_nested_past_the_reader_is_located(tmp_path):
    """`[` x 100000 is a TraceFormatError at the line and column where nesting got deep."""
    path = tmp_path / "deep.json"
    path.write_text('{"traceEvents":\n' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(TraceFormatError, match=r"deep\.json:2:\d+: JSON nested at least "
                       r"\d+ levels deep here"):
        read_kineto(path)


def test_kineto_non_utf8_file_names_the_byte(tmp_path):
    """A latin-1 kernel name is reported at its line and column."""
    path = tmp_path / "latin.json"
    path.write_bytes(b'{"traceEvents": [\n  {"name": "caf\xe9"}]}')
    with pytest.raises(TraceFormatError, match=r"latin\.json:2:16: byte 0xe9 is not UTF-8"):
        read_kineto(path)


def test_kineto_number_too_long_to_convert_is_located(tmp_path):
    """A 5000-digit integer (past Python's conversion limit) is located, not a ValueError."""
    path = tmp_path / "long.json"
    path.write_text('{"traceEvents": [\n' + "1" * 5000 + "]}")
    with pytest.raises(TraceFormatError, match=r"long\.json:2:1: a number too long"):
        read_kineto(path)


def test_csv_non_utf8_file_names_the_byte(tmp_path):
    """A latin-1 op name in a kernel CSV is reported at its row and column."""
    path = tmp_path / "ops.csv"
    path.write_bytes(b"kernel,op,measured_us\ngemm,caf\xe9,1.5\n")
    with pytest.raises(TraceFormatError, match=r"ops\.csv:2:9: byte 0xe9 is not UTF-8"):
        read_kernel_csv(path)


def test_csv_with_a_byte_order_mark_reads_its_header(tmp_path):
    """A BOM (as spreadsheet programs write) does not hide the `kernel` column."""
    path = tmp_path / "ops.csv"
    path.write_bytes(b"\xef\xbb\xbfkernel,op,measured_us\ngemm,linear,1.5\n")
    assert list(read_kernel_csv(path)["name"]) == ["gemm"]


# -- the CLI prints these as one line, exit 2 ----------------------------------------------
def _cli(argv: list[str]) -> tuple[int, str]:
    """Exit status and the error line (other stderr lines, such as a notice that numba will
    compile, are not errors)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        status = main(argv)
    errors = [line for line in err.getvalue().splitlines() if ": error: " in line]
    assert "Traceback" not in err.getvalue() and len(errors) <= 1, err.getvalue()
    return status, errors[0] if errors else ""


def test_compare_with_nan_duration_is_one_line_exit_2(tmp_path):
    """`ptxsim compare --reference` a trace with dur NaN: one error line, nothing simulated."""
    path = _kineto(tmp_path, [_event(dur=math.nan)])
    status, err = _cli(["compare", "--reference", str(path), "--out",
                        str(tmp_path / "out")])
    assert status == 2
    assert err.startswith("ptxsim compare: error: ") and "dur is nan" in err
    assert not (tmp_path / "out").exists()


def test_kernel_cut_after_a_comma_is_one_line_exit_2(tmp_path):
    """`ptxsim kernel` on a truncated file: one error line with file:line:col."""
    path = tmp_path / "cut.ptx"
    path.write_text(f"{HEADER}{PRELUDE}add.s32 %r1, %r2,")
    status, err = _cli(["kernel", str(path), "--grid", "1", "--block", "1"])
    assert status == 2
    assert f"{path}:{BODY_LINE}:18: unexpected end of input" in err


def test_kernel_non_utf8_file_is_one_line_exit_2(tmp_path):
    """`ptxsim kernel` on a latin-1 file: one error line naming the byte's place."""
    path = tmp_path / "latin.ptx"
    path.write_bytes(kernel("ret; // caf\xe9").encode("latin-1"))
    status, err = _cli(["kernel", str(path), "--grid", "1", "--block", "1"])
    assert status == 2
    assert f"{path}:{BODY_LINE}:" in err and "not UTF-8" in err
