"""Errors raised for bad input: malformed PTX, unknown opcodes, impossible launches.

`InputError` is the base of every error caused by what a user gave us (PTX text,
launch shape, arguments, config keys); the CLI prints it as one line. `PtxError`
carries the source location: file, line, column, the offending text and what
would have been accepted.
"""

from __future__ import annotations

import re


class InputError(Exception):
    """Something the user supplied is wrong; the message says what and where."""


class PtxError(InputError):
    """A PTX program is malformed, unsupported, or faulted while running.

    `str(err)` reads `file:line:col: message: 'text' (expected ...)`.
    """

    def __init__(self, message: str, *, file: str = "<ptx>", line: int = 0, col: int = 0,
                 text: str = "", expected: str = ""):
        self.message = message
        self.file = file
        self.line = line
        self.col = col
        self.text = text
        self.expected = expected
        super().__init__(self._format())

    def _format(self) -> str:
        where = f"{self.file}:{self.line}:{self.col}"
        out = f"{where}: {self.message}"
        if self.text:
            out += f": {self.text.strip()!r}"
        if self.expected:
            out += f" (expected {self.expected})"
        return out


class LaunchError(InputError):
    """A launch that cannot run: bad grid/block, wrong argument count or kind."""


class StepLimitError(PtxError, LaunchError):
    """A launch stopped at its step limit (`run_kernel(max_steps=...)`), most likely an
    endless loop: a `LaunchError` naming the kernel and the limit, located (as a
    `PtxError`) at the instruction where it stopped."""


def column_of(line_text: str, name: str, start_col: int = 1, operand: int = -1) -> int:
    """1-based column of `name` in a source line at or after `start_col`; with `operand`
    = k, inside the k-th operand of the instruction starting there. `start_col` itself
    when the name is not written there (e.g. on a continuation line)."""
    start = max(start_col - 1, 0)
    if operand >= 0:
        start = _operand_start(line_text, start, operand)
    pattern = r"(?<![\w%$.])" + re.escape(name) + r"(?![\w$])"
    m = re.compile(pattern).search(line_text, start)
    return m.start() + 1 if m else start_col


def _operand_start(line_text: str, start: int, k: int) -> int:
    """Offset of operand k of the instruction at `start`: after an optional guard and
    the opcode, operands are separated by commas outside brackets and braces."""
    m = re.compile(r"\s*(?:@!?\S+\s+)?\S+").match(line_text, start)
    pos = m.end() if m else start
    depth = 0
    for i in range(pos, len(line_text)):
        ch = line_text[i]
        if ch in "[{(":
            depth += 1
        elif ch in "]})":
            depth -= 1
        elif ch == "," and depth == 0:
            k -= 1
            if k == 0:
                return i + 1
        elif ch == ";":
            break
    return pos


def operand_column(line_text: str, start_col: int, operand: int) -> int:
    """1-based column of the first character of operand `operand` of the instruction
    starting at `start_col` (`start_col` when the line does not hold it)."""
    start = _operand_start(line_text, max(start_col - 1, 0), operand)
    if operand > 0 and (start == 0 or line_text[start - 1] != ","):
        return start_col
    while start < len(line_text) and line_text[start] in " \t":
        start += 1
    return start + 1 if start < len(line_text) else start_col
