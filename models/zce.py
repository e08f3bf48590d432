"""Timing of the zero-skipping MMA (`zmma`) of the zero-compression engine (ZCE).

What it models
--------------
A `zmma` of shape m{M}n{N}k{K} costs the dense `mma.sync` interval of its input precision
(`ceil(M N K / (units.tensor.<p>_fma_per_clk_per_sm / subpartitions))`) scaled by the share
of work the engine cannot skip at `units.zce.granularity`, read from the operands' zeros
that the trace recorded for that warp-instruction (`isa.semantics.zce.event_detail`):

* element: non-zero products / (M N K);
* group: (m, 4-wide K group, n) units with a non-zero product / (M N K / 4);
* kblock: blocks of `units.zce.kblock_elements` K indices (at most K) holding a k with a
  non-zero product / blocks.

interval = max(1, ceil(dense_interval * max(units.zce.min_issue_fraction, share))); the
result latency stays `units.tensor.mma_latency_cycles`. Baseline for comparison: 2:4
structured sparsity runs at `units.tensor.sparse_rate_multiplier` times the dense rate.

Left out: the cost of finding the non-zeros (folded into `min_issue_fraction`), operand
bandwidth limits at high skip rates. Timing a `zmma` with `units.zce.enabled` false is an
`InputError`. Units: SM cycles, FMAs.
"""

from __future__ import annotations

import math
import re

from isa.errors import InputError
from isa.semantics.zce import GROUP_K, unpack_detail

_SHAPE = re.compile(r"m(\d+)n(\d+)k(\d+)")
_PRECISION = {"tf32": "tf32", "f16": "fp16", "bf16": "bf16", "e4m3": "fp8", "e5m2": "fp8",
              "s8": "int8", "u8": "int8"}


def active_share(detail: int, m: int, n: int, k: int, granularity: str,
                 kblock_elements: int) -> float:
    """Share of the dense work a zmma with packed `detail` still issues at `granularity`."""
    products, groups, mask = unpack_detail(int(detail))
    if granularity == "element":
        return products / (m * n * k)
    if granularity == "group":
        return groups / (m * n * (k // GROUP_K))
    block = min(kblock_elements, k)
    blocks = -(-k // block)
    live = sum(1 for b in range(blocks) if (mask >> (b * block)) & ((1 << block) - 1))
    return live / blocks


def dense_interval_cycles(ins, config) -> int:
    """Issue interval of the dense mma of the same form."""
    m, n, k = (int(v) for v in _SHAPE.search(ins.shape).groups())
    precision = _PRECISION[ins.types[1].name]
    per_sub = config.units.tensor.fma_per_clk_per_sm(precision) / config.sm.subpartitions
    return max(1, math.ceil(m * n * k / per_sub))


def zmma_timing(ins, config, detail: int) -> tuple[int, int]:
    """(latency, interval) cycles of a `zmma` whose operands' zeros are `detail`."""
    zce = config.units.zce
    if not zce.enabled:
        raise InputError(f"'{ins.text}' (line {ins.loc.line}) needs the zero-compression "
                         "engine, but units.zce.enabled is false in this config (accepted: a "
                         "preset with the ZCE, e.g. deepseek_codesign, or the override "
                         "units.zce.enabled = true)")
    m, n, k = (int(v) for v in _SHAPE.search(ins.shape).groups())
    share = max(zce.min_issue_fraction,
                active_share(detail, m, n, k, zce.granularity, zce.kblock_elements))
    dense = dense_interval_cycles(ins, config)
    return config.units.tensor.mma_latency_cycles, max(1, math.ceil(dense * share - 1e-9))
