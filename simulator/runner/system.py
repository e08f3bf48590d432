"""System assembly: the one place where the memory system and the SMs are wired together.

What it models
--------------
`build_system(config)` assembles, in this order:

1. the SimPy environment (integer picoseconds) and the SM clock;
2. the memory system, bottom up: HBM -> (L3) -> L2 -> NoC -> L1s, seen by the SMs through
   the `MemoryInterface` contract of `models.flat_memory` (`access(sm_id, kind, sectors,
   now_ps) -> done_ps`). `memory=` picks it by name from `MEMORY_MODELS`: `"cached"` (the
   default: `models.cached_memory.CachedMemory`, tag arrays per level, L1 sized by the
   kernel's shared-memory carve-out) or `"flat"` (`FlatMemory`: latencies and shared
   bandwidth pipes, an unbounded L2) or `"ideal"` (`FixedLatencyMemory`: every access an L1 hit,
   unlimited bandwidth, to measure what the real blocks cost); any object honouring the
   contract may be passed instead, or a factory `(config, n_sms, carveout) -> memory` (as
   the entries of `MEMORY_MODELS`; `models.link_memory` is built this way);
3. the SMs a kernel may use: compute kernels get the `sm.count - sm.comm_count` compute SMs
   (ids 0 .. compute-1), communication kernels the `sm.comm_count` reserved ones (the ids
   above); `System.sm_ids(role)` lists them. The memory system serves all `sm.count` SMs
   (each has its L1 and crossbar port). SMs are built per kernel by `simulator.runner.simulate`
   because they hold that kernel's traces; `System.n_compute_sms` says how many compute.

Every entry of `MEMORY_MODELS` honours the `MemoryInterface` contract, and
`tests/test_memory_contract.py` checks each against it with figures computed from the preset.

Left out: an event-driven memory behind ports: each warp request is answered at once with its
completion time, and contention is booked in call order (see `models.cached_memory`).
Units: ps, bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from models.flat_memory import MemoryInterface
from models.memory_system import MEMORY_MODELS
from simulator.framework.engine import Clock, SimEnvironment

DEFAULT_MEMORY = "cached"
SM_ROLES = ("compute", "comm")


@dataclass
class System:
    """An assembled chip for one run: environment, clock, memory, compute-SM count."""

    config: object
    env: SimEnvironment
    clock: Clock
    memory: MemoryInterface
    n_compute_sms: int

    def sm_ids(self, role: str = "compute") -> range:
        """SM ids a kernel of `role` ("compute" or "comm") runs on."""
        if role == "compute":
            return range(self.n_compute_sms)
        if role == "comm":
            return range(self.n_compute_sms, self.config.sm.count)
        raise ValueError(f"sm role {role!r}; accepted: {', '.join(SM_ROLES)}")


def build_system(config, memory: str | MemoryInterface | None = None,
                 shared_carveout_bytes: int = 0) -> System:
    """Assemble the chip of `config` (see the module docstring for the order).

    `memory` is a name in `MEMORY_MODELS` (None = `DEFAULT_MEMORY`) or a ready
    `MemoryInterface`; `shared_carveout_bytes` is the shared-memory share of the unified
    L1/shared array (the L1 gets the rest).
    """
    env = SimEnvironment()
    clock = Clock(config.chip.clock_ghz)
    n_sms = config.sm.count - config.sm.comm_count
    if memory is None:
        memory = DEFAULT_MEMORY
    if isinstance(memory, str):
        if memory not in MEMORY_MODELS:
            raise ValueError(f"memory={memory!r} is not a memory model; known: "
                             f"{sorted(MEMORY_MODELS)} or an object with access() and hooks")
        memory = MEMORY_MODELS[memory]
    if callable(memory) and not hasattr(memory, "access"):
        memory = memory(config, config.sm.count, shared_carveout_bytes)
    return System(config, env, clock, memory, n_sms)
