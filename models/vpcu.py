"""Timing of the variable-precision tensor unit (VPCU): `vmma` and `vpcu.setprec`.

What it models
--------------
* `vmma` of shape m16n8kK at precision p (the code in its precision register, recorded per
  warp-instruction in the trace): it issues to the sub-partition's tensor pipe, which is busy
  `ceil(16 * 8 * K / (fma_per_clk_per_sm(p) / subpartitions))` cycles, where
  fma_per_clk_per_sm(p) = `units.vpcu.<p>_flop_per_clk_per_sm` / 2; the result is ready
  `units.tensor.mma_latency_cycles` after issue (as for `mma.sync`).
* `vpcu.setprec`: a precision switch. It drains and reconfigures the sub-partition's tensor
  pipe: the pipe is held `units.vpcu.switch_cycles` cycles (at least one issue cycle) and the
  precision register is ready that long after issue, so the next `vmma` waits for it.

Closed form (one kernel, w warps per sub-partition, tensor-bound): a loop iteration that runs,
per precision p of a sequence, one setprec and c vmma takes
`w * sum_p (switch_cycles * [sequence has > 1 precision] + c * interval(p))` cycles.

Left out: per-warp precision state in the pipe (a switch is charged per executed setprec, not
per change between interleaved warps), different latencies per precision, partial-rate
operation while switching. Timing a VPCU op on a config whose `units.vpcu.enabled` is false
is an `InputError`. Units: SM cycles, FMAs.
"""

from __future__ import annotations

import math
import re

from isa.errors import InputError
from isa.semantics.vpcu import PRECISIONS

_SHAPE = re.compile(r"m(\d+)n(\d+)k(\d+)")
FLOP_PER_FMA = 2


def require_vpcu(config, ins) -> None:
    """InputError unless the config has the VPCU that `ins` needs."""
    if not config.units.vpcu.enabled:
        raise InputError(f"'{ins.text}' (line {ins.loc.line}) needs the variable-precision "
                         "tensor unit, but units.vpcu.enabled is false in this config "
                         "(accepted: a preset with the VPCU, e.g. deepseek_codesign, or the "
                         "override units.vpcu.enabled = true with its rates)")


def vmma_fmas(ins) -> int:
    """FMAs of one warp-level `vmma` (M * N * K of its shape)."""
    return math.prod(int(v) for v in _SHAPE.search(ins.shape).groups())


def vmma_interval_cycles(fmas: int, precision: str, config) -> int:
    """Cycles the sub-partition's tensor pipe is busy with `fmas` FMAs at `precision`."""
    flop = config.units.vpcu.flop_per_clk_per_sm(precision)
    per_sub = flop / FLOP_PER_FMA / config.sm.subpartitions
    return max(1, math.ceil(fmas / per_sub - 1e-9))


def vmma_timing(ins, config, code: int) -> tuple[int, int]:
    """(latency, interval) cycles of `vmma` at precision code `code`."""
    require_vpcu(config, ins)
    interval = vmma_interval_cycles(vmma_fmas(ins), PRECISIONS[code], config)
    return config.units.tensor.mma_latency_cycles, interval


def setprec_timing(ins, config) -> tuple[int, int]:
    """(latency, interval) cycles of `vpcu.setprec`: the switch cost."""
    require_vpcu(config, ins)
    cycles = max(1, config.units.vpcu.switch_cycles)
    return cycles, cycles
