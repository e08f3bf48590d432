"""The link windows of `models.link_memory` served inside the compiled SM loop.

What it models
--------------
The same rules as `models.link_memory.LinkMemory.access` (its docstring states them), on
arrays the loop can reach (`models.sm_memory`):

* `windows` (int64, one row per window, sorted by start): its first and past-last sector
  (`W_START`, `W_END`), the link (`W_LINK`: a row of `links`), whether it holds chunk
  signals (`W_SIGNAL`), whether the symmetric peer's data lands in rank 0's own buffer
  (`W_MIRROR`) and the sector offset of that buffer from the window (`W_MIRROR_OFFSET`);
* `scales` (float64, per window): bytes received per byte sent (`LinkWindow.ingress_scale`);
* `links` (int64, a row per link, `LINK_ROWS` = nvlink, network): the egress and ingress
  pipes' next free time (`L_EGRESS_FS`, `L_INGRESS_FS`, fs, as
  `models.flat_memory.BandwidthPipe.free_fs`), their fs per byte, the latency (ps) and the
  per-message cost (bytes of pipe time). `LinkPipes` in Python books the same rows through
  the same functions (`reserve`, `send`, `drained`), so a request answered in Python and one
  answered in the loop see the same pipes;
* `scratch` (int64, 2 rows of at least a request's sectors): the sectors of one part of a
  request and the window of each sector.

A request with no sector in a window goes to the cached memory unchanged. One that has
some is split as `LinkMemory.access` splits it: its local sectors first, then each window's
sectors in window order (`models.sm_memory`, which serves every part that reaches the
cached memory, the local part and a mirrored store, and logs it). A send over a link is
logged as a row of kind `LINK_LOG_KIND - link` (issue = when it started on the egress,
done = when its last byte left, first count = its payload bytes), which
`LinkMemory.fire_batch` hands to the link's hooks as `LINK_SEND`.

Results are those of `LinkMemory.access` bit for bit (Python's `round` of the received bytes
is `round_half_even`). Left out: what `models.link_memory` leaves out. Units: ps, fs, bytes,
32-byte sectors.
"""

from __future__ import annotations

import math

import numba as nb
import numpy as np

from models.cached_memory_layout import step

SECTOR_BYTES = 32

W_START, W_END, W_LINK, W_SIGNAL, W_MIRROR, W_MIRROR_OFFSET = range(6)
W_FIELDS = 6
L_EGRESS_FS, L_INGRESS_FS, L_FS_PER_BYTE, L_LATENCY_PS, L_OVERHEAD_BYTES = range(5)
L_FIELDS = 5
LINK_ROWS = ("nvlink", "network")
"""The links' rows of `links`, in order."""
LINK_LOG_KIND = -1
"""Log kind of a send over link row 0; row r logs `LINK_LOG_KIND - r` (memory kinds are >= 0)."""


def no_links(scratch_sectors: int = 1) -> tuple:
    """(windows, scales, links, scratch) of a memory without link windows (same types)."""
    return (np.zeros((0, W_FIELDS), np.int64), np.zeros(0, np.float64),
            np.zeros((len(LINK_ROWS), L_FIELDS), np.int64),
            np.zeros((2, max(scratch_sectors, 1)), np.int64))


@step
def round_half_even(x):
    """Python's `round(x)` of a float, to an int (ties to even)."""
    f = math.floor(x)
    d = x - f
    r = np.int64(f)
    if d > 0.5 or (d == 0.5 and r % 2 != 0):
        r += 1
    return r


@nb.njit(cache=True)
def reserve(links, row, col, now_ps, size_bytes):
    """`BandwidthPipe.reserve` of pipe `col` of link `row`: book `size_bytes` from `now_ps`
    on; the ps at which the last byte leaves."""
    start = max(now_ps * 1000, links[row, col])
    links[row, col] = start + size_bytes * links[row, L_FS_PER_BYTE]
    return -(-links[row, col] // 1000)


@nb.njit(cache=True)
def send(links, row, now_ps, size_bytes, message):
    """`LinkPipes.send`: queue `size_bytes` (plus the per-message cost for a `message`) on
    link `row`'s egress; (when it starts leaving, when its last byte has left) in ps. It has
    landed the link's latency after the second."""
    start = max(now_ps, -(-links[row, L_EGRESS_FS] // 1000))
    extra = links[row, L_OVERHEAD_BYTES] if message else 0
    return start, reserve(links, row, L_EGRESS_FS, now_ps, size_bytes + extra)


@nb.njit(cache=True)
def drained(links, row, now_ps):
    """`LinkPipes.drained`: when everything queued so far on both directions has landed."""
    last = max(links[row, L_EGRESS_FS], links[row, L_INGRESS_FS])
    return max(now_ps, -(-last // 1000)) + links[row, L_LATENCY_PS]


@step
def window_of(windows, sector):
    """Index of the window holding `sector`, or -1 (`LinkMemory._inside`)."""
    lo, hi = 0, windows.shape[0]
    while lo < hi:                         # the last window starting at or below `sector`
        mid = (lo + hi) // 2
        if windows[mid, W_START] <= sector:
            lo = mid + 1
        else:
            hi = mid
    w = lo - 1
    if w >= 0 and sector < windows[w, W_END]:
        return w
    return -1

