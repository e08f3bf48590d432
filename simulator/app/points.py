"""Sweep points and the registry of point runners, keyed by the sweep's base `kind`.

What it models
--------------
A sweep point is one simulation: a base `kind` (what is simulated), a hardware `preset` with
dotted-key config `overrides`, and a `target` (what to run on it, as a flat dotted mapping,
e.g. `{"op": "gemm", "params.m": 4096, ...}`). A `PointRunner` knows one kind: which target
keys it owns, how to complete and check a target before anything runs (`check`, without a
config; `inputs`, against the point's resolved config, returning a fingerprint of what
besides the parameters decides the result, e.g. the PTX text), which config overrides a
target implies (`defaults`: a deployment's communication SMs), which scalar metrics it
reports, and how to run a point on a config.

Kinds (`POINT_RUNNERS`):

* `kernel`: a kernel of `workloads/kernels/catalog.py` (`kernel`, `seed`, `size.<arg>`),
  built from a seeded Generator, timed by `simulator.simulate_kernel`. Metrics: cycles,
  time_us, instructions.
* `op`: any `ptxsim op` kind (`op`) with its flags as `params.<flag>` (the flag's name
  without dashes, `-` as `_`: `params.kv_heads`; a switch is true/false), `seed` and
  `fidelity` ("sampled" or "full"), built by `workloads.ops.build_op` on the point's
  config (so a bad value is refused before any point runs, naming the flag) and timed by
  `workloads.ops.simulate_op`.
* `layer`: one transformer layer as `ptxsim run` builds it from its flags (`workload`,
  `phase`, `tokens`, `batch`, `seqlen`, `kv_len`, `ep`, `tp`, `layer_index`, `dtype` (the
  GEMM dtype), `fidelity`) through `workloads.layer`, timed by
  `simulator.simulate_workload` (`chunk_bytes`, with or without a deployment: the
  collectives' largest message in bytes, a multiple of 512; absent: the ops' default); or
  one GPU of a deployment (`deployment` = a name of `workloads/deployments` or a .toml path,
  its keys as `deployment.<table>.<key>`, e.g. `deployment.batch.micro_batches`, applied
  with `Deployment.with_values`; its `communication.comm_sms` sets `sm.comm_count` unless
  the sweep sets that key; the sweep's `preset` is the hardware, not the deployment's).
* `step`: one training step (`phase` train): the forward and backward of a layer
  (`schedule` "sequential") or DualPipe's pair of micro-batch 1's forward beside
  micro-batch 0's backward (`schedule` "dualpipe", `workloads.layers.dualpipe`), of the
  whole layer or of its MoE block only (`block` "layer" or "moe"); keys as `layer` less
  `phase` and `kv_len`, plus `schedule` and `block`; or a train deployment (`deployment`).

Metrics of op, layer and step points (`WORKLOAD_METRICS`, one schema for the three):
`time_us` (end to end: the op's launches back to back, a layer's or step's makespan),
`kernel_time_us` (the kernels' times summed, each as its stream sees it, overlap between
streams not removed: what `ptxsim run` reports as `kernel_time_us`), `cycles` (an op's
simulated SM cycles, `simulate_op`'s; a graph's makespan at the SM clock), `kernel_count`, the
summed kernel time per category (`gemm_time_us`, `attention_time_us` (attention, MLA decode,
softmax), `comm_time_us` (all-to-all dispatch/combine, all-reduce), `norm_time_us`,
`elementwise_time_us` (activations, RoPE, residual adds, quantization), `other_time_us`
(MoE gating)), `comm_hidden_us` (collective time during which some other kernel runs: the
communication hidden behind compute; 0 without collectives) and `comm_exposed_us`,
`hbm_bytes`, `l2_bytes`, `link_bytes` (simulated, summed), `flops` (useful work) and
`tflops` (flops / time_us), `roofline_us` (the kernels' roofline times summed),
`sm_clock_ghz` (the SM clock, time-weighted over the kernels: below the preset's where the
sustained clock under tensor load slowed them), `bound` ("compute", "memory" or "link": the
bound carrying the most kernel time) and `fidelity_method` (how the launches were timed
where the result says: an op's launch methods, e.g. "sampled", or "op-sampled" for an
op-level extrapolation; a layer's requested fidelity, as its kernels table carries no
per-node method).

Each point also has a per-kernel table (`PointOutcome.kernels`): the kernels table of
`simulate_workload` for a layer or step (one row per node, `workloads.execute.
KERNEL_COLUMNS`), one row in those columns for an op (plus `cycles`, `launches`,
`fidelity_method`), one row for a kernel (name, cycles, time_us, instructions, HBM and L2 bytes).

`execute_point` is what a worker runs (in-process, in a worker process or on Dask): it never
raises for a failing point; it returns the point's part table (`part_frame`): the point
columns (`PART_POINT_COLUMNS`) and metrics on every row, then rows of the long stats table
(`record` "stat", `PART_STATS_COLUMNS`) and of the per-kernel table (`record` "kernel", its
columns prefixed `KERNEL_PREFIX`); `status = "ok"` or `"error"` with the error text. A point
whose process died or ran past its time limit never returns; the driver records it with
`failed_part` (`status = "failed"` or `"timeout"`, the reason in `error`). Writing the part
is the driver's job. A point's `op_cache` (a folder, set by the driver: `<out>/op-cache`) is
the on-disk op result cache its op, layer or step reads and saves op results in
(`workloads.op_result_cache`; none when empty); its per-kernel table's `cached` says which
kernels were read from it. Kernel points are not cached.
Left out: GPU-side batching; validating a layer's ops against the config before it runs (a
layer whose op the config refuses is an error part); micro-batches without a deployment.
Units: `elapsed_s` in seconds of host time; metrics carry their unit in their name.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import os
import re
import socket
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

import numpy as np
import pandas as pd

import models
import workloads
import workloads.deployments as deployments
from isa.errors import InputError
from reports.sweep_loading import (
    KERNEL_PREFIX,
    PART_POINT_COLUMNS,
    PART_STATS_COLUMNS,
    RECORD_COLUMN,
)
from simulator.framework.stats import level_bytes, link_bytes
from simulator.runner.simulate import simulate_kernel
from workloads.codesign.codesign_ops import op_counts
from workloads.execute import simulate_workload
from workloads.kernels.case import load_ptx
from workloads.kernels.catalog import KERNELS
from workloads.kernels.comm.collectives import check_chunk_bytes
from workloads.layers.dualpipe import dualpipe_pair, moe_block
from workloads.models import MODELS
from workloads.op_result_cache import OpResultCache, open_cache, simulate_op_cached
from workloads.ops import OP_FLAGS, OPS, available_fidelities, build_op
from workloads.traces.overlap import merged_intervals

POINT_STATUSES = ("ok", "error", "failed", "timeout")
"""A part's `status`: ran; raised (`error` holds the exception); its process died (`failed`:
the signal or exit code); stopped at the sweep's point time limit (`timeout`)."""

