"""The tuner: search a space of settings for the best value of one metric of a sweep point.

What it does
------------
A space file (`TUNE_FORMAT`, shown by `ptxsim tune --help`; docs/tuning.md) is a sweep file's
`[base]` (what every point runs: a kernel, op, layer or step, on a preset) with `[[param]]`
tables instead of `[[axis]]` (each a key, as a sweep axis key, and its values: a list, or a
range with a step or a factor) and an optional `[tune]` table (name, description, and the
defaults of the search: metric, direction, sampler, trials, seed). The space is the grid of
all parameter values; it is expanded and every point checked before anything runs, exactly as
a sweep's (`simulator.app.sweep.expand_points`), so a point's id is the one a sweep of the same
settings gives it.

The search (`run_tune`) picks points of that grid and runs them on the sweep machinery
(`simulator.app.sweep_runner.run_sweep`: in-process, a pool of worker processes or Dask, each
point a Parquet part written atomically), so the output folder is a sweep folder
(`reports.load_sweep(DIR)` reads it), its op result cache `DIR/op-cache` (points that meet
the same op on the same config read its result: the compute ops of points that differ only
in the chunk size, or a resumed search) and `tune.json` (the summary, written through
`reports.output_dir`):

* `grid`: every point of the space (one sweep);
* `random`: Optuna's `RandomSampler`, `trials` distinct points, drawn from `seed`;
* `tpe`: Optuna's `TPESampler` (a tree-structured Parzen estimator: proposals follow the
  results so far, after `startup_trials` random ones), `trials` distinct points.

For both, each parameter is an integer index into its values, sorted when they are numbers
(so the sampler sees their order), else a categorical choice. `batch` points are proposed and
run at a time (default 1: each proposal sees every result before it); the proposals depend
only on the space, `seed`, `batch` and the results.

A proposal that names a point already run is told its known result and does not count as a
trial; the search ends after `trials` distinct points, when the space is exhausted, or when
`STALL_PROPOSALS` proposals in a row bring nothing new. A point that errs is told to Optuna
as failed and never is the best. Resuming (`resume=True`) replays the search from the start:
proposals repeat (same seed, same results), points with a part are read instead of run, so a
killed search continues where it stopped and gives what an uninterrupted one gives.

The summary (`summarize`): the best point (its settings and metrics); per parameter, the
curve of the metric over its values (`best`: the best over the points with that value;
`at_best`: the point with the others at the best's settings, when it ran); the Pareto front of
the metric against `sm.comm_count` (SMs given to communication, taken from compute) when the
points' communication SMs vary (`pareto_front`: a point is on it when every point with fewer
communication SMs has a worse metric); and the history (each point in the order it ran, with
the best so far).

Left out: continuous parameters (a range is a grid of its steps), conditional parameters,
several metrics at once (other than the Pareto front against communication SMs), early
stopping of a point, spaces of more than `simulator.app.sweep.MAX_POINTS` points.
Units: a metric's unit is in its name (`time_us`: microseconds).
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import math
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np
import optuna
import pandas as pd

import models
from isa.errors import InputError
from reports.output_dir import check_output_dir, write_output_dir
from reports.sweep_loading import load_sweep
from simulator.app.points import Point, execute_point, point_runner
from simulator.app.sweep import (
    MAX_POINTS,
    Axis,
    Locator,
    SweepError,
    SweepSpec,
    expand_points,
    flatten_table,
    grid_values,
    parse_base,
    read_toml,
    read_toml_text,
)
from simulator.app.sweep_runner import MANIFEST_NAME, PARTS_DIR, part_statuses, run_sweep

SUMMARY_NAME = "tune.json"
SUMMARY_FORMAT = "ptxsim-tune/1"
TOP_KEYS = ("tune", "base", "param")
TUNE_KEYS = ("name", "description", "metric", "direction", "sampler", "trials", "seed")
PARAM_KEYS = ("key", "values", "range")
RANGE_KEYS = ("low", "high", "step", "factor")
SAMPLERS = ("grid", "random", "tpe")
DIRECTIONS = ("min", "max")
DEFAULT_METRIC = "time_us"
PARETO_KEY = "sm.comm_count"
STALL_PROPOSALS = 200
"""Proposals in a row that bring no new point before a random or TPE search stops."""

TUNE_FORMAT = """\
A space file (TOML) is a sweep file's [base] (what every point runs) with [[param]] tables
(the settings to search) instead of [[axis]], and an optional [tune] table. The space is the
grid of all parameter values; every point of it is checked before any runs.

