"""Precision policies for the variable-precision tensor unit, registered by name.

A policy decides the input precision (one of `models.chip_spec.VPCU_PRECISIONS`) of every
tensor-core kernel of a layer. Contract: `policy.precision(node, grad_norm)` is a pure
function of the kernel node (its `op`, `name`, `role`) and the layer's gradient norm (a
float, or None outside training); it returns a precision name, or None to keep the node's
own dtype (kernels that are not matrix products). Policies hold no state.

Registered policies (`make_policy(name, **params)`):

* `static` (`precision="bf16"`): every GEMM at one precision.
* `per_kernel` (`table=DEEPSEEK_RECIPE`): a table from node-name patterns (fnmatch) or op
  kinds to precisions, first match wins. DeepSeek-V3's recipe: GEMMs in fp8 (e4m3),
  attention and norms in bf16.
* `gradient_norm` (`low=1e-3`, `high=1e-1`): the scheduler of the co-design proposal:
  a layer whose gradient norm is below `low` runs its GEMMs in fp8 (e4m3), above `high`
  in fp32, else fp16.

Gradient norms per layer come from `GradientNorms.from_file` (CSV with columns
`layer,grad_norm`, or a .npy vector) or `GradientNorms.generated(layers, seed)` (log-normal,
seeded). `apply_policy(graph, policy, grad_norm)` returns the graph with each GEMM node
rebuilt at its precision (flops unchanged, `bytes_min` at the new operand width), and
`precision_table` lists the choices.

Left out: per-tensor (rather than per-kernel) precisions, FP8 scaling-factor overheads of a
precision the recipe did not plan for (`ops.gemm` adds FP8 block scales for any 1-byte
dtype), loss-scaling and convergence effects. Units: gradient norms are L2 norms
(dimensionless), bytes, FLOP.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from isa.errors import InputError
from models.chip_spec import VPCU_PRECISIONS
from workloads.graph import KernelGraph, KernelNode
from workloads.layers import ops

GEMM_OPS = ("gemm", "grouped_gemm")
WORKLOAD_DTYPE = {"fp32": "f32", "tf32": "f32", "fp16": "f16", "bf16": "bf16", "e4m3": "e4m3",
                  "e5m2": "e5m2"}
"""How a tensor of each precision is stored (tf32 operands occupy 4 bytes)."""
DEEPSEEK_RECIPE: Mapping[str, str] = {"gemm": "e4m3", "grouped_gemm": "e4m3",
                                      "attention": "bf16", "mla_decode": "bf16",
                                      "rmsnorm": "bf16", "layernorm": "bf16"}
"""DeepSeek-V3 training recipe (technical report, section 3.3): GEMMs in FP8, attention and
norms in BF16."""

POLICIES: dict[str, Callable] = {}


def register_policy(name: str):
    """Register the decorated policy class under `name`."""
    def wrap(cls):
        if name in POLICIES:
            raise ValueError(f"precision policy {name!r} registered twice")
        POLICIES[name] = cls
        return cls
    return wrap


def make_policy(name: str, **params):
    """The policy registered as `name`, built with `params`; InputError naming the choices."""
    if name not in POLICIES:
        raise InputError(f"precision policy {name!r} is not registered "
                         f"(accepted: {', '.join(sorted(POLICIES))})")
    return POLICIES[name](**params)


def _check_precision(value: str, where: str) -> str:
    if value not in VPCU_PRECISIONS:
        raise InputError(f"{where} = {value!r}: not a precision "
                         f"(accepted: {', '.join(VPCU_PRECISIONS)})")
    return value


@register_policy("static")
@dataclasses.dataclass(frozen=True)
class StaticPolicy:
    """Every GEMM at `precision`."""

    precision_name: str = "bf16"

    def __init__(self, precision: str = "bf16") -> None:
        object.__setattr__(self, "precision_name", _check_precision(precision, "precision"))

    def precision(self, node: KernelNode, grad_norm: float | None = None) -> str | None:
        return self.precision_name if node.op in GEMM_OPS else None


@register_policy("per_kernel")
@dataclasses.dataclass(frozen=True)
class PerKernelPolicy:
    """First matching entry of `table` (name pattern, then op kind); None when none matches."""

    table: tuple[tuple[str, str], ...]

    def __init__(self, table: Mapping[str, str] | None = None) -> None:
        entries = dict(DEEPSEEK_RECIPE if table is None else table)
        for key, value in entries.items():
            _check_precision(value, f"table[{key!r}]")
        object.__setattr__(self, "table", tuple(entries.items()))

    def precision(self, node: KernelNode, grad_norm: float | None = None) -> str | None:
        for key, value in self.table:
            if fnmatch.fnmatchcase(node.name, key):
                return value
        return dict(self.table).get(node.op)


@register_policy("gradient_norm")
@dataclasses.dataclass(frozen=True)
class GradientNormPolicy:
    """GEMMs of a layer in fp8 below `low`, fp32 above `high`, else fp16."""

    low: float = 1e-3
    high: float = 1e-1

    def __post_init__(self) -> None:
        if not 0 <= self.low < self.high:
            raise InputError(f"gradient_norm policy: low={self.low}, high={self.high} "
                             "(accepted: 0 <= low < high)")

    def precision(self, node: KernelNode, grad_norm: float | None = None) -> str | None:
        if node.op not in GEMM_OPS:
            return None
        if grad_norm is None:
            raise InputError(f"gradient_norm policy needs the layer's gradient norm for "
                             f"'{node.name}' (accepted: a float from GradientNorms)")
        if grad_norm < self.low:
            return "e4m3"
        return "fp32" if grad_norm > self.high else "fp16"


@dataclasses.dataclass(frozen=True)
class GradientNorms:
    """Per-layer gradient L2 norms, layer index -> norm."""

    values: tuple[float, ...]

    def __getitem__(self, layer: int) -> float:
        if not 0 <= layer < len(self.values):
            raise InputError(f"gradient norm of layer {layer} requested; the norms cover "
                             f"layers 0..{len(self.values) - 1}")
        return self.values[layer]

    def __len__(self) -> int:
        return len(self.values)

    @classmethod
    def generated(cls, layers: int, seed: int, median: float = 1e-2,
                  sigma: float = 1.5) -> GradientNorms:
        """Log-normal norms around `median` (natural-log spread `sigma`), from `seed`."""
        rng = np.random.default_rng(seed)
        return cls(tuple(float(v) for v in median * np.exp(sigma * rng.standard_normal(layers))))

    @classmethod
    def from_file(cls, path: str | Path) -> GradientNorms:
        """Norms from a CSV (`layer,grad_norm`, every layer 0..n-1 once) or a .npy vector."""
        path = Path(path)
        if path.suffix == ".npy":
            return cls(tuple(float(v) for v in np.load(path).reshape(-1)))
        frame = pd.read_csv(path)
        if not {"layer", "grad_norm"} <= set(frame.columns):
            raise InputError(f"{path}: columns {list(frame.columns)} (accepted: a CSV with "
                             "columns layer,grad_norm)")
        frame = frame.sort_values("layer")
        if list(frame.layer) != list(range(len(frame))):
            raise InputError(f"{path}: layers {list(frame.layer)} (accepted: each of "
                             "0..n-1 exactly once)")
        return cls(tuple(float(v) for v in frame.grad_norm))


def operand_elements(node: KernelNode) -> tuple[int, int]:
    """(A, B) elements a GEMM node reads (B = the weights), all groups together."""
    a = node.args
    if node.op == "gemm":
        return a["groups"] * a["m"] * a["k"], a["groups"] * a["k"] * a["n"]
    if a["ragged"] == "m":
        return a["m_total"] * a["k"], a["groups"] * a["k"] * a["n"]
    return a["m"] * a["k_total"], a["n"] * a["k_total"]


def retyped(node: KernelNode, precision: str) -> KernelNode:
    """A GEMM node rebuilt with operands stored in `precision` (flops unchanged)."""
    a = node.args
    dtype = WORKLOAD_DTYPE[precision]
    common = {"dtype": dtype, "out_dtype": a["out_dtype"], "deps": node.deps,
              "layout": a["layout"], "role": node.role, "stream": node.stream,
              "note": node.note}
    if node.op == "gemm":
        new = ops.gemm(node.name, m=a["m"], n=a["n"], k=a["k"], groups=a["groups"], **common)
    elif a["ragged"] == "m":
        new = ops.grouped_gemm(node.name, groups=a["groups"], n=a["n"], m_total=a["m_total"],
                               k=a["k"], **common)
    else:
        new = ops.grouped_gemm(node.name, groups=a["groups"], n=a["n"], k_total=a["k_total"],
                               m=a["m"], **common)
    return dataclasses.replace(new, args={**new.args, "precision": precision})


def apply_policy(graph: KernelGraph, policy, grad_norm: float | None = None) -> KernelGraph:
    """`graph` with every GEMM at the precision `policy` picks (other nodes unchanged)."""
    nodes = []
    for node in graph.nodes:
        precision = policy.precision(node, grad_norm)
        nodes.append(retyped(node, precision) if precision and node.op in GEMM_OPS else node)
    return KernelGraph(graph.name, tuple(nodes), dict(graph.meta))


def precision_table(graph: KernelGraph, policy, grad_norm: float | None = None) -> pd.DataFrame:
    """One row per node: name, op, role, precision (None = node's own dtype), flops."""
    rows = [{"name": n.name, "op": n.op, "role": n.role,
             "precision": policy.precision(n, grad_norm), "flops": n.flops}
            for n in graph.nodes]
    return pd.DataFrame(rows)