FIDELITIES = ("sampled", "full")


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
    op_cache: str = ""
    """The op result cache folder the point runs with ("" none); not part of its id."""

    def params(self) -> dict[str, Any]:
        """Every parameter of the point, flat: preset, target keys, config overrides."""
        return {"preset": self.preset, **self.target, **self.overrides}

    def to_dict(self) -> dict[str, Any]:
        return {"point_id": self.point_id, "index": self.index, "kind": self.kind,
                "preset": self.preset, "target": dict(self.target),
                "overrides": dict(self.overrides),
                **({"op_cache": self.op_cache} if self.op_cache else {})}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Point:
        return cls(data["point_id"], data["index"], data["kind"], data["preset"],
                   dict(data["target"]), dict(data["overrides"]), data.get("op_cache", ""))


@dataclass(frozen=True, slots=True)
class PointOutcome:
    """What a runner returns: scalar metrics, the long stats table and the per-kernel table."""

    metrics: dict[str, Any]
    stats: pd.DataFrame
    kernels: pd.DataFrame = field(default_factory=pd.DataFrame)


def _no_defaults(target: Mapping[str, Any]) -> dict[str, Any]:
    return {}


@dataclass(frozen=True, slots=True)
class PointRunner:
    """Contract: `check(target)` returns the completed target or raises `TargetProblem`
    (without a config); `inputs(target, config)` checks the target against the point's
    resolved config (raising `TargetProblem`) and returns a fingerprint of the inputs outside
    the parameters that decide the result; `defaults(target)` the config overrides the
    target implies (the sweep's own overrides win); `run(target, config, run_id,
    result_cache)` (an `OpResultCache` or None) returns a `PointOutcome` with the metrics
    named in `metrics` (name -> pandas dtype, so every part of a kind has one schema, error
    parts included). A target key is one of `target_keys`,
    or `<table>.<name>` for a table of `tables` (`owns`)."""

    kind: str
    target_keys: tuple[str, ...]
    metrics: Mapping[str, str]
    check: Callable[[Mapping[str, Any]], dict[str, Any]]
    run: Callable[[Mapping[str, Any], Any, str, OpResultCache | None], PointOutcome]
    inputs: Callable[[Mapping[str, Any], Any], str]
    tables: tuple[str, ...] = ()
    defaults: Callable[[Mapping[str, Any]], dict[str, Any]] = _no_defaults

    def owns(self, key: str) -> bool:
        """Whether a dotted key names a target parameter (else it is a config key)."""
        head, dot, _ = key.partition(".")
        return key in self.target_keys or (bool(dot) and head in self.tables)

    def accepted(self) -> str:
        """The target keys, for error messages."""
        return ", ".join([*self.target_keys, *(f"{t}.<key>" for t in self.tables)])


