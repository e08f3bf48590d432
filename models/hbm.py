"""HBM: channels with a data-bus bandwidth, a fixed access latency and per-bank row buffers.

What it models
--------------
Each `HbmChannel` serves the lines of one request (all in that channel) on its banks, which
work in parallel: a line whose row is open costs nothing extra, a closed bank costs an
activate (tRCD), a bank holding another row costs precharge + activate (tRP + tRCD); a bank
is busy while it opens a row. When the last line's row is open, the response enters the
channel's pipe: a link with the channel's fixed latency and its data-bus bandwidth. Write data
crosses the channel's input link at the same bandwidth; writes are acknowledged the same way.

`Hbm` builds all channels and their input links (one per channel, shared by every sender)
and sends each request to its channel by the `AddressMap` hash.

Latency split (in `hbm_fixed_latency_ps`): `hbm.latency_cycles` is a pointer-chase figure
over a footprint spread across both L2 partitions with random rows, so the channel's fixed
part is that figure minus the average L2 hit path (near and far) minus tRP + tRCD.

Left out: refresh, bank groups, read/write turnaround, command-bus limits, FR-FCFS
reordering (requests start in arrival order; banks overlap). Units: ps, ns for DRAM
timings, GB/s, bytes.
"""

from __future__ import annotations

import numba
import numpy as np
import simpy

from models.address_map import AddressMap
from models.cache import MappedTargets, UpstreamRouter, popcount8
from models.gpu_spec import GpuConfig
from simulator.engine import Clock, SimEnvironment
from simulator.hooks import Hooks
from simulator.ports import Inbox, Link, Port, ReadReq, ReadRsp, WriteRsp, pipeline_credits
from simulator.stats import Stat, Tracer

HBM_ACCESS = "HBM_ACCESS"
"""A request was scheduled on a channel's banks. data: kind, lines, row_hits, bytes, ready_ps."""


@numba.njit(cache=True)
def _open_rows(banks, rows, open_row, bank_ready, now, activate_ps, precharge_ps):
    ready = now
    row_hits = 0
    for i in range(banks.size):
        b = banks[i]
        start = max(now, bank_ready[b])
        if open_row[b] == rows[i]:
            done = start
            row_hits += 1
        elif open_row[b] < 0:
            done = start + activate_ps
        else:
            done = start + precharge_ps + activate_ps
        open_row[b] = rows[i]
        bank_ready[b] = done
        ready = max(ready, done)
    return ready, row_hits


def hbm_fixed_latency_ps(config: GpuConfig, clock: Clock) -> int:
    """The channel's own fixed latency (see the module docstring for the split)."""
    l2_average = (config.l2.near_hit_latency_cycles + config.l2.far_hit_latency_cycles) // 2
    row_miss_ps = round((config.hbm.row_activate_ns + config.hbm.row_precharge_ns) * 1000)
    fixed = clock.cycles_to_ps(config.hbm.latency_cycles - l2_average) - row_miss_ps
    if fixed < 0:
        raise ValueError("hbm.latency_cycles leaves no time for the channel after the L2 path")
    return fixed


