"""Ports and links: how components exchange immutable messages, with bounded queues.

What it models
--------------
* Messages (`ReadReq`, `ReadRsp`, `WriteReq`, `WriteRsp`) are frozen, slotted dataclasses.
  One message is one transaction: a warp's coalesced access or a whole TMA tile carries all of
  its line addresses (`lines`, a read-only int64 array of line start addresses) and, per line,
  a bit mask of the sectors it touches (`sector_masks`, uint8; None = whole lines). Messages
  compare by identity.
* A `Port` is a component's bounded inbox, named by the side it faces (`core_side` receives
  from the cores, `mem_side` from memory). `put()` on a full port blocks the putting process
  until the owner `get()`s: backpressure is real.
* A `Router` is an inbox that forwards each message to the inbox a function picks (by the
  message's source, say), keeping the chosen inbox's backpressure.
* A `Link` carries messages into one destination inbox with a latency and a bandwidth. A
  transfer of N bytes holds the link's transmitter for N / bandwidth and reaches the port
  `latency` after it leaves, so an unloaded transfer takes `latency + N / bandwidth`.
  At most `max_in_flight` transfers travel at once; a credit returns when the destination port
  accepts the message, so a full destination stalls the link and then its senders.

Bandwidth arithmetic is exact integer math: bandwidth is held in whole MB/s
(`round(bandwidth_gbps * 1000)`), one byte takes `1e6 / bandwidth_mbps` ps, and the
transmitter's busy-until time is kept in units of `1 / bandwidth_mbps` ps. Only the instants
handed to SimPy are rounded, up to the next whole ps; a transfer that starts within 1 ps of
the previous one's exact end continues from that exact end, so back-to-back transfers never
accumulate rounding error.

Left out: packet headers and command bytes (requests and write acks carry 0 payload bytes),
flit-level arbitration, message reordering (links deliver in FIFO order). No hardware block
of the timed path talks through these ports: the memory models of `simulator.runner.system` answer
each request synchronously (`models.flat_memory.MemoryInterface`).
Units: ps (int), bytes, GB/s (1e9 bytes/s).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import simpy

from simulator.framework.engine import SimEnvironment, as_time_ps
from simulator.framework.hooks import LINK_DELIVER, LINK_SEND, PORT_GET, PORT_PUT, Hooks

MBPS_PER_GBPS = 1000
PS_TIMES_MBPS_PER_BYTE = 10**6  # one byte at B MB/s takes 1e6 / B ps


def _frozen_array(values: Any, dtype: type) -> np.ndarray:
    array = np.array(values, dtype=dtype).reshape(-1)
    array.flags.writeable = False
    return array


def line_addresses(address: int, size_bytes: int, line_bytes: int) -> np.ndarray:
    """Start addresses of the lines that a contiguous range touches (read-only int64)."""
    first = address // line_bytes
    last = (address + max(size_bytes, 1) - 1) // line_bytes
    return _frozen_array(np.arange(first, last + 1, dtype=np.int64) * line_bytes, np.int64)


def coalesce(addresses: Any, access_bytes: int, line_bytes: int,
             sector_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """Lines touched by per-lane accesses and, per line, the mask of sectors touched.

    `addresses` are the byte addresses of the active lanes, each accessing `access_bytes`
    bytes. Returns sorted unique line addresses and a uint8 sector mask per line.
    """
    starts = np.asarray(addresses, dtype=np.int64).reshape(-1)
    sectors_per_line = line_bytes // sector_bytes
    first = starts // sector_bytes
    last = (starts + access_bytes - 1) // sector_bytes
    span = int((last - first).max(initial=0)) + 1
    sector_ids = np.unique((first[:, None] + np.arange(span)[None, :]).clip(max=last[:, None]))
    line_ids, which = np.unique(sector_ids // sectors_per_line, return_inverse=True)
    bits = np.left_shift(1, sector_ids % sectors_per_line).astype(np.uint8)
    masks = np.zeros(line_ids.size, dtype=np.uint8)
    np.bitwise_or.at(masks, which, bits)
    return _frozen_array(line_ids * line_bytes, np.int64), _frozen_array(masks, np.uint8)


@dataclass(frozen=True, slots=True, eq=False)
class ReadReq:
    """Read `size_bytes` starting at `address`, touching `lines` (sectors per `sector_masks`)."""

    address: int
    size_bytes: int
    lines: np.ndarray
    sector_masks: np.ndarray | None = None
    source: str = ""
    req_id: int = 0

    @property
    def payload_bytes(self) -> int:
        """Bytes a request puts on a link (commands are not modelled)."""
        return 0


@dataclass(frozen=True, slots=True, eq=False)
class ReadRsp:
    """The data for `req`; `served_by` names the level that held it (for tracing)."""

    req: ReadReq
    served_by: str = ""

    @property
    def payload_bytes(self) -> int:
        """The requested bytes travel back."""
        return self.req.size_bytes


@dataclass(frozen=True, slots=True, eq=False)
class WriteReq:
    """Write `size_bytes` at `address`, touching `lines` (sectors per `sector_masks`)."""

    address: int
    size_bytes: int
    lines: np.ndarray
    sector_masks: np.ndarray | None = None
    source: str = ""
    req_id: int = 0

    @property
    def payload_bytes(self) -> int:
        """The written bytes travel with the request."""
        return self.size_bytes


@dataclass(frozen=True, slots=True, eq=False)
class WriteRsp:
    """The acknowledgement of `req`."""

    req: WriteReq
    served_by: str = ""

    @property
    def payload_bytes(self) -> int:
        """An acknowledgement carries no data."""
        return 0


class Inbox(Protocol):
    """Anything a link can deliver into: `put(msg)` returns an event that fires on acceptance."""

    def put(self, msg: Any) -> simpy.events.Event: ...


class Port:
    """A bounded FIFO inbox of a component; a put on a full port blocks the putter."""

    def __init__(self, env: SimEnvironment, name: str, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"port {name!r}: capacity must be >= 1, got {capacity}")
        self.env = env
        self.name = name
        self.capacity = capacity
        self.hooks = Hooks(name)
        self._store = simpy.Store(env, capacity=capacity)

    def __len__(self) -> int:
        return len(self._store.items)

    @property
    def is_full(self) -> bool:
        """True when a put would block."""
        return len(self._store.items) >= self.capacity

    def put(self, msg: Any) -> simpy.events.Event:
        """Event that fires once `msg` is in the queue (blocks while the queue is full)."""
        event = self._store.put(msg)
        if self.hooks.listening:
            event.callbacks.append(lambda _ev: self._report(PORT_PUT, msg))
        return event

    def get(self) -> simpy.events.Event:
        """Event whose value is the oldest message (waits while the queue is empty)."""
        event = self._store.get()
        if self.hooks.listening:
            event.callbacks.append(lambda ev: self._report(PORT_GET, ev.value))
        return event

    def _report(self, position: str, msg: Any) -> None:
        self.hooks.fire(position, msg=msg, queued=len(self._store.items), time_ps=self.env.now)

    def __repr__(self) -> str:
        return f"Port({self.name!r}, {len(self)}/{self.capacity})"


class Router:
    """An inbox that passes each message on to the inbox `route(msg)` picks (no delay)."""

    def __init__(self, name: str, route: Callable[[Any], Inbox]) -> None:
        self.name = name
        self.route = route

    def put(self, msg: Any) -> simpy.events.Event:
        """The chosen inbox's put event (so its backpressure reaches the sender)."""
        return self.route(msg).put(msg)


