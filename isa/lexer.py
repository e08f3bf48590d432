"""Tokenizer for PTX text.

Produces `Token(kind, text, line, col)` for words (opcodes with their dotted
modifiers, directives, registers, identifiers), numbers (decimal, hex, `0f`/`0d`
float bit patterns, decimal floats), strings and punctuation. Comments are
dropped; line numbers are 1-based, columns 1-based. A character no token starts
with, or a word starting with a digit that is no number (`0f3F80`, `12ab`), is a
`PtxError` at its line and column.

Source given as bytes (as read from a file) must be UTF-8 (PTX itself is ASCII; UTF-8
is allowed in comments and strings); a byte sequence that is not is a `PtxError` at the
line and column of its first byte. A leading byte-order mark is dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from isa.errors import PtxError

_TOKEN = re.compile(r"""
  (?P<nl>\n)
| (?P<ws>[ \t\r\f\v]+)
| (?P<lcomment>//[^\n]*)
| (?P<bcomment>/\*.*?\*/)
| (?P<string>"[^"\n]*")
| (?P<fbits>0[fF][0-9a-fA-F]{8}(?![\w])|0[dD][0-9a-fA-F]{16}(?![\w]))
| (?P<hex>0[xX][0-9a-fA-F]+U?(?![\w]))
| (?P<float>\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\.\d+(?:[eE][+-]?\d+)?)
| (?P<int>\d+U?(?![\w]))
| (?P<badnum>\d[\w.]*)
| (?P<word>[.%$A-Za-z_][\w$]*(?:(?:\.|::)[\w$]+)*)
| (?P<punct>[{}()\[\],;:+\-|!@<>=*])
""", re.VERBOSE | re.DOTALL)


NUMBER_FORMS = ("a decimal or 0x-hex integer, a decimal float, 0f plus 8 hex digits (f32 bits) "
                "or 0d plus 16 hex digits (f64 bits)")


EXCERPT_CHARS = 120
TOKEN_CHARS = 40


def excerpt(line_text: str, col: int) -> str:
    """The source line shown in an error: whole, or the `EXCERPT_CHARS` around 1-based
    column `col` of a longer one, marked with '...'."""
    if len(line_text) <= EXCERPT_CHARS:
        return line_text
    start = max(0, min(col - 1 - EXCERPT_CHARS // 2, len(line_text) - EXCERPT_CHARS))
    end = start + EXCERPT_CHARS
    return ("..." if start else "") + line_text[start:end] + \
        ("..." if end < len(line_text) else "")


def shorten(text: str) -> str:
    """A token as named in an error message: whole, or its start and its length when it
    is longer than `TOKEN_CHARS`."""
    if len(text) <= TOKEN_CHARS:
        return text
    return f"{text[:TOKEN_CHARS - 10]}... ({len(text)} characters)"


@dataclass(frozen=True, slots=True)
class Token:
    kind: str
    text: str
    line: int
    col: int


def source_text(data: str | bytes, file: str = "<ptx>") -> str:
    """PTX source as text: bytes decoded as UTF-8 (a `PtxError` at the first byte that is
    not), a leading byte-order mark dropped."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        raw = bytes(data)
        try:
            data = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            start = raw.rfind(b"\n", 0, exc.start) + 1
            line = raw.count(b"\n", 0, exc.start) + 1
            prefix = raw[start:exc.start].decode("utf-8", errors="replace")
            end = raw.find(b"\n", exc.start)
            shown = raw[start:end if end >= 0 else len(raw)].decode("utf-8", errors="replace")
            raise PtxError(f"byte 0x{raw[exc.start]:02x} is not UTF-8 text", file=file,
                           line=line, col=len(prefix) + 1,
                           text=excerpt(shown, len(prefix) + 1),
                           expected="a UTF-8 (or plain ASCII) PTX file") from None
    if not isinstance(data, str):
        raise TypeError(f"PTX source must be str or bytes, not {type(data).__name__}")
    return data.removeprefix("\ufeff")


def tokenize(text: str | bytes, file: str = "<ptx>") -> tuple[list[Token], list[str]]:
    """Split PTX text (str, or UTF-8 bytes) into tokens; also return the source lines for
    error messages."""
    text = source_text(text, file)
    lines = text.split("\n")
    tokens: list[Token] = []
    pos, line, line_start = 0, 1, 0
    n = len(text)
    while pos < n:
        m = _TOKEN.match(text, pos)
        col = pos - line_start + 1
        if m is None and text.startswith(("/*", '"'), pos):
            what = "comment" if text[pos] == "/" else "string"
            raise PtxError(f"unterminated {what}", file=file, line=line, col=col,
                           text=excerpt(lines[line - 1], col),
                           expected="'*/' closing the comment" if what == "comment"
                           else "'\"' closing the string on the same line")
        if m is None:
            raise PtxError(f"unexpected character {text[pos]!r}", file=file, line=line,
                           col=col, text=excerpt(lines[line - 1], col),
                           expected="a PTX token: a word, number, string, or one of "
                           "{}()[],;:+-|!@<>=*")
        kind = m.lastgroup
        tok = m.group()
        if kind == "badnum":
            raise PtxError(f"malformed number '{shorten(tok)}'", file=file, line=line, col=col,
                           text=excerpt(lines[line - 1], col), expected=NUMBER_FORMS)
        if kind == "nl":
            line += 1
            line_start = m.end()
        elif kind == "bcomment":
            newlines = tok.count("\n")
            if newlines:
                line += newlines
                line_start = pos + tok.rfind("\n") + 1
        elif kind not in ("ws", "lcomment"):
            tokens.append(Token(kind, tok, line, pos - line_start + 1))
        pos = m.end()
    return tokens, lines
