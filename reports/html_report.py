"""One self-contained HTML page: tables and PNG plots embedded as base64 data URIs.

`render_html(title, sections)` builds the page from `Section`s (a heading, optional notes,
optional tables as DataFrames, optional figures as PNG bytes). Styles are inline; there are
no scripts, fonts, or links to anything outside the file, so it opens offline. Every value
is HTML-escaped; column headers carry the unit. Figures print with 4 significant digits
(`format_figure`): below 10,000 as they are (`9.375`, `0.02248`), above with a thousands
prefix up to `E` (`152.3 k`, `16.26 M`; beyond, an exponent), so that a cell reads
`16.26 k` under `hbm_bytes [B]`; integers (counts) print exactly with thousands
separators. Decimals of more than 4 significant digits in the notes are rounded the same
way; `format_figure(value, unit)` gives note writers a figure with its unit.
Left out: interactivity (sorting, filtering), dark mode.
"""

from __future__ import annotations

import base64
import html
import math
import numbers
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd

STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 1.6em; }
table { border-collapse: collapse; font-size: 0.8em; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 2px 6px; text-align: right; }
th { background: #eee; } td.text { text-align: left; }
.note { color: #555; font-style: italic; max-width: 60em; }
img { max-width: 100%; border: 1px solid #ddd; margin: 0.5em 0; }
.scroll { overflow-x: auto; }
"""


@dataclass(frozen=True, slots=True)
class Section:
    """A heading with notes, tables (id -> frame) and figures (caption -> PNG bytes)."""

    heading: str
    notes: tuple[str, ...] = ()
    tables: Mapping[str, pd.DataFrame] = field(default_factory=dict)
    figures: Mapping[str, bytes] = field(default_factory=dict)
    units: Mapping[str, str] = field(default_factory=dict)
    transpose: bool = False


PREFIXES = ("", "k", "M", "G", "T", "P", "E")
SIGNIFICANT = 4
LONG_DECIMAL = re.compile(r"(?<![\w.])\d+\.\d+(?![\w.])")


def format_figure(value: float, unit: str = "") -> str:
    """`value` with 4 significant digits, a thousands prefix from 10,000 up to 10**21, and
    `unit` after it ("9.375 us", "152.3 kFLOP"; nan and inf as they are)."""
    rounded = float(f"{float(value):.{SIGNIFICANT}g}")
    text, prefix = f"{rounded:.{SIGNIFICANT}g}", ""
    if math.isfinite(rounded) and 1e4 <= abs(rounded) < 1e21:
        step = int(math.log10(abs(rounded))) // 3
        text, prefix = f"{rounded / 10 ** (3 * step):.{SIGNIFICANT}g}", PREFIXES[step]
    if not unit:
        return f"{text} {prefix}" if prefix else text
    return f"{text} {prefix}{unit}"


def round_decimals(text: str) -> str:
    """`text` with every decimal number of more than 4 significant digits rounded to 4
    ("9.374591 us" -> "9.375 us"); integers, versions and names are left alone."""
    def shorten(match: re.Match) -> str:
        digits = match.group(0).replace(".", "").lstrip("0")
        return match.group(0) if len(digits) <= SIGNIFICANT else \
            format_figure(float(match.group(0)))
    return LONG_DECIMAL.sub(shorten, text)


def _cell(value) -> tuple[str, str]:
    if isinstance(value, bool):
        return html.escape(str(value)), ""
    if isinstance(value, numbers.Integral):
        return f"{int(value):,}", ""
    if isinstance(value, numbers.Real):
        if math.isnan(value):
            return "", ""
        return html.escape(format_figure(value)), ""
    if hasattr(value, "dtype"):
        return html.escape(str(value)), ""
    return html.escape(str(value)), ' class="text"'


def table_html(table_id: str, frame: pd.DataFrame, units: Mapping[str, str],
               transpose: bool = False) -> str:
    """An HTML <table> with unit-labelled headers (transposed: one row per column)."""
    def label(col) -> str:
        unit = units.get(str(col), "")
        return html.escape(f"{col} [{unit}]" if unit else str(col))

    lines = [f'<div class="scroll"><table id="{html.escape(table_id)}">']
    if transpose:
        header = "".join(f"<th>{html.escape(str(k))}</th>" for k in frame.get("kernel", []))
        lines.append(f"<thead><tr><th>column</th>{header}</tr></thead><tbody>")
        for col in frame.columns:
            cells = "".join(f"<td{cls}>{text}</td>" for text, cls in map(_cell, frame[col]))
            lines.append(f'<tr><th class="text">{label(col)}</th>{cells}</tr>')
    else:
        header = "".join(f"<th>{label(c)}</th>" for c in frame.columns)
        lines.append(f"<thead><tr>{header}</tr></thead><tbody>")
        for row in frame.itertuples(index=False):
            cells = "".join(f"<td{cls}>{text}</td>" for text, cls in map(_cell, row))
            lines.append(f"<tr>{cells}</tr>")
    lines.append("</tbody></table></div>")
    return "\n".join(lines)


def image_html(caption: str, png: bytes) -> str:
    """An <img> with the PNG inline as a data URI."""
    data = base64.b64encode(png).decode("ascii")
    alt = html.escape(caption)
    return f'<figure><img alt="{alt}" src="data:image/png;base64,{data}"><figcaption>' \
           f"{alt}</figcaption></figure>"


def render_html(title: str, sections: Sequence[Section]) -> str:
    """The whole page as a string."""
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>",
             f"<h1>{html.escape(title)}</h1>"]
    for section in sections:
        parts.append(f"<h2>{html.escape(section.heading)}</h2>")
        parts += [f'<p class="note">{html.escape(round_decimals(note))}</p>'
                  for note in section.notes]
        parts += [table_html(tid, frame, section.units, section.transpose)
                  for tid, frame in section.tables.items()]
        parts += [image_html(caption, png) for caption, png in section.figures.items()]
    parts.append("</body></html>")
    return "\n".join(parts)
