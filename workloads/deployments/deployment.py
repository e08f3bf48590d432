"""A deployment: how one GPU of a model's serving or training cluster is set up, read from
a data file that cites a source for every value.

A deployment file (`workloads/deployments/<name>.toml`, or any path) names the model, the
phase, the hardware preset, the parallel layout, one GPU's batch and its micro-batches, how
the micro-batches overlap and how the MoE all-to-all runs. Each `key = value` line ends in a
`# source: ...` comment, as the hardware presets do; `load_deployment` keeps the sources
beside the values (`Deployment.sources`, by dotted key).

Keys (`[table].key`; `FIELDS` holds the checks):
  name, model, phase, preset                 strings; description (optional)
  [parallel] ep, tp                          >= 1
             redundant_experts_per_gpu       >= 0 (copies of hot experts; none on one GPU)
  [batch]    tokens_per_gpu, sequence_tokens prefill/train: new tokens on the GPU (all
                                             micro-batches) and per sequence
             requests_per_gpu                decode: requests, each adding one token
             kv_len                          cached keys per sequence (optional)
             micro_batches                   1 .. 8, splitting the GPU's batch evenly
  [schedule] overlap                         "none" (one micro-batch), "micro-batches"
                                             (`workloads.layers.micro_batches`) or "dualpipe"
                                             (train, two: `workloads.layers.dualpipe`)
  [communication] comm_sms                   SMs reserved for communication (sm.comm_count)
             holds_sms                       false: the all-to-all is RDMA that frees the
                                             SMs once issued (timed by link bandwidth)
             routing                         "balanced" (every peer gets tokens x top-k / ep
                                             rows), or ep token counts, this GPU first

An unknown key, a missing one, a value of the wrong kind or range, or values that do not fit
together (a batch the micro-batches cannot split, a routing table of the wrong length) is an
`InputError` naming the file, the line, the key and what is accepted. `with_values` applies
overrides (the CLI's flags) with the same checks, naming the override.

`Deployment.graph()` builds the GPU's kernel graph: one micro-batch's layer
(`workloads.layer`) repeated per micro-batch, or DualPipe's forward/backward pair.

Left out: the layers before and after the simulated one, pipeline parallelism,
prefill/decode disaggregation across clusters, load imbalance beyond a given routing table.
Units: token counts; SM counts.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import models
import workloads
from isa.errors import InputError
from workloads.graph import KernelGraph
from workloads.layers.dualpipe import dualpipe_pair
from workloads.layers.micro_batches import micro_batches
from workloads.models import MODELS, get_model

DEPLOYMENT_DIR = Path(__file__).resolve().parent
PROJECT_ROOT = DEPLOYMENT_DIR.parents[1]
PHASES = ("prefill", "decode", "train")
OVERLAPS = ("none", "micro-batches", "dualpipe")
MAX_MICRO_BATCHES = 8
BALANCED = "balanced"
DEFAULT_SEQUENCE_TOKENS = 4096  # workloads.layer's default prompt (capped at the model's)
TOKEN_PHASES = ("prefill", "train")


def _is_int(v, low: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= low


def _is_text(v) -> bool:
    return isinstance(v, str) and v.strip() != ""


def _is_routing(v) -> bool:
    return v == BALANCED or (isinstance(v, list) and len(v) > 0
                             and all(_is_int(c, 0) for c in v))


@dataclass(frozen=True, slots=True)
class Field:
    """One key of a deployment file: its attribute, check, and what it accepts."""

    key: str
    attr: str
    check: Callable[[Any], bool]
    accepted: str
    required: bool = True
    phases: tuple[str, ...] = PHASES


FIELDS = (
    Field("name", "name", _is_text, "a non-empty string"),
    Field("description", "description", lambda v: isinstance(v, str), "a string",
          required=False),
    Field("model", "model", lambda v: v in MODELS, f"one of {', '.join(MODELS)}"),
    Field("phase", "phase", lambda v: v in PHASES, f"one of {', '.join(PHASES)}"),
    Field("preset", "preset", _is_text, "a hardware preset name (ptxsim models)"),
    Field("parallel.ep", "ep", lambda v: _is_int(v, 1), "an integer >= 1"),
    Field("parallel.tp", "tp", lambda v: _is_int(v, 1), "an integer >= 1"),
    Field("parallel.redundant_experts_per_gpu", "redundant_experts_per_gpu",
          lambda v: _is_int(v, 0), "an integer >= 0", required=False),
    Field("batch.tokens_per_gpu", "tokens_per_gpu", lambda v: _is_int(v, 1),
          "an integer >= 1", phases=TOKEN_PHASES),
    Field("batch.sequence_tokens", "sequence_tokens", lambda v: _is_int(v, 1),
          "an integer >= 1", phases=TOKEN_PHASES),
    Field("batch.requests_per_gpu", "requests_per_gpu", lambda v: _is_int(v, 1),
          "an integer >= 1", phases=("decode",)),
    Field("batch.kv_len", "kv_len", lambda v: _is_int(v, 0), "an integer >= 0",
          required=False),
    Field("batch.micro_batches", "micro_batches",
          lambda v: _is_int(v, 1) and v <= MAX_MICRO_BATCHES,
          f"an integer 1 .. {MAX_MICRO_BATCHES}"),
    Field("schedule.overlap", "overlap", lambda v: v in OVERLAPS,
          f"one of {', '.join(OVERLAPS)}"),
    Field("communication.comm_sms", "comm_sms", lambda v: _is_int(v, 0), "an integer >= 0"),
    Field("communication.holds_sms", "holds_sms", lambda v: isinstance(v, bool),
          "true or false"),
    Field("communication.routing", "routing", _is_routing,
          f"{BALANCED!r} or a list of token counts >= 0 (one per EP rank, this GPU first)"),
)
FIELD_BY_KEY = MappingProxyType({f.key: f for f in FIELDS})
TABLES = tuple(dict.fromkeys(f.key.split(".")[0] for f in FIELDS if "." in f.key))
_HEADER = re.compile(r"^\s*\[([A-Za-z0-9_.-]+)\]\s*(#.*)?$")
_VALUE = re.compile(r"^\s*([A-Za-z0-9_-]+)\s*=")
_SOURCE = re.compile(r"#\s*source:\s*(.+?)\s*$")


@dataclass(frozen=True)
class Deployment:
    """One GPU's deployment (see the module docstring); build with `load_deployment`."""

    name: str
    model: str
    phase: str
    preset: str
    ep: int
    tp: int
    micro_batches: int
    overlap: str
    comm_sms: int
    holds_sms: bool
    routing: str | tuple[int, ...]
    redundant_experts_per_gpu: int = 0
    tokens_per_gpu: int | None = None
    sequence_tokens: int | None = None
    requests_per_gpu: int | None = None
    kv_len: int | None = None
    description: str = ""
    file: str = ""
    sources: Mapping[str, str] = field(default_factory=dict)
    overrides: Mapping[str, dict] = field(default_factory=dict)
    """Dotted key -> {"value", "set_by"} for each value `with_values` changed."""

    def values(self) -> dict[str, Any]:
        """The set values by dotted key (the file's keys; overrides applied)."""
        out = {}
        for f in FIELDS:
            value = getattr(self, f.attr)
            if value is None or (f.attr == "description" and not value):
                continue
            out[f.key] = list(value) if isinstance(value, tuple) else value
        return out

    @property
    def micro_batch_tokens(self) -> int:
        """New tokens of one micro-batch (decode: its requests)."""
        if self.phase == "decode":
            return self.requests_per_gpu // self.micro_batches
        return self.tokens_per_gpu // self.micro_batches

    def layer_kwargs(self, layer_index: int | None = None) -> dict[str, Any]:
        """`workloads.layer` keywords of one micro-batch."""
        kw: dict[str, Any] = {
            "model": self.model, "phase": self.phase, "ep": self.ep, "tp": self.tp,
            "layer_index": layer_index, "kv_len": self.kv_len,
            "redundant_experts": self.redundant_experts_per_gpu if self.ep > 1 else 0,
            "routing": None if self.routing == BALANCED else tuple(self.routing),
            "comm_holds_sms": self.holds_sms}
        tokens = self.micro_batch_tokens
        if self.phase == "decode":
            kw["batch"] = tokens
        else:
            kw.update(tokens=tokens, batch=tokens // self.sequence_tokens)
        return kw

    def graph(self, layer_index: int | None = None):
        """The GPU's kernel graph: a micro-batch's layer per micro-batch (one: the plain
        `workloads.layer` graph), or DualPipe's pair of a forward and a backward one."""

        try:
            layer = workloads.layer(**self.layer_kwargs(layer_index))
        except InputError as exc:
            raise InputError(f"deployment {self.name!r}{self._where()}: {exc}") from None
        if self.overlap != "dualpipe":
            return micro_batches(layer, self.micro_batches)
        pair = dualpipe_pair(layer)
        meta = {**pair.meta, "micro_batches": 2, "micro_batch_tokens": layer.meta["tokens"],
                "micro_batch_batch": layer.meta["batch"], "tokens": 2 * layer.meta["tokens"],
                "batch": 2 * layer.meta["batch"]}
        return KernelGraph(pair.name, pair.nodes, meta)

    def expert_share(self) -> dict[str, int] | None:
        """Experts one GPU hosts: routed_experts / ep, the redundant copies, their sum (None
        for a model without experts)."""

        moe = get_model(self.model).moe
        if moe is None:
            return None
        redundant = self.redundant_experts_per_gpu if self.ep > 1 else 0
        routed = moe.routed_experts // self.ep
        return {"routed": routed, "redundant": redundant, "per_gpu": routed + redundant}

    def peer_rows(self) -> float | None:
        """(token, expert) rows of one micro-batch sent to each peer under balanced routing
        (tokens x top-k / ep); None for a routing table or a model without experts."""

        moe = get_model(self.model).moe
        if moe is None or self.routing != BALANCED:
            return None
        rows = self.micro_batch_tokens * moe.experts_per_token / self.ep
        return int(rows) if rows == int(rows) else rows

    def describe(self) -> dict[str, Any]:
        """What run.json carries: name, file, values, sources, overrides, expert share,
        micro-batch size and the balanced per-peer rows."""
        return {"name": self.name, "file": self.file, "values": self.values(),
                "sources": dict(self.sources), "overrides": dict(self.overrides),
                "experts": self.expert_share(), "micro_batch_tokens": self.micro_batch_tokens,
                "rows_per_peer": self.peer_rows()}

    def with_values(self, values: Mapping[str, Any],
                    names: Mapping[str, str] | None = None) -> Deployment:
        """A copy with `values` (dotted keys) replaced and checked; errors name a key by
        `names[key]` (e.g. the CLI flag that set it). Changing the phase between decode and
        prefill/train drops the other kind's batch keys and fills in the defaults: one
        request per micro-batch, or 4096-token sequences, one per micro-batch."""
        names = dict(names or {})
        for key, value in values.items():
            f = FIELD_BY_KEY.get(key)
            label = names.get(key, key)
            if f is None:
                raise InputError(f"deployment {self.name!r}: unknown key {label!r} (accepted "
                                 f"{', '.join(FIELD_BY_KEY)})")
            if not f.check(value):
                raise InputError(f"{label} {value!r}: accepted {f.accepted}")
        attrs = {FIELD_BY_KEY[k].attr: (tuple(v) if isinstance(v, list) else v)
                 for k, v in values.items()}
        set_now = {k: {"value": list(v) if isinstance(v, tuple) else v,
                       "set_by": names.get(k, "with_values")} for k, v in values.items()
                   if _plain(getattr(self, FIELD_BY_KEY[k].attr)) != _plain(v)}
        merged = replace(self, **attrs, overrides={**self.overrides, **set_now})
        merged = _phase_defaults(merged, self.phase, attrs)
        _check_phase_keys(merged, names)
        _check_together(merged, f"deployment {self.name!r}{merged._where()}", names)
        return merged

    def _where(self) -> str:
        return f" ({self.file})" if self.file else ""


def _plain(value):
    return list(value) if isinstance(value, tuple) else value


def _phase_defaults(d: Deployment, old_phase: str, attrs: dict) -> Deployment:
    """Batch keys of the new phase's kind where the phase changed kind."""
    if (d.phase == "decode") == (old_phase == "decode"):
        changes = {}
    elif d.phase == "decode":
        changes = {"tokens_per_gpu": None, "sequence_tokens": None,
                   "requests_per_gpu": attrs.get("requests_per_gpu", d.micro_batches)}
    else:

        seq = attrs.get("sequence_tokens", min(DEFAULT_SEQUENCE_TOKENS,
                                               get_model(d.model).max_positions))
        changes = {"requests_per_gpu": None, "sequence_tokens": seq,
                   "tokens_per_gpu": attrs.get("tokens_per_gpu", seq * d.micro_batches)}
    if d.overlap == "dualpipe" and d.phase != "train" and "overlap" not in attrs:
        changes["overlap"] = "micro-batches"
    return replace(d, **changes) if changes else d


def _check_phase_keys(d: Deployment, names: Mapping[str, str]) -> None:
    for f in FIELDS:
        if getattr(d, f.attr) is not None and d.phase not in f.phases:
            label = names.get(f.key, f.key)
            raise InputError(f"{label}: not a {d.phase} value (it applies to "
                             f"{' and '.join(f.phases)}); accepted for {d.phase}: "
                             f"{', '.join(g.key for g in FIELDS if d.phase in g.phases)}")


def _check_together(d: Deployment, where: str, names: Mapping[str, str]) -> None:
    """Values that must fit together: the batch split, the overlap, the routing table."""
    def n(key: str) -> str:
        return names.get(key, key)

    mb = d.micro_batches
    if d.phase == "decode":
        if d.requests_per_gpu % mb:
            raise InputError(f"{where}: {n('batch.requests_per_gpu')} = {d.requests_per_gpu}"
                             f" does not split into {n('batch.micro_batches')} = {mb}; "
                             f"accepted a multiple of {mb}")
        if d.kv_len == 0:
            raise InputError(f"{where}: {n('batch.kv_len')} = 0: decode attends at least its "
                             "own token; accepted >= 1")
    else:
        if d.tokens_per_gpu % (mb * d.sequence_tokens):
            raise InputError(f"{where}: {n('batch.tokens_per_gpu')} = {d.tokens_per_gpu} "
                             f"does not split into {n('batch.micro_batches')} = {mb} of whole "
                             f"{n('batch.sequence_tokens')} = {d.sequence_tokens}-token "
                             f"sequences; accepted a multiple of {mb * d.sequence_tokens}")
    if (d.overlap == "none") != (mb == 1):
        raise InputError(f"{where}: {n('schedule.overlap')} = {d.overlap!r} with "
                         f"{n('batch.micro_batches')} = {mb}; accepted 'none' for one "
                         "micro-batch, 'micro-batches' or 'dualpipe' for more")
    if d.overlap == "dualpipe" and (d.phase != "train" or mb != 2):
        raise InputError(f"{where}: {n('schedule.overlap')} = 'dualpipe' pairs a forward and a "
                         f"backward micro-batch; accepted with phase 'train' and 2 "
                         f"micro-batches (got {d.phase!r}, {mb})")
    if d.routing != BALANCED and len(d.routing) != d.ep:
        raise InputError(f"{where}: {n('communication.routing')} has {len(d.routing)} "
                         f"counts; accepted {d.ep} ({n('parallel.ep')}), this GPU first")


def deployment_path(name: str | Path) -> Path:
    """The file of bundled deployment `name`, or `name` itself when it is a path."""
    path = Path(name)
    if path.suffix == ".toml" or path.parent != Path("."):
        if not path.is_file():
            raise InputError(f"deployment file {str(path)!r} not found")
        return path
    bundled = DEPLOYMENT_DIR / f"{name}.toml"
    if not bundled.is_file():
        raise InputError(f"unknown deployment {str(name)!r} (bundled: "
                         f"{', '.join(list_deployments())}; or give a .toml path)")
    return bundled


def list_deployments() -> list[str]:
    """Names of the bundled deployment files, sorted."""
    return sorted(p.stem for p in DEPLOYMENT_DIR.glob("*.toml"))


def load_deployment(name: str | Path) -> Deployment:
    """The checked deployment of bundled `name` or of a .toml path (see the module
    docstring for the keys and checks)."""
    path = deployment_path(name)
    text = path.read_text()
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path}: {exc}") from None
    lines, sources = _scan(text)
    flat = _flatten(data, path, lines)
    phase = flat.get("phase")

    def where(key: str) -> str:
        return f"{path}:{lines[key]}" if key in lines else str(path)

    for f in FIELDS:
        if f.key not in flat:
            if f.required and phase in f.phases:
                raise InputError(f"{path}: key {f.key!r} missing; accepted {f.accepted}")
            continue
        if not f.check(flat[f.key]):
            raise InputError(f"{where(f.key)}: key {f.key!r} = {flat[f.key]!r}: accepted "
                             f"{f.accepted}")
        if phase not in f.phases:
            raise InputError(f"{where(f.key)}: key {f.key!r} is not a {phase} key (it "
                             f"applies to {' and '.join(f.phases)}); accepted for {phase}: "
                             f"{', '.join(g.key for g in FIELDS if phase in g.phases)}")
    _check_preset(flat, where)
    attrs = {FIELD_BY_KEY[k].attr: (tuple(v) if isinstance(v, list) else v)
             for k, v in flat.items()}
    deployment = Deployment(**attrs, file=_shown(path),
                            sources=MappingProxyType(sources))
    _check_together(deployment, str(path), {})
    return deployment


