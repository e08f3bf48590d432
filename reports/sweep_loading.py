"""Read a sweep folder (`ptxsim sweep --out DIR`) into pandas tables.

`load_sweep(DIR)` returns one row per point that has a part, in sweep order: `point_id`,
`index`, the point's parameters (one column per dotted key, named by it: `preset`,
`kernel`, `size.n`, `op`, `params.m`, `workload`, `tokens`, `sm.count`, ...; every axis is
one of them), its metrics (a kernel point's `cycles`, `time_us`, `instructions`; an op,
layer or step point's `time_us`, `kernel_time_us`, per-category times, `comm_hidden_us`,
bytes, `tflops`, `sm_clock_ghz`, `bound`, `fidelity_method`, ...: `simulator.app.points`;
empty unless the point is ok), then `status` ("ok", "error", "failed" when its worker
process died, "timeout"), `error` (the exception or the reason), `elapsed_s`, `worker`,
`finished_at`, `traceback` and `config_json` (the fully resolved config). `index` is the
point's index in the manifest (the sweep as last run), not the one stored in a part run by
an earlier version of an edited sweep.

`load_sweep(DIR, stats=True)` returns the long stats table instead: `point_id`, the
parameters, then `run_id, kernel, component, stat, value, unit` (error points have no rows;
a parameter named like a stats column, e.g. `kernel`, is given by that column).
`load_sweep_kernels(DIR)` returns the long per-kernel table: `point_id`, `index`, the
parameters, then the point's per-kernel table (a layer's or step's kernels table, one row per
node; one row for an op or a kernel), one row per kernel of each ok point; a parameter named
like a kernels column (an op sweep's `op`) is given by that column. Parts written before
sweeps kept per-kernel tables have none (`attrs["without_kernels"]` counts them).
`df.attrs` holds `sweep` (name), `kind`, `axes` (swept keys), `params`, `metrics` and
`missing` (points of the manifest without a part yet).
Only points listed in `DIR/sweep.json` are read; parts of other sweeps in the folder are not.
Left out: reading straight from remote object stores.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

# The part format `ptxsim sweep` writes (`simulator.app.points` imports these).
PART_POINT_COLUMNS = ("point_id", "index", "status", "error", "traceback", "elapsed_s",
                      "worker", "finished_at", "params_json", "config_json")
"""Point-level columns of a part (repeated on each row); metrics follow, then the rows."""

PART_STATS_COLUMNS = ("run_id", "kernel", "component", "stat", "value", "unit")

RECORD_COLUMN = "record"
"""Which table a part row belongs to: "stat" (the long stats) or "kernel" (the per-kernel
table). Parts written before per-kernel tables have no such column: every row is a stat."""

KERNEL_PREFIX = "kernels."
"""Prefix of the per-kernel table's columns in a part (`reports.load_sweep_kernels` drops it)."""

_TAIL = ("status", "error", "elapsed_s", "worker", "finished_at", "traceback", "config_json")


def _manifest(directory: Path) -> dict:
    path = directory / "sweep.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no sweep manifest (is {directory} a "
                                "`ptxsim sweep --out` folder?)") from None


def _part_paths(directory: Path, points: list[dict]):
    for point in points:
        path = directory / "parts" / f"{point['point_id']}.parquet"
        if path.exists():
            yield path


def _is_row_column(name: str) -> bool:
    return (name in PART_STATS_COLUMNS or name == RECORD_COLUMN
            or name.startswith(KERNEL_PREFIX))


def _head(path: Path) -> pd.DataFrame:
    """The first row of a part, point columns and metrics only (the rows are not read)."""
    part = pq.ParquetFile(path)
    columns = [n for n in part.schema_arrow.names if not _is_row_column(n)]
    batch = next(part.iter_batches(batch_size=1, columns=columns))
    return batch.to_pandas()


def _params(manifest: dict) -> list[str]:
    return list(dict.fromkeys(k for p in manifest["points"] for k in p["params"]))


def _attrs(frame: pd.DataFrame, manifest: dict, params: list[str], metrics: list[str],
           found: int) -> None:
    points = manifest["points"]
    frame.attrs.update(sweep=manifest["spec"]["name"], kind=manifest["spec"].get("kind", ""),
                       axes=list(manifest["axes"]), params=params, metrics=metrics,
                       missing=len(points) - found)


