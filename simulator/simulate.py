"""`simulate_kernel`: run a PTX kernel functionally, then time its warp traces on the chip model.

What it models
--------------
Functional first: `isa.run_kernel` computes the results (the caller's arrays are updated
exactly as `isa.run_kernel` would) while `simulator.trace.TraceRecorder` records every warp's
instruction stream. The timing model then replays the traces: CTAs are dispatched to the
compute SMs under the occupancy limits (`models.cta_dispatch`), each SM issues through its
warp schedulers to units and the LSU (`models.sm`), memory answers through the system built by
`simulator.build_system`. Timing never changes a result.

`KernelResult.stats` is the project's long table (`run_id, kernel, component, stat, value,
unit`): kernel totals (cycles, time, warp-instructions, occupancy), per-unit issued
instructions and busy cycles, scheduler stall cycles by reason, requests and bytes per memory
level. Same inputs give the same stats, bit for bit.

Left out: sampled fidelity (every CTA is timed), kernel launch overhead, concurrent kernels.
Units: SM cycles, microseconds, counts, bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

import isa
from isa.launch import dim3
from models.cached_memory import CachedMemoryTracer
from models.cta_dispatch import CtaDispatcher, estimate_registers, occupancy
from models.sm import DEFAULT_QUANTUM_CYCLES, KernelImage, StreamingMultiprocessor
from models.sm_tracer import MemoryTracer, SmTracer
from models.units import instruction_timings
from simulator.stats import Stat, StatSheet
from simulator.system import build_system
from simulator.trace import TraceRecorder

KERNEL_STATS = (
    Stat("cycles", "cycles", "kernel duration in SM cycles"),
    Stat("time_us", "us", "kernel duration"),
    Stat("warp_instructions", "count", "warp-instructions executed"),
    Stat("thread_instructions", "count", "thread-instructions executed"),
    Stat("ctas_per_sm", "count", "CTAs resident per SM (occupancy limit)"),
    Stat("theoretical_occupancy", "fraction", "resident warps / max warps per SM"),
    Stat("achieved_occupancy", "fraction", "average resident warps / max warps over used SMs"),
    Stat("sms_used", "count", "SMs that ran at least one CTA"),
)


@dataclass
class KernelResult:
    """Timing of one kernel launch (the functional outputs are in the caller's arrays)."""

    cycles: int
    time_us: float
    instructions: int
    stats: pd.DataFrame = field(repr=False)
    config: dict[str, Any] = field(repr=False)
    occupancy_limiter: str = ""


def _resolve_config(config):
    if config is None:
        import models
        return models.load_preset("h100_sxm")
    return config


def simulate_kernel(ptx, entry: str, grid, block, args: list, config=None, shared_bytes: int = 0,
                    *, policy: str | None = None, regs_per_thread: int | None = None,
                    memory=None, run_id: str = "run",
                    quantum_cycles: int = DEFAULT_QUANTUM_CYCLES) -> KernelResult:
    """Run `entry` functionally (arrays updated in place) and time it on `config`.

    `config` defaults to the `h100_sxm` preset; `policy` overrides `sm.scheduler_policy`;
    `regs_per_thread` overrides the estimated register count for occupancy; `memory` picks
    the memory model by name (`"cached"`, the default, or `"flat"`; see
    `simulator.system.MEMORY_MODELS`) or is any `MemoryInterface` object. The cached
    memory's L1 gets what the kernel's shared-memory carve-out leaves.
    """
    config = _resolve_config(config)
    program = ptx if isinstance(ptx, isa.launch.Program) else isa.compile_kernel(ptx, entry)
    grid3, block3 = dim3(grid, "grid"), dim3(block, "block")
    threads = block3[0] * block3[1] * block3[2]
    recorder = TraceRecorder(grid3, threads, program.local_bytes)
    functional = isa.run_kernel(program, entry, grid3, block3, args, shared_bytes,
                                observer=recorder)
    timings, n_regs = instruction_timings(program, config)
    kernel = KernelImage(recorder.finish(), timings, n_regs)
    occ = occupancy(config, threads, regs_per_thread or estimate_registers(program),
                    program.shared_bytes + shared_bytes)
    system = build_system(config, memory, occ.shared_carveout_bytes)
    sheet = StatSheet()
    sm_tracer, mem_tracer = SmTracer(sheet), MemoryTracer(sheet)
    cache_tracer = CachedMemoryTracer(sheet)
    mem_tracer.attach(system.memory.hooks)
    cache_tracer.attach(system.memory.hooks)
    dispatcher = CtaDispatcher(kernel.trace.n_ctas)
    sms = [StreamingMultiprocessor(k, system.env, config, kernel, system.memory, dispatcher,
                                   policy, quantum_cycles) for k in range(system.n_compute_sms)]
    for sm in sms:
        sm_tracer.attach(sm.hooks)
    dispatcher.initial_fill(sms, occ.ctas_per_sm)
    for sm in sms:
        if sm.resident:
            system.env.process(sm.process())
    system.env.run()
    cycles = max(sm.finish_cycle for sm in sms)
    time_us = system.clock.cycles_to_ps(cycles) / 1e6
    sm_tracer.flush()
    cache_tracer.flush()
    used = sum(1 for sm in sms if sm.finish_cycle > 0)
    _kernel_stats(sheet, config, occ, functional, cycles, time_us, used, sm_tracer.warp_cycles)
    return KernelResult(cycles, time_us, functional.warp_instructions,
                        sheet.to_frame(run_id, entry), config.to_dict(), occ.limiter)


def _kernel_stats(sheet, config, occ, functional, cycles, time_us, used, warp_cycles) -> None:
    for stat in KERNEL_STATS:
        sheet.declare(stat)
    max_warps = config.sm.max_warps_per_sm
    values = {
        "cycles": cycles, "time_us": time_us,
        "warp_instructions": functional.warp_instructions,
        "thread_instructions": functional.thread_instructions,
        "ctas_per_sm": occ.ctas_per_sm,
        "theoretical_occupancy": occ.ctas_per_sm * occ.warps_per_cta / max_warps,
        "achieved_occupancy": warp_cycles / max(cycles * max(used, 1) * max_warps, 1),
        "sms_used": used,
    }
    for name, value in values.items():
        sheet.set("kernel", name, value)