class HbmChannel:
    """One HBM channel: banks with open rows, a data-bus pipe, bounded outstanding requests."""

    def __init__(self, env: SimEnvironment, name: str, *, config: GpuConfig,
                 address_map: AddressMap, fixed_latency_ps: int, period_ps: float,
                 queue_capacity: int = 64) -> None:
        hbm = config.hbm
        self.env = env
        self.name = name
        self.address_map = address_map
        self.sector_bytes = config.l2.sector_bytes
        self.sectors_per_line = config.l2.line_bytes // config.l2.sector_bytes
        self.hooks = Hooks(name)
        self.core_side = Port(env, f"{name}.core_side", queue_capacity)
        self.upstream = UpstreamRouter(f"{name}.upstream")
        self.pipe = Link(env, f"{name}.pipe", self.upstream, fixed_latency_ps,
                         hbm.channel_bandwidth_gbps,
                         pipeline_credits(fixed_latency_ps, period_ps, 1, queue_capacity))
        self._activate_ps = round(hbm.row_activate_ns * 1000)
        self._precharge_ps = round(hbm.row_precharge_ns * 1000)
        self._open_row = np.full(hbm.banks_per_channel, -1, dtype=np.int64)
        self._bank_ready = np.zeros(hbm.banks_per_channel, dtype=np.int64)
        self._capacity = queue_capacity
        self._in_service = 0
        self._slot_freed = env.event()
        env.process(self._serve())

    def connect_upstream(self, source: str, inbox: Inbox) -> None:
        """Deliver responses to requests from `source` into `inbox`."""
        self.upstream.inboxes[source] = inbox

    def _serve(self):
        while True:
            if self._in_service >= self._capacity:
                self._slot_freed = self.env.event()
                yield self._slot_freed
            req = yield self.core_side.get()
            banks, rows = self.address_map.hbm_bank_row(req.lines)
            ready, row_hits = _open_rows(banks, rows, self._open_row, self._bank_ready,
                                         self.env.now, self._activate_ps, self._precharge_ps)
            if self.hooks.listening:
                sectors = (len(req.lines) * self.sectors_per_line if req.sector_masks is None
                           else int(popcount8(req.sector_masks).sum()))
                self.hooks.fire(HBM_ACCESS, kind="read" if isinstance(req, ReadReq) else "write",
                                lines=len(req.lines), row_hits=int(row_hits),
                                bytes=sectors * self.sector_bytes, ready_ps=int(ready))
            rsp = ReadRsp(req, self.name) if isinstance(req, ReadReq) else WriteRsp(req, self.name)
            self._in_service += 1
            opened = self.env.timeout(int(ready) - self.env.now, rsp)
            opened.callbacks.append(self._to_pipe)

    def _to_pipe(self, opened: simpy.events.Event) -> None:
        """The rows are open: hand the response to the data pipe and free the slot."""
        self.pipe.put(opened.value)
        self._in_service -= 1
        if not self._slot_freed.triggered:
            self._slot_freed.succeed()


class Hbm:
    """All channels of the device memory, each behind one shared input link."""

    def __init__(self, env: SimEnvironment, config: GpuConfig, clock: Clock,
                 address_map: AddressMap, name: str = "hbm") -> None:
        fixed_ps = hbm_fixed_latency_ps(config, clock)
        self.channels = tuple(
            HbmChannel(env, f"{name}.ch{c}", config=config, address_map=address_map,
                       fixed_latency_ps=fixed_ps, period_ps=clock.period_ps)
            for c in range(config.hbm.channels))
        self.input_links = tuple(
            Link(env, f"{name}.ch{c}.in", channel.core_side, 0,
                 config.hbm.channel_bandwidth_gbps)
            for c, channel in enumerate(self.channels))
        self.fanout = MappedTargets(self.input_links, address_map.hbm_channel)

    def connect_upstream(self, source: str, inbox: Inbox) -> None:
        """Deliver every channel's responses to requests from `source` into `inbox`."""
        for channel in self.channels:
            channel.connect_upstream(source, inbox)


class HbmTracer(Tracer):
    """Requests, bytes and row-buffer hits of HBM channels."""

    STATS = (
        Stat("requests", "count", "requests served"),
        Stat("bytes", "B", "bytes read or written"),
        Stat("lines", "lines", "lines accessed"),
        Stat("row_hits", "lines", "lines whose row was already open"),
    )
    POSITIONS = (HBM_ACCESS,)

    def on_event(self, owner: str, position: str, data) -> None:
        self.sheet.add(owner, "requests")
        self.sheet.add(owner, "bytes", data["bytes"])
        self.sheet.add(owner, "lines", data["lines"])
        self.sheet.add(owner, "row_hits", data["row_hits"])
