"""Config loading: TOML tables -> validated frozen dataclasses, dotted overrides, TOML out.

What it models
--------------
Hardware configs are trees of frozen dataclasses (declared in `models/*_spec.py`). Each field
is declared with `spec_field(help, source=..., minimum=..., maximum=..., power_of_two=...)`,
so its help string, provenance and domain travel with it. This module is generic over such trees:

* `build_spec(cls, data)` checks a nested mapping against the tree: unknown keys, missing keys,
  wrong types and values outside their domain raise `ConfigError` naming the dotted key, the
  bad value and what would be accepted. After a block is built, its `problems()` method (if
  any) reports cross-field conflicts the same way.
* `apply_overrides(cls, data, {"l2.size_bytes": ...})` sets dotted keys, refusing unknown ones.
* `resolve_bases(name, read)` follows `base = "other"` keys (deep merge, child wins) and
  refuses cycles.
* `SpecMixin` gives every block `to_dict()`, `to_toml()` and `with_overrides(...)`; the TOML
  written is the fully resolved config and reads back to an equal object.

Domains: every numeric field has one (`field_domain`): a finite number (NaN and infinities
are refused everywhere), at least its field's `minimum` or above its `above` (a power of two
is at least 1), and at most its field's `maximum` or else the ceiling of its unit, read
from the name's suffix (`UNIT_MAXIMUMS`: `_ghz` 10, `_us` 1e6, ...); an int field without a
unit suffix is a count (at most `COUNT_MAXIMUM`). Lower bounds stay per field because 0 means
something for some keys (`sm.comm_count = 0`: no SM reserved; `chip.power_cap_clock_ghz = 0`:
the power model off; a tensor rate of 0: no such precision on the part) and nothing for
others (`chip.clock_ghz`).

Strict JSON: `strict_json(obj)` writes results as standard JSON (`allow_nan=False`): a NaN or
infinity becomes null, and the table holding it gets a `null_reasons` entry saying which
value it was (`json_safe` does the conversion alone).

Types accepted in a spec: bool, int, float (an int is accepted and widened), str,
`Literal[...]`, `tuple[T, ...]` of those, and nested spec dataclasses.
Left out: environment-variable overrides, unit conversion (field names carry their unit).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import os
import tomllib
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal

import numpy as np

from isa.errors import InputError

Problem = tuple[str, Any, str, str]
"""A cross-field problem: (relative dotted key, value, what is accepted, what is wrong)."""


class ConfigError(InputError):
    """A config key is unknown, missing, of the wrong type or impossible."""

    def __init__(self, key: str, value: Any, accepted: str, problem: str = "invalid value",
                 *, file: str = "") -> None:
        self.key = key
        self.value = value
        self.accepted = accepted
        self.problem = problem
        self.file = file
        where = f"{file}: " if file else ""
        super().__init__(f"{where}{key} = {value!r}: {problem} (accepted: {accepted})")


def spec_field(help: str, *, default: Any = dataclasses.MISSING,
               default_factory: Any = dataclasses.MISSING, source: str = "",
               minimum: float | None = None, above: float | None = None,
               maximum: float | None = None, power_of_two: bool = False) -> Any:
    """A dataclass field with its help string, source and domain in `metadata`
    (`maximum` None: the ceiling of the field's unit, `field_domain`)."""
    metadata = {"help": help, "source": source, "minimum": minimum, "above": above,
                "maximum": maximum, "power_of_two": power_of_two}
    return dataclasses.field(default=default, default_factory=default_factory,
                             metadata=metadata)


UNIT_MAXIMUMS: tuple[tuple[str, float], ...] = (
    ("_ghz", 10.0),                       # clocks
    ("_gbps", 1e6),                       # bandwidths: 1 PB/s
    ("_ns", 1e9),                         # durations: 1 s
    ("_us", 1e6),                         # durations: 1 s
    ("_cycles", 1e8),                     # latencies and costs: ~50 ms at 2 GHz
    ("_per_clk_per_sm", float(1 << 20)),  # unit throughputs (results, FMA, FLOP, bytes)
    ("_per_clk", float(1 << 20)),         # bytes per clock of a port or a cache
    ("_operand_bytes", 64.0),             # bytes of one operand element
    ("_bytes", float(1 << 50)),           # sizes and capacities: 1 PiB
    ("_per_sm", float(1 << 24)),          # per-SM resources (registers, warps, threads)
)
"""The ceiling of a numeric field by the unit suffix of its name (first match wins), where
the field declares no `maximum`: far above any part, low enough to stop typos and infinities
before they reach the model."""

COUNT_MAXIMUM = 1 << 16
"""The ceiling of an int field without a unit suffix (SMs, slices, ways, banks, nodes...)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Domain:
    """The values a numeric field accepts: finite, `low` <= v (< v when `open_low`),
    v <= `high`, an integer where `integer`, a power of two where `power_of_two`."""

    low: float | None
    open_low: bool
    high: float | None
    integer: bool
    power_of_two: bool = False

    def describe(self) -> str:
        """What is accepted, as a ConfigError prints it (e.g. "a finite number > 0 and
        <= 10")."""
        if self.power_of_two:
            parts = ["a power of two (1, 2, 4, ...)"]
        else:
            parts = ["an integer" if self.integer else "a finite number"]
            if self.low is not None:
                parts.append(f"{'>' if self.open_low else '>='} {_bound(self.low)}")
        if self.high is not None:
            parts.append(f"{'and ' if len(parts) > 1 else ''}<= {_bound(self.high)}")
        return " ".join(parts)

    def problem(self, value: float) -> str:
        """What is wrong with `value`, or "" when it lies in the domain."""
        if isinstance(value, float) and not math.isfinite(value):
            return "not a finite number"
        if self.low is not None and (value <= self.low if self.open_low else value < self.low):
            return "too small"
        if self.high is not None and value > self.high:
            return "too large"
        if self.power_of_two and not (value >= 1 and int(value) == value
                                      and int(value) & (int(value) - 1) == 0):
            return "not a power of two"
        return ""


def _bound(value: float) -> str:
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e16 else f"{value:g}"


def field_domain(name: str, tp: Any, meta: Mapping[str, Any]) -> Domain | None:
    """The domain of field `name` of type `tp` (None for a non-numeric field): its own
    bounds, else the ceiling of its unit suffix or, for an int, `COUNT_MAXIMUM`."""
    if typing.get_origin(tp) is tuple:
        tp = typing.get_args(tp)[0]
    if tp not in (int, float):
        return None
    low, open_low = meta.get("minimum"), False
    if meta.get("above") is not None:
        low, open_low = meta["above"], True
    if low is None and meta.get("power_of_two"):
        low = 1
    high = meta.get("maximum")
    if high is None:
        high = next((ceiling for suffix, ceiling in UNIT_MAXIMUMS if name.endswith(suffix)),
                    COUNT_MAXIMUM if tp is int else None)
    return Domain(low, open_low, high, tp is int, bool(meta.get("power_of_two")))


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _type_name(tp: Any) -> str:
    if typing.get_origin(tp) is Literal:
        return " | ".join(repr(v) for v in typing.get_args(tp))
    if typing.get_origin(tp) is tuple:
        return f"array of {_type_name(typing.get_args(tp)[0])}"
    if dataclasses.is_dataclass(tp):
        return f"table [{tp.__name__}]"
    if tp is bool:
        return "true or false"
    return getattr(tp, "__name__", str(tp))


def _convert(tp: Any, value: Any, key: str) -> Any:
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        return build_spec(tp, value, key)
    if origin is Literal:
        if value not in typing.get_args(tp) or isinstance(value, bool):
            raise ConfigError(key, value, _type_name(tp), "not one of the choices")
        return value
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ConfigError(key, value, _type_name(tp), "wrong type")
        return tuple(_convert(typing.get_args(tp)[0], v, f"{key}[{i}]")
                     for i, v in enumerate(value))
    if origin in (typing.Union, types.UnionType):
        raise TypeError(f"{key}: union types are not supported in specs")
    ok = {bool: isinstance(value, bool),
          int: isinstance(value, int) and not isinstance(value, bool),
          float: isinstance(value, int | float) and not isinstance(value, bool),
          str: isinstance(value, str)}
    if not ok.get(tp, False):
        raise ConfigError(key, value, _type_name(tp), "wrong type")
    if tp is float:
        try:
            return float(value)
        except OverflowError:         # an int beyond the floats: refused as infinite
            return math.inf if value > 0 else -math.inf
    return value


def _check_domain(value: Any, domain: Domain | None, key: str) -> None:
    if domain is None:
        return
    for v in value if isinstance(value, tuple) else (value,):
        problem = domain.problem(v)
        if problem:
            raise ConfigError(key, value, domain.describe(), problem)


def build_spec(cls: type, data: Any, prefix: str = "") -> Any:
    """Build the frozen spec `cls` from a nested mapping, validating every key on the way."""
    if not isinstance(data, Mapping):
        raise ConfigError(prefix or "<root>", data, f"table [{cls.__name__}]", "wrong type")
    hints = typing.get_type_hints(cls)
    fields = [f for f in dataclasses.fields(cls) if f.init]
    names = [f.name for f in fields]
    for key in data:
        if key not in names:
            raise ConfigError(_join(prefix, key), data[key], f"one of {names}", "unknown key")
    kwargs = {}
    for f in fields:
        key = _join(prefix, f.name)
        if f.name not in data:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise ConfigError(key, None, _type_name(hints[f.name]), "missing key")
            continue
        value = _convert(hints[f.name], data[f.name], key)
        _check_domain(value, field_domain(f.name, hints[f.name], f.metadata), key)
        kwargs[f.name] = value
    spec = cls(**kwargs)
    for name, value, accepted, problem in getattr(spec, "problems", lambda: ())():
        raise ConfigError(_join(prefix, name), value, accepted, problem)
    return spec


def _schema_child(cls: type, name: str, prefix: str, value: Any) -> Any:
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    if name not in fields:
        raise ConfigError(_join(prefix, name), value, f"one of {list(fields)}", "unknown key")
    return typing.get_type_hints(cls)[name]


def apply_overrides(cls: type, data: Mapping[str, Any],
                    overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """A copy of `data` with each dotted key of `overrides` set; unknown keys are refused."""
    result = copy.deepcopy(dict(data))
    for dotted, value in (overrides or {}).items():
        parts = str(dotted).split(".")
        node, tp, prefix = result, cls, ""
        for i, part in enumerate(parts):
            if not dataclasses.is_dataclass(tp):
                raise ConfigError(str(dotted), value, f"{prefix} is a value, not a table",
                                  "unknown key")
            tp = _schema_child(tp, part, prefix, value)
            prefix = _join(prefix, part)
            if i == len(parts) - 1:
                node[part] = _plain(value)
            else:
                child = node.get(part)
                if not isinstance(child, dict):
                    child = node[part] = {}
                node = child
    return result


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return to_dict(value)
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def deep_merge(base: Mapping[str, Any], child: Mapping[str, Any]) -> dict[str, Any]:
    """`child` laid over `base`: tables merge key by key, other values are replaced."""
    merged = dict(base)
    for key, value in child.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def resolve_bases(name: str, read: Callable[[str], dict[str, Any]],
                  chain: tuple[str, ...] = ()) -> dict[str, Any]:
    """The table `read(name)` with its `base = "other"` chain merged in (child wins)."""
    data = dict(read(name))
    base = data.pop("base", None)
    if base is None:
        return data
    if not isinstance(base, str):
        raise ConfigError("base", base, "the name of another preset", "wrong type", file=name)
    if base in chain or base == name:
        cycle = " -> ".join((*chain, name, base))
        raise ConfigError("base", base, "a preset that does not inherit back", f"cycle {cycle}",
                          file=name)
    return deep_merge(resolve_bases(base, read, (*chain, name)), data)


def parse_overrides(items: list[str] | None) -> dict:
    """`["sm.count=112", ...]` -> `{"sm.count": 112}` (values parsed as TOML scalars; a value
    that is no TOML scalar stays a string)."""
    overrides = {}
    for item in items or ():
        key, sep, text = item.partition("=")
        if not sep:
            raise ConfigError(item, item, "KEY=VALUE", "not a KEY=VALUE pair")
        try:
            overrides[key.strip()] = tomllib.loads(f"v = {text.strip()}")["v"]
        except tomllib.TOMLDecodeError:
            overrides[key.strip()] = text.strip()
    return overrides


def read_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The tables of a TOML file; a syntax error becomes a ConfigError naming file and line."""
    try:
        with open(path, "rb") as handle:
            return tomllib.load(handle)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("<file>", os.fspath(path), "valid TOML", str(exc),
                          file=str(path)) from exc


def to_dict(spec: Any) -> dict[str, Any]:
    """The spec as nested plain data (tables as dicts, arrays as lists)."""
    return {f.name: _plain(getattr(spec, f.name)) for f in dataclasses.fields(spec) if f.init}


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} as TOML")


def dict_to_toml(data: Mapping[str, Any], prefix: str = "") -> str:
    """TOML text for nested plain data: scalars of a table first, then its sub-tables."""
    lines = [f"{k} = {_toml_value(v)}" for k, v in data.items() if not isinstance(v, Mapping)]
    blocks = ["\n".join(lines)] if lines else []
    for key, value in data.items():
        if isinstance(value, Mapping):
            name = _join(prefix, key)
            blocks.append(f"[{name}]\n" + dict_to_toml(value, name))
    return "\n\n".join(b.strip("\n") for b in blocks if b.strip()) + "\n"


def field_docs(cls: type, prefix: str = "") -> Iterator[tuple[str, str, str, str]]:
    """(dotted key, type, help, source) for every leaf field of the spec tree `cls`."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        key, tp = _join(prefix, f.name), hints[f.name]
        if dataclasses.is_dataclass(tp):
            yield from field_docs(tp, key)
        else:
            yield key, _type_name(tp), f.metadata.get("help", ""), f.metadata.get("source", "")


class SpecMixin:
    """`to_dict`, `to_toml` and `with_overrides` for frozen spec dataclasses."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        """The fully resolved values as nested plain data."""
        return to_dict(self)

    def to_toml(self) -> str:
        """The fully resolved values as TOML text that `build_spec` reads back unchanged."""
        return dict_to_toml(self.to_dict())

    def with_overrides(self, overrides: Mapping[str, Any]) -> Any:
        """A new validated spec with dotted-key `overrides` applied."""
        return build_spec(type(self), apply_overrides(type(self), self.to_dict(), overrides))


NULL_REASONS_KEY = "null_reasons"
"""The entry `json_safe` adds to a table whose values it turned to null: value key -> why."""


def json_safe(obj: Any, reasons: Mapping[str, str] | None = None) -> Any:
    """`obj` as data standard JSON can hold: a NaN or infinity becomes None and the table
    (dict) holding it, directly or in a list, gets a `null_reasons` entry naming it
    (`"tflops": "not a number (nan)"`, or `reasons[key]` where the caller knows why; a
    `null_reasons` the table already holds wins); numpy scalars and arrays become Python
    numbers and lists, tuples lists, a table (anything with `to_dict`, a DataFrame as its
    records) its data, anything else its `str()`."""
    return _json_safe(obj, "", {}, reasons or {})


def _json_safe(obj: Any, path: str, notes: dict[str, str], reasons: Mapping[str, str]) -> Any:
    if isinstance(obj, np.generic | np.ndarray):
        obj = obj.tolist()
    if isinstance(obj, float) and not math.isfinite(obj):
        key = path.split("[", 1)[0]
        notes[path] = reasons.get(path) or reasons.get(key) or (
            f"not a number ({obj!r})" if math.isnan(obj) else f"not finite ({obj!r})")
        return None
    if isinstance(obj, Mapping):
        own: dict[str, str] = {}
        out = {k: _json_safe(v, str(k), own, reasons) for k, v in obj.items()
               if k != NULL_REASONS_KEY}
        given = obj.get(NULL_REASONS_KEY)
        if isinstance(given, Mapping):
            own = {**own, **{str(k): str(v) for k, v in given.items()}}
        if own:
            out[NULL_REASONS_KEY] = own
        return out
    if isinstance(obj, list | tuple):
        return [_json_safe(v, f"{path}[{i}]", notes, reasons) for i, v in enumerate(obj)]
    if obj is None or isinstance(obj, str | int | float):
        return obj
    if hasattr(obj, "to_dict"):   # a table (DataFrame: its records), a Series or a config
        try:
            data = obj.to_dict("records")
        except (TypeError, ValueError):
            data = obj.to_dict()
        return _json_safe(data, path, notes, reasons)
    return str(obj)


def strict_json(obj: Any, *, reasons: Mapping[str, str] | None = None, **dumps: Any) -> str:
    """`obj` as standard JSON text (`json.dumps(json_safe(obj, reasons), allow_nan=False)`,
    other keywords passed on): never a bare NaN or Infinity; missing values are null with
    their reason under `null_reasons`."""
    return json.dumps(json_safe(obj, reasons), allow_nan=False, **dumps)
