"""The HBM step of the cached memory: banks, rows, refresh and the channel data bus.

What it models
--------------
The bottom of `models.cached_memory`'s hierarchy for one line, on the `banks` and `free_fs`
arrays `models.cached_memory_kernel` documents: a read opens the line's row in its bank
(row hit: nothing; closed row, or one an all-bank refresh closed since: tRCD; another row
open: tRP + tRCD; banks work in parallel), then books its bytes on the channel's data bus
and is back `hbm_fixed_latency_ps` (`models.hbm`) after its transfer starts; a write joins the
channel's write-back buffer, which crosses the bus as one batch at the buffer's bound,
after the read/write turnaround gap and outside refresh windows (channels staggered over
one refresh interval).

Left out: bank groups (tCCD_L against tCCD_S), per-bank refresh, write-to-read turnaround
inside a bank, command-bus limits (tRRD, tFAW). Units: ps, fs for pipe bookings, bytes.
"""

from __future__ import annotations

from models.cached_memory_layout import (
    C_HBM_WRITE,
    C_ROW_HIT,
    C_ROW_MISS,
    P_ACTIVATE_PS,
    P_BANKS,
    P_CHANNEL_FS,
    P_CHANNELS,
    P_HBM_PS,
    P_LINE_BYTES,
    P_PIPE_CHANNEL,
    P_PRECHARGE_PS,
    P_READ_TO_WRITE_FS,
    P_REFRESH_FS,
    P_REFRESH_INTERVAL_FS,
    P_ROW_BYTES,
    P_ROW_CHANNELS,
    P_SECTOR_BYTES,
    P_WRITE_TO_READ_FS,
    P_WRITEBACK_BOUND_FS,
    ceil_ps,
    hbm_channel_of_line,
    popcount,
    step,
)


@step
def _refresh_offset_fs(p, channel):
    """Phase of the channel's refresh windows (channels staggered over one interval)."""
    return channel * p[P_REFRESH_INTERVAL_FS] // p[P_CHANNELS]


@step
def _refresh_index(p, channel, t_fs):
    """Number of the last refresh window of the channel starting at or before `t_fs`."""
    return (t_fs - _refresh_offset_fs(p, channel)) // p[P_REFRESH_INTERVAL_FS]


@step
def _outside_refresh(p, channel, start_fs, duration_fs):
    """The earliest time >= `start_fs` at which `duration_fs` of channel work overlaps no
    all-bank refresh window ([offset + k * tREFI, + tRFC))."""
    interval, busy = p[P_REFRESH_INTERVAL_FS], p[P_REFRESH_FS]
    window = _refresh_offset_fs(p, channel) + _refresh_index(p, channel, start_fs) * interval
    if start_fs < window + busy:
        start_fs = window + busy
    if start_fs + duration_fs > window + interval:
        start_fs = window + interval + busy
    return start_fs


@step
def _book_channel(p, free_fs, banks, channel, at_ps, size_bytes, write):
    """Book `size_bytes` on the channel's data bus from `at_ps` on, after the turnaround gap
    if the bus last moved data the other way and outside refresh; the start in ps."""
    pipe = p[P_PIPE_CHANNEL] + channel
    bus = banks[channel, p[P_BANKS]]
    start = max(at_ps * 1000, free_fs[pipe])
    if bus[0] != write and free_fs[pipe] > 0:
        gap = p[P_READ_TO_WRITE_FS] if write else p[P_WRITE_TO_READ_FS]
        start = max(start, free_fs[pipe] + gap)
    duration = size_bytes * p[P_CHANNEL_FS]
    start = _outside_refresh(p, channel, start, duration)
    bus[0] = write
    free_fs[pipe] = start + duration
    return ceil_ps(start)


@step
def hbm_access(p, free_fs, banks, counts, line, size_bytes, at_ps, write):
    """Open the line's row; a read moves its bytes over the channel at once and returns the
    ps they are back at the level above; a write joins the channel's write-back buffer, which
    crosses the bus as one batch when it holds the buffer's bound (returns `at_ps`)."""
    channels = p[P_CHANNELS]
    channel = hbm_channel_of_line(line, channels)
    row_index = (line // p[P_ROW_CHANNELS]) * p[P_LINE_BYTES] // p[P_ROW_BYTES]
    bank = row_index % p[P_BANKS]
    row = row_index // p[P_BANKS]
    start = max(at_ps, banks[channel, bank, 1])
    start = ceil_ps(_outside_refresh(p, channel, start * 1000, p[P_ACTIVATE_PS] * 1000))
    if _refresh_index(p, channel, start * 1000) != _refresh_index(
            p, channel, banks[channel, bank, 1] * 1000):
        banks[channel, bank, 0] = -1  # an all-bank refresh closed every row since
    if banks[channel, bank, 0] == row:
        ready = start
        counts[C_ROW_HIT] += 1
    elif banks[channel, bank, 0] < 0:
        ready = start + p[P_ACTIVATE_PS]
        counts[C_ROW_MISS] += 1
    else:
        ready = start + p[P_PRECHARGE_PS] + p[P_ACTIVATE_PS]
        counts[C_ROW_MISS] += 1
    banks[channel, bank, 0] = row
    banks[channel, bank, 1] = ready
    if not write:
        return _book_channel(p, free_fs, banks, channel, ready, size_bytes, 0) + p[P_HBM_PS]
    bus = banks[channel, p[P_BANKS]]
    bus[1] += size_bytes
    if bus[1] * p[P_CHANNEL_FS] >= p[P_WRITEBACK_BOUND_FS]:
        _book_channel(p, free_fs, banks, channel, ready, bus[1], 1)
        bus[1] = 0
    return at_ps


@step
def hbm_write(p, free_fs, banks, counts, line, mask, at_ps):
    """Write `mask` of `line` to HBM from `at_ps` on; returns the ps from which the request
    that caused the write-back may complete: when the channel's backlog (the work booked on
    its pipe up to the end of this write) has drained to the write-back buffer's bound."""
    counts[C_HBM_WRITE] += popcount(mask)
    hbm_access(p, free_fs, banks, counts, line, popcount(mask) * p[P_SECTOR_BYTES], at_ps, 1)
    channel = hbm_channel_of_line(line, p[P_CHANNELS])
    return ceil_ps(free_fs[p[P_PIPE_CHANNEL] + channel] - p[P_WRITEBACK_BOUND_FS])
