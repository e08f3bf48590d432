"""CTA dispatch: how many CTAs fit on one SM (occupancy) and which CTA an SM takes next.

What it models
--------------
`occupancy(config, block_threads, regs_per_thread, shared_bytes_per_cta)` applies the
per-SM limits of `config.sm` as the CUDA occupancy calculator does:

* warps: `max_warps_per_sm // warps_per_cta`; threads: `max_threads_per_sm // (32 * warps)`;
  CTAs: `max_ctas_per_sm`;
* registers: per thread rounded up to a multiple of 8, per warp rounded up to 256;
  `registers_per_sm // (warps_per_cta * regs_per_warp)`;
* shared memory: each CTA also holds `RESERVED_SHARED_BYTES` (1 KiB the system keeps per CTA
  on sm_80 and later); the carve-out is the smallest option of
  `sm.shared_carveout_options_bytes` holding as many CTAs as the other limits allow (else
  the largest), and `carveout // per_cta` CTAs fit. The L1 gets the rest of the array.

`CtaDispatcher` hands out CTA linear indices (x fastest) in launch order: first round-robin
over the SMs until each is full, then one to whichever SM finishes a CTA.

Registers: PTX declares virtual registers without reuse, so `program.regs_per_thread` far
overstates what ptxas allocates. `estimate_registers(program)` approximates the allocation by
the peak number of 32-bit register slots live at once (64-bit registers count two,
predicates none), from a liveness analysis over the control-flow graph (`isa.cfg`): a
register is live from a write to its last read on any path, so a value carried around a
loop stays live over the whole loop and a temporary of one iteration does not. A guarded
write does not end the old value's range, and `wgmma` accumulators are read as well as
written. The program is the one `isa.schedule` left, its global loads hoisted as ptxas
issues them, so the values of loads in flight are live together. Against the allocations
ncu reports for the 39 catalogued kernels on our H100
(`workloads/reference/h100/ncu_own_kernels.csv`, 78 launches) the estimate gives the same
CTAs per SM for 62 launches (the former estimate, which stretched every range touching a
loop over the whole loop, 50: `add_n_bf16` 133 registers and 1 CTA of 256 threads per SM
against ncu's 32 and 8); it reads high where ptxas folds address arithmetic into
instruction offsets or hoists fewer loads (`add_n_bf16` 43, `wmma_gemm_f16` 44, the norm
backward kernels 50-52, all against 32) and up to 15 low where ptxas keeps more in flight
(`quantize_e4m3_128x1_t` 45 vs 60). Callers may pass the real count.

Left out: cluster launch, ptxas's exact allocation. Units: bytes, threads, counts.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from isa.cfg import basic_blocks, block_spans
from isa.dataflow import defs_uses
from isa.errors import LaunchError
from models.sm_state import D_N, D_NEXT, D_STOP, NO_STOP

RESERVED_SHARED_BYTES = 1024
REGISTER_ROUND_THREAD = 8
REGISTER_ROUND_WARP = 256


_WIDTH = {0: 0, 1: 1, 2: 1, 3: 2}
"""32-bit register slots per register of each file (`isa.operands.FILE_IDS`): predicates
none (they live in the predicate file), 16- and 32-bit one, 64-bit two."""


def estimate_registers(program) -> int:
    """Peak 32-bit register slots live at once in `program` (module docstring)."""
    instrs = program.instrs
    if not instrs:
        return 1
    info = [defs_uses(ins) for ins in instrs]
    starts, succ = basic_blocks(program)
    ends = dict(block_spans(starts, len(instrs)))
    gen: dict[int, set] = {}
    kill: dict[int, set] = {}
    for s in starts:
        g: set = set()
        k: set = set()
        for pc in range(ends[s] - 1, s - 1, -1):
            defs, uses = info[pc]
            g.difference_update(defs)
            k.update(defs)
            g.update(uses)
        gen[s], kill[s] = g, k - g
    live_in = {s: set(gen[s]) for s in starts}

    def live_out(s: int) -> set:
        return set().union(*(live_in[t] for t in succ.get(s, ()) if t in live_in))

    changed = True
    while changed:
        changed = False
        for s in reversed(starts):
            new = gen[s] | (live_out(s) - kill[s])
            if new != live_in[s]:
                live_in[s] = new
                changed = True
    peak = 0
    for s in starts:
        live = live_out(s)
        for pc in range(ends[s] - 1, s - 1, -1):
            defs, uses = info[pc]
            after = live | set(defs)
            peak = max(peak, sum(_WIDTH[f] for f, _ in after))
            live = (live - set(defs)) | set(uses)
            peak = max(peak, sum(_WIDTH[f] for f, _ in live))
    return max(peak, 1)


@dataclass(frozen=True, slots=True)
class Occupancy:
    """CTAs per SM and what limits them."""

    ctas_per_sm: int
    warps_per_cta: int
    limiter: str
    shared_carveout_bytes: int
    limits: dict


def occupancy(config, block_threads: int, regs_per_thread: int,
              shared_bytes_per_cta: int) -> Occupancy:
    """CTAs of this shape that fit on one SM (LaunchError if none fits)."""
    sm = config.sm
    warps = -(-block_threads // sm.warp_size_threads)
    regs = max(-(-max(regs_per_thread, 1) // REGISTER_ROUND_THREAD) * REGISTER_ROUND_THREAD, 1)
    if regs_per_thread > sm.max_registers_per_thread:
        raise LaunchError(f"{regs_per_thread} registers per thread exceed "
                          f"sm.max_registers_per_thread ({sm.max_registers_per_thread})")
    per_warp_regs = -(-regs * sm.warp_size_threads // REGISTER_ROUND_WARP) * REGISTER_ROUND_WARP
    limits = {
        "warps": sm.max_warps_per_sm // warps,
        "threads": sm.max_threads_per_sm // (warps * sm.warp_size_threads),
        "ctas": sm.max_ctas_per_sm,
        "registers": sm.registers_per_sm // (warps * per_warp_regs),
    }
    carveout = 0
    if shared_bytes_per_cta > 0:
        if shared_bytes_per_cta > sm.max_shared_memory_per_cta_bytes:
            raise LaunchError(f"{shared_bytes_per_cta} B of shared memory per CTA exceed "
                              f"sm.max_shared_memory_per_cta_bytes "
                              f"({sm.max_shared_memory_per_cta_bytes})")
        per_cta = shared_bytes_per_cta + RESERVED_SHARED_BYTES
        wanted = min(limits.values()) * per_cta
        options = sm.shared_carveout_options_bytes
        carveout = next((c for c in options if c >= wanted), options[-1])
        limits["shared_memory"] = carveout // per_cta
    limiter = min(limits, key=lambda k: limits[k])
    ctas = limits[limiter]
    if ctas < 1:
        raise LaunchError(f"a CTA of {block_threads} threads, {regs} registers/thread and "
                          f"{shared_bytes_per_cta} B shared memory does not fit on an SM "
                          f"(limit: {limiter})")
    return Occupancy(ctas, warps, limiter, carveout, limits)


class CtaDispatcher:
    """Hands out CTA linear indices in launch order.

    Its state is one int64 array (`D_*` entries of `models.sm_state`: next CTA, CTA count,
    and the dispatch count from which a caller wants the driver to stop), so that
    `models.sm_driver.drive` hands out CTAs without a Python round trip."""

    __slots__ = ("state",)

    def __init__(self, n_ctas: int) -> None:
        self.state = np.array([0, n_ctas, NO_STOP], np.int64)

    @property
    def n_ctas(self) -> int:
        return int(self.state[D_N])

    @n_ctas.setter
    def n_ctas(self, value: int) -> None:
        self.state[D_N] = value

    @property
    def next_cta(self) -> int:
        return int(self.state[D_NEXT])

    def stop_from(self, dispatched: int | None) -> None:
        """Ask the driver to stop once `dispatched` CTAs are handed out and some are left
        (None: never)."""
        self.state[D_STOP] = NO_STOP if dispatched is None else dispatched

    def take(self) -> int | None:
        """The next CTA to launch, or None when all have been handed out."""
        state = self.state
        cta = int(state[D_NEXT])
        if cta >= state[D_N]:
            return None
        state[D_NEXT] = cta + 1
        return cta

    def initial_fill(self, sms: list, ctas_per_sm: int) -> None:
        """Round-robin over `sms` (each has `launch(cta)`) until each holds `ctas_per_sm`."""
        for _ in range(ctas_per_sm):
            for sm in sms:
                cta = self.take()
                if cta is None:
                    return
                sm.launch(cta)
