"""Sweep points and the registry of point runners, keyed by the sweep's base `kind`.

What it models
--------------
A sweep point is one simulation: a base `kind` (what is simulated), a hardware `preset` with
dotted-key config `overrides`, and a `target` (what to run on it, as a flat dotted mapping,
e.g. `{"kernel": "saxpy", "seed": 0, "size.n": 1000, "size.block": 128}`). A `PointRunner`
knows one kind: which top-level target keys it owns, how to complete and check a target
before anything runs, what goes into the point id besides the parameters (`fingerprint`,
e.g. the PTX text), which scalar metrics it reports, and how to run a point on a config.

`execute_point` is what a worker runs (in-process, in a worker process or on Dask): it never
raises for a failing point; it returns the point's part table (see `PART_POINT_COLUMNS`)
with `status = "ok"` or `"error"` and the error text. A point whose process died or ran past
its time limit never returns; the driver records it with `failed_part` (`status = "failed"`
or `"timeout"`, the reason in `error`). Writing the part is the driver's job.

Kinds: `kernel` (a kernel of `workloads/kernels/catalog.py`, built from a seeded Generator
and a size, run by `simulator.simulate_kernel`). Adding a kind (`op`, `workload`) means one
`check` and one `run` function and one entry in `POINT_RUNNERS`.
Left out: GPU-side batching.
Units: `elapsed_s` in seconds of host time; metrics carry their unit in their name.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import socket
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

import pandas as pd

from isa.errors import InputError

PART_POINT_COLUMNS = ("point_id", "index", "status", "error", "traceback", "elapsed_s",
                      "worker", "finished_at", "params_json", "config_json")
"""Point-level columns of a part (repeated on each stats row); metrics follow, then stats."""

PART_STATS_COLUMNS = ("run_id", "kernel", "component", "stat", "value", "unit")

POINT_STATUSES = ("ok", "error", "failed", "timeout")
"""A part's `status`: ran; raised (`error` holds the exception); its process died (`failed`:
the signal or exit code); stopped at the sweep's point time limit (`timeout`)."""


class TargetProblem(InputError):
    """A target parameter is missing, unknown or of the wrong type (the sweep adds where)."""

    def __init__(self, key: str, value: Any, accepted: str, problem: str) -> None:
        self.key, self.value, self.accepted, self.problem = key, value, accepted, problem
        super().__init__(f"{key} = {value!r}: {problem} (accepted: {accepted})")


