"""Flat memory: fixed load-to-use latencies and shared bandwidth pipes, no cache tag arrays.

What it models
--------------
The stand-in memory hierarchy behind the SMs' load/store units, implementing the
`MemoryInterface` contract below. Every global access goes to the L2 (the per-SM L1 keeps no
data here). The L2 is treated as unbounded: the first touch of a 32-byte sector misses to
HBM, later touches hit (near-partition latency); the first store or atomic to a sector makes
it dirty, and its write-back to HBM is charged then (its bytes use the HBM pipe once). Bandwidth is
a set of first-come-first-served pipes reserved at request time: one per SM port on the
crossbar (`noc.port_bandwidth_bytes_per_clk`), the whole L2 (`l2.bandwidth_bytes_per_clk`)
and the whole HBM (`hbm.peak_bandwidth_gbps`). A request completes when its latency has
passed and its bytes have left every pipe it uses.

Contract (`MemoryInterface`):
    access(sm_id: int, kind: str, sectors: np.ndarray, now_ps: int, ops: int = 1,
           policy: np.ndarray | None = None) -> int
        kind is "load", "store", "atomic" or "bulk_load" (a TMA / bulk-copy load: it reads
        like "load" but bypasses the SM's L1, as `cp.async.bulk` does); `sectors` are
        distinct 32-byte sector indices (byte address >> 5) of one warp instruction (int64,
        possibly empty); `now_ps` is the issue time in integer picoseconds, non-decreasing
        per SM and within a small window across SMs. Returns the completion time in ps
        (>= now_ps): load data usable, store or atomic performed. Calls must not change
        functional results; `ops` is, for an atomic, the most lanes of the warp that update
        one address (a memory that serializes same-address atomics uses it, this one does
        not); `policy` is the instruction's cache-policy row (`isa.trace_format`; None: no
        policy), which a memory with caches applies (`models.cached_memory`) and the others
        ignore; the memory fires its own hooks (`MEMORY_ACCESS` here: sm_id,
        kind, sectors, l2_bytes, hbm_bytes, issue_ps, done_ps) and keeps no counters.
    hooks: a `simulator.framework.hooks.Hooks`.

Left out: L1 hits, cache capacity and conflicts, partition distance, HBM channels and row
buffers, write-allocate fills. Units: ps (int), bytes, sectors of 32 bytes, SM cycles in the
config.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from simulator.framework.engine import Clock
from simulator.framework.hooks import Hooks

SECTOR_BYTES = 32
LOAD_KINDS = ("load", "bulk_load", "load_cg")
"""The contract's kinds that read (a bulk load is a TMA / bulk-copy load: no L1)."""
MEMORY_ACCESS = "MEMORY_ACCESS"


class MemoryInterface(Protocol):
    """What an SM's load/store unit needs from the memory system (see the module Contract)."""

    hooks: Hooks

    def access(self, sm_id: int, kind: str, sectors: np.ndarray, now_ps: int,
               ops: int = 1, policy: np.ndarray | None = None) -> int: ...


class BandwidthPipe:
    """A first-come-first-served pipe of fixed bandwidth; reservations never overlap."""

    __slots__ = ("fs_per_byte", "free_fs")

    def __init__(self, bytes_per_second: float) -> None:
        self.fs_per_byte = max(int(round(1e15 / bytes_per_second)), 1)
        self.free_fs = 0

    def reserve(self, now_ps: int, size_bytes: int) -> int:
        """Book `size_bytes` from `now_ps` on; return the ps at which the last byte leaves."""
        start = max(now_ps * 1000, self.free_fs)
        self.free_fs = start + size_bytes * self.fs_per_byte
        return -(-self.free_fs // 1000)


class FlatMemory:
    """Latency + bandwidth memory implementing `MemoryInterface` (see the module docstring)."""

    def __init__(self, config, n_sms: int) -> None:
        clock = Clock(config.chip.clock_ghz)
        hz = config.chip.clock_ghz * 1e9
        self.hooks = Hooks("memory")
        self.l2_hit_ps = clock.cycles_to_ps(config.l2.near_hit_latency_cycles)
        self.hbm_ps = clock.cycles_to_ps(config.hbm.latency_cycles)
        self.ports = [BandwidthPipe(config.noc.port_bandwidth_bytes_per_clk * hz)
                      for _ in range(n_sms)]
        self.l2 = BandwidthPipe(config.l2.bandwidth_bytes_per_clk * hz)
        self.hbm = BandwidthPipe(config.hbm.peak_bandwidth_gbps * 1e9)
        self.resident: set[int] = set()
        self.dirty: set[int] = set()

    @staticmethod
    def _newly_added(into: set[int], sectors: list[int]) -> int:
        before = len(into)
        into.update(sectors)
        return len(into) - before

    def access(self, sm_id: int, kind: str, sectors: np.ndarray, now_ps: int,
               ops: int = 1, policy: np.ndarray | None = None) -> int:
        """Completion time in ps of one warp's access (see the module Contract; no cache,
        so `policy` changes nothing)."""
        size = int(sectors.size) * SECTOR_BYTES
        listed = sectors.tolist()
        misses = self._newly_added(self.resident, listed)
        if kind not in LOAD_KINDS:
            misses += self._newly_added(self.dirty, listed)
        hbm_bytes = misses * SECTOR_BYTES
        done = max(self.ports[sm_id].reserve(now_ps, size), self.l2.reserve(now_ps, size))
        latency = self.l2_hit_ps
        if hbm_bytes:
            done = max(done, self.hbm.reserve(now_ps, hbm_bytes))
            if kind != "store":
                latency = self.hbm_ps
        done = max(done, now_ps + latency)
        if self.hooks.listening:
            self.hooks.fire(MEMORY_ACCESS, sm_id=sm_id, kind=kind, sectors=int(sectors.size),
                            l2_bytes=size, hbm_bytes=hbm_bytes, issue_ps=now_ps, done_ps=done)
        return done
