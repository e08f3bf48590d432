"""Fuzzers for what users hand ptxsim: PTX files, config overrides and command lines.

The rule every test checks: bad input fails as an `InputError` subclass that says where
(`file:line:col` for PTX, the dotted key for configs, one `error:` line and exit status 2
for the CLI), never as another exception, and nothing is written outside the output
directory it was given.

* PTX: committed kernels (`FUZZED_KERNELS`) mutated by token deletions, duplications,
  swaps and splices (tokens from any of them, plus edge tokens such as 2^64 or `{`),
  random bytes and truncation, or with one instruction's modifiers and operands changed,
  then parsed and compiled (`isa.parse`, `isa.compile_kernel`: decode, verify, schedule);
  the retyped kernels that compile are also run on two small CTAs.
* Configs: `models.load_preset("h100_sxm", {key: value})` with keys of the preset (and
  misspelt ones) and values from NaN, infinities, zero, negatives, huge numbers, strings.
* CLI: `simulator.app.cli.main(argv)` with cheap commands (`opcodes`, `models`, `kernel` on
  small files, `compare` on references that are refused before simulating, `--help` and
  bad flags on the rest), run in a scratch working directory.

Hypothesis runs derandomized with a bounded number of examples (about a minute in all on
one slow core); no assertion is on wall-clock time.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import isa
import models
from simulator.app.cli import main
from simulator.app.commands.kernel import make_arguments
from simulator.framework.config import ConfigError, read_toml, resolve_bases

ROOT = Path(__file__).resolve().parents[1]
KERNEL_DIR = ROOT / "workloads" / "kernels"
FUZZED_KERNELS = ("saxpy", "collatz", "vote", "half2_math")
SOURCES = {name: (KERNEL_DIR / f"{name}.ptx").read_text() for name in FUZZED_KERNELS}
PIECE = re.compile(r"\s+|[\w.%$]+|.", re.DOTALL)
# the seeds without their `//` comment lines, which the parser never looks into
PIECES = {name: PIECE.findall(re.sub(r"(?m)^\s*//.*\n", "", text))
          for name, text in SOURCES.items()}
EDGE_TOKENS = ("{", "}", "[", "]", "(", ")", ",", ";", "<", ">", "@", "!", "-", "+", "|",
               "_", "18446744073709551616", "9223372036854775808", "0xFFFFFFFFFFFFFFFF",
               "1e999", "0f7FC00000", ".reg", ".b32", "%r<100000000>", ".entry", ".func",
               "call", "ret", "bra", "$L__BB0_2:", "%tid.x", "\n", "/*", '"', "9" * 5000)
TOKENS = tuple(sorted({p for pieces in PIECES.values() for p in pieces if not p.isspace()}))
# tokens of one kind, for replacements that keep a statement's shape
KINDS = {kind: tuple(t for t in TOKENS if test(t)) for kind, test in {
    "register": lambda t: t.startswith("%"),
    "word": lambda t: t[0].isalpha() or t.startswith("."),
    "number": lambda t: t[0].isdigit(),
    "punct": lambda t: not (t[0].isalnum() or t[0] in "%._$"),
}.items()}
LOCATED = re.compile(r"mut\.ptx:\d+:\d+: ")
SETTINGS = dict(deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# -- PTX -----------------------------------------------------------------------------------
def _kind(token: str) -> str:
    return next((k for k, tokens in KINDS.items() if token in tokens), "punct")


@st.composite
def mutated_ptx(draw) -> bytes:
    """A committed kernel after 1-4 token edits, mostly in the body (a replacement keeps
    the token's kind half the time), then maybe random bytes or a cut."""
    pieces = list(PIECES[draw(st.sampled_from(FUZZED_KERNELS))])
    any_token = st.one_of(st.sampled_from(TOKENS), st.sampled_from(EDGE_TOKENS))
    for _ in range(draw(st.integers(1, 4))):
        code = [i for i, piece in enumerate(pieces) if not piece.isspace()] or [0]
        body = [i for i in code if i > pieces.index("{")] if "{" in pieces else []
        at = draw(st.sampled_from(body if body and draw(st.integers(0, 4)) else code))
        span = draw(st.integers(1, 3))
        edit = draw(st.sampled_from(("delete", "duplicate", "splice", "replace", "swap")))
        if edit == "delete":
            del pieces[at:at + span]
        elif edit == "duplicate":
            pieces[at:at] = pieces[at:at + span] * draw(st.integers(1, 3))
        elif edit == "splice":
            pieces[at:at] = [" ", draw(any_token), " "]
        elif edit == "replace":
            same_kind = KINDS.get(_kind(pieces[at])) or TOKENS
            pieces[at] = draw(st.one_of(st.sampled_from(same_kind), any_token))
        else:
            other = draw(st.sampled_from(code))
            pieces[at], pieces[other] = pieces[other], pieces[at]
        if not pieces:
            pieces = [""]
    data = "".join(pieces).encode()
    tail = draw(st.sampled_from(("none", "none", "none", "none", "bytes", "cut")))
    if tail == "bytes":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(min_size=1, max_size=8)) + data[at:]
    elif tail == "cut":
        data = data[:draw(st.integers(0, len(data)))]
    return data


