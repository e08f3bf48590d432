"""Ideal memory blocks behind the memory protocol: fixed latency, optional bandwidth, no misses.

What it models
--------------
`IdealMemory` answers every `ReadReq`/`WriteReq` after a fixed latency, limited only by an
optional bandwidth (None: unlimited). `PerfectCache` is the same block standing in for one
cache level that always hits: built from that level's own latency and bandwidth, it shows
what the level's misses cost when swapped for the real block. Both honour the contract in
`models.cache` (one response per request, to the inbox of `req.source`), so every contract
test runs against them too.

Left out: data values (timing only), any state. Units: cycles of `clock`, ps, bytes/clock.
"""

from __future__ import annotations

from models.cache import UpstreamRouter
from simulator.engine import Clock, SimEnvironment
from simulator.hooks import Hooks
from simulator.ports import Inbox, Link, Port, ReadReq, ReadRsp, WriteRsp, pipeline_credits


class IdealMemory:
    """Answers each request `latency_cycles` later; `bandwidth_bytes_per_clk=None` = unlimited."""

    def __init__(self, env: SimEnvironment, name: str, *, clock: Clock, latency_cycles: int,
                 bandwidth_bytes_per_clk: float | None = None, queue_capacity: int = 64) -> None:
        self.env = env
        self.name = name
        self.hooks = Hooks(name)
        self.core_side = Port(env, f"{name}.core_side", queue_capacity)
        self.upstream = UpstreamRouter(f"{name}.upstream")
        bandwidth_gbps = (None if bandwidth_bytes_per_clk is None
                          else bandwidth_bytes_per_clk * clock.clock_ghz)
        latency_ps = clock.cycles_to_ps(latency_cycles)
        self.pipe = Link(env, f"{name}.pipe", self.upstream, latency_ps, bandwidth_gbps,
                         pipeline_credits(latency_ps, clock.period_ps, 1, queue_capacity))
        env.process(self._serve())

    def connect_upstream(self, source: str, inbox: Inbox) -> None:
        """Deliver responses to requests from `source` into `inbox`."""
        self.upstream.inboxes[source] = inbox

    def _serve(self):
        while True:
            req = yield self.core_side.get()
            rsp = ReadRsp(req, self.name) if isinstance(req, ReadReq) else WriteRsp(req, self.name)
            yield self.pipe.send(rsp)


class PerfectCache(IdealMemory):
    """A cache level that always hits: its own latency and bandwidth, nothing below it."""
