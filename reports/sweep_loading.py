"""Read a sweep folder (`ptxsim sweep --out DIR`) into pandas tables.

`load_sweep(DIR)` returns one row per point that has a part, in sweep order: `point_id`,
`index`, the point's parameters (one column per dotted key: `preset`, `kernel`, `size.n`,
`sm.count`, ...), its metrics (e.g. `cycles`, `time_us`, `instructions`; empty unless the
point is ok), then `status` ("ok", "error", "failed" when its worker process died,
"timeout"), `error` (the exception or the reason), `elapsed_s`, `worker`, `finished_at`,
`traceback` and `config_json` (the fully resolved config). `index` is the point's index in
the manifest (the sweep as last run), not the one stored in a part run by an earlier
version of an edited sweep. `load_sweep(DIR, stats=True)` returns the long
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
    heads, long = [], []
    for part in _parts(directory, points):
        heads.append(part.iloc[[0]].drop(columns=list(PART_STATS_COLUMNS)))
        if stats:
            long.append(part.loc[part["stat"].notna(), ["point_id", *PART_STATS_COLUMNS]])
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
        found = (pd.concat(long, ignore_index=True) if long
                 else pd.DataFrame(columns=["point_id", *PART_STATS_COLUMNS]))
        frame = found.merge(frame[["point_id", *keys]], on="point_id", how="left")
        frame = frame[["point_id", *keys, *PART_STATS_COLUMNS]]
    frame.attrs.update(sweep=manifest["spec"]["name"], axes=list(manifest["axes"]),
                       params=params, metrics=metrics, missing=len(points) - len(heads))
    return frame