INSTRUCTION = re.compile(r"^(\s*(?:@!?%\w+\s+)?)([a-z][\w.:]*)(\s+)(.*);(\s*)$")
MODIFIERS = (".f32", ".f64", ".s64", ".u32", ".b16", ".u8", ".pred", ".f16x2", ".bf16",
             ".rn", ".rz", ".sat", ".wide", ".lo", ".hi", ".nc", ".global", ".shared",
             ".param", ".v4", ".sync", ".aligned", ".eq", ".approx", ".ftz", ".x")
OPERANDS = ("%r1", "%r2", "%rd1", "%rd9", "%f1", "%p1", "%h1", "%tid.x", "%ctaid.y",
            "%laneid", "0", "-1", "4294967296", "18446744073709551615", "0f3F800000",
            "0d3FF0000000000000", "1.5", "[%rd1]", "[%rd1+4]", "[%r1]", "[0]", "[%f1]",
            "[saxpy_param_0]", "{%f1, %f2}", "{%r1}", "_", "%p1|%p2", "!%p1", "$L__BB0_2",
            "nosuch")


def _split_operands(text: str) -> list[str]:
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch in "[{(" and 1 or ch in "]})" and -1 or 0
        if ch == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    return [*out, text[start:]] if text.strip() else out


@st.composite
def retyped_ptx(draw) -> bytes:
    """A committed kernel with one instruction's modifiers or operands changed: a type or
    modifier swapped, operands swapped, dropped, duplicated or replaced by other kinds
    (registers of another width, immediates, addresses, vectors), which the verifier and
    the decoder must refuse with a location or accept."""
    lines = "".join(PIECES[draw(st.sampled_from(FUZZED_KERNELS))]).split("\n")
    for _ in range(draw(st.integers(1, 2))):
        at = draw(st.sampled_from([i for i, line in enumerate(lines)
                                   if INSTRUCTION.match(line)]))
        prefix, opcode, gap, operands, tail = INSTRUCTION.match(lines[at]).groups()
        ops = _split_operands(operands)
        edit = draw(st.sampled_from(("modifier", "swap", "drop", "duplicate", "replace",
                                     "guard")))
        if edit == "modifier":
            parts = opcode.split(".")
            k = draw(st.integers(1, len(parts)))
            parts[k:k + draw(st.integers(0, 1))] = [draw(st.sampled_from(MODIFIERS))[1:]]
            opcode = ".".join(parts)
        elif edit == "swap" and len(ops) > 1:
            i, j = draw(st.permutations(range(len(ops))))[:2]
            ops[i], ops[j] = ops[j], ops[i]
        elif edit == "drop" and ops:
            del ops[draw(st.integers(0, len(ops) - 1))]
        elif edit == "duplicate" and ops:
            ops.insert(0, ops[draw(st.integers(0, len(ops) - 1))])
        elif edit == "guard":
            prefix = f"{prefix}@{draw(st.sampled_from(OPERANDS))} "
        elif ops:
            ops[draw(st.integers(0, len(ops) - 1))] = " " + draw(st.sampled_from(OPERANDS))
        lines[at] = f"{prefix}{opcode}{gap}{','.join(ops)};{tail}"
    return "\n".join(lines).encode()


def compile_all(data: bytes) -> None:
    """Parse `data` and compile every entry it declares (decode, verify, schedule)."""
    module = isa.parse(data, "mut.ptx")
    text = data.decode("utf-8")
    for name, fn in module.functions.items():
        if fn.is_entry:
            isa.compile_kernel(text, name, "mut.ptx")


@settings(max_examples=400, **SETTINGS)
@given(data=mutated_ptx())
def test_mutated_ptx_compiles_or_fails_with_a_located_input_error(data):
    """Any edit of a real kernel compiles or raises an InputError at mut.ptx:line:col."""
    try:
        compile_all(data)
    except isa.InputError as err:
        assert LOCATED.search(str(err)), f"error without a location: {err}"


@settings(max_examples=300, **SETTINGS)
@given(data=retyped_ptx())
def test_retyped_instructions_compile_or_fail_with_a_located_input_error(data):
    """Changed modifiers or operands of one instruction compile or raise at mut.ptx:line:col."""
    try:
        compile_all(data)
    except isa.InputError as err:
        assert LOCATED.search(str(err)), f"error without a location: {err}"


