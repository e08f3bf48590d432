"""On-disk op result cache: an op timed once is read back, not simulated again, by every
later layer, sweep point or `ptxsim op` that meets the same op on the same config and code.

Model of a cache entry
----------------------
One entry is one JSON file `<directory>/<sha256 of the key>.json` holding
`{"format": "ptxsim-op-result/1", "key": ..., "value": ...}`. The key is everything that
decides the result, as canonical JSON (keys sorted):

* `entry`: what was timed: `workload-op` (one node op of `simulate_workload`: its timing
  dict, the long stats table of its simulated launches and, with a timeline, their time
  series), `op` (`simulate_op`'s result dict and the stats table of each simulated launch
  with its weight: `ptxsim op` and sweep op points) or `contention-pair` (a compute and a
  collective launch measured side by side, `simulator.runner.contention.PairEffect`);
* the op's parameters: its kind and builder keywords (`workloads.node_ops.NodeOp`), or
  `ptxsim op`'s flags and seed;
* `config`: the fully resolved hardware config (`config.to_dict()`), after what
  `simulate_workload` adds (`sm.comm_count`, `links.nodes`);
* `fidelity` and, for workload ops, `timeline` (whether per-launch time series are kept);
* `code`: `code_version()`, the installed ptxsim version, a SHA-256 of every file under
  the folders whose code decides timing (`isa`, `models`, `simulator/framework`,
  `simulator/runner`, `workloads`: Python, presets, PTX, data; `__pycache__` and dotfiles
  left out), the Python minor version and the versions of numpy, numba, simpy and pandas.
  It is computed once per process, at the first cache made: edit any such file and every
  later process keys its results afresh (old entries stay on disk, unread).

Values: numbers and text as JSON with non-finite floats tagged `{"nonfinite": "nan"}`, as
`ptxsim-op-cache/1` (`workloads.traces.distinct_ops`) writes them; tuples come back as
lists. Tables (stats, time series) as Parquet (zstd), base64 text inside the JSON entry,
with their column dtypes (`table_data`); a table Parquet cannot hold exactly (an object
column of other than text) as JSON columns (`frame_doc`). Floats are written as `repr` or
as Parquet doubles and read back bit for bit, so a result read from the cache equals the
one computed. `ptxsim-op-cache/1` itself does not fit: it keeps a whole cache in one file
rewritten after each op (concurrent workers would overwrite each other's ops) and its JSON
columns are 40 times the size of Parquet for the per-launch time series `ptxsim run` keeps
(a BERT-base layer: 20 MB against 0.45 MB, read in 0.8 s against 0.2 s).

Concurrency and trust
---------------------
An entry is written to a temp file in the same folder (`.<name>.<random>.tmp`) and renamed
over its name (`os.replace`, atomic on one file system), so a reader sees a whole entry or
none; two workers that time the same op write the same bytes and the last rename wins. A
read that finds no file, a partial or foreign file, another format or another key is a
miss: the op is simulated, and a file at the entry's name that the cache did not write
(no `ptxsim-op-result/1` format tag) is left in place and not replaced. Nothing is ever
read with pickle. A key or value with no exact JSON form (a numpy array as a builder
keyword) is not cached: that op is simulated each time.

Where: `default_cache_dir()` is `$XDG_CACHE_HOME/ptxsim/op-cache` (else
`~/.cache/ptxsim/op-cache`) for `ptxsim run` and `ptxsim op`; a sweep keeps its own under
`<out>/op-cache`. The location and whether to use a cache at all are run options (CLI
flags, function arguments), recorded with each result (`cached` per kernel or op).
Left out: eviction and size limits (delete the folder to clear it), fsync (a power cut may
leave a truncated entry, which reads as a miss), locking (a miss in two workers at once is
simulated twice, once each), temp files left by a killed writer (harmless; not removed).
Units: none of its own; the cached results carry theirs.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import io
import json
import math
import os
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from workloads.ops.registry import OpPlan, available_fidelities, simulate_op

RESULT_FORMAT = "ptxsim-op-result/1"
NONFINITE_TAG = "nonfinite"
FRAME_TAG = "frame"
CACHE_SUBDIR = "op-cache"
CODE_FOLDERS = ("isa", "models", "simulator/framework", "simulator/runner", "workloads")
"""The project folders whose files decide timing (hashed into `code_version`)."""
DEPENDENCIES = ("numpy", "numba", "simpy", "pandas")
"""Installed packages whose versions are part of `code_version`."""
ENTRY_MODE = 0o644
"""Entry files are readable by all (a sweep folder shared between users), as `open` would
make them; a temp file starts private (`tempfile.mkstemp`)."""
WORKLOAD_OP, OP, PAIR = "workload-op", "op", "contention-pair"
"""The entry kinds (module docstring)."""


class Uncacheable(TypeError):
    """A key or value has no exact JSON form; the result is computed, not cached."""


# ---- values as JSON -------------------------------------------------------------------------

def encode_number(value: Any) -> Any:
    """`value` as JSON data: numpy scalars as Python numbers, tuples as lists, non-finite
    floats tagged `{"nonfinite": "nan"}`, inside dicts and lists too; anything else as it
    is (`json.dumps` refuses what it cannot write)."""
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return {NONFINITE_TAG: repr(value)}
    if isinstance(value, dict):
        return {k: encode_number(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [encode_number(v) for v in value]
    return value


def decode_number(value: Any) -> Any:
    """The inverse of `encode_number` (lists stay lists)."""
    if isinstance(value, dict):
        if set(value) == {NONFINITE_TAG}:
            return float(value[NONFINITE_TAG])
        return {k: decode_number(v) for k, v in value.items()}
    if isinstance(value, list):
        return [decode_number(v) for v in value]
    return value


def frame_doc(frame: pd.DataFrame | None) -> dict | None:
    """A table as `{"columns", "dtypes", "data"}` (column-wise values; the index is not
    kept: tables are read back with a RangeIndex)."""
    if frame is None:
        return None
    return {"columns": [str(c) for c in frame.columns],
            "dtypes": [str(t) for t in frame.dtypes],
            "data": [[encode_number(v.item() if hasattr(v, "item") else v) for v in frame[c]]
                     for c in frame.columns]}


def frame_from_doc(doc: dict | None) -> pd.DataFrame | None:
    """The table `frame_doc` wrote, with its column dtypes."""
    if doc is None:
        return None
    columns = {c: pd.Series([decode_number(v) for v in values], dtype=object)
               for c, values in zip(doc["columns"], doc["data"], strict=True)}
    frame = pd.DataFrame(columns)
    for column, dtype in zip(doc["columns"], doc["dtypes"], strict=True):
        frame[column] = frame[column].astype(dtype)
    return frame


PARQUET_DTYPES = ("float64", "int64", "bool", "str", "string", "object")
"""Column dtypes a table may have to be kept as Parquet (an object column: text or None)."""


def _parquet_exact(frame: pd.DataFrame) -> bool:
    """Whether Parquet gives `frame` back exactly (with `table_from_data`'s dtype fix)."""
    if not all(isinstance(c, str) for c in frame.columns) or frame.columns.duplicated().any():
        return False
    for column, dtype in frame.dtypes.items():
        if str(dtype) not in PARQUET_DTYPES:
            return False
        if str(dtype) == "object" and not all(v is None or isinstance(v, str)
                                       for v in frame[column]):
            return False
    return True


def table_data(frame: pd.DataFrame) -> dict:
    """A table as `{"parquet": base64 text, "dtypes": [...]}` (zstd), or `{"json":
    frame_doc}` where Parquet would not give it back exactly; the index is not kept."""
    if not _parquet_exact(frame):
        return {"json": frame_doc(frame)}
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), buffer,
                   compression="zstd")
    return {"parquet": base64.b64encode(buffer.getvalue()).decode("ascii"),
            "dtypes": [str(t) for t in frame.dtypes]}