def load_sweep(directory: str | Path, *, stats: bool = False) -> pd.DataFrame:
    """One row per finished point (or, with `stats=True`, the long stats of all points)."""
    directory = Path(directory)
    manifest = _manifest(directory)
    points = manifest["points"]
    params = _params(manifest)
    paths = list(_part_paths(directory, points))
    heads = [_head(path) for path in paths]
    head = (pd.concat(heads, ignore_index=True) if heads
            else pd.DataFrame(columns=list(PART_POINT_COLUMNS)))
    metrics = [c for c in head.columns if c not in PART_POINT_COLUMNS]
    values = pd.DataFrame([json.loads(text) for text in head["params_json"]], columns=params)
    index = pd.Series({p["point_id"]: p["index"] for p in points}, dtype="int64")
    ids = head["point_id"].reset_index(drop=True)
    frame = pd.concat([ids, pd.Series(index[ids].to_numpy(), name="index"), values,
                       head[[*metrics, *_TAIL]].reset_index(drop=True)], axis=1)
    frame = frame.sort_values("index", kind="stable").reset_index(drop=True)
    if stats:
        keys = [k for k in params if k not in PART_STATS_COLUMNS]
        long = [_stat_rows(path) for path in paths]
        found = (pd.concat(long, ignore_index=True) if long
                 else pd.DataFrame(columns=["point_id", *PART_STATS_COLUMNS]))
        frame = found.merge(frame[["point_id", *keys]], on="point_id", how="left")
        frame = frame[["point_id", *keys, *PART_STATS_COLUMNS]]
    _attrs(frame, manifest, params, metrics, len(heads))
    return frame


def _stat_rows(path: Path) -> pd.DataFrame:
    part = pq.ParquetFile(path)
    names = part.schema_arrow.names
    columns = ["point_id", *PART_STATS_COLUMNS] + ([RECORD_COLUMN] if RECORD_COLUMN in names
                                                    else [])
    rows = part.read(columns=columns).to_pandas()
    keep = rows["stat"].notna()
    if RECORD_COLUMN in rows.columns:
        keep &= rows[RECORD_COLUMN] == "stat"
    return rows.loc[keep, ["point_id", *PART_STATS_COLUMNS]]


def _kernel_rows(path: Path) -> pd.DataFrame | None:
    """The per-kernel rows of a part (columns without their prefix); None for a part written
    before parts held per-kernel tables."""
    part = pq.ParquetFile(path)
    names = part.schema_arrow.names
    if RECORD_COLUMN not in names:
        return None
    kernel_columns = [n for n in names if n.startswith(KERNEL_PREFIX)]
    rows = part.read(columns=["point_id", RECORD_COLUMN, *kernel_columns]).to_pandas()
    rows = rows[rows[RECORD_COLUMN] == "kernel"].drop(columns=[RECORD_COLUMN])
    return rows.rename(columns={n: n[len(KERNEL_PREFIX):] for n in kernel_columns})


def load_sweep_kernels(directory: str | Path) -> pd.DataFrame:
    """The long per-kernel table of every finished point (see the module docstring)."""
    directory = Path(directory)
    points = load_sweep(directory)
    manifest = _manifest(directory)
    params = _params(manifest)
    found, old = [], 0
    for path in _part_paths(directory, manifest["points"]):
        rows = _kernel_rows(path)
        if rows is None:
            old += 1
        elif len(rows):
            found.append(rows)
    kernels = (pd.concat(found, ignore_index=True) if found
               else pd.DataFrame(columns=["point_id"]))
    columns = [c for c in kernels.columns if c != "point_id"]
    keys = [k for k in params if k not in columns]
    frame = kernels.merge(points[["point_id", "index", *keys]], on="point_id", how="left")
    frame = frame[["point_id", "index", *keys, *columns]]
    frame = frame.sort_values("index", kind="stable").reset_index(drop=True)
    _attrs(frame, manifest, params, points.attrs["metrics"], len(points))
    frame.attrs["without_kernels"] = old
    return frame