@settings(max_examples=150, **SETTINGS)
@given(data=retyped_ptx())
def test_retyped_kernels_that_compile_run_or_fail_with_a_located_ptx_error(data):
    """What compiles also runs (2 CTAs of 32 threads, inputs as `ptxsim kernel` makes them,
    a step limit against endless loops) or stops with a PtxError at mut.ptx:line:col."""
    try:
        module = isa.parse(data, "mut.ptx")
        for name, fn in module.functions.items():
            if fn.is_entry:
                program = isa.compile_kernel(data.decode("utf-8"), name, "mut.ptx")
                args, _ = make_arguments(program, elements=64, seed=0)
                isa.run_kernel(program, name, (2, 1, 1), (32, 1, 1), args, max_steps=20_000)
    except isa.PtxError as err:
        assert LOCATED.search(str(err)), f"error without a location: {err}"


@settings(max_examples=150, **SETTINGS)
@given(data=st.binary(max_size=300))
def test_random_bytes_parse_or_fail_with_a_located_ptx_error(data):
    """Arbitrary bytes are a module or a PtxError at mut.ptx:line:col."""
    try:
        compile_all(data)
    except isa.InputError as err:
        assert LOCATED.search(str(err)), f"error without a location: {err}"


def test_the_unmutated_kernels_compile():
    """The fuzzer's seeds are valid, so a failure is the mutation's doing."""
    for pieces in PIECES.values():
        compile_all("".join(pieces).encode())


# -- config overrides ----------------------------------------------------------------------
def _flat(table: dict, prefix: str = "") -> list[tuple[str, object]]:
    out = []
    for key, value in table.items():
        if isinstance(value, dict):
            out += _flat(value, f"{prefix}{key}.")
        else:
            out.append((f"{prefix}{key}", value))
    return out


PRESET_KEYS = _flat(resolve_bases("h100_sxm", lambda name: read_toml(models.preset_path(name))))
NUMERIC_KEYS = tuple(k for k, v in PRESET_KEYS
                     if isinstance(v, int | float) and not isinstance(v, bool))
ODD_VALUES = (math.nan, math.inf, -math.inf, 0, 0.0, -1, -1e-9, 1e308, 10**30, 2**63, True,
              "", "fast", "nan", "1.5", [], [1, -1], {"x": 1}, None)


@settings(max_examples=300, **SETTINGS)
@given(key=st.one_of(st.sampled_from([k for k, _ in PRESET_KEYS]),
                     st.sampled_from(["sm.cnt", "chip", "l2.size", "nope.x", "hbm..stacks"])),
       value=st.one_of(st.sampled_from(ODD_VALUES), st.floats(), st.integers(),
                       st.text(max_size=8)))
def test_config_override_loads_or_fails_naming_the_key(key, value):
    """Any override of any key loads, or raises a ConfigError naming the key (a conflict
    with another field of its block may be reported at that field, naming this one)."""
    try:
        models.load_preset("h100_sxm", {key: value})
    except ConfigError as err:
        field = key.rsplit(".", 1)[-1]
        assert key in str(err) or (field in str(err) and err.key.startswith(
            key.rsplit(".", 1)[0])), err


@settings(max_examples=120, **SETTINGS)
@given(key=st.sampled_from(NUMERIC_KEYS), value=st.sampled_from((math.nan, math.inf,
                                                                  -math.inf)))
def test_non_finite_number_for_a_numeric_key_is_refused_naming_it(key, value):
    """NaN or an infinity for a numeric field is a ConfigError naming the key."""
    with pytest.raises(ConfigError) as info:
        models.load_preset("h100_sxm", {key: value})
    assert key in str(info.value)


# -- command lines -------------------------------------------------------------------------
GOOD_PTX = SOURCES["saxpy"]
CLI_FILES = {
    "good.ptx": GOOD_PTX.encode(),
    "cut.ptx": GOOD_PTX[:GOOD_PTX.index("%r1, %r3,") + len("%r1, %r3,")].encode(),
    "nested.ptx": (GOOD_PTX.split("{")[0] + "{" * 20_000).encode(),
    "nan.json": json.dumps({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k",
                                             "ts": 1, "dur": math.nan, "args": {}}]}).encode(),
    "abc.json": json.dumps({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k",
                                             "ts": "abc", "dur": 1, "args": {}}]}).encode(),
    "deep.json": b"[" * 50_000 + b"]" * 50_000,
    "empty.csv": b"kernel,op,measured_us\n",
    "bad.csv": b"kernel,op,measured_us\nk,o,-1\n",
}
OUT_NAMES = ("out", "res", "o2")
NOISE = ("1", "0", "-1", "2,2", "abc", "1e9", "nan", "", "--json", "--no-such-flag", "-h",
         *OUT_NAMES)
