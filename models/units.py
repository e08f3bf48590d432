"""Execution units of an SM sub-partition: which unit each static instruction uses, for how long.

What it models
--------------
`instruction_timings(program, config)` turns every decoded instruction of a program into an
`InstrTiming`: the unit it issues to, its issue-to-result latency and the initiation interval
(cycles the unit of one sub-partition is busy per warp instruction, from the preset's
results-per-clock-per-SM: `32 lanes * subpartitions / results_per_clk_per_sm`, at least one
cycle), the registers it reads and writes (dense indices for the scoreboard) and what the SM
does with it besides (`ACTION_*`: plain unit op, memory through the LSU, barrier, exit).

Unit choice: the decoded `unit` of the ISA (`fp32`, `fp16`, `fp64`, `int`, `sfu`, `tensor`,
`lsu`, `ctrl`, `sync`, `misc`) refined by latency class: conversions (`cvt` with a float
side) use the conversion unit, `shfl` the shuffle unit, divides and square roots use their
type's unit with the SFU latency added (nvcc's divide is an SFU reciprocal plus FMAs).
`mma`/`wmma.mma` use the tensor unit: interval = FMAs of the shape / (dense FMA rate of the
input precision per sub-partition). Control and synchronisation ops use a one-cycle branch
unit. `cp.async` writes a per-warp pseudo register that `cp.async.wait_*` reads.

Left out: dual issue, register-bank conflicts, operand collectors, per-opcode latencies
inside a unit (all FP32 ops share the FP32 latency). Units: SM cycles.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from isa.operands import DAddr, DNeg, DReg, DVec

UNIT_NAMES = ("fp32", "fp16", "fp64", "int32", "sfu", "conversion", "shuffle", "tensor", "lsu",
              "branch")
UNIT_INDEX = {name: k for k, name in enumerate(UNIT_NAMES)}
ACTION_UNIT, ACTION_MEMORY, ACTION_BARRIER = range(3)

_NO_DESTINATION = frozenset({"st", "red", "stmatrix", "wmma.store", "prefetch", "prefetchu",
                             "cp.async"})
_ISA_UNIT = {"fp32": "fp32", "fp16": "fp16", "fp64": "fp64", "int": "int32", "sfu": "sfu",
             "tensor": "tensor", "lsu": "lsu", "ctrl": "branch", "sync": "branch",
             "misc": "branch"}
_TENSOR_PRECISION = {"f64": "fp64", "tf32": "tf32", "f16": "fp16", "bf16": "bf16",
                     "e4m3": "fp8", "e5m2": "fp8", "s8": "int8", "u8": "int8"}
_SHAPE = re.compile(r"m(\d+)n(\d+)k(\d+)")
BRANCH_LATENCY_CYCLES = 1
ASYNC_COPY_REGISTER = "async-copy"


@dataclass(frozen=True, slots=True)
class InstrTiming:
    """How one static instruction occupies the SM."""

    unit: int
    latency_cycles: int
    interval_cycles: int
    sources: tuple[int, ...]
    destinations: tuple[int, ...]
    action: int


def _registers(op) -> list[DReg]:
    if isinstance(op, DReg):
        return [op]
    if isinstance(op, DNeg):
        return [op.reg]
    if isinstance(op, DVec):
        return [r for item in op.items for r in _registers(item)]
    if isinstance(op, DAddr) and isinstance(op.base, DReg):
        return [op.base]
    pipe_value = getattr(op, "value", None)
    pipe_pred = getattr(op, "pred", None)
    if isinstance(pipe_value, DReg) and isinstance(pipe_pred, DReg):
        return [pipe_value, pipe_pred]
    return []


class RegisterNumbering:
    """Dense scoreboard indices for the registers a program uses (plus pseudo registers)."""

    def __init__(self) -> None:
        self.index: dict[tuple, int] = {}

    def of(self, key: tuple) -> int:
        return self.index.setdefault(key, len(self.index))

    def regs(self, regs: list[DReg]) -> tuple[int, ...]:
        return tuple(dict.fromkeys(self.of((r.fid, r.index)) for r in regs))


def _interval(spec, subpartitions: int, warp: int) -> int:
    return max(1, math.ceil(spec.initiation_interval_cycles(subpartitions, warp) - 1e-9))


def _tensor_timing(ins, config) -> tuple[int, int]:
    tensor = config.units.tensor
    names = [t.name for t in ins.types]
    precision = next((_TENSOR_PRECISION[n] for n in names[1:] + names if n in _TENSOR_PRECISION),
                     "fp16")
    shape = _SHAPE.search(ins.shape or "") or _SHAPE.search(ins.text)
    fmas = math.prod(int(v) for v in shape.groups()) if shape else 16 * 8 * 16
    per_sub = max(tensor.fma_per_clk_per_sm(precision), 1) / config.sm.subpartitions
    return tensor.mma_latency_cycles, max(1, math.ceil(fmas / per_sub))


def _unit_timing(ins, config) -> tuple[str, int, int]:
    """(unit name, latency cycles, interval cycles) of one instruction."""
    units, subs, warp = config.units, config.sm.subpartitions, config.sm.warp_size_threads
    name = _ISA_UNIT.get(ins.unit, "branch")
    latency_class = ins.spec.latency
    if ins.opname == "shfl":
        name = "shuffle"
    elif latency_class == "conv" and any(t.kind == "f" for t in ins.types):
        name = "conversion"
    if name == "tensor":
        latency, interval = _tensor_timing(ins, config)
        return name, latency, interval
    if name == "branch":
        return name, BRANCH_LATENCY_CYCLES, 1
    spec = getattr(units, name)
    latency = spec.latency_cycles
    if latency_class == "div" or (name == "sfu" and ins.opname in ("sqrt", "rcp") and
                                  not ins.has("approx")):
        latency += units.sfu.latency_cycles
    return name, latency, _interval(spec, subs, warp)


def instruction_timings(program, config) -> tuple[list[InstrTiming], int]:
    """Per-pc timings of `program` and the number of scoreboard registers per warp."""
    numbering = RegisterNumbering()
    timings = []
    for ins in program.instrs:
        unit, latency, interval = _unit_timing(ins, config)
        ops = list(ins.ops)
        writes = ins.opname not in _NO_DESTINATION and ins.opname != "bar" and ops
        dst_regs = _registers(ops[0]) if writes and not isinstance(ops[0], DAddr) else []
        src_ops = ops[1:] if dst_regs else ops
        src_regs = [r for op in src_ops for r in _registers(op)]
        guard = ins.guard
        if isinstance(guard, DReg):
            src_regs.append(guard)
        sources = numbering.regs(src_regs)
        destinations = numbering.regs(dst_regs)
        if ins.opname == "cp.async":
            destinations = (numbering.of((ASYNC_COPY_REGISTER,)),)
        elif ins.opname in ("cp.async.wait_group", "cp.async.wait_all"):
            sources = sources + (numbering.of((ASYNC_COPY_REGISTER,)),)
        action = ACTION_UNIT
        if ins.unit == "lsu" and latency_class_is_memory(ins):
            action = ACTION_MEMORY
        elif ins.opname in ("bar", "barrier") and not ins.has("arrive"):
            action = ACTION_BARRIER
        timings.append(InstrTiming(UNIT_INDEX[unit], latency, interval, sources, destinations,
                                   action))
    return timings, max(len(numbering.index), 1)


def latency_class_is_memory(ins) -> bool:
    """Whether the instruction moves data through the LSU (loads, stores, atomics, copies)."""
    return ins.spec.latency == "mem"
