"""The partitioned crossbar between SMs' L1s and the L2 slices.

What it models
--------------
Each SM has one port into the crossbar and one out of it: links with the crossbar's one-way
latency and the per-port bandwidth (request direction carries write data, response direction
read data). Behind the SM's port a router picks the request's L2 slice by the address hash
(a request sent through the crossbar holds lines of one slice). A slice in the other L2
partition is reached over a bridge that adds the far-partition penalty (`l2.far - l2.near`
cycles, half each way), so a far hit costs exactly the measured far latency when unloaded.

Link credits are sized so they never bind an unloaded pipeline (`pipeline_credits`); a full
destination queue still pushes back through them.

Left out: arbitration inside the crossbar (only the ports serialise), the bridge's own
bandwidth (not published: the bridge adds latency only), GPC-level hierarchy, SM-to-SM
(distributed shared memory) traffic. Units: ps, cycles of the SM clock, bytes/clock.
"""

from __future__ import annotations

from typing import Any

from models.address_map import AddressMap
from models.gpu_spec import GpuConfig
from simulator.engine import Clock, SimEnvironment
from simulator.ports import Inbox, Link, Router, pipeline_credits


class Crossbar:
    """Ports for `sm_count` SMs into the L2 slices' `core_side` inboxes, and back."""

    def __init__(self, env: SimEnvironment, config: GpuConfig, clock: Clock,
                 address_map: AddressMap, slice_inboxes: tuple[Inbox, ...], sm_count: int,
                 name: str = "noc") -> None:
        self.env = env
        self.name = name
        self.address_map = address_map
        self.slice_inboxes = slice_inboxes
        self.latency_ps = clock.cycles_to_ps(config.noc.latency_cycles)
        self.port_gbps = config.noc.port_bandwidth_bytes_per_clk * clock.clock_ghz
        penalty = config.l2.far_hit_latency_cycles - config.l2.near_hit_latency_cycles
        far_up_ps = clock.cycles_to_ps(penalty // 2)
        far_down_ps = clock.cycles_to_ps(penalty - penalty // 2)
        period_ps = clock.period_ps
        self._period_ps = period_ps
        self._slice_count = len(slice_inboxes)
        pairs = [(a, b) for a in range(config.l2.partitions)
                 for b in range(config.l2.partitions) if a != b]
        to_slices = Router(f"{name}.slices", self._slice_inbox)
        to_sms = Router(f"{name}.sms", self._sm_inbox)
        self.bridges_up = {
            pair: Link(env, f"{name}.bridge{pair[0]}to{pair[1]}.up", to_slices, far_up_ps, None,
                       pipeline_credits(far_up_ps, period_ps, sm_count))
            for pair in pairs}
        self.bridges_down = {
            pair: Link(env, f"{name}.bridge{pair[0]}to{pair[1]}.down", to_sms, far_down_ps, None,
                       pipeline_credits(far_down_ps, period_ps, len(slice_inboxes)))
            for pair in pairs}
        self.uplinks = tuple(
            Link(env, f"{name}.sm{i}.up", Router(f"{name}.sm{i}.route", self._route_up(i)),
                 self.latency_ps, self.port_gbps, pipeline_credits(self.latency_ps, period_ps))
            for i in range(sm_count))
        self.downlinks: dict[str, Link] = {}
        self._sm_of_source: dict[str, int] = {}

    def _slice_of(self, msg: Any) -> int:
        return int(self.address_map.l2_slice(msg.lines[:1])[0])

    def _slice_inbox(self, msg: Any) -> Inbox:
        return self.slice_inboxes[self._slice_of(msg)]

    def _sm_inbox(self, msg: Any) -> Inbox:
        return self.downlinks[msg.req.source]

    def _route_up(self, sm_index: int):
        here = self.address_map.partition_of_sm(sm_index)

        def route(msg: Any) -> Inbox:
            there = self.address_map.partition_of_slice(self._slice_of(msg))
            return self._slice_inbox(msg) if there == here else self.bridges_up[(here, there)]

        return route

    def connect_sm(self, sm_index: int, source: str, inbox: Inbox) -> None:
        """Responses to requests from `source` (SM `sm_index`'s L1) go down into `inbox`."""
        self._sm_of_source[source] = sm_index
        self.downlinks[source] = Link(
            self.env, f"{self.name}.sm{sm_index}.down", inbox, self.latency_ps, self.port_gbps,
            pipeline_credits(self.latency_ps, self._period_ps, self._slice_count))

    def inbox_from_slice(self, slice_index: int, source: str) -> Inbox:
        """Where slice `slice_index` puts responses for `source` (direct or over a bridge)."""
        here = self.address_map.partition_of_slice(slice_index)
        there = self.address_map.partition_of_sm(self._sm_of_source[source])
        return self.downlinks[source] if here == there else self.bridges_down[(here, there)]
