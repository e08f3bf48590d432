"""Strict JSON for results: no bare NaN or Infinity, every value a JSON type.

`json_safe(obj)` turns NaN and infinities into null, numpy scalars and arrays into Python
numbers and lists, tuples into lists, DataFrames into lists of records and anything else
without a JSON form into its `str()`; `strict_json(obj)` dumps the result with
`allow_nan=False`, so what it writes parses in every JSON reader. A null stands for a value
the simulation has not got (a kernel with no FLOP has no TFLOP/s); the tables it came from
say why in their notes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd


def json_safe(obj: Any) -> Any:
    """`obj` with JSON types only (see the module docstring)."""
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, (int, np.integer)) and not isinstance(obj, np.bool_):
        return int(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, (float, np.floating)):
        value = float(obj)
        return value if math.isfinite(value) else None
    if isinstance(obj, Mapping):
        return {str(k): json_safe(v) for k, v in obj.items()}
    if isinstance(obj, pd.DataFrame):
        return [json_safe(r) for r in obj.to_dict("records")]
    if isinstance(obj, pd.Series):
        return json_safe(obj.to_dict())
    if isinstance(obj, np.ndarray):
        return [json_safe(v) for v in obj.tolist()]
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [json_safe(v) for v in obj]
    if hasattr(obj, "to_dict"):
        return json_safe(obj.to_dict())
    return str(obj)


def strict_json(obj: Any, indent: int | None = 1) -> str:
    """`obj` as strict JSON text (NaN/inf as null, `allow_nan=False`)."""
    return json.dumps(json_safe(obj), indent=indent, allow_nan=False)
