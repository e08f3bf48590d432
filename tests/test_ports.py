"""Rules of ports and links: bounded queues push back, links cost latency + bytes/bandwidth."""

from __future__ import annotations

import numpy as np
import pytest

from simulator.framework.engine import SimEnvironment
from simulator.framework.ports import (
    Link,
    Port,
    ReadReq,
    ReadRsp,
    WriteReq,
    coalesce,
    line_addresses,
    transfer_ps,
)


def _req(address: int = 0, size_bytes: int = 128) -> ReadReq:
    return ReadReq(address, size_bytes, line_addresses(address, size_bytes, 128))


def test_messages_are_frozen():
    """A message cannot be changed after it is made, nor its line array."""
    req = _req()
    with pytest.raises(AttributeError):
        req.address = 4  # type: ignore[misc]
    with pytest.raises(ValueError):
        req.lines[0] = 1


def test_line_addresses_cover_the_range():
    """A 256-byte read at 64 touches lines 0, 128 and 256."""
    assert line_addresses(64, 256, 128).tolist() == [0, 128, 256]


def test_coalesce_merges_lanes_into_lines_and_sectors():
    """32 lanes reading consecutive 4-byte words touch one line, all four sectors."""
    lines, masks = coalesce(np.arange(32) * 4 + 1024, 4, 128, 32)
    assert lines.tolist() == [1024] and masks.tolist() == [0b1111]
    lines, masks = coalesce([0, 200, 4096 + 96], 8, 128, 32)
    assert lines.tolist() == [0, 128, 4096] and masks.tolist() == [0b0001, 0b0100, 0b1000]


def test_response_payload_is_the_requested_bytes():
    """A read response carries the request's bytes; the request and a write ack carry none."""
    req = _req(0, 256)
    assert (req.payload_bytes, ReadRsp(req).payload_bytes) == (0, 256)
    assert WriteReq(0, 64, line_addresses(0, 64, 128)).payload_bytes == 64


def test_full_port_blocks_the_producer_until_the_consumer_takes():
    """With capacity 2, the third put completes only when the consumer's get frees a slot."""
    env = SimEnvironment()
    port = Port(env, "l1.core_side", capacity=2)
    put_done: list[int] = []

    def producer():
        for i in range(4):
            yield port.put(_req(i * 128))
            put_done.append(env.now)

    def consumer():
        yield env.timeout(1000)
        while True:
            yield port.get()
            yield env.timeout(500)

    env.process(producer())
    env.process(consumer())
    env.run(until=5000)
    assert put_done == [0, 0, 1000, 1500]


def test_link_unloaded_transfer_takes_latency_plus_bytes_over_bandwidth():
    """One 4096-byte transfer over 64 GB/s with 100 ns latency arrives at 100 ns + 64 ns."""
    env = SimEnvironment()
    dst = Port(env, "hbm.core_side", capacity=4)
    link = Link(env, "l2_to_hbm", dst, latency_ps=100_000, bandwidth_gbps=64.0)
    arrivals: list[int] = []

    def sender():
        yield link.send(_req(), size_bytes=4096)

    def receiver():
        yield dst.get()
        arrivals.append(env.now)

    env.process(sender())
    env.process(receiver())
    env.run()
    assert arrivals == [100_000 + 4096 * 1000 // 64]


def test_link_back_to_back_transfers_are_bandwidth_bound_without_rounding_drift():
    """N transfers of 32 B at 3350 GB/s: the last arrives at latency + ceil(N*32/bandwidth)."""
    env = SimEnvironment()
    count = 1000
    dst = Port(env, "sink", capacity=count)
    link = Link(env, "wide", dst, latency_ps=7, bandwidth_gbps=3350.0, max_in_flight=count)
    arrivals: list[int] = []

    def sender():
        for _ in range(count):
            yield link.send(_req(), size_bytes=32)

    def receiver():
        for _ in range(count):
            yield dst.get()
            arrivals.append(env.now)

    env.process(sender())
    env.process(receiver())
    env.run()
    assert arrivals[-1] == 7 + -(-count * 32 * 10**6 // 3_350_000)
    assert transfer_ps(32, 3350.0) == 10  # one transfer alone rounds up to whole ps


def test_full_destination_stalls_the_link_and_then_its_sender():
    """A link with 1 credit into a 1-slot port: sends wait for the consumer's pace."""
    env = SimEnvironment()
    dst = Port(env, "slow.core_side", capacity=1)
    link = Link(env, "narrow", dst, latency_ps=10, bandwidth_gbps=1000.0, max_in_flight=1)
    sent: list[int] = []

    def sender():
        for _ in range(4):
            yield link.send(_req(), size_bytes=0)
            sent.append(env.now)

    def consumer():
        while True:
            yield env.timeout(100)
            yield dst.get()

    env.process(sender())
    env.process(consumer())
    env.run(until=1000)
    assert sent == [0, 10, 100, 200]
