"""Errors raised for bad input: malformed PTX, unknown opcodes, impossible launches.

`InputError` is the base of every error caused by what a user gave us (PTX text,
launch shape, arguments, config keys); the CLI prints it as one line. `PtxError`
carries the source location: file, line, column, the offending text and what
would have been accepted.
"""

from __future__ import annotations


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
