"""Scores shared by the accuracy scripts: signed error per row and MAPE / Pearson r per group.

`with_errors(rows, simulated_us)` adds `simulated_us` and `error_pct` = 100 (simulated -
measured) / measured; `group_metrics(df, by, overall)` gives, per value of column `by` (and
over all rows when `overall`), the row count, MAPE (%) and Pearson r of simulated vs
measured (NaN for a single row); `write_baseline` stores a scored table as the JSON
baseline the accuracy tests read. Units: microseconds, percent.
"""

from __future__ import annotations

import datetime
import json
import math

import numpy as np
import pandas as pd


def with_errors(rows: pd.DataFrame, simulated_us: list[float]) -> pd.DataFrame:
    """A copy of `rows` with `simulated_us` and the signed `error_pct` against `measured_us`."""
    out = rows.copy()
    out["simulated_us"] = simulated_us
    out["error_pct"] = 100.0 * (out.simulated_us - out.measured_us) / out.measured_us
    return out


def group_metrics(df: pd.DataFrame, by: str, overall: bool = False) -> dict:
    """{group: {"rows", "mape_pct", "pearson_r"}} per value of `by` (plus "all")."""
    groups = list(df.groupby(by)) + ([("all", df)] if overall else [])
    result = {}
    for name, g in groups:
        r = float(np.corrcoef(g.simulated_us, g.measured_us)[0, 1]) if len(g) > 1 \
            else math.nan
        result[name] = {"rows": len(g), "mape_pct": float(g.error_pct.abs().mean()),
                        "pearson_r": r}
    return result


SCORE_COLUMNS = ("measured_us", "simulated_us", "error_pct")


def write_baseline(path, df: pd.DataFrame, keys: dict, *, preset: str, fidelity: str,
                   metrics: dict, **fields) -> None:
    """Write `path`: today's date, `preset`, `fidelity`, `fields`, `metrics` and one row per
    row of `df` (its `keys` {name in the file: column of df}, then `SCORE_COLUMNS`)."""
    rows = [{**{name: _plain(rec[col]) for name, col in keys.items()},
             **{c: float(rec[c]) for c in SCORE_COLUMNS}} for rec in df.to_dict("records")]
    path.write_text(json.dumps({
        "date": datetime.date.today().isoformat(), "preset": preset, "fidelity": fidelity,
        **fields, "metrics": metrics, "rows": rows}, indent=1) + "\n")


def _plain(value):
    """A numpy scalar as the Python value (JSON has no int64)."""
    return value.item() if isinstance(value, np.generic) else value
