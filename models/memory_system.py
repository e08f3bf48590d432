"""The memory systems the SMs can be timed against, by name (`MEMORY_MODELS`).

What it models
--------------
Nothing of its own: each entry builds one implementation of the `MemoryInterface` contract
of `models.flat_memory` from `(config, SMs served, shared carve-out bytes)`:

* `"cached"`: `models.cached_memory.CachedMemory`, tag arrays per level, the L1 sized by the
  kernel's shared-memory carve-out (the production model);
* `"flat"`: `models.flat_memory.FlatMemory`, latencies and shared bandwidth pipes, an
  unbounded L2;
* `"ideal"`: `models.fixed_latency_memory.FixedLatencyMemory`, every access an L1 hit with
  unlimited bandwidth, to measure what the real blocks cost.

`simulator.runner.system.build_system` picks one by name; `models.link_memory` wraps one by name.
`tests/test_memory_contract.py` checks every entry against the contract.

Left out: the models themselves. Units: bytes (the carve-out).
"""

from __future__ import annotations

from models.cached_memory import CachedMemory
from models.fixed_latency_memory import FixedLatencyMemory
from models.flat_memory import FlatMemory

MEMORY_MODELS = {
    "cached": lambda config, n_sms, carveout: CachedMemory(config, n_sms, carveout),
    "flat": lambda config, n_sms, carveout: FlatMemory(config, n_sms),
    "ideal": lambda config, n_sms, carveout: FixedLatencyMemory(config),
}
"""Memory models by name: (config, compute SMs, shared carve-out bytes) -> MemoryInterface."""
