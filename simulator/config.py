"""Config loading: TOML tables -> validated frozen dataclasses, dotted overrides, TOML out.

What it models
--------------
Hardware configs are trees of frozen dataclasses (declared in `models/*_spec.py`). Each field
is declared with `spec_field(help, source=..., minimum=..., power_of_two=...)`, so its help
string, provenance and range travel with it. This module is generic over such trees:

* `build_spec(cls, data)` checks a nested mapping against the tree: unknown keys, missing keys,
  wrong types and out-of-range values raise `ConfigError` naming the dotted key, the bad value
  and what would be accepted. After a block is built, its `problems()` method (if any) reports
  cross-field conflicts the same way.
* `apply_overrides(cls, data, {"l2.size_bytes": ...})` sets dotted keys, refusing unknown ones.
* `resolve_bases(name, read)` follows `base = "other"` keys (deep merge, child wins) and
  refuses cycles.
* `SpecMixin` gives every block `to_dict()`, `to_toml()` and `with_overrides(...)`; the TOML
  written is the fully resolved config and reads back to an equal object.

Types accepted in a spec: bool, int, float (an int is accepted and widened), str,
`Literal[...]`, `tuple[T, ...]` of those, and nested spec dataclasses.
Left out: environment-variable overrides, unit conversion (field names carry their unit).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import tomllib
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal

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
               power_of_two: bool = False) -> Any:
    """A dataclass field with its help string, source and range checks in `metadata`."""
    metadata = {"help": help, "source": source, "minimum": minimum, "above": above,
                "power_of_two": power_of_two}
    return dataclasses.field(default=default, default_factory=default_factory,
                             metadata=metadata)


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _type_name(tp: Any) -> str:
    if typing.get_origin(tp) is Literal:
        return " | ".join(repr(v) for v in typing.get_args(tp))
    if typing.get_origin(tp) is tuple:
        return f"array of {_type_name(typing.get_args(tp)[0])}"
    if dataclasses.is_dataclass(tp):
        return f"table [{tp.__name__}]"
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
    return float(value) if tp is float else value


def _check_range(value: Any, meta: Mapping[str, Any], key: str) -> None:
    values = value if isinstance(value, tuple) else (value,)
    for v in values:
        if not isinstance(v, int | float) or isinstance(v, bool):
            continue
        if meta.get("minimum") is not None and v < meta["minimum"]:
            raise ConfigError(key, value, f">= {meta['minimum']}", "too small")
        if meta.get("above") is not None and not v > meta["above"]:
            raise ConfigError(key, value, f"> {meta['above']}", "too small")
        if meta.get("power_of_two") and not (v >= 1 and int(v) == v and int(v) & (int(v) - 1) == 0):
            raise ConfigError(key, value, "a power of two (1, 2, 4, ...)", "not a power of two")


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
        _check_range(value, f.metadata, key)
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