def _unknown_keys(target: Mapping[str, Any], runner_keys: tuple[str, ...],
                  tables: tuple[str, ...], accepted: str) -> None:
    for key, value in target.items():
        head, dot, _ = key.partition(".")
        if key not in runner_keys and not (dot and head in tables):
            raise TargetProblem(key, value, accepted, "unknown key")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _want_int(target: Mapping[str, Any], key: str, low: int = 0) -> None:
    if key in target and not (_is_int(target[key]) and target[key] >= low):
        raise TargetProblem(key, target[key], f"an integer >= {low}", "wrong value")


def _want_choice(target: Mapping[str, Any], key: str, choices: tuple) -> None:
    if key in target and target[key] not in choices:
        raise TargetProblem(key, target[key], "one of " + ", ".join(map(str, choices)),
                            "wrong value")


# ---- kind = "kernel" ------------------------------------------------------------------------

def _kernel_size_params(spec) -> tuple[str, ...]:
    return tuple(list(inspect.signature(spec.build).parameters)[1:])


def check_kernel_target(target: Mapping[str, Any]) -> dict[str, Any]:
    """Complete (`seed` 0, size = the kernel's first variant) and check a kernel target."""

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


def run_kernel_target(target: Mapping[str, Any], config, run_id: str,
                      result_cache: OpResultCache | None = None) -> PointOutcome:
    """Build the catalogued case from its seed and size and time it on `config` (kernels are
    not cached: `result_cache` is not read)."""

    spec = KERNELS[target["kernel"]]
    size = {k[len("size."):]: v for k, v in target.items() if k.startswith("size.")}
    case = spec.build(np.random.default_rng(target["seed"]), **size)
    res = simulate_kernel(load_ptx(case.file), case.entry, case.grid, case.block, case.args,
                          config=config, shared_bytes=case.shared_bytes, run_id=run_id)
    row = {"name": case.entry, "op": "kernel", "kind": target["kernel"],
           "cycles": int(res.cycles), "time_us": float(res.time_us),
           "instructions": int(res.instructions),
           "hbm_bytes": level_bytes([(1.0, res.stats)], "hbm"),
           "l2_bytes": level_bytes([(1.0, res.stats)], "l2")}
    return PointOutcome({"cycles": int(res.cycles), "time_us": float(res.time_us),
                         "instructions": int(res.instructions)}, res.stats,
                        pd.DataFrame([row]))


def kernel_fingerprint(target: Mapping[str, Any], config=None) -> str:
    """Hash of the kernel's PTX text: an edited kernel gets new point ids."""

    return digest(load_ptx(KERNELS[target["kernel"]].file))


# ---- kind = "op" ----------------------------------------------------------------------------

OP_KEYS = ("op", "seed", "fidelity", "params")
_FLAG_TYPES = {"int": ("an integer", _is_int),
               "float": ("a number", lambda v: isinstance(v, int | float)
                         and not isinstance(v, bool) and math.isfinite(v)),
               "str": ("text", lambda v: isinstance(v, str)),
               "switch": ("true or false", lambda v: isinstance(v, bool))}


def check_op_target(target: Mapping[str, Any]) -> dict[str, Any]:
    """Check an op target's names and types against `ptxsim op KIND`'s flags; complete the
    flags that have defaults (switches: false), `seed` 0 and `fidelity`."""

    _unknown_keys(target, ("op", "seed", "fidelity"), ("params",),
                  "op, seed, fidelity, params.<flag of ptxsim op OP>")
    kind = target.get("op")
    if not isinstance(kind, str) or kind not in OPS:
        raise TargetProblem("op", kind, "one of " + ", ".join(sorted(OPS)),
                            "unknown op" if isinstance(kind, str) else "missing or not text")
    _want_int(target, "seed")
    have = available_fidelities()
    _want_choice(target, "fidelity", have)
    flags = {f.dest: f for f in OP_FLAGS[kind]}
    accepted = f"params of ptxsim op {kind}: " + ", ".join(flags)
    given = {}
    for key, value in target.items():
        if key.startswith("params."):
            name = key[len("params."):].replace("-", "_")
            if name not in flags:
                raise TargetProblem(key, value, accepted, "unknown parameter")
            if name in given:
                raise TargetProblem(key, value, "each parameter once", "given twice")
            given[name] = (key, value)
    params = {}
    for name, flag in flags.items():
        key, value = given.get(name, (f"params.{name}", None))
        if value is None:
            if flag.required:
                raise TargetProblem(key, None, accepted, "missing required parameter")
            value = False if flag.kind == "switch" else flag.default
            if value is None:
                continue
        wanted, ok = _FLAG_TYPES[flag.kind]
        if not ok(value):
            raise TargetProblem(key, value, f"{wanted} (ptxsim op {kind} {flag.name})",
                                "wrong type")
        if flag.choices is not None and value not in flag.choices:
            raise TargetProblem(key, value, "one of " + ", ".join(map(str, flag.choices)),
                                "wrong value")
        params[f"params.{name}"] = value
    return {"op": kind, "seed": target.get("seed", 0),
            "fidelity": target.get("fidelity", have[0]), **params}


