"""The SM's memory pipeline: shared-memory banks, the L1 data path, TMA pacing, and the
service of global accesses and TMA messages inside the compiled loop.

What it models
--------------
How each traced memory warp-instruction of an SM is timed after the LSU unit issued it
(address generation's issue rate is the LSU unit's initiation interval, `models.units`):

* shared memory: the banked array serves one conflict-free wavefront per cycle; a warp
  instruction with bank-conflict degree `d` holds it `d` cycles and its data is usable
  `shared_memory.latency_cycles + d - 1` cycles after it started (`shared_access`);
* `.const` loads: served by the constant cache, `sm.const_cache_hit_cycles`, no traffic
  (`.param` accesses are no memory instructions: `models.units`);
* global/local loads, stores and atomics: the L1 data path moves
  `l1.bandwidth_bytes_per_clk / 32` sectors per cycle (a warp instruction of `s` sectors holds
  it `ceil(s / that)` cycles, `lsu_window`), then the sectors go to the memory system through
  the `MemoryInterface` contract (`models.flat_memory`), which returns the completion time;
* TMA messages: the engine's pacing (`tma_window`; `models.tma` documents the constants,
  which live here so that the compiled loop can use them); a store's source has been read
  out of shared memory when the engine's window ends plus the shared-memory latency
  (`source_read_cycle`, what `cp.async.bulk.wait_group.read` waits for).

Shared and constant accesses are timed inside the compiled issue loop (`models.sm_core`),
and so are global kinds that touch no sector. One `LoadStoreUnit` per SM times the global
accesses that need the memory system through Python (memories other than the cached one).

In front of `models.cached_memory.CachedMemory` the loop does not leave for them:
`serve_event` takes a traced global load/store/atomic or TMA message, books the SM's L1
data path or TMA engine (`lsu_window`, `tma_window`, as `LoadStoreUnit.issue` and
`models.tma.TmaEngine.issue` do), runs each request through
`models.cached_memory_kernel.serve_request` on the memory's arrays, with its instruction's
cache-policy row (`P_POLICY` columns of the pc table), and returns the completion cycle.
The order of requests is that of the issues, exactly as when the loop asked Python for each
one, so results are identical; only the Python round trip per request is gone. In front of
a `models.link_memory.LinkMemory` around the cached memory the same holds: a request's
sectors in a peer's window go over the link's pipes as `LinkMemory.access` sends them
(`_request`, `models.link_memory_kernel`), the rest to the cached memory.

What the per-request hook (`CACHED_MEMORY_ACCESS`) carried goes to the SM's request log
(`LOG_*` columns: memory kind, issue and done ps, then the `COUNT_NAMES` counts); the SM
hands full logs, and what is left at its end, to the memory's listeners as one
`CACHED_MEMORY_BATCH` firing (`models.sm`); a link send is a row of kind
`LINK_LOG_KIND - link` that `LinkMemory.fire_batch` hands to the link's hooks. With no
listener nothing is logged. When the
log lacks room for an event's requests (or the memory's scratch arrays for one request)
`serve_event` returns -1 and the loop asks Python, which drains the log (grows the
scratch) and calls it again.

The SM's parameters and bookings live in its loop variables (`models.sm_state`):
`L_SM_ID`, `L_FREQ_KHZ` (its clock, `simulator.framework.engine.Clock`), `L_L1_FREE` /
`L_L1_SECTORS` (data path free cycle, sectors per cycle), `L_TMA_FREE` / `L_TMA_BYTES`
(engine free cycle, bytes per cycle), `L_LOG_N` (rows used), `L_MEM_LISTEN`.

Through Python (`LoadStoreUnit`, `models.tma.TmaEngine`) each request carries its
instruction's cache-policy row too, so a memory wrapping another (the link windows of
`models.link_memory` around a memory other than the cached one) applies the same policies.

Left out: L1 hits in the flat memory (it keeps no L1 data), cache policies in the flat and
fixed-latency memories (they have no tag arrays), MSHR limits, write coalescing buffers,
and what `models.tma` and `models.cached_memory` leave out. Units: SM cycles, ps at the
memory interface, 32-byte sectors.
"""