[tune]                        optional: name, description and the search's defaults
  metric = "time_us"          a numeric metric of the kind's points (below)
  direction = "min"           min | max
  sampler = "grid"            grid (every point) | random | tpe (Optuna's samplers)
  trials = 12                 distinct points for random and tpe
  seed = 0                    the samplers' seed

[base]                        as in a sweep file (ptxsim sweep --help): kind, preset,
  kind = "layer"              overrides and the kind's parameters
  preset = "h800_sxm"
  deployment = "deepseek-v3-prefill"

[[param]]                     one key = a list of values
  "sm.comm_count" = [8, 12, 16, 20, 24, 32]
[[param]]                     or key and values,
  key = "deployment.batch.micro_batches"
  values = [1, 2]
[[param]]                     or key and a range: low, low + step, ... up to high
  key = "sm.comm_count"       (inclusive), or low, low * factor, ... up to high
  range = { low = 8, high = 32, step = 4 }
  key = "chunk_bytes"
  range = { low = 16384, high = 262144, factor = 4 }

A parameter key is what a sweep axis takes: "preset", a parameter of the kind (tokens,
chunk_bytes (a layer's or step's collective message size in bytes), params.m,
deployment.batch.micro_batches, ...) or a preset key (sm.comm_count, l2.size_bytes,
kernels.gemm_tile_rule, ...).

Metrics (--metric): time_us, kernel_time_us, cycles, gemm_time_us, attention_time_us,
comm_time_us, comm_hidden_us, comm_exposed_us (communication not hidden behind compute),
hbm_bytes, l2_bytes, link_bytes, flops, tflops, roofline_us, sm_clock_ghz, ... (a kernel
point: cycles, time_us, instructions).

The output folder is a sweep folder (reports.load_sweep(DIR) reads the points; --resume
continues a stopped search) with tune.json: the best settings, the curve of the metric over
each parameter's values, the Pareto front of the metric against sm.comm_count when the
points' communication SMs vary, and the history of the search."""
"""The space file format as `ptxsim tune --help` shows it (docs/tuning.md has more)."""


class TuneError(SweepError):
    """A space file or a search setting is wrong; names file, line, key path and the fix."""


@dataclasses.dataclass(frozen=True, slots=True)
class Param:
    """One parameter of the space: a dotted key and its values; `entry` is the TOML key
    under [[param]] that holds them (`values`, `range` or the key itself)."""

    index: int
    key: str
    values: tuple
    entry: str = "values"

    @property
    def ordered(self) -> tuple[int, ...]:
        """Indices of `values` in the order the sampler sees them (sorted numbers; else as
        written)."""
        if all(_is_number(v) for v in self.values):
            return tuple(sorted(range(len(self.values)), key=lambda j: self.values[j]))
        return tuple(range(len(self.values)))


@dataclasses.dataclass(frozen=True, slots=True)
class TuneSpace:
    """A validated space file: the sweep of its whole grid, its parameters and the search
    defaults its [tune] table gives (None where it gives none)."""

    sweep: SweepSpec
    params: tuple[Param, ...]
    defaults: Mapping[str, Any]

    @property
    def file(self) -> str:
        return self.sweep.file

    @property
    def name(self) -> str:
        return self.sweep.name

    def size(self) -> int:
        """Points in the space (the grid of all parameter values)."""
        return math.prod(len(p.values) for p in self.params)


@dataclasses.dataclass(frozen=True, slots=True)
class TuneSettings:
    """How to search: the metric and its direction, the sampler, distinct points to run
    (`trials`, None for grid), the seed, and points proposed at a time (`batch`)."""

    metric: str
    direction: str
    sampler: str
    trials: int | None
    seed: int
    batch: int


@dataclasses.dataclass(frozen=True, slots=True)
class TuneOutcome:
    """What one `run_tune` call did: its summary (what tune.json holds), the points it ran
    (not read from parts), and whether every point it listed has an ok part."""

    out_dir: Path
    summary: dict[str, Any]
    ran: int
    lost: int

    @property
    def complete(self) -> bool:
        return self.summary["errors"] == 0 and self.lost == 0


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


# ---- the space file --------------------------------------------------------------------------

def parse_space(text: str, file: str = "<space>") -> TuneSpace:
    """Validate the text of a space file (its points: `space_points`)."""
    where = Locator(file, text)
    data = read_toml(text, file, TuneError)
    _known(where, data, TOP_KEYS, ())
    head = data.get("tune", {})
    if not isinstance(head, dict):
        raise _bad(where, ("tune",), head, "wrong type", "a table [tune]")
    _known(where, head, TUNE_KEYS, ("tune",))
    kind, preset, target, overrides = parse_base(where, data.get("base"))
    params_data = data.get("param")
    if not isinstance(params_data, list) or not params_data:
        raise _bad(where, ("param",), params_data, "the space is empty", "one or more "
                   "[[param]] tables, each a key with a list of values or a range")
    params = tuple(_parse_param(where, i, table) for i, table in enumerate(params_data))
    _check_params(where, params, point_runner(kind).accepted())
    defaults = _parse_defaults(where, head, kind)
    axes = tuple(Axis(p.index, p.key, p.values, "", "grid", p.entry) for p in params)
    sweep = SweepSpec(file, text, head.get("name") or Path(file).stem,
                      head.get("description", ""), kind, preset, target, overrides, axes)
    space = TuneSpace(sweep, params, defaults)
    if space.size() > MAX_POINTS:
        raise _bad(where, ("param",), space.size(), "too many points in the space",
                   f"at most {MAX_POINTS:,}")
    return space


def load_space(path: str | Path) -> TuneSpace:
    """Read (UTF-8, an optional byte-order mark) and validate a space file."""
    return parse_space(read_toml_text(path, TuneError), str(path))


def _path_text(path: tuple) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _bad(where: Locator, path: tuple, value: Any, problem: str, accepted: str) -> TuneError:
    shown = "(missing)" if value is None else repr(value)
    return TuneError(where.file, where.line(path), _path_text(path),
                     f"{shown}: {problem} (accepted: {accepted})")


def _known(where: Locator, table: dict, allowed: tuple, path: tuple) -> None:
    for key in table:
        if key not in allowed:
            raise _bad(where, (*path, key), table[key], "unknown key",
                       "one of " + ", ".join(allowed))


def _parse_param(where: Locator, i: int, table: Any) -> Param:
    path = ("param", i)
    if not isinstance(table, dict):
        raise _bad(where, path, table, "wrong type", "a [[param]] table")
    if "key" not in table:
        flat = flatten_table(table)
        if len(flat) != 1 or not isinstance(next(iter(flat.values())), list):
            raise _bad(where, path, table, "not a parameter", "key = \"a.b\" with values = "
                       "[...] or range = {low, high, step | factor}, or one dotted.key = "
                       "[values]")
        key, values = next(iter(flat.items()))
        return Param(i, key, grid_values(where, (*path, key), values), key)
    _known(where, table, PARAM_KEYS, path)
    key = table["key"]
    if not isinstance(key, str) or not all(re.fullmatch(r"\w+", s) for s in key.split(".")):
        raise _bad(where, (*path, "key"), key, "not a dotted key",
                   "e.g. \"sm.comm_count\", \"chunk_bytes\", \"params.m\"")
    if ("values" in table) == ("range" in table):
        raise _bad(where, path, None, "needs exactly one of values and range",
                   "values = [...] or range = {low, high, step | factor}")
    if "values" in table:
        return Param(i, key, grid_values(where, (*path, "values"), table["values"]))
    return Param(i, key, _range_values(where, (*path, "range"), table["range"]), "range")


def range_values(low: float, high: float, step: float | None = None,
                 factor: float | None = None) -> tuple:
    """low, low + step, ... (or low, low * factor, ...) up to `high` inclusive; integers when
    the bounds and the step or factor are integers. Checked by the caller."""
    exact = all(_is_int(v) for v in (low, high, step if step is not None else factor))
    out, value, tolerance = [], low, 1e-9 * max(abs(low), abs(high), 1.0)
    while value <= high + tolerance and len(out) <= MAX_POINTS:
        out.append(value if exact else float(value))
        value = value + step if step is not None else value * factor
    if not exact:
        out = [float(np.round(v, 12)) for v in out]
    return tuple(out)


def _range_values(where: Locator, path: tuple, table: Any) -> tuple:
    accepted = ("{low, high, step} or {low, high, factor}: numbers, high >= low, step > 0, "
                "factor > 1")
    if not isinstance(table, dict):
        raise _bad(where, path, table, "wrong type", accepted)
    _known(where, table, RANGE_KEYS, path)
    for name in ("low", "high"):
        if not _is_number(table.get(name)):
            raise _bad(where, (*path, name), table.get(name), "missing or not a number",
                       accepted)
    low, high = table["low"], table["high"]
    if high < low:
        raise _bad(where, (*path, "high"), high, f"below low ({low})", accepted)
    if ("step" in table) == ("factor" in table):
        raise _bad(where, path, None, "needs exactly one of step and factor", accepted)
    name = "step" if "step" in table else "factor"
    value = table[name]
    if not _is_number(value) or (value <= 0 if name == "step" else value <= 1 or low <= 0):
        raise _bad(where, (*path, name), value, "not a usable " + name,
                   "step > 0" if name == "step" else "factor > 1 with low > 0")
    values = range_values(low, high, **{name: value})
    if len(values) > MAX_POINTS:
        raise _bad(where, (*path, name), value, "too many values", f"at most {MAX_POINTS:,}")
    return values


def _check_params(where: Locator, params: tuple[Param, ...], target_keys: str) -> None:
    seen: dict[str, int] = {}
    names = models.list_presets()
    for param in params:
        path = ("param", param.index, "key")
        head = param.key.split(".")[0]
        if head in ("kind", "overrides") or (head == "preset" and param.key != "preset"):
            raise _bad(where, path, param.key, "not a parameter key",
                       f"preset, {target_keys} or a dotted preset key")
        if param.key in seen:
            raise _bad(where, path, param.key, f"already in param[{seen[param.key]}]",
                       "each key in one [[param]]")
        seen[param.key] = param.index
        if param.key == "preset":
            for j, value in enumerate(param.values):
                if value not in names:
                    raise _bad(where, ("param", param.index, param.entry, j), value,
                               "unknown preset", "one of " + ", ".join(names))


def metric_names(kind: str) -> tuple[str, ...]:
    """The numeric metrics a point of `kind` records (what `--metric` accepts)."""
    return tuple(m for m, dtype in point_runner(kind).metrics.items() if dtype != "string")


def _parse_defaults(where: Locator, head: dict, kind: str) -> dict[str, Any]:
    for key in ("name", "description"):
        if not isinstance(head.get(key, ""), str):
            raise _bad(where, ("tune", key), head[key], "wrong type", "text")
    wants = {
        "metric": (lambda v: v in metric_names(kind), "one of " + ", ".join(metric_names(kind))),
        "direction": (lambda v: v in DIRECTIONS, "min or max"),
        "sampler": (lambda v: v in SAMPLERS, "one of " + ", ".join(SAMPLERS)),
        "trials": (lambda v: _is_int(v) and v >= 1, "an integer >= 1"),
        "seed": (lambda v: _is_int(v) and v >= 0, "an integer >= 0"),
    }
    for key, (ok, accepted) in wants.items():
        if key in head and not ok(head[key]):
            raise _bad(where, ("tune", key), head[key], "wrong value", accepted)
    return {key: head.get(key) for key in wants}


def space_points(space: TuneSpace) -> tuple[Point, ...]:
    """Every point of the space (grid order: the last parameter varies fastest), each
    checked as a sweep checks its points; a bad value is a `TuneError` naming its
    [[param]] entry."""
    try:
        return expand_points(space.sweep)
    except SweepError as exc:
        raise _param_error(space, exc) from None


def _param_error(space: TuneSpace, exc: SweepError) -> TuneError:
    """The sweep's error about an axis, told about the [[param]] it stands for."""
    found = re.match(r"axis\[(\d+)\]\.?([^\[]*)(?:\[(\d+)\])?", exc.path)
    text = str(exc)
    prefix = f"{exc.file}:{exc.line}" if exc.line else exc.file
    message = text[len(prefix) + 2:]
    if exc.path and message.startswith(exc.path + ": "):
        message = message[len(exc.path) + 2:]
    if not found:
        return TuneError(space.file, exc.line, exc.path, message)
    where = Locator(space.file, space.sweep.text)
    param = space.params[int(found[1])]
    path: tuple = ("param", param.index, param.entry)
    if found[3] is not None and param.entry != "range":
        path = (*path, int(found[3]))
    shown = _path_text(path) + (f" (value {param.values[int(found[3])]!r})"
                                if found[3] is not None and param.entry == "range" else "")
    return TuneError(space.file, where.line(path), shown, message)


# ---- settings ---------------------------------------------------------------------------------

def resolve_settings(space: TuneSpace, *, metric: str | None = None,
                     direction: str | None = None, sampler: str | None = None,
                     trials: int | None = None, seed: int | None = None,
                     batch: int | None = None) -> TuneSettings:
    """The search's settings: each argument given (the command's flags) over the space
    file's [tune] defaults over the built-in ones (time_us, min, grid, seed 0, batch 1)."""
    file = space.defaults
    metric = metric if metric is not None else file.get("metric") or DEFAULT_METRIC
    names = metric_names(space.sweep.kind)
    if metric not in names:
        raise InputError(f"--metric {metric}: not a numeric metric of {space.sweep.kind} "
                         f"points (accepted: {', '.join(names)})")
    direction = direction if direction is not None else file.get("direction") or "min"
    if direction not in DIRECTIONS:
        raise InputError(f"--direction {direction}: accepted min or max")
    sampler_given = sampler
    sampler = sampler if sampler is not None else file.get("sampler") or "grid"
    if sampler not in SAMPLERS:
        raise InputError(f"--sampler {sampler}: accepted {', '.join(SAMPLERS)}")
    seed = seed if seed is not None else file.get("seed") or 0
    if not _is_int(seed) or seed < 0:
        raise InputError(f"--seed {seed}: accepted an integer >= 0")
    batch = 1 if batch is None else batch
    if not _is_int(batch) or batch < 1:
        raise InputError(f"--batch {batch}: accepted an integer >= 1")
    if sampler == "grid":
        if trials is not None:
            raise InputError(f"--trials {trials}: the grid sampler runs every point of the "
                             f"space ({space.size()}); drop --trials, or use --sampler random "
                             "or tpe")
        return TuneSettings(metric, direction, sampler, None, seed, batch)
    trials = trials if trials is not None else file.get("trials")
    if trials is None:
        told = "--sampler " + sampler if sampler_given else f"sampler = {sampler!r}"
        raise InputError(f"{told}: needs --trials N (or trials in [tune]), the distinct "
                         f"points to run (the space has {space.size()})")
    if not _is_int(trials) or trials < 1:
        raise InputError(f"--trials {trials}: accepted an integer >= 1")
    return TuneSettings(metric, direction, sampler, min(trials, space.size()), seed, batch)


# ---- the search -------------------------------------------------------------------------------

def run_tune(space: str | Path | TuneSpace, out_dir: str | Path, *,
             settings: TuneSettings | None = None, workers: int | None = None,
             dask: str | None = None, resume: bool = False,
             point_timeout_s: float | None = None, progress: IO[str] | None = None,
             execute: Callable[[Mapping[str, Any]], Any] = execute_point,
             op_cache: bool = True) -> TuneOutcome:
    """Search `space` (see the module docstring) into `out_dir`; write and return the summary.

    `settings` default to `resolve_settings(space)`; `workers`, `dask`, `point_timeout_s`,
    `execute` and `op_cache` (whether points share the op result cache `out_dir/op-cache`)
    are `run_sweep`'s. Without `resume` the folder must be new or empty (a folder
    holding a search is refused: resume it); with `resume`, points with a part are read, not
    run. Progress (one line per point for random and tpe, the sweep's bar for grid) goes to
    `progress` (default: stderr)."""
    space = space if isinstance(space, TuneSpace) else load_space(space)
    settings = settings or resolve_settings(space)
    points = space_points(space)
    out = _check_out(out_dir, resume)
    stream = progress if progress is not None else sys.stderr
    backend = {"workers": workers, "dask": dask, "point_timeout_s": point_timeout_s,
               "execute": execute, "op_cache": op_cache}
    if settings.sampler == "grid":
        outcome = run_sweep(space.sweep, out, resume=True, progress=stream, points=points,
                            **backend)
        order, ran, lost = list(points), len(outcome.ran), len(outcome.lost)
    else:
        order, ran, lost = _search(space, settings, points, out, stream, backend)
    table = load_sweep(out)
    summary = summarize(table, space, settings, [p.point_id for p in order])
    summary.update(out=str(out), space_points=len(points), ran=ran, lost=lost)
    write_summary(out, summary)
    return TuneOutcome(out, summary, ran, lost)


def _check_out(out_dir: str | Path, resume: bool) -> Path:
    """The output folder, refused when it would mix a new search with other files."""
    out = Path(out_dir)
    held = part_statuses(out / PARTS_DIR) if (out / PARTS_DIR).is_dir() else {}
    if resume:
        if out.exists() and not (out / MANIFEST_NAME).exists():
            check_output_dir(out)
        return out
    if held or (out / MANIFEST_NAME).exists():
        raise InputError(f"--out {out}: holds a search ({len(held)} point parts); pass "
                         "--resume to continue it, or choose another --out")
    return check_output_dir(out)


def _sampler(settings: TuneSettings, space: TuneSpace) -> optuna.samplers.BaseSampler:
    """Optuna's sampler; TPE starts from `startup_trials(space)` random proposals."""
    if settings.sampler == "random":
        return optuna.samplers.RandomSampler(seed=settings.seed)
    startup = startup_trials(space)
    return optuna.samplers.TPESampler(seed=settings.seed, n_startup_trials=startup,
                                      constant_liar=settings.batch > 1)


def startup_trials(space: TuneSpace) -> int:
    """Random proposals before TPE models the results: a quarter of the space, 1 to 10. It
    depends on the space alone, so a search resumed with more trials repeats its start."""
    return max(1, min(10, space.size() // 4))


def _distributions(space: TuneSpace) -> dict[str, optuna.distributions.BaseDistribution]:
    out: dict[str, optuna.distributions.BaseDistribution] = {}
    for param in space.params:
        n = len(param.values)
        if all(_is_number(v) for v in param.values):
            out[param.key] = optuna.distributions.IntDistribution(0, n - 1)
        else:
            out[param.key] = optuna.distributions.CategoricalDistribution(list(range(n)))
    return out


def _grid_index(space: TuneSpace, chosen: Mapping[str, int]) -> int:
    """The grid position of the point whose parameter `key` takes its `chosen[key]`-th value
    in the sampler's order (the last parameter varies fastest, as in `expand_points`)."""
    index = 0
    for param in space.params:
        index = index * len(param.values) + param.ordered[chosen[param.key]]
    return index


def _search(space: TuneSpace, settings: TuneSettings, points: Sequence[Point], out: Path,
            stream: IO[str], backend: dict) -> tuple[list[Point], int, int]:
    """Ask Optuna for points, run the new ones `settings.batch` at a time, tell the results."""
    direction = "minimize" if settings.direction == "min" else "maximize"
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(logging.WARNING)
    try:
        study = optuna.create_study(direction=direction, sampler=_sampler(settings, space))
        return _ask_and_tell(study, space, settings, points, out, stream, backend)
    finally:
        optuna.logging.set_verbosity(verbosity)


def _ask_and_tell(study, space, settings, points, out, stream, backend):
    distributions = _distributions(space)
    known: dict[str, float | None] = {}     # point id -> metric (None: not ok)
    order: list[Point] = []
    ran = lost = stall = 0
    while len(order) < settings.trials and len(order) < len(points) and stall < STALL_PROPOSALS:
        batch: list[tuple[Any, Point]] = []
        new: list[Point] = []
        while (len(new) < settings.batch and len(order) + len(new) < settings.trials
               and stall < STALL_PROPOSALS):
            trial = study.ask(distributions)
            point = points[_grid_index(space, trial.params)]
            if point.point_id in known:
                _tell(study, trial, known[point.point_id])
                stall += 1
                continue
            if all(p.point_id != point.point_id for p in new):
                new.append(point)
                stall = 0
            else:
                stall += 1
            batch.append((trial, point))
        if not new:
            break
        outcome = run_sweep(space.sweep, out, resume=True, progress=io.StringIO(),
                            points=[*order, *new], **backend)
        ran, lost = ran + len(outcome.ran), lost + len(outcome.lost)
        values = _values(out, settings.metric)
        for point in new:
            status, value, error = values.get(point.point_id, ("lost", None, "no part"))
            known[point.point_id] = value if status == "ok" else None
            order.append(point)
            best = _best_value([known[p.point_id] for p in order], settings.direction)
            stream.write(_trial_line(len(order), settings, space, point, status, value, error,
                                     best, point.point_id in outcome.ran))
            stream.flush()
        for trial, point in batch:
            _tell(study, trial, known[point.point_id])
    return order, ran, lost


def _tell(study, trial, value: float | None) -> None:
    if value is None:
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
    else:
        study.tell(trial, value)


def _values(out: Path, metric: str) -> dict[str, tuple[str, float | None, str]]:
    table = load_sweep(out)
    found = {}
    for _, row in table.iterrows():
        value = row.get(metric)
        value = float(value) if value is not None and not pd.isna(value) else None
        found[row["point_id"]] = (str(row["status"]), value, str(row["error"] or ""))
    return found


def _best_value(values: Sequence[float | None], direction: str) -> float | None:
    done = [v for v in values if v is not None]
    if not done:
        return None
    return min(done) if direction == "min" else max(done)


def _trial_line(n: int, settings: TuneSettings, space: TuneSpace, point: Point, status: str,
                value: float | None, error: str, best: float | None, ran: bool) -> str:
    params = point.params()
    shown = " ".join(f"{p.key}={params.get(p.key)}" for p in space.params)
    result = (f"{settings.metric} {value:.6g}" if status == "ok" and value is not None
              else f"{status}: {error}")
    best_text = f"{best:.6g}" if best is not None else "-"
    return (f"tune {settings.sampler} {n}/{settings.trials}: {shown} -> {result} "
            f"(best {best_text}){'' if ran else ' [read]'}\n")


# ---- the summary ------------------------------------------------------------------------------

def pareto_front(table: pd.DataFrame, x: str, metric: str, direction: str = "min"
                 ) -> pd.DataFrame:
    """The ok points of `table` no other point beats on both `x` (fewer is better) and
    `metric` (in `direction`): sorted by `x`, each with a strictly better metric than every
    point with a smaller `x`; of points with one `x`, the best (the first by `index` on a
    tie)."""
    ok = table[(table["status"] == "ok") & table[x].notna() & table[metric].notna()]
    sign = 1.0 if direction == "min" else -1.0
    score = sign * pd.to_numeric(ok[metric]).astype(float)
    order = ok.assign(_score=score).sort_values([x, "_score", "index"], kind="stable")
    keep, best = [], math.inf
    for label, value in order["_score"].items():
        if value < best:
            keep.append(label)
            best = value
    return ok.loc[keep]


def _plain(value: Any) -> Any:
    """A JSON-safe Python value (numpy scalars unwrapped; NaN and NA as None)."""
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if value is None or value is pd.NA:
        return None
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _same(column: pd.Series, value: Any) -> pd.Series:
    text = json.dumps(_plain(value), sort_keys=True)
    return column.map(lambda v: json.dumps(_plain(v), sort_keys=True) == text)


def summarize(table: pd.DataFrame, space: TuneSpace, settings: TuneSettings,
              order: Sequence[str] | None = None) -> dict[str, Any]:
    """The summary of the points in `table` (`reports.load_sweep` of the search's folder):
    best, curves, Pareto front and history (module docstring); `order` is the point ids in
    the order the search ran them (default: the table's)."""
    metric, keys = settings.metric, [p.key for p in space.params]
    sign = 1.0 if settings.direction == "min" else -1.0
    ok = table[(table["status"] == "ok") & table[metric].notna()] if len(table) else table
    numeric = [m for m in metric_names(space.sweep.kind) if m in table.columns]
    best_row = None
    if len(ok):
        scores = sign * pd.to_numeric(ok[metric]).astype(float)
        best_row = ok.loc[scores.sort_values(kind="stable").index[0]]
    summary: dict[str, Any] = {
        "format": SUMMARY_FORMAT, "space": space.name, "file": space.file,
        "description": space.sweep.description, "kind": space.sweep.kind,
        "preset": space.sweep.preset, **dataclasses.asdict(settings),
        "params": {p.key: _plain(list(p.values)) for p in space.params},
        "evaluated": len(table), "ok": len(ok), "errors": int(len(table) - len(ok)),
        "best": None if best_row is None else _point(best_row, keys, numeric),
        "curve": {p.key: _curve(table, ok, p, keys, metric, sign, best_row)
                  for p in space.params},
        "pareto": None, "history": _history(table, order, keys, metric, sign),
    }
    if PARETO_KEY in table.columns and ok[PARETO_KEY].nunique() > 1:
        front = pareto_front(table, PARETO_KEY, metric, settings.direction)
        summary["pareto"] = {"x": PARETO_KEY, "metric": metric, "front": [
            {PARETO_KEY: _plain(row[PARETO_KEY]), metric: _plain(row[metric]),
             "settings": {k: _plain(row[k]) for k in keys}, "point_id": row["point_id"]}
            for _, row in front.iterrows()]}
    return summary


def _point(row: pd.Series, keys: list[str], metrics: list[str]) -> dict[str, Any]:
    return {"point_id": row["point_id"], "index": _plain(row["index"]),
            "settings": {k: _plain(row[k]) for k in keys},
            "metrics": {m: _plain(row[m]) for m in metrics}}


def _curve(table, ok, param: Param, keys, metric, sign, best_row) -> list[dict[str, Any]]:
    rows = []
    for value in (param.values[j] for j in param.ordered):
        here = ok[_same(ok[param.key], value)] if len(ok) else ok
        best = (float(here[metric].iloc[int(np.argmin(sign * here[metric].to_numpy(float)))])
                if len(here) else None)
        at_best = None
        if best_row is not None:
            match = _same(ok[param.key], value)
            for other in keys:
                if other != param.key:
                    match &= _same(ok[other], best_row[other])
            if match.any():
                at_best = float(ok.loc[match, metric].iloc[0])
        count = int(_same(table[param.key], value).sum()) if len(table) else 0
        rows.append({"value": _plain(value), "best": best, "at_best": at_best,
                     "points": count})
    return rows


def _history(table, order, keys, metric, sign) -> list[dict[str, Any]]:
    by_id = {row["point_id"]: row for _, row in table.iterrows()}
    ids = list(order) if order is not None else list(by_id)
    out, best = [], None
    for n, point_id in enumerate((i for i in ids if i in by_id), 1):
        row = by_id[point_id]
        ok = row["status"] == "ok" and not pd.isna(row[metric])
        value = float(row[metric]) if ok else None
        if value is not None and (best is None or sign * value < sign * best):
            best = value
        out.append({"trial": n, "point_id": point_id, "status": str(row["status"]),
                    "settings": {k: _plain(row[k]) for k in keys}, metric: value,
                    "best_so_far": best})
    return out


def write_summary(out: Path, summary: Mapping[str, Any]) -> Path:
    """Write `out/tune.json` (strict JSON) through `reports.output_dir`, beside the search's
    sweep manifest and parts (which it never touches)."""
    text = json.dumps(summary, indent=1, allow_nan=False) + "\n"
    write_output_dir(out, lambda folder: (folder / SUMMARY_NAME).write_text(text),
                     force=True)
    return out / SUMMARY_NAME


def format_summary(summary: Mapping[str, Any]) -> str:
    """The summary as the command prints it: best, curves, Pareto front."""
    metric, best = summary["metric"], summary["best"]
    lines = [f"tune {summary['space']}: {summary['kind']} on {summary['preset']}, sampler "
             f"{summary['sampler']}, {summary['evaluated']} of {summary['space_points']} "
             f"points ({summary['ok']} ok, {summary['errors']} not), {metric} "
             f"({summary['direction']})"]
    if best is None:
        lines.append("best: none (no point finished ok)")
    else:
        settings = "  ".join(f"{k}={v}" for k, v in best["settings"].items())
        lines.append(f"best: {metric} {best['metrics'][metric]:.6g} at {settings}  "
                     f"(point {best['index']}, {best['point_id']})")
    for key, rows in summary["curve"].items():
        lines.append(f"curve of {metric} over {key} (best: over the points with the value; "
                     "at best: the other settings at the best's)")
        lines.append(f"  {key:>24} {'best':>14} {'at best':>14} {'points':>7}")
        for row in rows:
            lines.append(f"  {_text(row['value']):>24} {_number(row['best']):>14} "
                         f"{_number(row['at_best']):>14} {row['points']:>7}")
    pareto = summary.get("pareto")
    if pareto:
        lines.append(f"Pareto front of {metric} against {pareto['x']} (fewer comm SMs, "
                     f"{'lower' if summary['direction'] == 'min' else 'higher'} {metric})")
        for row in pareto["front"]:
            others = "  ".join(f"{k}={v}" for k, v in row["settings"].items()
                               if k != pareto["x"])
            lines.append(f"  {pareto['x']}={row[pareto['x']]:<6} {metric} "
                         f"{_number(row[metric])}  {others}")
    lines.append(f"out: {summary['out']} ({SUMMARY_NAME}; reports.load_sweep reads the "
                 "points)")
    return "\n".join(lines)


def _text(value: Any) -> str:
    return json.dumps(value) if isinstance(value, list) else str(value)


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"


def dry_run_lines(space: TuneSpace) -> list[str]:
    """The space as `ptxsim tune --dry-run` lists it."""
    lines = [f"space {space.name}: {space.size()} points (kind {space.sweep.kind}, preset "
             f"{space.sweep.preset})"]
    for param in space.params:
        lines.append(f"  {param.key}: {', '.join(_text(v) for v in param.values)}")
    return lines

