"""Import a plain per-kernel measurement CSV into the kernel-table schema.

The file may start with `#` lines (its source). Its header must hold `kernel` (the kernel
name), `op` (the operator that launched it) and `measured_us` (its measured duration in
microseconds, finite and > 0); every other column is a shape argument and must hold
non-negative integers (e.g. `m, n, k` or `tokens, hidden`). Each problem is reported as
`file:row:column: message (expected ...)`, where row is the 1-based line in the file and
column the 1-based column of the header field, so a user can jump to it. The file must be
UTF-8 text (a bad byte is reported at its line and column) and each line a CSV record.

The table has the columns of `kineto.KINETO_COLUMNS` (`name` = kernel, `cpu_op` = op,
`dur_us` = measured_us, `kind` "kernel", stream 0, `start_us` the running sum of the
durations as if run back to back, launch geometry unknown: grid/block (0, 0, 0)), then
`input_shapes` as a JSON object of the shape columns, `annotation` and `op_stack` None,
and the shape columns themselves.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pandas as pd

from workloads.traces.errors import TraceFormatError
from workloads.traces.kineto import KINETO_COLUMNS

REQUIRED_COLUMNS = ("kernel", "op", "measured_us")


def read_kernel_csv(path: str | Path) -> pd.DataFrame:
    """The kernels listed in the CSV at `path`, validated (see the module docstring)."""
    path = Path(path)
    lines = _lines(path)
    header_index = next((i for i, line in enumerate(lines)
                         if line.strip() and not line.lstrip().startswith("#")), None)
    if header_index is None:
        raise TraceFormatError(f"{path}:1:1: no header line (expected a header with "
                               f"{', '.join(REQUIRED_COLUMNS)} and shape columns)")
    header = _fields(path, header_index + 1, lines[header_index])
    header = [h.strip() for h in header]
    _check_header(path, header_index + 1, header)
    shape_columns = [h for h in header if h not in REQUIRED_COLUMNS]
    rows, clock_us = [], 0.0
    for number, line in enumerate(lines[header_index + 1:], start=header_index + 2):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = _fields(path, number, line)
        if len(fields) != len(header):
            raise TraceFormatError(f"{path}:{number}:1: {len(fields)} fields (expected "
                                   f"{len(header)}, as in the header)")
        record = dict(zip(header, (f.strip() for f in fields), strict=True))
        where = {h: f"{path}:{number}:{i + 1}" for i, h in enumerate(header)}
        measured = _duration(record["measured_us"], where["measured_us"])
        shapes = {c: _shape(record[c], where[c], c) for c in shape_columns}
        for name in ("kernel", "op"):
            if not record[name]:
                raise TraceFormatError(f"{where[name]}: empty {name} (expected a name)")
        rows.append((record["kernel"], "kernel", 0, clock_us, measured, (0, 0, 0), (0, 0, 0),
                     0, 0, 0, 0, -1, record["op"], json.dumps(shapes), None, None,
                     *shapes.values()))
        clock_us += measured
    return pd.DataFrame(rows, columns=[*KINETO_COLUMNS, *shape_columns])


def _lines(path: Path) -> list[str]:
    """The file's lines, decoded as UTF-8 (a `TraceFormatError` at the first bad byte)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot read: {exc.strerror} (expected a readable "
                               "kernel CSV file)") from None
    try:
        return data.decode("utf-8-sig").splitlines()
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise TraceFormatError(f"{path}:{line}:{col}: byte 0x{data[exc.start]:02x} is not "
                               "UTF-8 text (expected a UTF-8 CSV file)") from None


def _fields(path: Path, number: int, line: str) -> list[str]:
    """The CSV fields of one line (a `TraceFormatError` at the line if it is no record)."""
    try:
        return next(csv.reader([line]), [])
    except csv.Error as exc:
        raise TraceFormatError(f"{path}:{number}:1: not a CSV record: {exc} (expected "
                               "comma-separated fields, quoted with '\"' where needed)") from None


def _check_header(path: Path, line: int, header: list[str]) -> None:
    for i, name in enumerate(header):
        if not name:
            raise TraceFormatError(f"{path}:{line}:{i + 1}: empty column name")
        if name in header[:i]:
            raise TraceFormatError(f"{path}:{line}:{i + 1}: column {name!r} repeated")
        if name in KINETO_COLUMNS:
            raise TraceFormatError(f"{path}:{line}:{i + 1}: shape column {name!r} clashes "
                                   "with a kernel-table column (rename it)")
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise TraceFormatError(f"{path}:{line}:1: missing column(s) {', '.join(missing)} "
                               f"(expected {', '.join(REQUIRED_COLUMNS)} plus shape columns)")


def _duration(text: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise TraceFormatError(f"{where}: measured_us {text!r} (expected a finite number of "
                               "microseconds > 0)")
    return value


def _shape(text: str, where: str, column: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise TraceFormatError(f"{where}: {column} {text!r} (expected a non-negative "
                               "integer shape argument)")
    return value