from __future__ import annotations

import numba as nb
import numpy as np

from isa.trace_format import KIND_ATOMIC as TRACE_ATOMIC
from isa.trace_format import KIND_BULK_STORE
from isa.trace_format import KIND_LOAD as TRACE_LOAD
from isa.trace_format import KIND_LOAD_CG as TRACE_LOAD_CG
from isa.trace_format import KIND_STORE as TRACE_STORE
from models.cached_memory_kernel import serve_scratch
from models.cached_memory_layout import (
    KIND_ATOMIC,
    KIND_BULK_LOAD,
    KIND_LOAD,
    KIND_LOAD_CG,
    KIND_STORE,
    N_COUNTS,
    step,
)
from models.link_memory_kernel import (
    L_INGRESS_FS,
    L_LATENCY_PS,
    LINK_LOG_KIND,
    W_LINK,
    W_MIRROR,
    W_MIRROR_OFFSET,
    W_SIGNAL,
    drained,
    reserve,
    round_half_even,
    send,
    window_of,
)
from models.sm_state import (
    L_FREQ_KHZ,
    L_L1_FREE,
    L_L1_SECTORS,
    L_LOG_N,
    L_MEM_LISTEN,
    L_SM_ID,
    L_TMA_BYTES,
    L_TMA_FREE,
)
from simulator.framework.engine import KHZ_PS_PRODUCT, Clock

SECTOR_BYTES = 32
TMA_ISSUE_CYCLES = 1
TMA_EXTRA_LATENCY_CYCLES = 100
CHUNK_SECTORS = 128
LOG_KIND, LOG_ISSUE, LOG_DONE, LOG_COUNTS = 0, 1, 2, 3
LOG_ROWS = 256
_LSU_KIND_NAMES = {TRACE_LOAD: "load", TRACE_STORE: "store", TRACE_ATOMIC: "atomic",
                   TRACE_LOAD_CG: "load_cg"}
"""The memory interface's access kind of a traced global access kind (`LoadStoreUnit`)."""


def new_log() -> np.ndarray:
    """An empty request log of one SM."""
    return np.empty((LOG_ROWS, LOG_COUNTS + N_COUNTS), np.int64)


