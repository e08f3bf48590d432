"""Simulate the kernels of a mapped reference trace as ops, and say why the others are not.

`simulate_reference(df, config, fidelity)` takes a kernel table from `read_kineto` or
`read_kernel_csv` after `map_kernels` and returns one row per kernel (nothing dropped) with
the registry op it ran as, its sizes, the simulated time and a `status`:

    simulated   built with `workloads.ops.build_op` and timed with `simulate_op`
    unmatched   no mapping rule matches the kernel name
    no_op       the mapped op has no builder registered in `workloads.ops.OPS` (yet)
    no_shapes   the trace does not give the sizes the builder requires
    error       the builder or the simulator rejected the sizes (`InputError`)

and a `reason` sentence for every status but `simulated`. The registry is read when the
function runs, so ops registered later are picked up.

Op kind: the mapped op itself, its `_` spelled `-` (`residual_add` -> `residual-add`), or
an alias of `OP_ALIASES` (`grouped_gemm` -> `gemm`). Sizes: a CSV's shape columns
(`input_shapes` holds them as a JSON object) whose names are the builder's flag names
(`m`, `n`, `k`, `rows`, `cols`, ...); from Kineto "Input Dims" (a list of shapes): for a
GEMM m = product of the first matrix's leading dims, k its last, n the second matrix's
last dim (its first for `linear`, whose weight is [n, k]), and a batched (3-D) pair gives
`groups`; for an op with `rows`/`cols`, rows = product of the first input's leading dims
and cols its last. Identical (op, sizes) pairs are simulated once.

Left out: dtypes from the trace (CSV shape columns are integers; builders use their
default precision), fused kernels that are more than one op, sizes from Kineto grid/block
or name hints. Units: microseconds.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd

from isa.errors import InputError

OP_ALIASES = {"grouped_gemm": "gemm"}
STATUSES = ("simulated", "unmatched", "no_op", "no_shapes", "error")
RESULT_COLUMNS = ("kind", "sizes", "simulated_us", "status", "reason")


def op_kind(op: str | None, registry) -> str | None:
    """The registry kind a mapped op runs as, or None when none is registered."""
    if not op:
        return None
    for candidate in (op, op.replace("_", "-"), OP_ALIASES.get(op)):
        if candidate and candidate in registry:
            return candidate
    return None


def _shape_dict(row: dict) -> dict[str, Any] | None:
    shapes = row.get("input_shapes")
    if isinstance(shapes, str):
        try:
            shapes = json.loads(shapes)
        except json.JSONDecodeError:
            return None
    return shapes if isinstance(shapes, dict) else None


def _dims_list(row: dict) -> list[list[int]]:
    shapes = row.get("input_shapes")
    if isinstance(shapes, str):
        try:
            shapes = json.loads(shapes)
        except json.JSONDecodeError:
            return []
    if not isinstance(shapes, (list, tuple)):
        return []
    return [list(s) for s in shapes if isinstance(s, (list, tuple)) and s
            and all(isinstance(d, int) for d in s)]


def sizes_from_dims(kind: str, cpu_op: str | None, dims: list[list[int]],
                    wanted: set[str]) -> dict[str, int]:
    """Builder sizes from Kineto "Input Dims" (see the module docstring); {} if none fit."""
    matrices = [d for d in dims if len(d) >= 2]
    if {"m", "n", "k"} <= wanted and len(matrices) >= 2:
        a, b = matrices[0], matrices[1]
        if "linear" in str(cpu_op or ""):
            return {"m": math.prod(a[:-1]), "k": a[-1], "n": b[0]}
        if len(a) == 3 and len(b) == 3 and "groups" in wanted:
            return {"groups": a[0], "m": a[1], "k": a[2], "n": b[2]}
        return {"m": math.prod(a[:-1]), "k": a[-1], "n": b[-1]}
    if {"rows", "cols"} <= wanted and dims:
        first = dims[0]
        return {"rows": math.prod(first[:-1]) if len(first) > 1 else 1, "cols": first[-1]}
    return {}


def row_sizes(row: dict, kind: str, flags) -> tuple[dict[str, int], list[str]]:
    """(sizes for the builder, names of required flags still missing)."""
    wanted = {f.dest for f in flags}
    given = _shape_dict(row)
    if given is not None:
        sizes = {k: int(v) for k, v in given.items() if k in wanted}
    else:
        sizes = sizes_from_dims(kind, row.get("cpu_op"), _dims_list(row), wanted)
    missing = [f.name for f in flags if f.required and f.dest not in sizes]
    return sizes, missing


def simulate_reference(df: pd.DataFrame, config, fidelity: str | None = None,
                       progress=None) -> pd.DataFrame:
    """`df` (mapped kernels) with `RESULT_COLUMNS` added (see the module docstring).
    `progress(index, total, name)`, when given, is called before each kernel row."""
    from workloads.ops import OP_FLAGS, OPS, build_op, simulate_op

    cache: dict[tuple, tuple[float | None, str | None]] = {}
    results = []
    rows = df.to_dict("records")
    for index, row in enumerate(rows):
        if progress is not None:
            progress(index, len(rows), str(row.get("name", "")))
        if not isinstance(row.get("rule"), str):
            results.append((None, None, math.nan, "unmatched",
                            "no mapping rule matches the kernel name"))
            continue
        kind = op_kind(row.get("op"), OPS)
        if kind is None:
            results.append((None, None, math.nan, "no_op",
                            f"op {row.get('op')!r} (category {row.get('category')}) has no "
                            f"builder in workloads.ops; registered: {', '.join(sorted(OPS))}"))
            continue
        sizes, missing = row_sizes(row, kind, OP_FLAGS[kind])
        text = json.dumps(sizes, sort_keys=True)
        if missing:
            results.append((kind, text, math.nan, "no_shapes",
                            f"op {kind} needs {', '.join(missing)}; the trace gives "
                            f"{text if sizes else 'no shape arguments'}"))
            continue
        key = (kind, text)
        if key not in cache:
            try:
                plan = build_op(kind, config, **sizes)
                cache[key] = (float(simulate_op(plan, config, fidelity)["time_us"]), None)
            except InputError as exc:
                cache[key] = (None, str(exc))
        time_us, error = cache[key]
        if error is not None:
            results.append((kind, text, math.nan, "error", error))
        else:
            results.append((kind, text, time_us, "simulated", None))
    out = df.copy()
    for i, column in enumerate(RESULT_COLUMNS):
        out[column] = [r[i] for r in results]
    return out