DIMS = ("1", "2", "1,1,1", "0", "-1", "2,2", "4,1,1", "1,1,1,1", "abc", "", "1025", "32,33")
INTS = ("0", "1", "-1", "64", "abc", "1e9", "99999999999999999999", "")
PRESETS = ("h100_sxm", "a100_sxm", "nope", "")
SETTINGS_TEXT = tuple(f"{key}={value}"
                      for key in ("chip.clock_ghz", "sm.count", "l2.size_bytes", "nosuch.key",
                                  "hbm")
                      for value in ("inf", "nan", "0", "-1", "1e400", "abc", "", "true"))


def _option(draw, flag: str, values) -> list[str]:
    return [flag, draw(st.sampled_from(values))] if draw(st.booleans()) else []


@st.composite
def command_line(draw) -> list[str]:
    """A well-formed cheap command with random flag values (`kernel` on small files,
    `compare` only on references refused before simulating), sometimes a stray token; the
    costly commands only with --help or a bad flag, so argparse stops them first."""
    command = draw(st.sampled_from(("opcodes", "models", "kernel", "kernel", "compare",
                                    "compare", "run", "report", "op", "sweep", "golden",
                                    "", "nosuch")))
    if command == "opcodes":
        argv = ["opcodes", *(["--json"] if draw(st.booleans()) else [])]
    elif command == "models":
        argv = ["models", *([draw(st.sampled_from(PRESETS))] if draw(st.booleans()) else [])]
        for _ in range(draw(st.integers(0, 2))):
            argv += ["--set", draw(st.sampled_from(SETTINGS_TEXT))]
        argv += draw(st.sampled_from(([], ["--fields"], ["--json"])))
    elif command == "kernel":
        argv = ["kernel", draw(st.sampled_from(("good.ptx", "cut.ptx", "nested.ptx",
                                                "missing.ptx", "deep.json"))),
                "--grid", draw(st.sampled_from(DIMS)), "--block", draw(st.sampled_from(DIMS))]
        argv += _option(draw, "--entry", ("saxpy", "nope", ""))
        argv += _option(draw, "--shared", ("0", "-1", "49152", "1000000000", "abc"))
        argv += _option(draw, "--elements", INTS)
        argv += _option(draw, "--seed", INTS)
        argv += draw(st.sampled_from(([], ["--json"])))
    elif command == "compare":
        argv = ["compare", "--reference", draw(st.sampled_from(
            ("nan.json", "abc.json", "deep.json", "empty.csv", "bad.csv", "missing.json",
             "good.ptx")))]
        argv += _option(draw, "--format", ("auto", "kineto", "csv", "xml"))
        argv += _option(draw, "--device", INTS)
        argv += _option(draw, "--top", INTS)
        argv += _option(draw, "--out", OUT_NAMES)
        argv += _option(draw, "--model", PRESETS)
        argv += _option(draw, "--set", SETTINGS_TEXT)
        argv += _option(draw, "--fidelity", ("sampled", "full", "exact"))
        argv += draw(st.sampled_from(([], ["--json"])))
    elif command in ("", "nosuch"):
        return [*([command] if command else []),
                draw(st.sampled_from(("--help", "--version", "--no-such-flag")))]
    else:
        return [command, *draw(st.lists(st.sampled_from(NOISE), max_size=2)),
                draw(st.sampled_from(("--help", "--no-such-flag", "-h")))]
    if draw(st.integers(0, 3)) == 0:
        argv.insert(draw(st.integers(1, len(argv))), draw(st.sampled_from(NOISE)))
    return argv


def _run_cli(argv: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(argv)
        except SystemExit as exc:   # argparse: --help, --version (0) or a usage error (2)
            code = exc.code if exc.code is not None else 0
            assert code in (0, 2), (argv, code, err.getvalue())
            return -1, err.getvalue()
    return status, err.getvalue()


def test_command_lines_exit_cleanly_and_write_only_where_told(tmp_path, monkeypatch):
    """Exit 0/1/2 (or argparse's 0/2), one error line for 2, no file written anywhere."""
    for name, data in CLI_FILES.items():
        (tmp_path / name).write_bytes(data)
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    repo_before = {p.name for p in ROOT.iterdir()}

    @settings(max_examples=120, **SETTINGS)
    @given(argv=command_line())
    def check(argv):
        status, err = _run_cli(argv)
        assert status in (-1, 0, 1, 2), (argv, status, err)
        assert "Traceback" not in err, (argv, err)
        if status == 2:
            errors = [line for line in err.splitlines() if ": error: " in line]
            assert len(errors) == 1 and errors[0].startswith("ptxsim"), (argv, err)
        assert sorted(p.name for p in tmp_path.iterdir()) == before, argv
        assert not {p.name for p in ROOT.iterdir()} - repo_before & set(OUT_NAMES), argv

    check()