def _op_sizes(target: Mapping[str, Any]) -> dict[str, Any]:
    return {k[len("params."):]: v for k, v in target.items() if k.startswith("params.")}


def _flag_key(message: str, target: Mapping[str, Any]) -> str:
    """The target key of the `--flag` an op builder's error names (else `op`)."""
    found = re.match(r"--([\w-]+)", message)
    key = f"params.{found[1].replace('-', '_')}" if found else "op"
    return key if key in target else "op"


def _build_op(target: Mapping[str, Any], config):

    try:
        return build_op(target["op"], config, seed=target["seed"], **_op_sizes(target))
    except InputError as exc:
        key = _flag_key(str(exc), target)
        raise TargetProblem(key, target.get(key), f"what `ptxsim op {target['op']} --help` "
                            "accepts", str(exc)) from None


def op_fingerprint(target: Mapping[str, Any], config) -> str:
    """Build the op on the point's config (so bad values are refused before anything runs)
    and hash its launches: entry, grid, block, shared bytes and PTX text."""
    plan = _build_op(target, config)
    return digest([[x.entry, x.grid, x.block, x.shared_bytes, digest(x.ptx)]
                   for x in (*plan.launches, *(s for _, s in plan.samples))])


def run_op_target(target: Mapping[str, Any], config, run_id: str,
                  result_cache: OpResultCache | None = None) -> PointOutcome:
    """Build the op on `config`, time it with `simulate_op` (or read it from
    `result_cache`), sum its figures."""

    plan = _build_op(target, config)
    runs: list = []
    res = simulate_op_cached(target["op"], {"seed": target["seed"], **_op_sizes(target)},
                             plan, config, target["fidelity"], result_cache, stats=runs)
    weighted = [(weight, frame) for weight, _, frame in runs]
    launches = res["kernel"] if isinstance(res["kernel"], list) else [res["kernel"]]
    methods = sorted({str(k["fidelity"]) if "fidelity" in k else "op-sampled"
                      for k in launches})
    time_us = float(res["time_us"])
    row = {"name": plan.kind, "op": plan.kind, "kind": plan.kind, "stream": "compute",
           "role": "forward", "deps": "", "start_us": 0.0, "end_us": time_us,
           "time_us": time_us, "flops": float(plan.flops), "tflops": float(res["tflops"]),
           "bytes": float(plan.bytes), "gbps": float(res["gbps"]),
           "hbm_bytes": float(res["hbm_bytes"]), "l2_bytes": level_bytes(weighted, "l2"),
           "link_bytes": link_bytes(weighted), "roofline_us": float(res["roofline_us"]),
           "bound": str(res["bound"]), "gap": float(res["gap"]), "model": "simulated",
           "reused": False, "cached": bool(res["cached"]),
           "note": plan.sample_note if launches and "sampled_from" in launches[0] else "",
           **op_counts(plan),
           "sm_clock_ghz": float(res["sm_clock_ghz"]), "cycles": int(res["cycles"]),
           "launches": len(plan.launches), "fidelity_method": ",".join(methods)}
    kernels = pd.DataFrame([row])
    stats = [frame.assign(run_id=run_id) for _, frame in weighted if len(frame)]
    metrics = _graph_metrics(kernels, time_us, float(res["cycles"]), ",".join(methods))
    return PointOutcome(metrics, pd.concat(stats, ignore_index=True) if stats
                        else pd.DataFrame(), kernels)


# ---- kinds "layer" and "step" ---------------------------------------------------------------

LAYER_SHAPE_KEYS = ("workload", "phase", "tokens", "batch", "seqlen", "kv_len", "ep", "tp",
                    "dtype")
