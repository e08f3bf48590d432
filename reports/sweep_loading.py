"""Read a sweep folder (`ptxsim sweep --out DIR`) into pandas tables.

`load_sweep(DIR)` returns one row per point that has a part, in sweep order: `point_id`,
`index`, the point's parameters (one column per dotted key: `preset`, `kernel`, `size.n`,
`sm.count`, ...), its metrics (e.g. `cycles`, `time_us`, `instructions`; empty for error
points), then `status`, `error`, `elapsed_s`, `worker`, `finished_at`, `traceback` and
`config_json` (the fully resolved config). `load_sweep(DIR, stats=True)` returns the long
stats table instead: `point_id`, the parameters, then `run_id, kernel, component, stat, value,
unit` (error points have no rows; a parameter named like a stats column, e.g. `kernel`,
is given by that column). `df.attrs` holds `sweep` (name), `axes` (swept keys),
`params`, `metrics` and `missing` (points of the manifest without a part yet).
Only points listed in `DIR/sweep.json` are read; parts of other sweeps in the folder are not.
Left out: reading straight from remote object stores.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from simulator.points import PART_POINT_COLUMNS, PART_STATS_COLUMNS

_TAIL = ("status", "error", "elapsed_s", "worker", "finished_at", "traceback", "config_json")


def _manifest(directory: Path) -> dict:
    path = directory / "sweep.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"{path}: no sweep manifest (is {directory} a "
                                "`ptxsim sweep --out` folder?)") from None


def _parts(directory: Path, points: list[dict]):
    for point in points:
        path = directory / "parts" / f"{point['point_id']}.parquet"
        if path.exists():
            yield pq.read_table(path).to_pandas()


def load_sweep(directory: str | Path, *, stats: bool = False) -> pd.DataFrame:
    """One row per finished point (or, with `stats=True`, the long stats of all points)."""
    directory = Path(directory)
    manifest = _manifest(directory)
    points = manifest["points"]
    params = list(dict.fromkeys(k for p in points for k in p["params"]))
    rows, long, metrics = [], [], []
    for part in _parts(directory, points):
        head = part.iloc[0]
        values = json.loads(head["params_json"])
        names = [c for c in part.columns
                 if c not in PART_POINT_COLUMNS and c not in PART_STATS_COLUMNS]
        metrics += [m for m in names if m not in metrics]
        rows.append({"point_id": head["point_id"], "index": int(head["index"]),
                     **{k: values.get(k) for k in params},
                     **{m: None if pd.isna(head[m]) else head[m] for m in names},
                     **{c: head[c] for c in _TAIL}})
        if stats:
            found = part.loc[part["stat"].notna(), list(PART_STATS_COLUMNS)]
            found.insert(0, "point_id", head["point_id"])
            for i, k in enumerate(k for k in params if k not in PART_STATS_COLUMNS):
                found.insert(1 + i, k, [values.get(k)] * len(found))
            long.append(found)
    columns = ["point_id", "index", *params, *metrics, *_TAIL]
    if stats:
        frame = (pd.concat(long, ignore_index=True) if long else
                 pd.DataFrame(columns=["point_id", *(k for k in params
                                                     if k not in PART_STATS_COLUMNS),
                                       *PART_STATS_COLUMNS]))
    else:
        frame = pd.DataFrame(rows, columns=columns)
        frame = frame.sort_values("index", kind="stable").reset_index(drop=True)
    frame.attrs.update(sweep=manifest["spec"]["name"], axes=list(manifest["axes"]),
                       params=params, metrics=metrics, missing=len(points) - len(rows))
    return frame