@dataclass(frozen=True, slots=True)
class Point:
    """One resolved sweep point; `target` and `overrides` are flat dotted-key mappings."""

    point_id: str
    index: int
    kind: str
    preset: str
    target: dict[str, Any] = field(default_factory=dict)
    overrides: dict[str, Any] = field(default_factory=dict)

    def params(self) -> dict[str, Any]:
        """Every parameter of the point, flat: preset, target keys, config overrides."""
        return {"preset": self.preset, **self.target, **self.overrides}

    def to_dict(self) -> dict[str, Any]:
        return {"point_id": self.point_id, "index": self.index, "kind": self.kind,
                "preset": self.preset, "target": dict(self.target),
                "overrides": dict(self.overrides)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Point:
        return cls(data["point_id"], data["index"], data["kind"], data["preset"],
                   dict(data["target"]), dict(data["overrides"]))


@dataclass(frozen=True, slots=True)
class PointOutcome:
    """What a runner returns: scalar metrics and the long stats table of the point."""

    metrics: dict[str, float | int]
    stats: pd.DataFrame


@dataclass(frozen=True, slots=True)
class PointRunner:
    """Contract: `check(target)` returns the completed target or raises `TargetProblem`;
    `run(target, config, run_id)` returns a `PointOutcome` with the metrics named in `metrics`
    (name -> pandas dtype, so every part of a kind has one schema, error parts included);
    `fingerprint(target)` names inputs outside the parameters that decide the result."""

    kind: str
    target_keys: tuple[str, ...]
    metrics: Mapping[str, str]
    check: Callable[[Mapping[str, Any]], dict[str, Any]]
    run: Callable[[Mapping[str, Any], Any, str], PointOutcome]
    fingerprint: Callable[[Mapping[str, Any]], str]


# ---- kind = "kernel" ------------------------------------------------------------------------

def _kernel_size_params(spec) -> tuple[str, ...]:
    return tuple(list(inspect.signature(spec.build).parameters)[1:])


def check_kernel_target(target: Mapping[str, Any]) -> dict[str, Any]:
    """Complete (`seed` 0, size = the kernel's first variant) and check a kernel target."""
    from workloads.kernels.catalog import KERNELS

    for key, value in target.items():
        head = key.split(".")[0]
        if head not in ("kernel", "seed", "size") or key == "size":
            raise TargetProblem(key, value, "kernel, seed, size.<builder argument>",
                                "unknown key")
    name = target.get("kernel")
    if not isinstance(name, str) or name not in KERNELS:
        raise TargetProblem("kernel", name, "one of " + ", ".join(sorted(KERNELS)),
                            "unknown kernel" if isinstance(name, str) else "missing or not text")
    seed = target.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise TargetProblem("seed", seed, "an integer >= 0", "wrong seed")
    spec = KERNELS[name]
    size = {k[len("size."):]: v for k, v in target.items() if k.startswith("size.")}
    size = size or dict(spec.variants[0])
    wanted = _kernel_size_params(spec)
    for key, value in size.items():
        if key not in wanted:
            raise TargetProblem(f"size.{key}", value, f"size keys of {name}: {', '.join(wanted)}",
                                "unknown size key")
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise TargetProblem(f"size.{key}", value, "an integer >= 1", "wrong size")
    missing = [k for k in wanted if k not in size]
    if missing:
        raise TargetProblem(f"size.{missing[0]}", None, f"size keys of {name}: "
                            + ", ".join(wanted), "missing size key")
    return {"kernel": name, "seed": seed, **{f"size.{k}": size[k] for k in wanted}}


def run_kernel_target(target: Mapping[str, Any], config, run_id: str) -> PointOutcome:
    """Build the catalogued case from its seed and size and time it on `config`."""
    import numpy as np

    from simulator.simulate import simulate_kernel
    from workloads.kernels.case import load_ptx
    from workloads.kernels.catalog import KERNELS

    spec = KERNELS[target["kernel"]]
    size = {k[len("size."):]: v for k, v in target.items() if k.startswith("size.")}
    case = spec.build(np.random.default_rng(target["seed"]), **size)
    res = simulate_kernel(load_ptx(case.file), case.entry, case.grid, case.block, case.args,
                          config=config, shared_bytes=case.shared_bytes, run_id=run_id)
    return PointOutcome({"cycles": int(res.cycles), "time_us": float(res.time_us),
                         "instructions": int(res.instructions)}, res.stats)


def kernel_fingerprint(target: Mapping[str, Any]) -> str:
    """Hash of the kernel's PTX text: an edited kernel gets new point ids."""
    from workloads.kernels.case import load_ptx
    from workloads.kernels.catalog import KERNELS

    return digest(load_ptx(KERNELS[target["kernel"]].file))


POINT_RUNNERS: Mapping[str, PointRunner] = MappingProxyType({
    "kernel": PointRunner("kernel", ("kernel", "seed", "size"),
                          {"cycles": "Int64", "time_us": "Float64", "instructions": "Int64"},
                          check_kernel_target, run_kernel_target, kernel_fingerprint),
})
"""Base `kind` -> its runner (read-only)."""


def digest(data: Any) -> str:
    """A short stable hash of JSON-able data (keys sorted)."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def make_point_id(kind: str, preset: str, target: Mapping[str, Any],
                  overrides: Mapping[str, Any], config_digest: str, inputs: str) -> str:
    """The stable id of a point: a hash of everything that decides its result."""
    return digest({"kind": kind, "preset": preset, "target": dict(target),
                   "overrides": dict(overrides), "config": config_digest, "inputs": inputs})


def point_runner(kind: Any) -> PointRunner:
    """The runner of `kind`, or `TargetProblem` naming the kinds there are."""
    runner = POINT_RUNNERS.get(kind) if isinstance(kind, str) else None
    if runner is None:
        raise TargetProblem("kind", kind, "one of " + ", ".join(sorted(POINT_RUNNERS)),
                            "unknown kind")
    return runner


# ---- worker side ----------------------------------------------------------------------------

def resolve_config(point: Point):
    """The frozen hardware config of a point (preset + overrides)."""
    import models

    return models.load_preset(point.preset, point.overrides)


def execute_point(point_data: Mapping[str, Any]) -> pd.DataFrame:
    """Run one point (a `Point.to_dict()`) and return its part table; never raises for it."""
    point = Point.from_dict(point_data)
    started = time.perf_counter()
    config_json, outcome, error, trace = "", None, "", ""
    try:
        config = resolve_config(point)
        config_json = json.dumps(config.to_dict(), sort_keys=True)
        runner = point_runner(point.kind)
        outcome = runner.run(point.target, config, point.point_id)
    except Exception as exc:  # noqa: BLE001 - a failing point is recorded, the sweep goes on
        error = f"{type(exc).__name__}: {exc}"
        trace = traceback.format_exc()
    head = _part_head(point, "error" if outcome is None else "ok", error, trace,
                      time.perf_counter() - started, os.getpid(), config_json)
    return part_frame(head, outcome, _metrics_of(point.kind))


def failed_part(point_data: Mapping[str, Any], status: str, reason: str, elapsed_s: float,
                worker_pid: int | None) -> pd.DataFrame:
    """The part of a point that gave no result (`status` "failed" or "timeout", see
    `POINT_STATUSES`): written by the driver, with the reason as its `error` (`worker` is
    empty when the process is not known, e.g. on Dask)."""
    if status not in ("failed", "timeout"):
        raise ValueError(f"failed_part: status {status!r}, want 'failed' or 'timeout'")
    point = Point.from_dict(point_data)
    try:
        config_json = json.dumps(resolve_config(point).to_dict(), sort_keys=True)
    except Exception:  # noqa: BLE001 - the part records the failure, not the config
        config_json = ""
    head = _part_head(point, status, reason, "", elapsed_s, worker_pid, config_json)
    return part_frame(head, None, _metrics_of(point.kind))


def _metrics_of(kind: str) -> Mapping[str, str]:
    return POINT_RUNNERS[kind].metrics if kind in POINT_RUNNERS else {}


def _part_head(point: Point, status: str, error: str, trace: str, elapsed_s: float,
               worker_pid: int | None, config_json: str) -> dict[str, Any]:
    return {
        "point_id": point.point_id, "index": point.index, "status": status, "error": error,
        "traceback": trace, "elapsed_s": elapsed_s,
        "worker": "" if worker_pid is None else f"{socket.gethostname()}:{worker_pid}",
        "finished_at": datetime.now(UTC).isoformat(timespec="milliseconds"),
        "params_json": json.dumps(point.params(), sort_keys=True), "config_json": config_json,
    }


def part_frame(head: Mapping[str, Any], outcome: PointOutcome | None,
               metrics: Mapping[str, str]) -> pd.DataFrame:
    """Point columns + metric columns repeated over the stats rows (one empty row if none)."""
    values = outcome.metrics if outcome is not None else {}
    stats = outcome.stats if outcome is not None else pd.DataFrame()
    if stats.empty:
        stats = pd.DataFrame({c: [None] for c in PART_STATS_COLUMNS})
    stats = stats.loc[:, list(PART_STATS_COLUMNS)].reset_index(drop=True)
    stats = stats.astype({c: "float64" if c == "value" else "string" for c in stats.columns})
    n = len(stats)
    columns = {name: [head[name]] * n for name in PART_POINT_COLUMNS}
    for name, dtype in metrics.items():
        columns[name] = pd.array([values.get(name)] * n, dtype=dtype)
    return pd.concat([pd.DataFrame(columns), stats], axis=1)
