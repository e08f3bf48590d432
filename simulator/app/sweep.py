"""Sweep files: load and validate a TOML sweep, expand its axes into points with stable ids.

The format (`SWEEP_FORMAT`, shown by `ptxsim sweep --help`; one example file per kind in
`workloads/sweeps/`)::

    [sweep]                     # optional: name (default: the file stem), description
    [base]
    kind = "kernel"             # kernel, op, layer or step: simulator.app.points.POINT_RUNNERS
    preset = "h800_sxm"         # models.list_presets()
    overrides = { "l2.size_bytes" = 52428800 }   # optional fixed config overrides
    kernel = "saxpy"            # the kind's parameters: kernel, seed, size table here
    size = { n = 4096, block = 128 }
    seed = 0
    [[axis]]                    # grid, shorthand: one dotted key = list of values
    "sm.count" = [66, 132]
    [[axis]]                    # grid, explicit form
    key = "size.n"
    values = [1024, 4096]
    [[axis]]                    # seeded random draws (sorted; equal integer draws merge)
    key = "l2.size_bytes"
    random = { low = 1e6, high = 1e8, count = 4, seed = 7, log = true, integer = true }
    zip = true                  # axes with zip = true (or one group name) are paired

Axis keys: `preset`; a parameter of the kind (`PointRunner.owns`: one of its keys, as in
[base], or an entry of one of its tables, dotted: `size.n`, `params.m`,
`deployment.batch.micro_batches`); any other key is a dotted preset key (a config override:
`sm.count`, `l2.size_bytes`, `hbm.*`, `units.*`, `fidelity.*`, `kernels.*`), checked against
the resolved config, so every key a preset has can be swept. Points are the cartesian
product of the axes (a zip group is one axis where its first member stands; the last axis
varies fastest). All is checked before anything runs, every point's target (the kind's
`check`, then its `inputs` against the point's resolved config: an op is built) and config
(`models.load_preset`); a `SweepError` names file, line (a cheap text scan: the key's line,
else its table header), TOML key path and what is accepted. A point id hashes kind, preset,
target, overrides, resolved config and the runner's input fingerprint, so resume is exact.
Random axes are drawn only after their `count` is checked against the point cap. Sweep files
are UTF-8 (a byte-order mark is allowed); other bytes or malformed TOML are a `SweepError`
with file and line.
Left out: conditional axes, axes over whole tables, more than 1,000,000 points.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
import re
import tomllib
from pathlib import Path
from typing import Any

import numpy as np

import models
from isa.errors import InputError
from simulator.app.points import Point, TargetProblem, digest, make_point_id, point_runner
from simulator.framework.config import ConfigError

MAX_POINTS = 1_000_000
TOP_KEYS = ("sweep", "base", "axis")
SWEEP_KEYS = ("name", "description")
AXIS_KEYS = ("key", "values", "random", "zip")
RANDOM_KEYS = ("low", "high", "count", "seed", "log", "integer")
_HEADER = re.compile(r"^\s*\[(\[)?\s*([^\]]+?)\s*\]")

SWEEP_FORMAT = """\
A sweep file (TOML) has a [base] table (what every point runs), [[axis]] tables (what
varies) and an optional [sweep] table (name, description). Points are the grid of all axes.

