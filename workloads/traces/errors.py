"""The error raised for a malformed reference trace (Kineto JSON or kernel CSV).

Its message names the file and, where there is one, the row and column (or event index)
and what would have been accepted; the CLI prints it as one line like any `InputError`.
"""

from __future__ import annotations

from isa.errors import InputError


class TraceFormatError(InputError):
    """A reference trace file is malformed; the message says where and what was expected."""