def _shown(path: Path) -> str:
    """`path` relative to the project for a bundled file, else as given."""
    try:
        return str(path.resolve().relative_to(PROJECT_ROOT))
    except ValueError:
        return str(path)


def _scan(text: str) -> tuple[dict[str, int], dict[str, str]]:
    """Line number and `# source:` comment of every `key = value` line, by dotted key."""
    lines, sources, table = {}, {}, ""
    for number, line in enumerate(text.splitlines(), 1):
        header = _HEADER.match(line)
        if header:
            table = header.group(1)
            continue
        value = _VALUE.match(line)
        if not value:
            continue
        key = f"{table}.{value.group(1)}" if table else value.group(1)
        lines[key] = number
        source = _SOURCE.search(line)
        if source:
            sources[key] = source.group(1)
    return lines, sources


def _flatten(data: dict, path: Path, lines: dict[str, int]) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            if key not in TABLES:
                raise InputError(f"{path}: unknown table [{key}] (accepted "
                                 f"{', '.join(f'[{t}]' for t in TABLES)})")
            flat.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            flat[key] = value
    for key in flat:
        if key not in FIELD_BY_KEY:
            at = f"{path}:{lines[key]}" if key in lines else str(path)
            table = key.rpartition(".")[0]
            near = [k for k in FIELD_BY_KEY if k.rpartition(".")[0] == table]
            raise InputError(f"{at}: unknown key {key!r} (accepted "
                             f"{', '.join(near or FIELD_BY_KEY)})")
    return flat


def _check_preset(flat: dict, where: Callable[[str], str]) -> None:
    """The preset exists."""

    if flat["preset"] not in models.list_presets():
        raise InputError(f"{where('preset')}: key 'preset' = {flat['preset']!r}: accepted "
                         f"one of {', '.join(models.list_presets())}")


__all__ = ["BALANCED", "FIELDS", "OVERLAPS", "Deployment", "deployment_path",
           "list_deployments", "load_deployment"]