[base]
  kind = "op"                 kernel | op | layer | step
  preset = "h100_sxm"         a hardware preset (ptxsim models)
  overrides = { "l2.size_bytes" = 52428800 }   fixed preset keys (optional)
  ...                         the kind's parameters:
  kernel  kernel (workloads/kernels/catalog.py), seed, size = { its builder's sizes }
  op      op (a ptxsim op kind), params = { its flags without dashes, `-` as `_`: m, n,
          k, dtype, kv_heads, causal = true, ... }, seed, fidelity (sampled | full)
  layer   ptxsim run's flags: workload, phase, tokens, batch, seqlen, kv_len, ep, tp,
          layer_index, dtype (the GEMM dtype), fidelity; or deployment = NAME|FILE.toml
          with its keys as "deployment.<table>.<key>" (e.g. "deployment.batch.micro_batches")
          and layer_index, fidelity; a deployment's comm_sms sets sm.comm_count unless swept;
          with either, chunk_bytes (the collectives' largest message, a multiple of 512)
  step    a training step: workload, tokens, batch, seqlen, ep, tp, layer_index, dtype,
          fidelity, schedule (sequential: forward + backward; dualpipe: micro-batch 1's
          forward beside micro-batch 0's backward), block (layer | moe: the MoE block only);
          or a train deployment as for layer

[[axis]]
  "sm.count" = [66, 132]      one key = a list of values
  key = "params.m"            or key and values,
  values = [1024, 4096]
  key = "l2.size_bytes"       or key and seeded random draws (the same every run):
  random = { low = 1e6, high = 1e8, count = 4, seed = 7, log = true, integer = true }
  zip = true                  axes with zip = true (or the same group name) pair up

An axis key is "preset", a parameter of the kind (as in [base]; a table's entries dotted:
params.m, size.n, deployment.batch.micro_batches), or else a preset key: sm.count,
sm.comm_count, l2.size_bytes, hbm.*, units.*, fidelity.*, kernels.* (every key of the
resolved config; `fidelity` alone is the layer's parameter, fidelity.chip_slicing the
config's). Keys and values are checked before any point runs.

Examples (workloads/sweeps/ has these and more):

  # op: a GEMM on half and all of an H100's SMs
  [base]
  kind = "op"
  preset = "h100_sxm"
  op = "gemm"
  params = { m = 4096, n = 4096, k = 4096, dtype = "bf16" }
  [[axis]]
  "sm.count" = [66, 132]

  # layer: a BERT-base layer with twice the L2
  [base]
  kind = "layer"
  preset = "h800_sxm"
  workload = "bert-base"
  phase = "prefill"
  batch = 1
  seqlen = 128
  [[axis]]
  "l2.size_bytes" = [26214400, 52428800]

  # step: a BERT-base TP2 training step, sequential or as a DualPipe pair
  [base]
  kind = "step"
  preset = "h800_sxm"
  workload = "bert-base"
  seqlen = 128
  tp = 2
  overrides = { "sm.comm_count" = 16 }
  [[axis]]
  schedule = ["sequential", "dualpipe"]

  # kernel: saxpy with SMs reserved for communication
  [base]
  kind = "kernel"
  preset = "h800_sxm"
  kernel = "saxpy"
  size = { n = 4096, block = 128 }
  [[axis]]
  "sm.comm_count" = [0, 20]

Each point records its metrics (time_us, kernel_time_us, per-category times, comm_hidden_us,
HBM/L2 bytes, tflops, sm_clock_ghz, bound, fidelity_method, ...) and its per-kernel table;
read them with reports.load_sweep(DIR) and reports.load_sweep_kernels(DIR)."""
"""The sweep file format as `ptxsim sweep --help` shows it (docs/sweeps.md has more)."""


class SweepError(InputError):
    """A sweep file is malformed; the message names file, line, TOML key path and the fix."""

    def __init__(self, file: str, line: int, path: str, message: str) -> None:
        self.file, self.line, self.path = file, line, path
        where = f"{file}:{line}" if line else file
        super().__init__(f"{where}: {path}: {message}" if path else f"{where}: {message}")


@dataclasses.dataclass(frozen=True, slots=True)
class Axis:
    """One axis: a dotted key and its values; `group` names its zip group ("" = none)."""

    index: int
    key: str
    values: tuple
    group: str = ""
    source: str = "grid"
    entry: str = "values"        # the TOML key under [[axis]] that holds the values


@dataclasses.dataclass(frozen=True, slots=True)
class SweepSpec:
    """A validated sweep file; `target` and `overrides` are flat dotted-key mappings."""

    file: str
    text: str
    name: str
    description: str
    kind: str
    preset: str
    target: dict
    overrides: dict
    axes: tuple[Axis, ...]

    def to_dict(self) -> dict[str, Any]:
        """The normalized spec without its text (random axes as their drawn values)."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "text"}


def _path_text(path: tuple) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


class Locator:
    """Finds the line of a TOML key path by scanning the text (0 when not found)."""

    def __init__(self, file: str, text: str) -> None:
        self.file, self.lines = file, text.splitlines()
        self.sections: dict[str, tuple[int, int]] = {}
        counts: dict[str, int] = {}
        name, start = "", 0
        for i, line in enumerate(self.lines):
            match = _HEADER.match(line)
            if not match:
                continue
            self.sections.setdefault(name, (start, i))
            name = match[2].replace(" ", "").replace('"', "")
            if match[1]:
                counts[name] = counts.get(name, -1) + 1
                name = f"{name}#{counts[name]}"
            elif (head := name.split(".")[0]) in counts:
                name = f"{head}#{counts[head]}{name[len(head):]}"
            start = i
        self.sections.setdefault(name, (start, len(self.lines)))

    def line(self, path: tuple) -> int:
        for k in range(len(path), -1, -1):
            name = "".join(f"#{p}" if isinstance(p, int) else f".{p}" for p in path[:k])[1:]
            if name not in self.sections:
                continue
            start, end = self.sections[name]
            for seg in reversed([p for p in path[k:] if isinstance(p, str)]):
                pattern = re.compile(rf"(^|[\s{{,.])[\"']?{re.escape(seg)}[\"']?\s*=")
                for i in range(start, end):
                    if pattern.search(self.lines[i]):
                        return i + 1
            return start + 1 if name else 0
        return 0

    def error(self, path: tuple, message: str) -> SweepError:
        return SweepError(self.file, self.line(path), _path_text(path), message)

    def bad(self, path: tuple, value: Any, problem: str, accepted: str) -> SweepError:
        shown = "(missing)" if value is None else repr(value)
        return self.error(path, f"{shown}: {problem} (accepted: {accepted})")


def flatten_table(table: dict, prefix: str = "") -> dict[str, Any]:
    """A nested TOML table as {dotted key: value}."""
    out: dict[str, Any] = {}
    for key, value in table.items():
        dotted = f"{prefix}.{key}" if prefix else str(key)
        out.update(flatten_table(value, dotted) if isinstance(value, dict) else {dotted: value})
    return out


def _check_known(where: Locator, table: dict, allowed: tuple, path: tuple) -> None:
    for key in table:
        if key not in allowed:
            raise where.bad((*path, key), table[key], "unknown key", "one of " + ", ".join(allowed))


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _is_scalar(v: Any) -> bool:
    return isinstance(v, str | bool) or _is_number(v)


def read_toml(text: str, file: str, error: type[SweepError] = SweepError) -> dict:
    """The TOML document `text` of `file`; `error` (file, line, "", message) when it is not
    TOML (the line of the parser's message; the last line for an unexpected end)."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r"at line (\d+)", str(exc))
        line = int(found[1]) if found else 0
        if "end of document" in str(exc):
            line = len(text.splitlines())
        raise error(file, line, "", f"not valid TOML: {exc}") from None
    except RecursionError:
        raise error(file, 0, "", "not valid TOML: arrays or tables nested too deeply "
                    "for the parser (the format needs two levels)") from None


def read_toml_text(path: str | Path, error: type[SweepError] = SweepError) -> str:
    """The text of a UTF-8 TOML file (an optional byte-order mark dropped); `error` naming the
    file (and the line and column of a byte that is not UTF-8) when it cannot be read."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise error(str(path), 0, "", f"cannot read: {exc.strerror}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        before = data[:exc.start]
        line, column = before.count(b"\n") + 1, exc.start - (before.rfind(b"\n") + 1) + 1
        raise error(str(path), line, "", f"column {column}: byte 0x{data[exc.start]:02x} "
                    "is not UTF-8 text (TOML files are UTF-8)") from None


def parse_sweep(text: str, file: str = "<sweep>") -> SweepSpec:
    """Validate the text of a sweep file (not its points: see `expand_points`)."""
    where = Locator(file, text)
    data = read_toml(text, file)
    _check_known(where, data, TOP_KEYS, ())
    head = data.get("sweep", {})
    if not isinstance(head, dict):
        raise where.bad(("sweep",), head, "wrong type", "a table [sweep]")
    _check_known(where, head, SWEEP_KEYS, ("sweep",))
    for key in SWEEP_KEYS:
        if not isinstance(head.get(key, ""), str):
            raise where.bad(("sweep", key), head[key], "wrong type", "text")
    kind, preset, target, overrides = parse_base(where, data.get("base"))
    axes_data = data.get("axis", [])
    if not isinstance(axes_data, list):
        raise where.bad(("axis",), axes_data, "wrong type", "[[axis]] tables")
    axes = tuple(_parse_axis(where, i, table) for i, table in enumerate(axes_data))
    _check_axes(where, axes, point_runner(kind).accepted())
    return SweepSpec(file, text, head.get("name") or Path(file).stem,
                     head.get("description", ""), kind, preset, target, overrides, axes)


def parse_base(where: Locator, base: Any) -> tuple[str, str, dict, dict]:
    """Check a [base] table (also a space file's: `simulator.app.tune`); return its kind,
    preset, target and overrides (flat dotted keys)."""
    if not isinstance(base, dict):
        raise where.bad(("base",), base, "missing or not a table", "a table [base]")
    try:
        runner = point_runner(base.get("kind"))
    except TargetProblem as exc:
        raise where.bad(("base", "kind"), exc.value, exc.problem, exc.accepted) from None
    own = ("kind", "preset", "overrides")
    for key in base:
        if key not in own and not runner.owns(key) and key not in runner.tables:
            raise where.bad(("base", key), base[key], "unknown key",
                            "one of " + ", ".join(own) + ", " + runner.accepted())
    _check_preset(where, ("base", "preset"), base.get("preset"))
    overrides = base.get("overrides", {})
    if not isinstance(overrides, dict):
        raise where.bad(("base", "overrides"), overrides, "wrong type",
                        "a table of dotted preset keys")
    target = flatten_table({k: v for k, v in base.items() if k not in own})
    for key, value in target.items():
        if not runner.owns(key):
            raise where.bad(("base", *key.split(".")), value, "not a parameter",
                            runner.accepted())
    return base["kind"], base["preset"], target, flatten_table(overrides)


def _check_preset(where: Locator, path: tuple, value: Any) -> None:

    names = models.list_presets()
    if value not in names:
        raise where.bad(path, value, "unknown preset", "one of " + ", ".join(names))


def _parse_axis(where: Locator, i: int, table: Any) -> Axis:
    path = ("axis", i)
    if not isinstance(table, dict):
        raise where.bad(path, table, "wrong type", "an [[axis]] table")
    group = table.get("zip", False)
    if not (isinstance(group, bool) or (isinstance(group, str) and group)):
        raise where.bad((*path, "zip"), group, "wrong type", "true, false or a group name")
    group = "zip" if group is True else (group or "")
    if "key" not in table:
        rest = flatten_table({k: v for k, v in table.items() if k != "zip"})
        if len(rest) != 1 or not isinstance(next(iter(rest.values())), list):
            raise where.bad(path, table, "not an axis", "key = \"a.b\" with values = [...] or "
                            "random = {...}, or one dotted.key = [values]")
        key, values = next(iter(rest.items()))
        return Axis(i, key, grid_values(where, (*path, key), values), group, "grid", key)
    _check_known(where, table, AXIS_KEYS, path)
    key = table["key"]
    if not isinstance(key, str) or not all(re.fullmatch(r"\w+", s) for s in key.split(".")):
        raise where.bad((*path, "key"), key, "not a dotted key", "e.g. \"sm.count\", \"size.n\"")
    if ("values" in table) == ("random" in table):
        raise where.bad(path, None, "needs exactly one of values and random",
                        "values = [...] or random = {low, high, count, seed}")
    if "values" in table:
        return Axis(i, key, grid_values(where, (*path, "values"), table["values"]), group)
    return Axis(i, key, _random_values(where, (*path, "random"), table["random"], key), group,
                "random", "random")


def grid_values(where: Locator, path: tuple, values: Any) -> tuple:
    """Check a list of axis (or tuner parameter) values: non-empty, scalars or lists of them,
    each once."""
    accepted = "a non-empty list of numbers, text, booleans (or lists of them)"
    if not isinstance(values, list) or not values:
        raise where.bad(path, values, "empty or not a list", accepted)
    seen = []
    for j, v in enumerate(values):
        if not (_is_scalar(v) or (isinstance(v, list) and all(_is_scalar(x) for x in v))):
            raise where.bad((*path, j), v, "wrong type", accepted)
        if any(v == s and type(v) is type(s) for s in seen):
            raise where.bad((*path, j), v, "repeated value", "each value once")
        seen.append(v)
    return tuple(values)


_RANDOM_WANTS = {
    "low": ("a number", _is_number), "high": ("a number", _is_number),
    "count": ("an integer >= 1", lambda v: _is_number(v) and isinstance(v, int) and v >= 1),
    "seed": ("an integer >= 0", lambda v: _is_number(v) and isinstance(v, int) and v >= 0),
    "log": ("true or false", lambda v: isinstance(v, bool)),
    "integer": ("true or false", lambda v: isinstance(v, bool)),
}


def _random_values(where: Locator, path: tuple, table: Any, key: str) -> tuple:
    """Check a random table, then draw (only after the count is checked against the cap)."""
    if not isinstance(table, dict):
        raise where.bad(path, table, "wrong type", "{low, high, count, seed, log, integer}")
    _check_known(where, table, RANDOM_KEYS, path)
    table = {"log": False, "integer": False, **table}
    for name, (accepted, ok) in _RANDOM_WANTS.items():
        if not ok(table.get(name)):
            raise where.bad((*path, name), table.get(name), "missing or wrong type", accepted)
    low, high, count, log = table["low"], table["high"], table["count"], table["log"]
    if count > MAX_POINTS:
        raise where.bad((*path, "count"), count, f"axis {path[1]} ({key}) asks for "
                        "more draws than a sweep may have points",
                        f"count <= {MAX_POINTS:,}")
    lowest, highest = math.ceil(low), math.floor(high)
    if not high > low or (table["integer"] and lowest > highest):
        raise where.bad((*path, "high"), high, "range is empty", f"a number > {low}"
                        + (" with an integer in between" if table["integer"] else ""))
    if log and low <= 0:
        raise where.bad((*path, "low"), low, "log-uniform needs a positive range", "low > 0")
    rng = np.random.default_rng(table["seed"])
    if log:
        drawn = np.exp(rng.uniform(math.log(low), math.log(high), size=count))
    elif table["integer"]:
        drawn = rng.integers(lowest, highest, size=count, endpoint=True)
    else:
        drawn = rng.uniform(low, high, size=count)
    if table["integer"]:
        return tuple(sorted({int(v) for v in np.clip(np.rint(drawn), lowest, highest)}))
    return tuple(sorted(float(v) for v in drawn))


def _check_axes(where: Locator, axes: tuple[Axis, ...], target_keys: str) -> None:
    keys: dict[str, int] = {}
    groups: dict[str, Axis] = {}
    for axis in axes:
        path = ("axis", axis.index, "key")
        head = axis.key.split(".")[0]
        if head in ("kind", "overrides") or (head == "preset" and axis.key != "preset"):
            raise where.bad(path, axis.key, "not an axis key",
                            f"preset, {target_keys} or a dotted preset key")
        if axis.key in keys:
            raise where.bad(path, axis.key, f"already swept by axis[{keys[axis.key]}]",
                            "each key on one axis")
        keys[axis.key] = axis.index
        if axis.key == "preset":
            for j, value in enumerate(axis.values):
                _check_preset(where, ("axis", axis.index, "values", j), value)
        first = groups.setdefault(axis.group, axis) if axis.group else axis
        if len(first.values) != len(axis.values):
            raise where.bad(("axis", axis.index, "zip"), axis.group,
                            f"pairs {len(axis.values)} values with {len(first.values)} of "
                            f"axis[{first.index}]", "zipped axes with equal value counts")


def load_sweep_spec(path: str | Path) -> SweepSpec:
    """Read (UTF-8, an optional byte-order mark) and validate a sweep file."""
    return parse_sweep(read_toml_text(path), str(path))


def _dimensions(axes: tuple[Axis, ...]) -> list[list[tuple[tuple[Axis, int], ...]]]:
    dims: dict[str | int, list[Axis]] = {}   # a zip group by name, any other axis by index
    for axis in axes:
        dims.setdefault(axis.group or axis.index, []).append(axis)
    return [[tuple((a, j) for a in dim) for j in range(len(dim[0].values))]
            for dim in dims.values()]


def count_points(spec: SweepSpec) -> int:
    """The number of points the sweep expands to."""
    return math.prod(len(dim) for dim in _dimensions(spec.axes))


def expand_points(spec: SweepSpec) -> tuple[Point, ...]:
    """All points of the sweep, each target completed and checked against its resolved
    config (so a bad value is refused before anything runs)."""
    where = Locator(spec.file, spec.text)
    total = count_points(spec)
    if total > MAX_POINTS:
        raise where.bad(("axis",), total, "too many points", f"at most {MAX_POINTS}")
    runner = point_runner(spec.kind)
    configs, inputs, seen, points = {}, {}, {}, []
    for index, combo in enumerate(itertools.product(*_dimensions(spec.axes))):
        preset, target, overrides = spec.preset, dict(spec.target), dict(spec.overrides)
        origin = {k: ("base", *k.split(".")) for k in target}
        origin |= {k: ("base", "overrides", k) for k in overrides}
        for axis, j in itertools.chain.from_iterable(combo):
            value = axis.values[j]
            origin[axis.key] = ("axis", axis.index, axis.entry, j)
            if axis.key == "preset":
                preset = value
            elif runner.owns(axis.key):
                target[axis.key] = value
            else:
                overrides[axis.key] = value
        try:
            target = runner.check(target)
            implied = runner.defaults(target)
        except TargetProblem as exc:
            raise where.error(_origin(origin, exc.key), f"point {index}: {exc}") from None
        for key in implied:
            origin.setdefault(key, origin.get("deployment", ("base", "deployment")))
        overrides = {**implied, **overrides}
        config, digest = _resolve_config(where, configs, preset, overrides, origin, index)
        key = json.dumps([target, digest], sort_keys=True)
        if key not in inputs:
            try:
                inputs[key] = runner.inputs(target, config)
            except TargetProblem as exc:
                raise where.error(_origin(origin, exc.key), f"point {index}: preset {preset}: "
                                  f"{exc}") from None
        point_id = make_point_id(spec.kind, preset, target, overrides, digest, inputs[key])
        if point_id in seen:
            raise where.error(("axis",), f"points {seen[point_id]} and {index} resolve to the "
                              "same parameters (each point must differ)")
        seen[point_id] = index
        points.append(Point(point_id, index, spec.kind, preset, target, overrides))
    return tuple(points)


def _origin(origin: dict, key: str) -> tuple:
    """Where a target key was set (its axis value or its [base] entry)."""
    return origin.get(key, ("base", *key.split(".")))


def _resolve_config(where, cache: dict, preset: str, overrides: dict, origin: dict,
                    index: int) -> tuple[Any, str]:
    """Resolve (and so check) the point's config; return it and a hash of it."""

    key = json.dumps([preset, overrides], sort_keys=True)
    if key not in cache:
        try:
            config = models.load_preset(preset, overrides)
        except ConfigError as exc:
            path = origin.get(exc.key, ("base", "preset"))
            message = f"{exc.key} = {exc.value!r}: {exc.problem} (accepted: {exc.accepted})"
            raise where.error(path, f"point {index}: preset {preset}: {message}") from None
        cache[key] = (config, digest(config.to_dict()))
    return cache[key]