def table_from_data(doc: dict) -> pd.DataFrame:
    """The table `table_data` wrote, with its column dtypes and a RangeIndex."""
    if "json" in doc:
        return frame_from_doc(doc["json"])
    raw = base64.b64decode(doc["parquet"], validate=True)
    frame = pq.read_table(io.BytesIO(raw)).to_pandas()
    for column, dtype in zip(list(frame.columns), doc["dtypes"], strict=True):
        if str(frame[column].dtype) != dtype:
            frame[column] = frame[column].astype(dtype)
    return frame


def _key_data(value: Any) -> Any:
    """A key part as canonical JSON data, or `Uncacheable` (exact types only: a value whose
    JSON form would be lossy, an array or an object, is refused)."""
    if isinstance(value, np.generic):
        value = value.item()
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {NONFINITE_TAG: repr(value)}
    if isinstance(value, list | tuple):
        return [_key_data(v) for v in value]
    if isinstance(value, Mapping) and all(isinstance(k, str) for k in value):
        return {k: _key_data(v) for k, v in value.items()}
    raise Uncacheable(f"op cache key: {type(value).__name__} {value!r:.60} has no exact "
                      "JSON form")


def _value_data(value: Any) -> Any:
    if isinstance(value, pd.DataFrame):
        return {FRAME_TAG: table_data(value)}
    if isinstance(value, dict):
        return {str(k): _value_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_value_data(v) for v in value]
    return encode_number(value)


