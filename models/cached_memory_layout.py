"""What the compiled steps of the cached memory share: array layouts, compile options, hashes.

What it models
--------------
Nothing of its own: the indices of the `params` and `counts` arrays, the band an eviction
class adds to a stamp (`CLASS_BAND`)
(`models.cached_memory_kernel` documents the arrays), the request kinds and levels, the
address hashes that place a line in an L2 set, an L2 slice and an HBM channel (the same as
`models.address_map`'s; `tests/test_cached_memory.py` checks they agree), and `step`, the
way every step is compiled.

Speed: the steps allocate nothing and are compiled with numba's reference counting off
(`_nrt=False`, a private numba option, set here only); with it on, every call between them
increfed and decrefed each array it passed (the tuples `meta` and `flags` hold six), about
half of a request's time.
Units: ps, fs for pipe bookings, line numbers.
"""

from __future__ import annotations

import numba

step = numba.njit(cache=True, no_cpython_wrapper=True, _nrt=False)
"""How the cached memory's steps compile (no Python wrapper, no reference counting)."""
inline_step = numba.njit(cache=True, no_cpython_wrapper=True, _nrt=False, inline="always")
"""`step`, inlined into its callers by numba (the SM loop's per-issue helpers)."""

KIND_LOAD, KIND_STORE, KIND_ATOMIC, KIND_BULK_LOAD, KIND_LOAD_CG = 0, 1, 2, 3, 4
"""Memory request kinds; `KIND_LOAD_CG` is a global load that skips the L1 (`ld.global.cg`,
`.cv`, `cp.async.cg`): it neither looks up nor fills the L1, as a bulk (TMA) load."""

# params indices
(P_L1_PS, P_NOC_PS, P_FAR_PS, P_SLICE_PS, P_L3_PS, P_HBM_PS, P_ACTIVATE_PS, P_PRECHARGE_PS,
 P_SECTOR_BYTES, P_L1_SPL, P_L2_SPL, P_LINE_BYTES, P_PARTITIONS, P_SLICES, P_CHANNELS,
 P_BANKS, P_ROW_BYTES, P_L3_ENABLED, P_L3_SLICES,
 P_PORT_FS, P_SLICE_FS, P_L3_FS, P_CHANNEL_FS, P_WRITEBACK_BOUND_FS,
 P_PIPE_UP, P_PIPE_DOWN, P_PIPE_SLICE, P_PIPE_L3, P_PIPE_CHANNEL,
 P_REFRESH_INTERVAL_FS, P_REFRESH_FS, P_WRITE_TO_READ_FS, P_READ_TO_WRITE_FS,
 P_ATOMIC_PS, P_PIPE_ATOMIC, P_ROW_CHANNELS, P_PERSIST_WAYS,
 P_RETURN_FS, P_RETURN_BIN_FS, P_PIPE_RETURN, P_SLICE_MIN_BYTES,
 N_PARAMS) = range(42)

RETURN_BINS = 1024
"""Bins of the calendar that books the crossbar's shared read return (`free_fs` from
`P_PIPE_RETURN` on: per bin its number and the fs of transfer booked in it; bin `b` sits at
`b % RETURN_BINS`; `P_RETURN_FS` is fs per 1024 bytes, as one byte at 7.8 TB/s is 128 fs,
too coarse a step). With `RETURN_BIN_CYCLES` per bin it looks 32768 cycles ahead, far more
than the backlog of the SMs' outstanding loads at the limit."""
RETURN_BIN_CYCLES = 32
"""SM cycles per bin of that calendar: the bytes of a bin are booked in any order, so requests
that reach the memory out of time order (SMs run a quantum apart) do not queue behind later
ones; within a bin the limit is not enforced."""

ATOMIC_ENTRIES = 64
"""Entries per L2 slice of the table that serializes atomics on one line (`free_fs` from
`P_PIPE_ATOMIC` on: a tag (line + 1) and the ps the line's last atomic is performed, at
`line % ATOMIC_ENTRIES`; two hot lines on one entry lose each other's order)."""

# counts indices
(C_SECTORS, C_L1_HIT, C_L1_MISS, C_L2_HIT, C_L2_MISS, C_L3_HIT, C_L3_MISS, C_HBM_READ,
 C_HBM_WRITE, C_ROW_HIT, C_ROW_MISS, C_L2_LINES, C_FAR_LINES, C_L2_WRITEBACK,
 C_L3_WRITEBACK, C_L2_REQUESTS, C_L3_REQUESTS, C_HBM_REQUESTS, C_L2_COPY_HIT,
 N_COUNTS) = range(20)

CLASS_BAND = 1 << 60
"""What a line's eviction class adds to its LRU stamp: evict-first lines sit one band below
the normal ones, evict-last lines one above, so the least stamp is the LRU line of the
lowest class (`models.cached_memory_kernel`). The stamp counter stays far below a band."""

SECTOR_BYTES_ASSUMED = 32
"""The memory interface's sector (byte address >> 5); cache sectors must equal it."""

LEVEL_L1, LEVEL_L2, LEVEL_L3 = 0, 1, 2


@step
def ceil_ps(fs):
    """Femtoseconds rounded up to whole ps."""
    return -(-fs // 1000)


@step
def _fold(ids, a, b, c):
    return ids ^ (ids >> a) ^ (ids >> b) ^ (ids >> c)


@numba.njit(cache=True)
def l2_set_of_line(line, sets):
    """The set of an L2 slice holding a line: an XOR-fold of the line number, so that rows
    of a power-of-two stride (a K-major operand panel, 2^k bytes per row) spread over the
    slice's sets instead of sharing the few that `line % sets` leaves them."""
    return _fold(line, 8, 16, 24) % sets


@numba.njit(cache=True)
def l2_slice_of_line(line, slices):
    """`AddressMap.l2_slice` for a line number."""
    return _fold(line, 7, 13, 19) % slices


@numba.njit(cache=True)
def hbm_channel_of_line(line, channels):
    """`AddressMap.hbm_channel` for a line number."""
    return _fold(line, 5, 11, 17) % channels


@step
def popcount(mask):
    """Set bits of a sector mask."""
    n = 0
    while mask:
        n += mask & 1
        mask >>= 1
    return n