def pipeline_credits(latency_ps: int, period_ps: float, feeders: int = 1,
                     queue: int = 64) -> int:
    """In-flight credits that never bind a link fed at most one message per cycle by each of
    `feeders` (one per cycle of latency and feeder), plus `queue` for bursts."""
    return feeders * (math.ceil(latency_ps / period_ps) + 1) + queue


def bandwidth_mbps(bandwidth_gbps: float) -> int:
    """GB/s as whole MB/s (the resolution of link bandwidth)."""
    mbps = round(bandwidth_gbps * MBPS_PER_GBPS)
    if mbps < 1:
        raise ValueError(f"bandwidth must be >= 0.001 GB/s, got {bandwidth_gbps!r}")
    return mbps


def transfer_ps(size_bytes: int, bandwidth_gbps: float | None) -> int:
    """Time to push `size_bytes` through `bandwidth_gbps` (None: unlimited), rounded up."""
    if bandwidth_gbps is None:
        return 0
    return -(-size_bytes * PS_TIMES_MBPS_PER_BYTE // bandwidth_mbps(bandwidth_gbps))


class Link:
    """A point-to-point connection into `dst` with latency, bandwidth and bounded in-flight.

    `bandwidth_gbps=None` makes a pure delay line (transfers take no transmitter time).
    `send()` fires when the message has left the transmitter (senders pace themselves on it);
    `put()` fires as soon as the link has accepted it (a link is an inbox for what feeds it).
    Either waits while all `max_in_flight` credits are out; credits come back as messages are
    accepted by `dst`. Waiting senders are admitted in FIFO order.
    """

    def __init__(self, env: SimEnvironment, name: str, dst: Inbox, latency_ps: int,
                 bandwidth_gbps: float | None, max_in_flight: int = 64) -> None:
        if max_in_flight < 1:
            raise ValueError(f"link {name!r}: max_in_flight must be >= 1, got {max_in_flight}")
        self.env = env
        self.name = name
        self.dst = dst
        self.latency_ps = as_time_ps(latency_ps, "latency_ps")
        self.bandwidth_gbps = bandwidth_gbps
        self.max_in_flight = max_in_flight
        self.hooks = Hooks(name)
        self._mbps = 1 if bandwidth_gbps is None else bandwidth_mbps(bandwidth_gbps)
        self._ps_mbps_per_byte = 0 if bandwidth_gbps is None else PS_TIMES_MBPS_PER_BYTE
        self._busy_until_scaled = 0  # transmitter free time, in units of 1/_mbps ps
        self._credits = max_in_flight
        self._waiting: deque[tuple[simpy.events.Event, Any, int, bool]] = deque()
        self._in_flight: deque[tuple[int, Any]] = deque()
        self._wake = env.event()
        env.process(self._deliver())

    @property
    def in_flight(self) -> int:
        """Messages admitted and not yet accepted by `dst`."""
        return self.max_in_flight - self._credits

    def send(self, msg: Any, size_bytes: int | None = None) -> simpy.events.Event:
        """Event that fires when `msg` has left the transmitter (its last byte is sent).

        `size_bytes` defaults to `msg.payload_bytes`. The sender waits first for an in-flight
        credit, then for the transmitter to drain earlier transfers and this one.
        """
        size = msg.payload_bytes if size_bytes is None else int(size_bytes)
        if self._credits and not self._waiting:
            return self.env.timeout(self._admit(msg, size) - self.env.now)
        event = self.env.event()
        self._waiting.append((event, msg, size, True))
        return event

    def put(self, msg: Any) -> simpy.events.Event:
        """Event that fires once the link has accepted `msg` (a credit was free)."""
        if self._credits and not self._waiting:
            self._admit(msg, msg.payload_bytes)
            return self.env.timeout(0)
        event = self.env.event()
        self._waiting.append((event, msg, msg.payload_bytes, False))
        return event

    def _admit(self, msg: Any, size_bytes: int) -> int:
        """Take a credit, schedule the transfer; returns the time its last byte leaves."""
        self._credits -= 1
        now = self.env.now
        # A transmitter that went idle less than 1 ps ago (its free time rounded up to now)
        # continues back to back, so a sender waiting on each send accumulates no rounding.
        busy = self._busy_until_scaled
        start_scaled = busy if busy > (now - 1) * self._mbps else now * self._mbps
        end_scaled = start_scaled + size_bytes * self._ps_mbps_per_byte
        self._busy_until_scaled = end_scaled
        end_ps = -(-end_scaled // self._mbps)
        arrival_ps = end_ps + self.latency_ps
        self._in_flight.append((arrival_ps, msg))
        if not self._wake.triggered:
            self._wake.succeed()
        if self.hooks.listening:
            self.hooks.fire(LINK_SEND, msg=msg, size_bytes=size_bytes,
                            start_ps=-(-start_scaled // self._mbps), end_ps=end_ps,
                            arrival_ps=arrival_ps)
        return end_ps

    def _return_credit(self) -> None:
        self._credits += 1
        if not self._waiting:
            return
        event, msg, size, until_sent = self._waiting.popleft()
        end_ps = self._admit(msg, size)
        if until_sent and end_ps > self.env.now:
            self.env.timeout(end_ps - self.env.now).callbacks.append(
                lambda _timeout: event.succeed())
        else:
            event.succeed()

    def _deliver(self):
        while True:
            if not self._in_flight:
                self._wake = self.env.event()
                yield self._wake
            arrival_ps, msg = self._in_flight.popleft()
            if arrival_ps > self.env.now:
                yield self.env.timeout(arrival_ps - self.env.now)
            yield self.dst.put(msg)
            self._return_credit()
            if self.hooks.listening:
                self.hooks.fire(LINK_DELIVER, msg=msg, arrival_ps=arrival_ps,
                                time_ps=self.env.now)

    def __repr__(self) -> str:
        return (f"Link({self.name!r}, latency_ps={self.latency_ps}, "
                f"bandwidth_gbps={self.bandwidth_gbps}, to={getattr(self.dst, 'name', '?')!r})")
