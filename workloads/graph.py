"""Kernel graphs: the kernels of one transformer layer, their shapes, streams and order.

A `KernelNode` is one kernel launch described by its shape: an `op` kind, a dict of
shape arguments (gemm: m, n, k, dtype, groups, layout; attention: batch, heads,
kv_heads, seqlen_q, seqlen_k, headdim, causal, dtype; ...), the stream it is issued
on, the names of the nodes it waits for, its phase role, and two closed forms that
give a roofline without simulation: `flops` (floating-point operations, a
multiply-add counted as 2) and `bytes_min` (compulsory bytes read plus written in
device memory, each operand touched once). A `KernelGraph` is a validated DAG of
nodes in issue order.

Left out: the ISA program, launch geometry and tensors of each kernel (the kernel
templates attach those); timing of any kind.

Units: flops in floating-point operations, bytes in bytes, shapes in elements.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from isa.errors import InputError

OPS = ("gemm", "grouped_gemm", "attention", "mla_decode", "softmax", "rmsnorm", "layernorm",
       "swiglu", "gelu", "rope", "residual_add", "moe_gating", "alltoall_dispatch",
       "alltoall_combine", "allreduce", "quantize")
STREAMS = ("compute", "comm", "wgrad")
ROLES = ("forward", "dgrad", "wgrad")
COMM_OPS = ("alltoall_dispatch", "alltoall_combine", "allreduce")


class GraphError(InputError):
    """A kernel graph is malformed: duplicate or unknown names, a cycle, a bad field."""


@dataclass(frozen=True, slots=True)
class KernelNode:
    """One kernel: shape arguments, stream, dependencies, role and closed-form cost.

    `args` is a plain dict (kept picklable for process pools); treat it as read-only.
    """

    name: str
    op: str
    args: dict[str, Any]
    stream: str = "compute"
    deps: tuple[str, ...] = ()
    role: str = "forward"
    flops: int = 0
    bytes_min: int = 0
    note: str = ""

    def __post_init__(self) -> None:
        _check_choice(self.name, "op", self.op, OPS)
        _check_choice(self.name, "stream", self.stream, STREAMS)
        _check_choice(self.name, "role", self.role, ROLES)
        if not isinstance(self.deps, tuple):
            object.__setattr__(self, "deps", tuple(self.deps))
        if self.flops < 0 or self.bytes_min < 0:
            raise GraphError(f"node {self.name!r}: flops and bytes_min must be >= 0, got "
                             f"{self.flops} and {self.bytes_min}")

    def __hash__(self) -> int:  # args is a dict: hash the identifying fields
        return hash((self.name, self.op, self.stream, self.deps, self.role, self.flops,
                     self.bytes_min))

    @property
    def intensity_flops_per_byte(self) -> float:
        """Arithmetic intensity of the closed forms (0 for pure data movement)."""
        return self.flops / self.bytes_min if self.bytes_min else 0.0


def _check_choice(node: str, key: str, value: str, accepted: tuple[str, ...]) -> None:
    if value not in accepted:
        raise GraphError(f"node {node!r}: unknown {key} {value!r} (expected one of "
                         f"{', '.join(accepted)})")


@dataclass(frozen=True, slots=True)
class KernelGraph:
    """A DAG of kernel nodes in issue order; validated on construction."""

    name: str
    nodes: tuple[KernelNode, ...]
    meta: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.nodes, tuple):
            object.__setattr__(self, "nodes", tuple(self.nodes))
        self.validate()

    def __hash__(self) -> int:  # meta is a dict: hash the name and nodes
        return hash((self.name, self.nodes))

    def __iter__(self) -> Iterator[KernelNode]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)

    def node(self, name: str) -> KernelNode:
        """The node called `name`; GraphError naming the graph if there is none."""
        for n in self.nodes:
            if n.name == name:
                return n
        raise GraphError(f"graph {self.name!r} has no node {name!r}")

    def names(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.nodes)

    def select(self, *, op: str | None = None, stream: str | None = None,
               role: str | None = None) -> tuple[KernelNode, ...]:
        """Nodes matching every given field, in issue order."""
        return tuple(n for n in self.nodes if (op is None or n.op == op)
                     and (stream is None or n.stream == stream)
                     and (role is None or n.role == role))

    def validate(self) -> None:
        """Raise GraphError on duplicate names, unknown dependencies or a cycle."""
        seen: set[str] = set()
        for n in self.nodes:
            if n.name in seen:
                raise GraphError(f"graph {self.name!r}: duplicate node name {n.name!r}")
            seen.add(n.name)
        for n in self.nodes:
            unknown = [d for d in n.deps if d not in seen]
            if unknown:
                raise GraphError(f"graph {self.name!r}: node {n.name!r} depends on unknown "
                                 f"node(s) {', '.join(map(repr, unknown))}")
        self.topological_order()

    def topological_order(self) -> tuple[KernelNode, ...]:
        """Nodes ordered so each follows its dependencies; ties keep issue order."""
        index = {n.name: i for i, n in enumerate(self.nodes)}
        waiting = {n.name: len(set(n.deps)) for n in self.nodes}
        users: dict[str, list[str]] = {n.name: [] for n in self.nodes}
        for n in self.nodes:
            for d in set(n.deps):
                users[d].append(n.name)
        ready = sorted((name for name, k in waiting.items() if k == 0), key=index.get)
        order: list[KernelNode] = []
        while ready:
            name = ready.pop(0)
            order.append(self.nodes[index[name]])
            for u in users[name]:
                waiting[u] -= 1
                if waiting[u] == 0:
                    ready.append(u)
            ready.sort(key=index.get)
        if len(order) != len(self.nodes):
            stuck = sorted((k for k, v in waiting.items() if v > 0), key=index.get)
            raise GraphError(f"graph {self.name!r}: dependency cycle among "
                             f"{', '.join(map(repr, stuck))}")
        return tuple(order)

    @property
    def flops(self) -> int:
        return sum(n.flops for n in self.nodes)

    @property
    def bytes_min(self) -> int:
        return sum(n.bytes_min for n in self.nodes)

    def totals(self, by: str = "op") -> pd.DataFrame:
        """Count, flops and bytes_min summed by `op`, `stream` or `role`."""
        if by not in ("op", "stream", "role"):
            raise GraphError(f"totals(by={by!r}): expected 'op', 'stream' or 'role'")
        frame = self.to_frame()
        out = frame.groupby(by, sort=False).agg(
            count=("name", "size"), flops=("flops", "sum"), bytes_min=("bytes_min", "sum"))
        return out

    def totals_by_op(self) -> pd.DataFrame:
        """Count, flops and bytes_min per op kind."""
        return self.totals("op")

    def to_frame(self) -> pd.DataFrame:
        """One row per node: name, op, stream, role, deps, flops, bytes_min, intensity,
        note, and the shape args as a dict column."""
        rows = [{"name": n.name, "op": n.op, "stream": n.stream, "role": n.role,
                 "deps": ",".join(n.deps), "flops": n.flops, "bytes_min": n.bytes_min,
                 "intensity_flops_per_byte": n.intensity_flops_per_byte, "note": n.note,
                 "args": dict(n.args)} for n in self.nodes]
        columns = ["name", "op", "stream", "role", "deps", "flops", "bytes_min",
                   "intensity_flops_per_byte", "note", "args"]
        return pd.DataFrame(rows, columns=columns)