LAYER_KEYS = (*LAYER_SHAPE_KEYS, "layer_index", "fidelity", "chunk_bytes", "deployment")
STEP_SHAPE_KEYS = ("workload", "tokens", "batch", "seqlen", "ep", "tp", "dtype", "block")
STEP_KEYS = (*STEP_SHAPE_KEYS, "layer_index", "fidelity", "chunk_bytes", "schedule",
             "deployment")
SCHEDULES = ("sequential", "dualpipe")
BLOCKS = ("layer", "moe")
DEPLOYMENT_KEY = "deployment"
COMM_COUNT_KEY = "sm.comm_count"
DEFAULT_WORKLOAD = "deepseek-v3"


def _deployment(target: Mapping[str, Any], train: bool):
    """The target's deployment with its `deployment.<key>` values applied (a micro-batch
    count alone also sets the overlap, as `ptxsim run --micro-batches` does)."""
    module = deployments
    name = target[DEPLOYMENT_KEY]
    if not isinstance(name, str) or not name:
        raise TargetProblem(DEPLOYMENT_KEY, name, "a deployment name or a .toml path",
                            "wrong type")
    values = {k[len("deployment."):]: v for k, v in target.items()
              if k.startswith("deployment.")}
    for key in ("preset", "name"):
        if key in values:
            raise TargetProblem(f"deployment.{key}", values[key], "the sweep's own preset "
                                "and deployment keys" if key == "preset" else "deployment",
                                "not settable here")
    try:
        found = module.load_deployment(name)
    except InputError as exc:
        raise TargetProblem(DEPLOYMENT_KEY, name, ", ".join(module.list_deployments())
                            + " or a .toml path", str(exc)) from None
    mb, overlap = "batch.micro_batches", "schedule.overlap"
    if mb in values and overlap not in values and found.overlap != "dualpipe":
        values[overlap] = "none" if values[mb] == 1 else "micro-batches"   # as run's flag
    try:
        found = found.with_values(values, {k: f"deployment.{k}" for k in values})
    except InputError as exc:
        key = next((f"deployment.{k}" for k in values if f"deployment.{k}" in str(exc)),
                   DEPLOYMENT_KEY)
        raise TargetProblem(key, target.get(key), "the keys of a deployment file "
                            "(workloads/deployments/deployment.py)", str(exc)) from None
    if train and found.phase != "train":
        raise TargetProblem(DEPLOYMENT_KEY, name, "a train deployment (e.g. "
                            "deepseek-v3-train) for a step", f"phase {found.phase!r}")
    return found


def _layer_graph(target: Mapping[str, Any], step: bool):
    """The kernel graph of a layer or step target (module docstring)."""

    if DEPLOYMENT_KEY in target:
        return _deployment(target, step).graph(target.get("layer_index"))
    kw = {k: target[k] for k in ("tokens", "batch", "seqlen", "kv_len", "ep", "tp", "dtype",
                                 "layer_index") if k in target}
    phase = "train" if step else target.get("phase", "prefill")
    graph = workloads.layer(target.get("workload", DEFAULT_WORKLOAD), phase=phase, **kw)
    if step and target.get("block", "layer") == "moe":
        graph = moe_block(graph)
    if step and target.get("schedule", "sequential") == "dualpipe":
        graph = dualpipe_pair(graph)
    return graph


_GRAPH_STEPS = {"moe_block": "block", "dualpipe_pair": "schedule"}
"""Graph helpers whose errors start with their own name, and the key that chose them."""


def _problem_key(message: str, target: Mapping[str, Any], keys: tuple[str, ...]) -> str:
    """The target key an error message starts with (`tokens=...`, `kv_len/seqlen`,
    `moe_block: ...`), else `workload`."""
    found = re.match(r"\w+", message)
    key = found[0] if found else ""
    key = _GRAPH_STEPS.get(key, key)
    return key if key in keys and key in target else "workload"


