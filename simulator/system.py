"""System assembly: the one place where the memory system and the SMs are wired together.

What it models
--------------
`build_system(config)` assembles, in this order:

1. the SimPy environment (integer picoseconds) and the SM clock;
2. the memory system, bottom up: HBM -> (L3) -> L2 -> NoC, seen by the SMs through the
   `MemoryInterface` contract of `models.flat_memory` (`access(sm_id, kind, sectors,
   now_ps) -> done_ps`). Today that is `FlatMemory` (latencies from the config, shared
   bandwidth pipes for SM ports, L2 and HBM, an unbounded L2); any object honouring the
   contract may be passed as `memory=`;
3. the compute SMs: `sm.count - sm.comm_count` of them (communication SMs run no compute
   kernel). SMs are built per kernel by `simulator.simulate` because they hold that kernel's
   traces; `System.n_compute_sms` says how many.

Left out: the port-level cache blocks (`models.l2`, `models.hbm`, ...) are not wired yet; an
adapter from `MemoryInterface` to their `ReadReq`/`WriteReq` ports belongs here. Units: ps.
"""

from __future__ import annotations

from dataclasses import dataclass

from models.flat_memory import FlatMemory, MemoryInterface
from simulator.engine import Clock, SimEnvironment


@dataclass
class System:
    """An assembled chip for one run: environment, clock, memory, compute-SM count."""

    config: object
    env: SimEnvironment
    clock: Clock
    memory: MemoryInterface
    n_compute_sms: int


def build_system(config, memory: MemoryInterface | None = None) -> System:
    """Assemble the chip of `config` (see the module docstring for the order)."""
    env = SimEnvironment()
    clock = Clock(config.chip.clock_ghz)
    n_sms = config.sm.count - config.sm.comm_count
    if memory is None:
        memory = FlatMemory(config, n_sms)
    return System(config, env, clock, memory, n_sms)