def _from_value_data(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {FRAME_TAG}:
            return table_from_data(value[FRAME_TAG])
        if set(value) == {NONFINITE_TAG}:
            return float(value[NONFINITE_TAG])
        return {k: _from_value_data(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_from_value_data(v) for v in value]
    return value


# ---- the code version -----------------------------------------------------------------------

def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


@functools.cache
def code_version() -> str:
    """`<ptxsim version>+<16 hex digits>`: the digits hash the files of `CODE_FOLDERS`
    (relative path and bytes, in path order), the Python minor version and the versions of
    `DEPENDENCIES` (module docstring). Computed once per process (about 4 MB read)."""
    root = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for folder in CODE_FOLDERS:
        base = root / folder
        files = sorted(p for p in base.rglob("*") if p.is_file()
                       and "__pycache__" not in p.parts
                       and not any(part.startswith(".") for part in p.relative_to(base).parts))
        for path in files:
            digest.update(str(path.relative_to(root)).encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    versions = {"python": f"{sys.version_info.major}.{sys.version_info.minor}",
                **{name: _version(name) for name in DEPENDENCIES}}
    digest.update(json.dumps(versions, sort_keys=True).encode())
    return f"{_version('ptxsim')}+{digest.hexdigest()[:16]}"


def default_cache_dir(environ: Mapping[str, str] | None = None) -> Path:
    """`$XDG_CACHE_HOME/ptxsim/op-cache`, else `~/.cache/ptxsim/op-cache`; `environ`
    (default `os.environ`) is where the variable is read."""
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ptxsim" / CACHE_SUBDIR


# ---- the cache ------------------------------------------------------------------------------

@dataclass(frozen=True)
class OpResultCache:
    """The entries under `directory` for `code` (default `code_version()`). Constructing
    one reads the project's files once per process and writes nothing; the folder is made
    at the first write. Contract: `load(key)` returns the value saved under an equal key by
    any process of the same code, or None; it never raises for what it finds on disk.
    `save(key, value)` makes the entry whole or not at all, and returns whether it did."""

    directory: Path
    code: str = field(default_factory=code_version)
    counts: dict = field(default_factory=lambda: {"read": 0, "missed": 0, "written": 0},
                         compare=False, repr=False)
    """Entries this object read, missed and wrote (what a result reports)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "directory", Path(self.directory))

    def key(self, entry: str, **parts: Any) -> dict:
        """The canonical key of an `entry` of kind WORKLOAD_OP, OP or PAIR (`Uncacheable`
        when a part has no exact JSON form)."""
        return _key_data({"entry": entry, "code": self.code, **parts})

    def path(self, key: dict) -> Path:
        """Where the entry of `key` lives."""
        text = json.dumps(key, sort_keys=True, separators=(",", ":"), allow_nan=False)
        return self.directory / f"{hashlib.sha256(text.encode()).hexdigest()}.json"

    def load(self, key: dict, check: Callable[[Any], bool] | None = None) -> Any | None:
        """The value saved under `key`, or None (no file, a partial or foreign file,
        another format or key, or a value `check` refuses or raises on)."""
        try:
            doc = json.loads(self.path(key).read_text(encoding="utf-8"))
            if (not isinstance(doc, dict) or doc.get("format") != RESULT_FORMAT
                    or doc.get("key") != key):
                raise ValueError("not this entry")
            value = _from_value_data(doc["value"])
            if check is not None and not check(value):
                raise ValueError("not the value's shape")
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError,
                pa.ArrowException):
            self.counts["missed"] += 1
            return None
        self.counts["read"] += 1
        return value

    def save(self, key: dict, value: Any) -> bool:
        """Write the entry (temp file, then `os.replace`); False when the value has no JSON
        form, the folder cannot be written, or a file the cache did not write holds the
        entry's name (left as it is)."""
        path = self.path(key)
        try:
            text = json.dumps({"format": RESULT_FORMAT, "key": key,
                               "value": _value_data(value)}, allow_nan=False)
        except (TypeError, ValueError):
            return False
        if path.exists() and not _ours(path):
            return False
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            handle, staging = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.",
                                               suffix=".tmp")
            try:
                with os.fdopen(handle, "w", encoding="utf-8") as f:
                    f.write(text)
                os.chmod(staging, ENTRY_MODE)
                os.replace(staging, path)
            except BaseException:
                Path(staging).unlink(missing_ok=True)
                raise
        except OSError:
            return False
        self.counts["written"] += 1
        return True

    def summary(self) -> dict:
        """What a result records of the cache: folder, code version, entries read, missed
        and written by this cache object."""
        return {"dir": str(self.directory), "code_version": self.code,
                **self.counts}


def _ours(path: Path) -> bool:
    """Whether the file at `path` carries the cache's format tag (read, not trusted)."""
    try:
        with open(path, encoding="utf-8") as f:
            head = f.read(64)
    except OSError:
        return False
    return head.startswith(json.dumps({"format": RESULT_FORMAT})[:-1])


def open_cache(directory: str | Path | None) -> OpResultCache | None:
    """An `OpResultCache` at `directory`, or None for None (no cache)."""
    return None if directory is None else OpResultCache(Path(directory))


# ---- cached ops -----------------------------------------------------------------------------

def _op_entry(value: Any) -> bool:
    return (isinstance(value["result"], dict)
            and all(isinstance(t, pd.DataFrame) for _, t in value["stats"]))


def workload_op_entry(value: Any) -> bool:
    """Whether a loaded value has a workload op's shape: timing dict, stats table, time
    series table or None."""
    return (isinstance(value["timed"], dict) and isinstance(value["stats"], pd.DataFrame)
            and (value["series"] is None or isinstance(value["series"], pd.DataFrame)))


def simulate_op_cached(kind: str, params: Mapping[str, Any], plan: OpPlan, config,
                       fidelity: str | None, cache: OpResultCache | None,
                       stats: list | None = None) -> dict:
    """`simulate_op(plan, config, fidelity, stats=...)` of the op built as `build_op(kind,
    config, **params)`, read from `cache` when it holds it (then `stats` receives
    `(weight, None, table)` per launch: the launch object is not kept) and saved there
    when simulated. The result gains `cached` (read from the cache) and `op_cache` (the
    folder, None without one)."""
    fidelity = fidelity or available_fidelities()[0]
    key = None
    if cache is not None:
        try:
            key = cache.key(OP, op=kind, params=dict(params), config=config.to_dict(),
                            fidelity=fidelity)
        except Uncacheable:
            key = None
    found = cache.load(key, _op_entry) if key is not None else None
    if found is not None:
        if stats is not None:
            stats.extend((weight, None, table) for weight, table in found["stats"])
        return {**found["result"], "cached": True, "op_cache": str(cache.directory)}
    runs: list = []
    result = simulate_op(plan, config, fidelity, stats=runs)
    if stats is not None:
        stats.extend(runs)
    if key is not None:
        cache.save(key, {"result": result,
                         "stats": [[weight, table] for weight, _, table in runs]})
    return {**result, "cached": False,
            "op_cache": None if cache is None else str(cache.directory)}