def _check_graph_target(target: Mapping[str, Any], step: bool) -> dict[str, Any]:

    keys = STEP_KEYS if step else LAYER_KEYS
    _unknown_keys(target, keys, (DEPLOYMENT_KEY,),
                  ", ".join(keys) + ", deployment.<key of the deployment file>")
    _want_choice(target, "fidelity", FIDELITIES)
    values = [k for k in target if k.startswith("deployment.")]
    if values and DEPLOYMENT_KEY not in target:
        raise TargetProblem(values[0], target[values[0]], "deployment = NAME beside "
                            "deployment.<key>", "no deployment named")
    if DEPLOYMENT_KEY in target:
        for key in STEP_SHAPE_KEYS if step else LAYER_SHAPE_KEYS:
            if key in target:
                raise TargetProblem(key, target[key], "with a deployment: deployment.<key> "
                                    "(e.g. deployment.batch.tokens_per_gpu, "
                                    "deployment.parallel.ep), layer_index, fidelity",
                                    "not a deployment value")
    else:
        _want_choice(target, "workload", tuple(MODELS))
        _want_choice(target, "phase", ("prefill", "decode", "train"))
        if step:
            _want_choice(target, "schedule", SCHEDULES)
            _want_choice(target, "block", BLOCKS)
        for key in ("tokens", "batch", "seqlen", "ep", "tp"):
            _want_int(target, key, 1)
        _want_int(target, "kv_len")
        if "dtype" in target and not isinstance(target["dtype"], str):
            raise TargetProblem("dtype", target["dtype"], "a GEMM dtype name (fp8, bf16, "
                                "fp16, fp32)", "wrong type")
    _want_int(target, "layer_index")
    if "chunk_bytes" in target:
        try:
            check_chunk_bytes(target["chunk_bytes"])
        except InputError:
            raise TargetProblem("chunk_bytes", target["chunk_bytes"], "a multiple of 512 "
                                "bytes (32 lanes x 16 B), at least 512", "wrong value") from None
    try:
        graph = _layer_graph(target, step)
    except InputError as exc:
        if isinstance(exc, TargetProblem):
            raise
        key = _problem_key(str(exc), target, keys)
        raise TargetProblem(key, target.get(key), "what `ptxsim run` accepts",
                            str(exc)) from None
    return _completed(target, graph.meta, step)


def _completed(target: Mapping[str, Any], meta: Mapping[str, Any], step: bool) -> dict:
    """The target with the values the graph resolved (so two spellings of one point are one
    point): fidelity, layer index, and without a deployment the shape's tokens and sizes;
    keys in the order of `LAYER_KEYS` / `STEP_KEYS`, deployment values last."""
    out = _resolved(target, meta, step)
    order = STEP_KEYS if step else LAYER_KEYS
    return {**{k: out[k] for k in order if k in out},
            **{k: v for k, v in out.items() if k not in order}}


def _resolved(target: Mapping[str, Any], meta: Mapping[str, Any], step: bool) -> dict:
    out = dict(target)
    out.setdefault("fidelity", "sampled")
    out["layer_index"] = int(meta["layer_index"])
    if DEPLOYMENT_KEY in target:
        return out
    out.setdefault("workload", DEFAULT_WORKLOAD)
    phase = "train" if step else out.setdefault("phase", "prefill")
    out.update(tokens=int(meta["tokens"]), batch=int(meta["batch"]), ep=int(meta["ep"]),
               tp=int(meta["tp"]))
    if step:
        out.setdefault("schedule", "sequential")
        out.setdefault("block", "layer")
    if phase == "decode":
        out.pop("seqlen", None)
        out["kv_len"] = int(meta["seqlen_k"])
    else:
        out["seqlen"] = int(meta["seqlen_q"])
        if not step:
            out["kv_len"] = int(meta["seqlen_k"]) - int(meta["seqlen_q"])
    return out


def check_layer_target(target: Mapping[str, Any]) -> dict[str, Any]:
    """Check a layer target by building its graph; complete it with the resolved values."""
    return _check_graph_target(target, step=False)


def check_step_target(target: Mapping[str, Any]) -> dict[str, Any]:
    """Check a training-step target by building its graph; complete it."""
    return _check_graph_target(target, step=True)


def _graph_fingerprint(target: Mapping[str, Any], step: bool) -> str:
    """Hash of the graph's nodes (name, op, stream, dependencies, arguments)."""
    graph = _layer_graph(target, step)
    return digest([[n.name, n.op, n.stream, list(n.deps), n.args] for n in graph.nodes])


def layer_fingerprint(target: Mapping[str, Any], config=None) -> str:
    """Hash of the layer graph: an edited model or graph builder gets new point ids."""
    return _graph_fingerprint(target, step=False)


def step_fingerprint(target: Mapping[str, Any], config=None) -> str:
    """Hash of the training-step graph."""
    return _graph_fingerprint(target, step=True)


def _comm_sms(target: Mapping[str, Any], step: bool) -> dict[str, Any]:
    if DEPLOYMENT_KEY not in target:
        return {}
    return {COMM_COUNT_KEY: _deployment(target, step).comm_sms}


def layer_defaults(target: Mapping[str, Any]) -> dict[str, Any]:
    """`sm.comm_count` = the deployment's communication SMs (the sweep's own key wins)."""
    return _comm_sms(target, step=False)


