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
side) use the conversion unit (with `sm.cvt_model` "ptxas_like", the default, bf16 -> f32 and
f16 -> f32 use the int32 and fp16 units, the shift and HADD2.F32 ptxas emits for them),
`shfl` the shuffle unit, integer ops with `sm.int_pipe_model` "alu_fma" (the default) the
ALU (`int32`) or the FMA pipe (`fp32`, at the int32 rate) as ptxas places them (`_int_pipes`),
divides and square roots use their type's unit with the SFU latency
added (nvcc's divide is an SFU reciprocal plus FMAs).
`mma`/`wmma.mma` use the tensor unit: interval = FMAs of the shape / (dense FMA rate of the
input precision per sub-partition). Control and synchronisation ops use a one-cycle branch
unit. `cp.async` writes a per-warp pseudo register (the open group: the latest completion
of the copies issued since the last commit); a copy does not wait for the warp's earlier
ones (they are in flight together, as LDGSTS are). `cp.async.commit_group`
(`ACTION_COPY_COMMIT`) moves the open group into a ring of `COPY_GROUPS` committed groups'
registers, `cp.async.wait_group N` (`ACTION_COPY_WAIT`, `count` = N) holds the warp until
all but the N newest committed groups completed, `cp.async.wait_all` until every copy did
(`models.sm_core.copy_groups`; a two-stage pipeline with `wait_group 1`, `mma_bf16_gemm`
512^3 on h100_sxm, 19.35 -> 10.69 us against ncu's 12.35).

Hopper tile ops get their own actions, timed by the SM (`models.sm`) and the TMA engine
(`models.tma`):

* `wgmma.mma_async` (`ACTION_WGMMA`): each of the warpgroup's 4 warps issues a quarter of
  the m64nNkK FMAs to its sub-partition's tensor pipe, which is busy `16 N K / (rate / 4)`
  cycles (rate: dense FMA/clk/SM of the input precision, `units.tensor`); the warp itself
  is not held. The accumulators are written, not read, by the scoreboard (chained wgmmas
  accumulate inside the pipe); they are ready `max(wgmma_latency_cycles, interval)` after
  the pipe starts the op. `wgmma.commit_group` (`ACTION_WGMMA_COMMIT`) closes a group,
  `wgmma.wait_group N` (`ACTION_WGMMA_WAIT`, `count` = N) holds the warp until all but the
  N newest groups completed; `wgmma.fence` is a one-cycle branch-unit op.
* `cp.async.bulk{.tensor}` (`ACTION_TMA`): one LSU issue slot, then the SM's TMA engine.
  A store (`.bulk_group`) writes two per-warp pseudo registers: the cycle its writes to
  global memory completed, which `cp.async.bulk.wait_group` reads, and the cycle the TMA
  engine finished reading its shared-memory source, which `cp.async.bulk.wait_group.read`
  reads (the source may be reused then, the writes still in flight; `models.sm_core.post`,
  `models.tma`). Either waits for all of the warp's bulk stores, whatever N; like
  `cp.async`, a store does not wait for the warp's earlier ones.
* `mbarrier.arrive*`, `expect_tx`, `complete_tx` (`ACTION_MBARRIER`): a shared-memory
  access that contributes to a barrier phase (an arrival that releases at cluster scope
  holds its warp until its wgmma groups in flight completed plus
  `sm.cluster_release_cycles`, `count`, and contributes then: ptxas emits MEMBAR.ALL.GPU
  and ERRBAR before it, and a membar waits for the warp's outstanding operations);
  `try_wait`/`test_wait` (`ACTION_MBARRIER_WAIT`) hold the warp until the phase
  completes in simulated time.
* A fence at GPU or system scope (`membar.gl`, `fence.sc.gpu`, ...; `ACTION_FENCE`, `count`
  = `sm.gpu_fence_cycles`) holds its warp until the warp's memory operations in flight
  completed (its stores written to the L2; not its TMA copies, which the async proxy
  orders) and its wgmma groups, then `count` cycles more: the
  MEMBAR, ERRBAR and CCTL.IVALL ptxas emits for it. The L1 invalidation is not modelled.
* `setmaxnreg` is a one-cycle branch-unit op; occupancy keeps using the launch's register
  count (the re-partitioning between warpgroups inside a CTA does not change how many CTAs
  fit).

Parameter-space accesses (`ld.param`, `st.param`: `reads_parameter`) are not loads: ptxas
makes a kernel parameter a constant-bank-0 read (an operand `c[0x0][offset]` of its consumer
on sm_80; a ULDC into a uniform register, or an LDC, on sm_90a) and a call sequence's
arguments registers. Each takes one issue slot on the one-cycle branch unit (standing for the
uniform datapath; no LSU slot, no L1 access) and its value is usable `sm.param_read_cycles`
later; with `sm.param_read_model = "ptxas_like"` the reads ptxas makes per-thread LDCs
(`models.param_reads.ldc_reads`) are usable `sm.const_cache_hit_cycles` later instead.
`.const` loads stay memory instructions, served by the constant cache (`models.sm_memory`).

Co-design units (each off unless the config enables it): `vpcu.setprec` and `vmma` are timed
by `models.vpcu`, `zmma` (zero-skipping MMA) by `models.zce`, all on the tensor unit. `vmma`
and `zmma` (the ops in `DATA_TIMED`) depend on data the trace records per event (`detail`:
the precision code, the operands' zero statistics), so `event_timings` gives each distinct
detail its own timing entry. With `units.lut_exp.enabled`, `ex2` takes the LUT exp
latency and interval instead of the SFU's (other SFU ops keep theirs).

Fused runs: a run of plain one-cycle ops of one unit and latency (the 64 or 128 FFMAs of a
DeepSeek-scaled GEMM's promotion after every k-tile) may be traced as one event
(`fusable_run_ends`, `simulator.runner.trace.TraceRecorder`); `fused_timing` gives it a pc of its
own after the program's (`first_pc`, `count`), and the SM issues its pcs one by one at the
cycles greedy-then-oldest issues them traced one by one (`models.sm_core.issue_run`), so
the stats are the same bit for bit with fewer events (4096x4096x7168 fp8 on h800_sxm:
15.8 -> 12.2 s CPU). Only under greedy-then-oldest (`simulator.runner.simulate.Replay.recorder`).

Left out: dual issue, register-bank conflicts, operand collectors, per-opcode latencies
inside a unit (all FP32 ops share the FP32 latency); FP32 compares, selects and min/max
(FSETP, FSEL, FMNMX, on the ALU in the SASS) stay on the FP32 unit; ptxas's if-conversion
of a `selp` into a predicated op, and a 64-bit add's two SASS instructions; under the default
`sm.param_read_model = "uniform"` every parameter read is timed alike. Units: SM cycles.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass

import numpy as np

from isa.cfg import basic_blocks
from isa.dataflow import NO_DESTINATION
from isa.event_detail import EVENT_DETAILS
from isa.operands import DAddr, DImm, DReg, DSpecial
from isa.operands import registers_of as _registers
from models import vpcu, zce
from models.param_reads import ldc_reads
from models.sm_state import BARRIERS

UNIT_NAMES = ("fp32", "fp16", "fp64", "int32", "sfu", "conversion", "shuffle", "tensor", "lsu",
              "branch")
UNIT_INDEX = {name: k for k, name in enumerate(UNIT_NAMES)}
(ACTION_UNIT, ACTION_MEMORY, ACTION_BARRIER, ACTION_TMA, ACTION_MBARRIER, ACTION_MBARRIER_WAIT,
 ACTION_WGMMA, ACTION_WGMMA_COMMIT, ACTION_WGMMA_WAIT, ACTION_COPY_COMMIT,
 ACTION_COPY_WAIT, ACTION_FENCE) = range(12)
ASYNC_ACTIONS = frozenset(range(ACTION_TMA, ACTION_COPY_WAIT + 1))
COPY_GROUPS = 8
"""Committed `cp.async` groups a warp's scoreboard tracks apart (pseudo registers); a warp
with more outstanding merges its two oldest (it then waits for both together)."""
WAIT_ALL = -1
"""`count` of `cp.async.wait_all`: every copy, committed or not."""

_ISA_UNIT = {"fp32": "fp32", "fp16": "fp16", "fp64": "fp64", "int": "int32", "sfu": "sfu",
             "tensor": "tensor", "lsu": "lsu", "ctrl": "branch", "sync": "branch",
             "misc": "branch"}
_TENSOR_PRECISION = {"f64": "fp64", "tf32": "tf32", "f16": "fp16", "bf16": "bf16",
                     "e4m3": "fp8", "e5m2": "fp8", "s8": "int8", "u8": "int8"}
_SHAPE = re.compile(r"m(\d+)n(\d+)k(\d+)")
BRANCH_LATENCY_CYCLES = 1
ASYNC_COPY_REGISTER = "async-copy"
BULK_COPY_REGISTER = "bulk-copy"
BULK_READ_REGISTER = "bulk-copy-read"
_TILE_ACTIONS = {"cp.async.bulk.tensor": ACTION_TMA, "cp.async.bulk": ACTION_TMA,
                 "mbarrier.arrive": ACTION_MBARRIER, "mbarrier.arrive_drop": ACTION_MBARRIER,
                 "mbarrier.expect_tx": ACTION_MBARRIER, "mbarrier.complete_tx": ACTION_MBARRIER,
                 "mbarrier.try_wait": ACTION_MBARRIER_WAIT,
                 "mbarrier.test_wait": ACTION_MBARRIER_WAIT,
                 "barrier.cluster.arrive": ACTION_MBARRIER,
                 "barrier.cluster.wait": ACTION_MBARRIER_WAIT,
                 "wgmma.mma_async": ACTION_WGMMA, "wgmma.commit_group": ACTION_WGMMA_COMMIT,
                 "wgmma.wait_group": ACTION_WGMMA_WAIT,
                 "cp.async.commit_group": ACTION_COPY_COMMIT,
                 "cp.async.wait_group": ACTION_COPY_WAIT, "cp.async.wait_all": ACTION_COPY_WAIT}


@dataclass(frozen=True, slots=True)
class InstrTiming:
    """How one static instruction occupies the SM."""

    unit: int
    latency_cycles: int
    interval_cycles: int
    sources: tuple[int, ...]
    destinations: tuple[int, ...]
    action: int
    count: int = 0
    unchecked: tuple[int, ...] = ()   # destinations the instruction itself does not wait for
    first_pc: int = -1                # a fused run's first pc (its `count` pcs are timed)


def scoreboard_board(t: InstrTiming) -> tuple[int, ...]:
    """The registers an instruction's scoreboard check reads: its sources then its
    destinations, once each, without those it does not wait for (`unchecked`); a wgmma's
    sources only (its accumulators are written, not read)."""
    if t.action == ACTION_WGMMA:
        return t.sources
    return tuple(r for r in dict.fromkeys(t.sources + t.destinations) if r not in t.unchecked)


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
    if ins.opname.startswith("mma.sp"):      # 2:4 sparse: dense-equivalent FMAs, faster
        per_sub *= tensor.sparse_rate_multiplier
    if ins.opname == "wgmma.mma_async":
        interval = max(1, math.ceil(fmas / 4 / per_sub))
        return max(tensor.wgmma_latency_cycles, interval), interval
    return tensor.mma_latency_cycles, max(1, math.ceil(fmas / per_sub))


WIDENING_UNITS = {("f32", "bf16"): "int32", ("f32", "f16"): "fp16"}
"""(destination, source) type of the `cvt`s ptxas emits as no conversion instruction, and
the unit of what it emits instead (`sm.cvt_model` "ptxas_like"): SHF.L.U32 / IMAD.U32 for
bf16 -> f32, HADD2.F32 for f16 -> f32 (nvdisasm of nvcc 13's sm_90a and sm_80 code)."""


def _conversion_unit(ins, config) -> str:
    """The unit of a `cvt` with a float side (`sm.cvt_model`)."""
    if config.sm.cvt_model == "ptxas_like" and len(ins.types) == 2:
        unit = WIDENING_UNITS.get((ins.types[0].name, ins.types[1].name))
        if unit is not None and not ins.has("sat"):
            return unit
    return "conversion"


FMA_PIPE_INT_OPS = frozenset({"mul", "mad", "mul24", "mad24", "dp4a", "dp2a"})
"""Integer ops ptxas emits as IMAD / IMUL / IDP, which run on the FMA pipe (sm_80, sm_90a)."""
EITHER_PIPE_INT_OPS = frozenset({"add", "sub", "mov"})
"""Integer ops ptxas places on either pipe: IADD3 / MOV on the ALU, or IMAD.IADD /
IMAD.MOV.U32 / VIADD beside the FMAs (nvdisasm of the catalogued kernels, sm_90a: 4183
IADD3 and 1577 MOV against 399 IMAD.IADD, 872 VIADD and 3006 IMAD.MOV)."""
PREDICATE_LOGIC_OPS = frozenset({"and", "or", "xor", "not"})


def _int_pipes(program, config) -> dict[int, str]:
    """Per pc, the unit an integer op issues to under `sm.int_pipe_model` "alu_fma" (empty
    under "int32_unit"): multiplies on the FMA pipe (the `fp32` unit, at the int32 rate),
    adds, subtracts and register moves on whichever of the two a basic block has loaded
    less so far (counted in issue cycles, ptxas's static balancing), predicate logic folded
    into the compare or branch that consumes it (ISETP's and FSETP's predicate operand,
    `@P BRA P`: an issue slot on the branch unit, no ALU cycles), the rest on the ALU
    (`int32`)."""
    if config.sm.int_pipe_model != "alu_fma":
        return {}
    units, subs, warp = config.units, config.sm.subpartitions, config.sm.warp_size_threads
    int_cycles = _interval(units.int32, subs, warp)
    fp32_cycles = _interval(units.fp32, subs, warp)
    starts = set(basic_blocks(program)[0])
    pipes: dict[int, str] = {}
    alu = fma = 0
    for ins in program.instrs:
        if ins.pc in starts:
            alu = fma = 0
        if ins.unit == "fp32" and ins.spec.latency in ("alu", "mul", "fma"):
            fma += fp32_cycles
        if ins.unit != "int" or ins.spec.latency not in ("alu", "mul", "fma"):
            continue
        name = ins.opname
        if name in PREDICATE_LOGIC_OPS and ins.types and ins.types[0].name == "pred":
            pipes[ins.pc] = "branch"
        elif name in FMA_PIPE_INT_OPS:
            pipes[ins.pc] = "fp32"
            fma += int_cycles
        elif name in EITHER_PIPE_INT_OPS and not (
                name == "mov" and any(isinstance(o, DSpecial) for o in ins.ops)):
            if fma < alu:
                pipes[ins.pc] = "fp32"
                fma += int_cycles
            else:
                alu += int_cycles
        else:
            alu += int_cycles
    return pipes


def _unit_timing(ins, config, pipe: str | None = None) -> tuple[str, int, int]:
    """(unit name, latency cycles, interval cycles) of one instruction."""
    units, subs, warp = config.units, config.sm.subpartitions, config.sm.warp_size_threads
    if ins.opname == "vpcu.setprec":
        return ("tensor", *vpcu.setprec_timing(ins, config))
    if ins.opname in DATA_TIMED:
        return ("tensor", *DATA_TIMED[ins.opname](ins, config, 0))
    if ins.opname == "ex2" and units.lut_exp.enabled:
        return "sfu", units.lut_exp.latency_cycles, _interval(units.lut_exp, subs, warp)
    if reads_parameter(ins):
        return "branch", config.sm.param_read_cycles, 1
    if pipe == "branch":
        return pipe, BRANCH_LATENCY_CYCLES, 1
    if pipe == "fp32":          # an integer op on the FMA pipe, at the int32 rate
        return pipe, units.int32.latency_cycles, _interval(units.int32, subs, warp)
    name = _ISA_UNIT.get(ins.unit, "branch")
    latency_class = ins.spec.latency
    if ins.opname == "shfl":
        name = "shuffle"
    elif latency_class == "conv" and any(t.kind == "f" for t in ins.types):
        name = _conversion_unit(ins, config)
    if name == "tensor" and ins.opname.startswith("wgmma.") and ins.opname != "wgmma.mma_async":
        return "branch", BRANCH_LATENCY_CYCLES, 1
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
    ldc = ldc_reads(program) if config.sm.param_read_model == "ptxas_like" else frozenset()
    pipes = _int_pipes(program, config)
    for ins in program.instrs:
        unit, latency, interval = _unit_timing(ins, config, pipes.get(ins.pc))
        if ins.pc in ldc:
            latency = config.sm.const_cache_hit_cycles
        ops = list(ins.ops)
        writes = ins.opname not in NO_DESTINATION and ops
        dst_regs = _registers(ops[0]) if writes and not isinstance(ops[0], DAddr) else []
        src_ops = ops[1:] if dst_regs or ins.opname == "wgmma.mma_async" else ops
        src_regs = [r for op in src_ops for r in _registers(op)]
        guard = ins.guard
        if isinstance(guard, DReg):
            src_regs.append(guard)
        sources = numbering.regs(src_regs)
        destinations = numbering.regs(dst_regs)
        unchecked: tuple[int, ...] = ()
        action, count = ACTION_UNIT, 0
        if ins.opname == "cp.async":
            destinations = unchecked = (numbering.of((ASYNC_COPY_REGISTER,)),)
        elif ins.opname in ("cp.async.commit_group", "cp.async.wait_group",
                            "cp.async.wait_all"):
            # the open group, then the committed groups' ring (`models.sm_core`)
            destinations = unchecked = (numbering.of((ASYNC_COPY_REGISTER,)),) + tuple(
                numbering.of((ASYNC_COPY_REGISTER, g)) for g in range(COPY_GROUPS))
        elif ins.opname in ("cp.async.bulk", "cp.async.bulk.tensor") and \
                "bulk_group" in ins.flags:
            # completion, then the source's read (the second destination, `sm_core.post`)
            destinations = unchecked = (numbering.of((BULK_COPY_REGISTER,)),
                                        numbering.of((BULK_READ_REGISTER,)))
        elif ins.opname == "cp.async.bulk.wait_group":
            waited = BULK_READ_REGISTER if "read" in ins.flags else BULK_COPY_REGISTER
            sources = sources + (numbering.of((waited,)),)
        if ins.opname in _TILE_ACTIONS:
            action = _TILE_ACTIONS[ins.opname]
            if ins.opname.startswith("mbarrier.arrive") and "cluster" in ins.flags \
                    and "relaxed" not in ins.flags:       # release at cluster scope
                count = int(config.sm.cluster_release_cycles)
            if ins.opname == "cp.async.wait_all":
                count = WAIT_ALL
            elif action in (ACTION_WGMMA_WAIT, ACTION_COPY_WAIT):
                count = int(ins.ops[0].value)
        elif ins.unit == "lsu" and latency_class_is_memory(ins) and not reads_parameter(ins):
            action = ACTION_MEMORY
        elif ins.opname in ("bar", "barrier") and not ins.has("arrive"):
            action, count = ACTION_BARRIER, barrier_count(ins)
        elif is_gpu_fence(ins):
            action, count = ACTION_FENCE, int(config.sm.gpu_fence_cycles)
        timings.append(InstrTiming(UNIT_INDEX[unit], latency, interval, sources, destinations,
                                   action, count, unchecked))
    return timings, max(len(numbering.index), 1)


def is_gpu_fence(ins) -> bool:
    """A fence at GPU or system scope: `membar.gl`, `membar.sys`, `fence.sc` and
    `fence.acq_rel` at `.gpu` or `.sys` (ptxas: MEMBAR.SC.GPU or MEMBAR.ALL.GPU, then ERRBAR
    and CCTL.IVALL, nvdisasm of sm_90a code). `membar.cta`, `fence.*.cta`, `.cluster` and the
    proxy and mbarrier-init fences are not."""
    if ins.opname == "membar":
        return ins.has("gl") or ins.has("sys")
    return ins.opname == "fence" and (ins.has("gpu") or ins.has("sys"))


def barrier_count(ins) -> int:
    """A `bar.sync b{, n}`'s timing count: b + BARRIERS x ceil(n / 32), the warps it waits
    for; 0 warps (no n, or operands that are not immediates; a register id counts as
    barrier 0) and n >= the CTA's threads mean every live warp of the CTA (`sm_core`)."""
    ops = ins.ops
    b = int(ops[0].value) if ops and isinstance(ops[0], DImm) else 0
    warps = -(-int(ops[1].value) // 32) if len(ops) > 1 and isinstance(ops[1], DImm) else 0
    return b % BARRIERS + BARRIERS * warps


DATA_TIMED = {"vmma": vpcu.vmma_timing, "zmma": zce.zmma_timing}
"""Ops whose (latency, interval) depend on a per-event trace `detail` (precision code,
non-zero count): opname -> fn(ins, config, detail)."""


MAX_FUSED_RUN = 256
"""Longest run of instructions one fused event stands for."""


def fusable_run_ends(program, timings: list[InstrTiming]) -> np.ndarray:
    """For each pc, the end (exclusive) of a run of instructions from it that may be traced
    as one event (`simulator.runner.trace.TraceRecorder`; `models.sm_core` issues its pcs as
    greedy-then-oldest issues them traced one by one, `models.sm_core.issue_run`): plain unit ops
    (`ACTION_UNIT`) of one unit and latency with a one-cycle initiation interval,
    unguarded, no parameter accesses, without data-timed or per-event details. pc + 1 where
    no run of two starts."""
    instrs = program.instrs
    n = len(instrs)
    ends = np.arange(1, n + 1, dtype=np.int64)

    def plain(pc: int) -> bool:
        t, ins = timings[pc], instrs[pc]
        return (t.action == ACTION_UNIT and t.interval_cycles == 1 and ins.guard is None
                and not ins.control and not reads_parameter(ins) and ins.opname not in DATA_TIMED
                and ins.opname not in EVENT_DETAILS)

    pc = 0
    while pc < n:
        if not plain(pc):
            pc += 1
            continue
        head = (timings[pc].unit, timings[pc].latency_cycles)
        stop = pc + 1
        while stop < n and stop - pc < MAX_FUSED_RUN and plain(stop) and \
                (timings[stop].unit, timings[stop].latency_cycles) == head:
            stop += 1
        ends[pc:stop] = stop          # a suffix of a run is a run
        pc = stop
    return ends


def fused_timing(timings: list[InstrTiming], first: int, stop: int) -> InstrTiming:
    """The timing of pcs `first` .. `stop` - 1 traced as one event: the first's unit,
    latency and interval, `count` = the run's length, `first_pc` = `first`; no registers of
    its own (the SM checks and writes those of each pc of the run as it issues them,
    `models.sm_core`)."""
    return dataclasses.replace(timings[first], sources=(), destinations=(), unchecked=(),
                               count=stop - first, first_pc=first)


def fused_count(t: InstrTiming) -> int:
    """Warp-instructions one event of timing `t` stands for (a fused run's length, else 1)."""
    return t.count if t.first_pc >= 0 else 1


def event_timings(trace, timings: list[InstrTiming], program, config):
    """(trace, timings) with the timings of the trace's fused runs appended (their events'
    pcs already point past the program's, `trace.fused_runs` in order) and each event of a
    `DATA_TIMED` op given the timing of its detail.

    Events of such a pc are moved to a pc of their own per distinct detail value, appended
    after those with the same unit, registers and action and the latency and interval of
    that detail; every other event and pc is unchanged.
    """
    if trace.fused_runs:
        timings = list(timings) + [fused_timing(timings, a, b) for a, b in trace.fused_runs]
    pcs = [ins.pc for ins in program.instrs if ins.opname in DATA_TIMED]
    if not pcs or trace.n_events == 0:
        return trace, timings
    timings = list(timings)
    pc = trace.pc.copy()
    for at in pcs:
        ins = program.instrs[at]
        here = trace.pc == at
        for detail in np.unique(trace.detail[here]).tolist():
            latency, interval = DATA_TIMED[ins.opname](ins, config, int(detail))
            pc[here & (trace.detail == detail)] = len(timings)
            timings.append(dataclasses.replace(timings[at], latency_cycles=latency,
                                               interval_cycles=interval))
    return dataclasses.replace(trace, pc=pc), timings


PARAM_ACCESS_OPS = frozenset({"ld", "ldu", "st"})


def reads_parameter(ins) -> bool:
    """Whether the instruction is an access to the `.param` space (a kernel parameter, or
    a call sequence's argument or return value), timed as an operand read, not a load."""
    return ins.space == "param" and ins.opname in PARAM_ACCESS_OPS


def latency_class_is_memory(ins) -> bool:
    """Whether the instruction moves data through the LSU (loads, stores, atomics, copies)."""
    return ins.spec.latency == "mem"
