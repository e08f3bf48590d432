"""A sectored cache block behind the memory protocol (the engine of L1, L2 slices and L3).

What it models
--------------
Memory protocol (what every memory block here honours, and `tests/test_memory_contract.py`
checks):

    Contract: a block receives `ReadReq`/`WriteReq` on `core_side`. For each request it
    delivers exactly one `ReadRsp`/`WriteRsp` carrying that same request object to the inbox
    registered for `req.source` with `connect_upstream(source, inbox)`. Requests it sends
    downward carry `source = self.name`; their responses arrive on `mem_side`.

A `SectoredCache` looks up all lines of a request in one `TagArray` call. Hits answer through
the response pipe: a link whose latency is the block's own latency and whose bandwidth is the
block's bandwidth; the request loop waits for the pipe, so a busy pipe pushes back on the
requesters. The tag pipeline takes one request per clock. Missing sectors are fetched from
below, grouped per downstream target (one request per L2 slice or HBM channel); a line
already being fetched for the same sectors is not fetched twice (the request waits for that
fetch). When all its fetches are back, the request answers through the same pipe, so a miss
costs the block's latency plus the levels below.

Write policy by flag: `write_back=True` (L2, L3) allocates written sectors as dirty and
answers at once; evicted dirty sectors go down as `WriteReq`s whose acks are dropped.
`write_back=False` (L1) updates lines it holds and forwards the write, answering when
the level below acknowledged.

Left out: MSHR limits (queue capacities and link credits bound outstanding work), the
coherence of L1s with each other, atomics. Units: ps, cycles of `clock`, bytes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import simpy

from models.tag_array import TagArray
from simulator.engine import Clock, SimEnvironment
from simulator.hooks import Hooks
from simulator.ports import (
    Inbox,
    Link,
    Port,
    ReadReq,
    ReadRsp,
    Router,
    WriteReq,
    WriteRsp,
    pipeline_credits,
)
from simulator.stats import Stat, Tracer

CACHE_ACCESS = "CACHE_ACCESS"
"""A request was looked up. data: kind ('read'|'write'), lines, hit_lines, miss_sectors."""
CACHE_WRITEBACK = "CACHE_WRITEBACK"
"""Dirty sectors were evicted and sent down. data: lines, sectors."""


class Fanout(Protocol):
    """Where a block sends requests downward: a target per line, and a send per target."""

    def target_of(self, lines: np.ndarray) -> np.ndarray: ...

    def send(self, target: int, msg: Any) -> simpy.events.Event: ...


@dataclass(frozen=True, slots=True)
class SingleTarget:
    """A fanout with one target reached over one link."""

    link: Link

    def target_of(self, lines: np.ndarray) -> np.ndarray:
        return np.zeros(len(lines), dtype=np.int64)

    def send(self, target: int, msg: Any) -> simpy.events.Event:
        return self.link.send(msg)


@dataclass(frozen=True, slots=True)
class MappedTargets:
    """A fanout whose target comes from an address map and whose sends use one link each
    (or one shared link when `links` has a single entry)."""

    links: tuple[Link, ...]
    target_of_lines: Callable[[np.ndarray], np.ndarray]

    def target_of(self, lines: np.ndarray) -> np.ndarray:
        return self.target_of_lines(lines)

    def send(self, target: int, msg: Any) -> simpy.events.Event:
        return self.links[target if len(self.links) > 1 else 0].send(msg)


@dataclass(slots=True)
class _Waiter:
    req: Any
    pending: int = 0
    served_by: str = ""


def popcount8(masks: np.ndarray) -> np.ndarray:
    """Set bits of each uint8 mask."""
    return np.unpackbits(np.asarray(masks, dtype=np.uint8)[:, None], axis=1).sum(axis=1)


class UpstreamRouter(Router):
    """Routes responses to the inbox registered for their request's source."""

    def __init__(self, name: str) -> None:
        self.inboxes: dict[str, Inbox] = {}
        super().__init__(name, self._pick)

    def _pick(self, msg: Any) -> Inbox:
        source = msg.req.source
        if source not in self.inboxes:
            raise KeyError(f"{self.name}: no inbox connected for source {source!r}; "
                           f"connected: {sorted(self.inboxes)}")
        return self.inboxes[source]