def step_defaults(target: Mapping[str, Any]) -> dict[str, Any]:
    """As `layer_defaults`, for a train deployment."""
    return _comm_sms(target, step=True)


def _run_graph(target: Mapping[str, Any], config, run_id: str, step: bool,
               result_cache: OpResultCache | None) -> PointOutcome:

    graph = _layer_graph(target, step)
    result = simulate_workload(graph, config=config, fidelity=target["fidelity"],
                               timeline=False, chunk_bytes=target.get("chunk_bytes"),
                               result_cache=result_cache)
    metrics = _graph_metrics(result.kernels, float(result.time_us), float(result.cycles),
                             result.fidelity)
    stats = result.stats.assign(run_id=run_id) if len(result.stats) else result.stats
    return PointOutcome(metrics, stats, result.kernels)


def run_layer_target(target: Mapping[str, Any], config, run_id: str,
                     result_cache: OpResultCache | None = None) -> PointOutcome:
    """Build the layer graph and time it with `simulate_workload`."""
    return _run_graph(target, config, run_id, False, result_cache)


def run_step_target(target: Mapping[str, Any], config, run_id: str,
                    result_cache: OpResultCache | None = None) -> PointOutcome:
    """Build the training-step graph and time it with `simulate_workload`."""
    return _run_graph(target, config, run_id, True, result_cache)


# ---- metrics of op, layer and step points ---------------------------------------------------

CATEGORIES = {
    "gemm": ("gemm", "grouped_gemm"),
    "attention": ("attention", "mla_decode", "mla-decode", "softmax"),
    "comm": ("alltoall_dispatch", "alltoall_combine", "allreduce", "alltoall"),
    "norm": ("rmsnorm", "layernorm", "rmsnorm-bwd", "layernorm-bwd"),
    "elementwise": ("swiglu", "gelu", "rope", "residual_add", "residual-add", "quantize"),
}
"""Kernel-time categories by node op (`workloads.graph.OPS`) or op kind (`workloads.ops`);
an op in none of them (MoE gating) counts as `other`."""

WORKLOAD_METRICS: Mapping[str, str] = MappingProxyType({
    "time_us": "Float64", "kernel_time_us": "Float64", "cycles": "Int64",
    "kernel_count": "Int64",
    **{f"{c}_time_us": "Float64" for c in (*CATEGORIES, "other")},
    "comm_hidden_us": "Float64", "comm_exposed_us": "Float64",
    "hbm_bytes": "Float64", "l2_bytes": "Float64", "link_bytes": "Float64",
    "flops": "Float64", "tflops": "Float64", "roofline_us": "Float64",
    "sm_clock_ghz": "Float64", "bound": "string", "fidelity_method": "string",
})
"""Metrics of op, layer and step points (module docstring)."""


def _category(op: str) -> str:
    return next((c for c, ops in CATEGORIES.items() if op in ops), "other")


def _hidden_us(kernels: pd.DataFrame, comm: pd.Series) -> float:
    """Length of the collectives' time during which some other kernel runs."""

    spans = merged_intervals(kernels.loc[comm, "start_us"], kernels.loc[comm, "end_us"])
    cover = merged_intervals(kernels.loc[~comm, "start_us"], kernels.loc[~comm, "end_us"])
    total = 0.0
    for a, b in spans:
        for c, d in cover:
            if d > a and c < b:
                total += min(b, d) - max(a, c)
    return total


def _nansum(values) -> float:
    return float(np.nansum(pd.to_numeric(values, errors="coerce").to_numpy(dtype=float)))


def _graph_metrics(kernels: pd.DataFrame, time_us: float, cycles: float,
                   fidelity_method: str) -> dict[str, Any]:
    """`WORKLOAD_METRICS` of a kernels table (`workloads.execute.KERNEL_COLUMNS`)."""
    times = pd.to_numeric(kernels["time_us"], errors="coerce").fillna(0.0)
    category = kernels["op"].map(_category)
    comm = category == "comm"
    by_category = {f"{c}_time_us": float(times[category == c].sum())
                   for c in (*CATEGORIES, "other")}
    hidden = _hidden_us(kernels, comm) if comm.any() else 0.0
    clocks = pd.to_numeric(kernels["sm_clock_ghz"], errors="coerce")
    clocked = clocks.notna() & (times > 0)
    clock = (float((clocks[clocked] * times[clocked]).sum() / times[clocked].sum())
             if clocked.any() else float(clocks.mean()) if clocks.notna().any() else math.nan)
    by_bound = times.groupby(kernels["bound"].astype(str)).sum()
    by_bound = by_bound[by_bound.index != ""]
    flops = _nansum(kernels["flops"])
    return {"time_us": time_us, "kernel_time_us": float(times.sum()),
            "cycles": int(round(cycles)), "kernel_count": len(kernels), **by_category,
            "comm_hidden_us": hidden, "comm_exposed_us": by_category["comm_time_us"] - hidden,
            "hbm_bytes": _nansum(kernels["hbm_bytes"]), "l2_bytes": _nansum(kernels["l2_bytes"]),
            "link_bytes": _nansum(kernels["link_bytes"]), "flops": flops,
            "tflops": flops / (time_us * 1e6) if time_us > 0 else math.nan,
            "roofline_us": _nansum(kernels["roofline_us"]), "sm_clock_ghz": clock,
            "bound": str(by_bound.idxmax()) if len(by_bound) else "",
            "fidelity_method": fidelity_method}


