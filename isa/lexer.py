"""Tokenizer for PTX text.

Produces `Token(kind, text, line, col)` for words (opcodes with their dotted
modifiers, directives, registers, identifiers), numbers (decimal, hex, `0f`/`0d`
float bit patterns, decimal floats), strings and punctuation. Comments are
dropped; line numbers are 1-based, columns 1-based. A character no token starts
with, or a word starting with a digit that is no number (`0f3F80`, `12ab`), is a
`PtxError` at its line and column.
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


@dataclass(frozen=True, slots=True)
class Token:
    kind: str
    text: str
    line: int
    col: int


def tokenize(text: str, file: str = "<ptx>") -> tuple[list[Token], list[str]]:
    """Split PTX text into tokens; also return the source lines for error messages."""
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
                           text=lines[line - 1],
                           expected="'*/' closing the comment" if what == "comment"
                           else "'\"' closing the string on the same line")
        if m is None:
            raise PtxError(f"unexpected character {text[pos]!r}", file=file, line=line,
                           col=col, text=lines[line - 1],
                           expected="a PTX token: a word, number, string, or one of "
                           "{}()[],;:+-|!@<>=*")
        kind = m.lastgroup
        tok = m.group()
        if kind == "badnum":
            raise PtxError(f"malformed number '{tok}'", file=file, line=line, col=col,
                           text=lines[line - 1], expected=NUMBER_FORMS)
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