@nb.njit(cache=True)
def edge_ps(cycle, freq_khz):
    """`simulator.framework.engine.Clock.edge_ps`."""
    return -(-cycle * KHZ_PS_PRODUCT // freq_khz)


@nb.njit(cache=True)
def done_cycle(done_ps, freq_khz):
    """The first cycle edge at or after `done_ps` (`ps_to_cycles(done_ps - 1) + 1`)."""
    return (done_ps - 1) * freq_khz // KHZ_PS_PRODUCT + 1


@nb.njit(cache=True)
def lsu_window(cycle, free, n_sectors, sectors_per_cycle):
    """(start, next free cycle) of the L1 data path for `n_sectors` issued at `cycle`."""
    start = max(cycle, free)
    return start, start + -(-n_sectors // sectors_per_cycle)


@nb.njit(cache=True)
def tma_window(cycle, free, n_sectors, bytes_per_clk):
    """(start, next free cycle) of the TMA engine for a message of `n_sectors` issued at
    `cycle`."""
    start = max(cycle + TMA_ISSUE_CYCLES, free)
    return start, start + max(-(-n_sectors * SECTOR_BYTES // bytes_per_clk), 1)


@nb.njit(cache=True)
def source_read_cycle(window_end, shared_latency):
    """Cycle a TMA store's shared-memory source has been read: the engine reads it at its
    rate over its window (`tma_window`, ending at `window_end`), the last bytes arriving
    `shared_latency` cycles (`shared_memory.latency_cycles`) after their read started."""
    return window_end + shared_latency


@nb.njit(cache=True)
def shared_access(cycle, free, degree, latency):
    """(cycle its data is usable, cycle the banks are free again) of a shared-memory access
    issued at `cycle` with bank-conflict degree `degree` (at least 1), the banks free from
    `free` on."""
    start = max(cycle, free)
    degree = max(degree, 1)
    return start + latency + degree - 1, start + degree


@step
def _serve_inner(kind, sectors, now_ps, mem, lp, log, ops, policy):
    """One request to the cached memory at `now_ps`, logged; its done ps."""
    p, meta, flags, free_fs, banks, lru, counts = mem[:7]
    need, line_done = mem[-2], mem[-1]
    done_ps = serve_scratch(kind, lp[L_SM_ID], sectors, now_ps, p, meta, flags, free_fs,
                            banks, lru, counts, need, line_done, ops, policy)
    if lp[L_MEM_LISTEN]:
        row = lp[L_LOG_N]
        log[row, LOG_KIND] = kind
        log[row, LOG_ISSUE] = now_ps
        log[row, LOG_DONE] = done_ps
        for c in range(counts.size):
            log[row, LOG_COUNTS + c] = counts[c]
        lp[L_LOG_N] = row + 1
    return done_ps


@step
def _log_send(links, row, now_ps, size_bytes, message, lp, log):
    """A send over link `row` (`models.link_memory_kernel.send`), logged; when it has
    landed."""
    start, left = send(links, row, now_ps, size_bytes, message)
    if lp[L_MEM_LISTEN]:
        n = lp[L_LOG_N]
        log[n, :] = 0
        log[n, LOG_KIND] = LINK_LOG_KIND - row
        log[n, LOG_ISSUE] = start
        log[n, LOG_DONE] = left
        log[n, LOG_COUNTS] = size_bytes
        lp[L_LOG_N] = n + 1
    return left + links[row, L_LATENCY_PS]


@step
def _remote(kind, w, part, now_ps, mem, lp, log, policy):
    """Window `w`'s part of a request (`LinkMemory._remote`); its done ps. Mirrored stores
    overwrite `part`."""
    windows, scales, links = mem[7], mem[8], mem[9]
    row = windows[w, W_LINK]
    size = part.size * SECTOR_BYTES
    load = kind == KIND_LOAD or kind == KIND_BULK_LOAD or kind == KIND_LOAD_CG
    if windows[w, W_SIGNAL]:
        if load:
            return drained(links, row, now_ps)
        return _log_send(links, row, now_ps, size, True, lp, log)
    if load:
        request_left = _log_send(links, row, now_ps, 0, False, lp, log)
        return reserve(links, row, L_INGRESS_FS, request_left, size) + links[row, L_LATENCY_PS]
    arrived = _log_send(links, row, now_ps, size, False, lp, log)
    reserve(links, row, L_INGRESS_FS, now_ps, round_half_even(size * scales[w]))
    if windows[w, W_MIRROR]:
        offset = windows[w, W_MIRROR_OFFSET]
        for i in range(part.size):
            part[i] += offset
        _serve_inner(np.int64(KIND_STORE), part, now_ps, mem, lp, log, np.int64(1), policy)
    return arrived


@step
def _request(kind, sectors, at_cycle, mem, lp, log, ops, policy):
    """One request to the memory at cycle `at_cycle` (`ops`: an atomic's lane operations on
    one address; `policy`: its instruction's cache-policy row); its done cycle. Sectors in
    a link window go over the link as `models.link_memory.LinkMemory.access` sends them."""
    now_ps = edge_ps(at_cycle, lp[L_FREQ_KHZ])
    windows, scratch = mem[7], mem[10]
    inside = 0
    if windows.shape[0]:
        for i in range(sectors.size):
            w = window_of(windows, sectors[i])
            scratch[1, i] = w
            if w >= 0:
                inside += 1
    if inside == 0:
        return done_cycle(_serve_inner(kind, sectors, now_ps, mem, lp, log, ops, policy),
                          lp[L_FREQ_KHZ])
    n = sectors.size
    part = scratch[0]
    m = 0
    for i in range(n):
        if scratch[1, i] < 0:
            part[m] = sectors[i]
            m += 1
    done = now_ps
    if m:
        done = _serve_inner(kind, part[:m], now_ps, mem, lp, log, ops, policy)
    for w in range(windows.shape[0]):
        m = 0
        for i in range(n):
            if scratch[1, i] == w:
                part[m] = sectors[i]
                m += 1
        if m:
            done = max(done, _remote(kind, w, part[:m], now_ps, mem, lp, log, policy))
    return done_cycle(done, lp[L_FREQ_KHZ])


@nb.njit(cache=True)
def serve_event(trace_kind, tma, cycle, sectors, mem, lp, log, ops, policy):
    """Completion cycle of a global access (`tma` False; `trace_kind` load/store/atomic of
    `isa.trace_format`; `ops` an atomic's lane operations on one address) or TMA message
    issued at `cycle` touching `sectors`, under its instruction's cache-policy row `policy`
    (the kernel image's `P_POLICY` columns); -1 when the log lacks room for its requests."""
    n = sectors.size
    if min(n, CHUNK_SECTORS if tma else n) > min(mem[-1].size, mem[10].shape[1]):
        return -1                          # the caller grows the scratch arrays
    rows = 1 + 2 * mem[7].shape[0]         # log rows of a request: local, per window 2
    if tma:
        chunks = -(-n // CHUNK_SECTORS)
        if lp[L_MEM_LISTEN] and lp[L_LOG_N] + chunks * rows > log.shape[0]:
            return -1
        kind = KIND_STORE if trace_kind == KIND_BULK_STORE else KIND_BULK_LOAD
        per = lp[L_TMA_BYTES]
        start, lp[L_TMA_FREE] = tma_window(cycle, lp[L_TMA_FREE], n, per)
        done = lp[L_TMA_FREE]
        for first in range(0, n, CHUNK_SECTORS):
            at = start + first * SECTOR_BYTES // per
            done = max(done, _request(kind, sectors[first:first + CHUNK_SECTORS], at, mem, lp,
                                      log, np.int64(1), policy))
        return done + TMA_EXTRA_LATENCY_CYCLES
    if lp[L_MEM_LISTEN] and lp[L_LOG_N] + rows > log.shape[0]:
        return -1
    start, lp[L_L1_FREE] = lsu_window(cycle, lp[L_L1_FREE], n, lp[L_L1_SECTORS])
    kind = KIND_LOAD
    if trace_kind == TRACE_STORE:
        kind = KIND_STORE
    elif trace_kind == TRACE_ATOMIC:
        kind = KIND_ATOMIC
    elif trace_kind == TRACE_LOAD_CG:
        kind = KIND_LOAD_CG
    return _request(kind, sectors, start, mem, lp, log, ops, policy)


class LoadStoreUnit:
    """Times the global accesses of SM `sm_id` (see the module docstring)."""

    __slots__ = ("sm_id", "memory", "clock", "sectors_per_cycle", "l1_free")

    def __init__(self, sm_id: int, config, memory, clock: Clock) -> None:
        self.sm_id = sm_id
        self.memory = memory
        self.clock = clock
        self.sectors_per_cycle = max(config.l1.bandwidth_bytes_per_clk // SECTOR_BYTES, 1)
        self.l1_free = 0

    def issue(self, cycle: int, kind: int, sectors: np.ndarray, ops: int = 1,
              policy: np.ndarray | None = None) -> int:
        """Cycle at which a load, store or atomic of `sectors` (at least one) issued at
        `cycle` completes (data usable / store performed); `ops`: an atomic's lane
        operations on one address; `policy`: its instruction's cache-policy row."""
        start, self.l1_free = lsu_window(cycle, self.l1_free, int(sectors.size),
                                         self.sectors_per_cycle)
        clock = self.clock
        done_ps = self.memory.access(self.sm_id, _LSU_KIND_NAMES[kind], sectors,
                                     clock.edge_ps(start), ops, policy)
        return clock.ps_to_cycles(done_ps - 1) + 1