POINT_RUNNERS: Mapping[str, PointRunner] = MappingProxyType({
    "kernel": PointRunner("kernel", ("kernel", "seed", "size"),
                          {"cycles": "Int64", "time_us": "Float64", "instructions": "Int64"},
                          check_kernel_target, run_kernel_target, kernel_fingerprint,
                          tables=("size",)),
    "op": PointRunner("op", OP_KEYS, WORKLOAD_METRICS, check_op_target, run_op_target,
                      op_fingerprint, tables=("params",)),
    "layer": PointRunner("layer", LAYER_KEYS, WORKLOAD_METRICS, check_layer_target,
                         run_layer_target, layer_fingerprint, tables=(DEPLOYMENT_KEY,),
                         defaults=layer_defaults),
    "step": PointRunner("step", STEP_KEYS, WORKLOAD_METRICS, check_step_target,
                        run_step_target, step_fingerprint, tables=(DEPLOYMENT_KEY,),
                        defaults=step_defaults),
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
        outcome = runner.run(point.target, config, point.point_id,
                             open_cache(point.op_cache or None))
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


def _nullable(column: pd.Series) -> pd.Series:
    """A per-kernel column as a type that holds the empty values of the stats rows: integers
    as Int64, booleans as boolean, text as string, objects of other kinds (lists, dicts) as
    JSON text; floats as they are."""
    if pd.api.types.is_bool_dtype(column):
        return column.astype("boolean")
    if pd.api.types.is_integer_dtype(column):
        return column.astype("Int64")
    if column.dtype != object:
        return column
    if all(v is None or isinstance(v, str) for v in column):
        return column.astype("string")
    return column.map(lambda v: v if v is None or isinstance(v, str)
                      else json.dumps(v, sort_keys=True, default=str)).astype("string")


def part_frame(head: Mapping[str, Any], outcome: PointOutcome | None,
               metrics: Mapping[str, str]) -> pd.DataFrame:
    """Point columns + metric columns repeated over the rows: the stats rows (`record`
    "stat"), then the per-kernel rows (`record` "kernel", columns `KERNEL_PREFIX` + name);
    one empty stat row when there are neither."""
    values = outcome.metrics if outcome is not None else {}
    stats = outcome.stats if outcome is not None else pd.DataFrame()
    kernels = outcome.kernels if outcome is not None else pd.DataFrame()
    if stats.empty and kernels.empty:
        stats = pd.DataFrame({c: [None] for c in PART_STATS_COLUMNS})
    if stats.empty:
        stats = pd.DataFrame(columns=list(PART_STATS_COLUMNS))
    stats = stats.loc[:, list(PART_STATS_COLUMNS)].reset_index(drop=True)
    stats = stats.astype({c: "float64" if c == "value" else "string" for c in stats.columns})
    kernels = kernels.reset_index(drop=True)
    rows = pd.concat([stats.assign(**{RECORD_COLUMN: "stat"}),
                      pd.DataFrame({RECORD_COLUMN: ["kernel"] * len(kernels)})],
                     ignore_index=True)
    rows[RECORD_COLUMN] = rows[RECORD_COLUMN].astype("string")
    n = len(rows)
    columns = {name: [head[name]] * n for name in PART_POINT_COLUMNS}
    for name, dtype in metrics.items():
        columns[name] = pd.array([values.get(name)] * n, dtype=dtype)
    table = pd.DataFrame(columns)
    parts = [table, rows[[*PART_STATS_COLUMNS, RECORD_COLUMN]]]
    if len(kernels):
        shifted = pd.DataFrame({f"{KERNEL_PREFIX}{c}": _nullable(kernels[c])
                                for c in kernels.columns})
        shifted.index = range(len(stats), n)
        parts.append(shifted.reindex(range(n)))
    return pd.concat(parts, axis=1)
