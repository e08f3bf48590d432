"""Simulate the kernels of a mapped reference trace as ops, and say why the others are not.

`simulate_reference(df, config, fidelity, front_end_us=...)` takes a kernel table from
`read_kineto` or `read_kernel_csv` after `map_kernels` and returns one row per kernel
(nothing dropped) with the registry op it ran as, its sizes, the simulated time and a
`status`:

    simulated   built with `workloads.ops.build_op` and timed with `simulate_op`
    unmatched   neither an operator nor a kernel-name rule maps the kernel
    no_op       the mapped op has no builder registered in `workloads.ops.OPS` (yet)
    no_shapes   the trace does not give the sizes the builder requires
    error       the builder or the simulator rejected the sizes (`InputError`)

and a `reason` sentence for every status but `simulated` (where the operators around the
launch did not give the op, their reason leads: `map_reason` of `map_kernels`). The
registry is read when the function runs, so ops registered later are picked up.

Op kind and sizes: a kernel mapped through its operator (`workloads.traces.operators`)
carries both (`op`, `sizes`). Otherwise the kind is the mapped op itself, its `_` spelled
`-` (`residual_add` -> `residual-add`), or an alias of `OP_ALIASES` (`grouped_gemm` ->
`gemm`), and the sizes come from a CSV's shape columns (`input_shapes` holds them as a JSON
object) whose names are the builder's flag names (`m`, `n`, `k`, `rows`, `cols`, ...), or
from Kineto "Input Dims" (a list of shapes): for a GEMM m = product of the first matrix's
leading dims, k its last, n the second matrix's last dim (its first for `linear`, whose
weight is [n, k]), and a batched (3-D) pair gives `groups`; for an op with `rows`/`cols`,
rows = product of the first input's leading dims and cols its last. Identical (op, sizes)
pairs are simulated once.

Simulated figure: `simulate_op`'s `time_us` on `config`, which holds the host launch
overhead, as CUDA events around an operator see it (a kernel CSV's measurements). With
`front_end_us` given, each op is simulated with `launch.kernel_overhead_us = 0` and
`launch.kernel_front_end_us = front_end_us`: the kernel's duration as a profiler's activity
record shows it (a Kineto trace; `KINETO_FRONT_END_US`).

Memsets: with `front_end_us` given (a Kineto trace) a `memset` row is the driver's
`cudaMemsetAsync` as CUPTI records it (activity category `gpu_memset`), not a kernel launch,
so it is timed as one: `driver_memset_us`, `KINETO_MEMSET_US` plus its bytes over the HBM's
peak bandwidth, nothing simulated. A kernel CSV (CUDA events around an operator) keeps the
`memset` op's fill kernel with the preset's launch costs.

Decode attention: `kernels.decode_attention = "xqa"` (the presets' default) times GQA decode
with the XQA-style kernel, TensorRT-LLM's. A trace records the kernel that ran, so an
attention kernel whose name is not XQA's (`XQA_KERNEL`: cuDNN's SDPA kernels, FlashAttention's)
is timed with the FlashAttention-style template (`kernels.decode_attention = "fa3"`), the
program closer to it.

L2 at the start (`l2_start`, default None: every op as `config` says, cold unless its
`fidelity.l2_start` says otherwise): with "warm-inputs" the ops of `WARM_KINDS` (element-wise,
copy, cat and norm kernels) are simulated with `fidelity.l2_start = "warm-inputs"`, their
inputs resident in the L2 as the kernel before them left them (`simulator.runner.l2_start`:
when the inputs fit in it together), the others as `config` says. A trace records no tensor
identities, so which kernel wrote an input is not known; these kinds read activations the
layer has just computed (and small constants: a norm's weight, RoPE's tables), while a
GEMM's weights and attention's KV cache were not written by the kernel before and outgrow
the L2 at these sizes, so GEMMs and attention start cold.

Left out: fused kernels that are more than one op, sizes from Kineto grid/block or name
hints, dtypes of kernels mapped by name (builders use their default precision).
Units: microseconds.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pandas as pd

import workloads.ops as op_registry  # by attribute: tests swap simulate_op/build_op
from isa.errors import InputError
from models.roofline import chip_peaks
from workloads.ops import OP_FLAGS, OPS

OP_ALIASES = {"grouped_gemm": "gemm"}
KINETO_FRONT_END_US = 0.94
"""What a CUPTI kernel activity record (Kineto's `dur`) holds beyond the SMs' simulated span:
the grid's launch and drain as the activity timestamps see them. Source: fit,
`python -m workloads.traces.kineto_front_end` (0.936 us: the median of measured minus
simulated span over the 20 FIT rows, the single-CTA kernels of the LLaMA-3-8B prefill trace,
h100_sxm, sampled, simulated as `ptxsim compare` does: at the trace's recorded 1.98 GHz with
warm inputs; per row 0.78 to 1.60 us; the decode trace and every multi-CTA kernel held back;
0.854 us at the preset's 1.83 GHz from a cold L2). ncu's duration holds more
(`launch.kernel_front_end_us`, 2.75 us on h100_sxm), so that preset value does not apply to
a trace's kernel durations."""
KINETO_MEMSET_US = 0.77
"""The fixed part of a driver memset's CUPTI activity record (`driver_memset_us`). Source:
fit, `python -m workloads.traces.kineto_front_end` (0.767 us: the median of measured
duration minus bytes over the HBM peak over the 5 FIT rows, the LLaMA-3-8B prefill trace's
memsets at even positions, 4 bytes each, 0.70 to 1.31 us; the 5 at odd positions held
back). Less than a kernel's front end (`KINETO_FRONT_END_US`): no grid is launched as a
kernel's is."""
XQA_KERNEL = re.compile(r"xqa|kernel_mha", re.IGNORECASE)
"""Kernel names of TensorRT-LLM's XQA decode kernels (`kernel_mha` in `cpp/kernels/xqa/`)."""
WARM_KINDS = ("elementwise", "copy", "cat", "rmsnorm", "layernorm", "softmax")
"""Op kinds that start with their inputs in the L2 when `l2_start` is "warm-inputs" (module
docstring); cuBLAS's split-K reduction (an element-wise add) reads the partial sums its GEMM
has just written."""
STATUSES = ("simulated", "unmatched", "no_op", "no_shapes", "error")
RESULT_COLUMNS = ("kind", "sizes", "simulated_us", "status", "reason")


def op_kind(op: str | None, registry) -> str | None:
    """The registry kind a mapped op runs as, or None when none is registered."""
    if not op:
        return None
    for candidate in (op, op.replace("_", "-"), OP_ALIASES.get(op)):
        if candidate and candidate in registry:
            return candidate
    return None


def _shape_dict(row: dict) -> dict[str, Any] | None:
    shapes = row.get("input_shapes")
    if isinstance(shapes, str):
        try:
            shapes = json.loads(shapes)
        except json.JSONDecodeError:
            return None
    return shapes if isinstance(shapes, dict) else None


def _dims_list(row: dict) -> list[list[int]]:
    shapes = row.get("input_shapes")
    if isinstance(shapes, str):
        try:
            shapes = json.loads(shapes)
        except json.JSONDecodeError:
            return []
    if not isinstance(shapes, (list, tuple)):
        return []
    return [list(s) for s in shapes if isinstance(s, (list, tuple)) and s
            and all(isinstance(d, int) for d in s)]


def sizes_from_dims(kind: str, cpu_op: str | None, dims: list[list[int]],
                    wanted: set[str]) -> dict[str, int]:
    """Builder sizes from Kineto "Input Dims" (see the module docstring); {} if none fit."""
    matrices = [d for d in dims if len(d) >= 2]
    if {"m", "n", "k"} <= wanted and len(matrices) >= 2:
        a, b = matrices[0], matrices[1]
        if "linear" in str(cpu_op or ""):
            return {"m": math.prod(a[:-1]), "k": a[-1], "n": b[0]}
        if len(a) == 3 and len(b) == 3 and "groups" in wanted:
            return {"groups": a[0], "m": a[1], "k": a[2], "n": b[2]}
        return {"m": math.prod(a[:-1]), "k": a[-1], "n": b[-1]}
    if {"rows", "cols"} <= wanted and dims:
        first = dims[0]
        return {"rows": math.prod(first[:-1]) if len(first) > 1 else 1, "cols": first[-1]}
    return {}


def row_sizes(row: dict, kind: str, flags) -> tuple[dict[str, int], list[str]]:
    """(sizes for the builder, names of required flags still missing)."""
    wanted = {f.dest for f in flags}
    given = _shape_dict(row)
    if given is not None:
        sizes = {k: int(v) for k, v in given.items() if k in wanted}
    else:
        sizes = sizes_from_dims(kind, row.get("cpu_op"), _dims_list(row), wanted)
    missing = [f.name for f in flags if f.required and f.dest not in sizes]
    return sizes, missing


def driver_memset_us(config, nbytes: int, fixed_us: float = KINETO_MEMSET_US) -> float:
    """A driver memset of `nbytes` as a Kineto activity record times it: `fixed_us` plus the
    bytes written at the HBM's peak bandwidth (`models.roofline.chip_peaks`)."""
    hbm_gbps = chip_peaks(config.to_dict())["hbm_gbps"]
    return float(fixed_us) + nbytes / (hbm_gbps * 1e3)


def kernel_config(config, front_end_us: float):
    """`config` for kernel durations: no host launch overhead, the given front end."""
    return config.with_overrides({"launch.kernel_overhead_us": 0.0,
                                  "launch.kernel_front_end_us": float(front_end_us)})


def runs_fa3_instead(row: dict, kind: str, config) -> bool:
    """Whether the row's attention, timed with `kernels.decode_attention = "xqa"`, ran a
    kernel that is not XQA's and so runs the FlashAttention-style template (module
    docstring)."""
    return (kind == "attention" and config.kernels.decode_attention == "xqa"
            and not XQA_KERNEL.search(str(row.get("name", ""))))


def _reason(row: dict, text: str) -> str:
    """`text`, after the reason the operators did not map the kernel (where there is one)."""
    lead = row.get("map_reason")
    return f"{lead}; by kernel name: {text}" if isinstance(lead, str) and lead else text


def _planned(row: dict, registry, flags) -> tuple:
    """(kind, sizes, None) of a row, or (kind, sizes text, (status, reason)) when it cannot
    be simulated."""
    if isinstance(row.get("sizes"), str):
        return row["op"], json.loads(row["sizes"]), None
    if not isinstance(row.get("rule"), str):
        return None, None, ("unmatched", _reason(row, "no mapping rule matches the kernel "
                                                      "name"))
    kind = op_kind(row.get("op"), registry)
    if kind is None:
        return None, None, ("no_op", _reason(
            row, f"op {row.get('op')!r} (category {row.get('category')}) has no builder in "
                 f"workloads.ops; registered: {', '.join(sorted(registry))}"))
    sizes, missing = row_sizes(row, kind, flags[kind])
    if missing:
        text = json.dumps(sizes, sort_keys=True)
        return kind, text, ("no_shapes", _reason(
            row, f"op {kind} needs {', '.join(missing)}; the trace gives "
                 f"{text if sizes else 'no shape arguments'}"))
    return kind, sizes, None


def simulate_reference(df: pd.DataFrame, config, fidelity: str | None = None,
                       progress=None, front_end_us: float | None = None,
                       costs: dict | None = None, l2_start: str | None = None,
                       memset_us: float = KINETO_MEMSET_US) -> pd.DataFrame:
    """`df` (mapped kernels) with `RESULT_COLUMNS` added (see the module docstring).
    `progress(index, total, name)`, when given, is called before each kernel row; `costs`,
    when given, receives the CPU seconds of each distinct op, keyed (kind, sizes JSON);
    `l2_start` as the module docstring says; `memset_us`: the fixed part of a driver memset
    (`driver_memset_us`, with `front_end_us` given)."""
    import time


    if front_end_us is not None:
        config = kernel_config(config, front_end_us)
    warm = (config.with_overrides({"fidelity.l2_start": l2_start})
            if l2_start is not None else config)
    fa3 = config.with_overrides({"kernels.decode_attention": "fa3"})
    cache: dict[tuple, tuple[float | None, str | None]] = {}
    results = []
    rows = df.to_dict("records")
    for index, row in enumerate(rows):
        if progress is not None:
            progress(index, len(rows), str(row.get("name", "")))
        kind, sizes, refused = _planned(row, OPS, OP_FLAGS)
        if refused is not None:
            results.append((kind, sizes, math.nan, *refused))
            continue
        text = json.dumps(sizes, sort_keys=True)
        op_config, variant = config, None
        if runs_fa3_instead(row, kind, config):
            op_config, variant = fa3, "fa3"
        if l2_start is not None and kind in WARM_KINDS:
            op_config, variant = warm, l2_start
        driver = front_end_us is not None and kind == "memset"
        key = (kind, text, "driver" if driver else variant)
        if key not in cache:
            started = time.process_time()
            try:
                if driver:
                    cache[key] = (driver_memset_us(config, int(sizes["bytes"]),
                                                   memset_us), None)
                else:
                    plan = op_registry.build_op(kind, op_config, **sizes)
                    result = op_registry.simulate_op(plan, op_config, fidelity)
                    cache[key] = (float(result["time_us"]), None)
            except InputError as exc:
                cache[key] = (None, str(exc))
            if costs is not None:
                costs[(kind, text)] = time.process_time() - started
        time_us, error = cache[key]
        if error is not None:
            results.append((kind, text, math.nan, "error", error))
        else:
            results.append((kind, text, time_us, "simulated", None))
    out = df.copy()
    for i, column in enumerate(RESULT_COLUMNS):
        out[column] = [r[i] for r in results]
    return out