class SectoredCache:
    """One cache block (see the module docstring for the protocol and the policies)."""

    def __init__(self, env: SimEnvironment, name: str, *, clock: Clock, tags: TagArray,
                 sector_bytes: int, latency_cycles: int, bandwidth_bytes_per_clk: int,
                 write_back: bool, queue_capacity: int = 64) -> None:
        self.env = env
        self.name = name
        self.clock = clock
        self.tags = tags
        self.sector_bytes = sector_bytes
        self.write_back = write_back
        self.hooks = Hooks(name)
        self.core_side = Port(env, f"{name}.core_side", queue_capacity)
        self.mem_side = Port(env, f"{name}.mem_side", queue_capacity)
        self.upstream = UpstreamRouter(f"{name}.upstream")
        bandwidth_gbps = bandwidth_bytes_per_clk * clock.clock_ghz
        latency_ps = clock.cycles_to_ps(latency_cycles)
        self.pipe = Link(env, f"{name}.pipe", self.upstream, latency_ps, bandwidth_gbps,
                         pipeline_credits(latency_ps, clock.period_ps, 2, queue_capacity))
        self.downstream: Fanout | None = None
        self._ids = itertools.count()
        self._in_flight: dict[int, tuple[Any, int]] = {}  # line -> (fetch, sectors)
        self._waiting: dict[Any, list[_Waiter]] = {}  # fetch -> waiters
        env.process(self._serve_core())
        env.process(self._serve_mem())

    def connect_upstream(self, source: str, inbox: Inbox) -> None:
        """Deliver responses to requests from `source` into `inbox`."""
        self.upstream.inboxes[source] = inbox

    @property
    def outstanding_fetches(self) -> int:
        """Requests sent below whose responses have not come back (and that someone awaits)."""
        return len(self._waiting)

    def connect_downstream(self, fanout: Fanout) -> None:
        """Send misses, write-throughs and write-backs through `fanout`."""
        self.downstream = fanout

    def _serve_core(self):
        # The tag pipeline takes one request per clock: after each, wait for the next edge.
        while True:
            req = yield self.core_side.get()
            if isinstance(req, ReadReq):
                yield from self._read(req)
            else:
                yield from self._write(req)
            yield self.env.timeout(self.clock.delay_ps(self.env.now, 1))

    def _serve_mem(self):
        # Never blocks except on get: responses always drain, so the hierarchy cannot
        # deadlock on full queues.
        while True:
            rsp = yield self.mem_side.get()
            fetch = rsp.req
            if isinstance(rsp, ReadRsp):
                self._install(fetch.lines, fetch.sector_masks, dirty=False)
                for line in fetch.lines.tolist():
                    if self._in_flight.get(line, (None,))[0] is fetch:
                        del self._in_flight[line]
            for waiter in self._waiting.pop(fetch, ()):
                waiter.pending -= 1
                waiter.served_by = rsp.served_by or waiter.served_by
                if waiter.pending == 0:
                    self._answer(waiter.req, waiter.served_by)

    def _answer(self, req: Any, served_by: str) -> None:
        rsp = ReadRsp(req, served_by) if isinstance(req, ReadReq) else WriteRsp(req, served_by)
        self.pipe.send(rsp)

    def _read(self, req: ReadReq):
        lines = req.lines
        missing = self.tags.lookup(lines, req.sector_masks)
        miss = np.flatnonzero(missing)
        if self.hooks.listening:
            self.hooks.fire(CACHE_ACCESS, kind="read", lines=len(lines),
                            hit_lines=len(lines) - len(miss),
                            miss_sectors=int(popcount8(missing[miss]).sum()))
        if miss.size == 0:
            yield self.pipe.send(ReadRsp(req, self.name))
            return
        waiter = _Waiter(req)
        new_lines, new_masks, joined = [], [], set()
        for line, sectors in zip(lines[miss].tolist(), missing[miss].tolist(), strict=True):
            fetch, fetching = self._in_flight.get(line, (None, 0))
            if fetch is not None and sectors & ~fetching == 0:
                joined.add(fetch)
            else:
                new_lines.append(line)
                new_masks.append(sectors)
        for fetch in joined:
            self._wait_for(fetch, waiter)
        if new_lines:
            yield from self._send_down(ReadReq, np.array(new_lines, np.int64),
                                        np.array(new_masks, np.uint8), waiter)

    def _write(self, req: WriteReq):
        if self.hooks.listening:
            self.hooks.fire(CACHE_ACCESS, kind="write", lines=len(req.lines), hit_lines=0,
                            miss_sectors=0)
        if self.write_back:
            self._install(req.lines, req.sector_masks, dirty=True)
            yield self.pipe.send(WriteRsp(req, self.name))
            return
        self.tags.update(req.lines, req.sector_masks)
        masks = self.tags.masks_for(req.lines, req.sector_masks)
        yield from self._send_down(WriteReq, np.asarray(req.lines), masks, _Waiter(req))

    def _wait_for(self, fetch: Any, waiter: _Waiter) -> None:
        waiter.pending += 1
        self._waiting.setdefault(fetch, []).append(waiter)

    def _send_down(self, kind: type, lines: np.ndarray, masks: np.ndarray,
                   waiter: _Waiter | None) -> list[simpy.events.Event]:
        """Split lines per downstream target, send one request each; returns the sends."""
        targets = self.downstream.target_of(lines)
        if len(targets) == 1 or (targets == targets[0]).all():
            groups = [(int(targets[0]), lines, masks)]
        else:
            groups = [(target, lines[targets == target], masks[targets == target])
                      for target in np.unique(targets).tolist()]
        sends = []
        for target, part_lines, part_masks in groups:
            part_lines = np.array(part_lines, dtype=np.int64)
            part_masks = np.array(part_masks, dtype=np.uint8)
            part_lines.flags.writeable = False
            part_masks.flags.writeable = False
            size = int(popcount8(part_masks).sum()) * self.sector_bytes
            msg = kind(int(part_lines[0]), size, part_lines, part_masks, source=self.name,
                       req_id=next(self._ids))
            if kind is ReadReq:
                for line, sectors in zip(part_lines.tolist(), part_masks.tolist(), strict=True):
                    self._in_flight[line] = (msg, sectors)
            if waiter is not None:
                self._wait_for(msg, waiter)
            sends.append(self.downstream.send(target, msg))
        return sends

    def _install(self, lines: np.ndarray, masks: np.ndarray | None, dirty: bool) -> None:
        evicted, evicted_masks = self.tags.fill(lines, masks, dirty=dirty)
        if evicted.size and self.write_back:
            if self.hooks.listening:
                self.hooks.fire(CACHE_WRITEBACK, lines=len(evicted),
                                sectors=int(popcount8(evicted_masks).sum()))
            self._send_down(WriteReq, evicted, evicted_masks, None)


class CacheTracer(Tracer):
    """Requests, lines, hits, missing sectors and write-backs of cache blocks."""

    STATS = (
        Stat("read_requests", "count", "read requests looked up"),
        Stat("read_lines", "lines", "lines those requests touched"),
        Stat("read_hit_lines", "lines", "lines whose sectors were all present"),
        Stat("read_miss_sectors", "sectors", "sectors fetched or joined from below"),
        Stat("write_requests", "count", "write requests received"),
        Stat("writeback_sectors", "sectors", "dirty sectors evicted and written below"),
    )
    POSITIONS = (CACHE_ACCESS, CACHE_WRITEBACK)

    def on_event(self, owner: str, position: str, data: Any) -> None:
        if position == CACHE_WRITEBACK:
            self.sheet.add(owner, "writeback_sectors", data["sectors"])
        elif data["kind"] == "read":
            self.sheet.add(owner, "read_requests")
            self.sheet.add(owner, "read_lines", data["lines"])
            self.sheet.add(owner, "read_hit_lines", data["hit_lines"])
            self.sheet.add(owner, "read_miss_sectors", data["miss_sectors"])
        else:
            self.sheet.add(owner, "write_requests")
