"""Tokenizer for PTX text.

Produces `Token(kind, text, line, col)` for words (opcodes with their dotted
modifiers, directives, registers, identifiers), numbers (decimal, hex, `0f`/`0d`
float bit patterns, decimal floats), strings and punctuation. Comments are
dropped; line numbers are 1-based, columns 1-based.
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
| (?P<word>[.%$A-Za-z_][\w$]*(?:(?:\.|::)[\w$]+)*)
| (?P<punct>[{}()\[\],;:+\-|!@<>=*])
""", re.VERBOSE | re.DOTALL)


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
        if m is None:
            col = pos - line_start + 1
            raise PtxError("unexpected character", file=file, line=line, col=col,
                           text=lines[line - 1], expected="a PTX token")
        kind = m.lastgroup
        tok = m.group()
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
