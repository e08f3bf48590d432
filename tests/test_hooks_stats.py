"""Rules of hooks and stats: listeners see what components report; one long table with units."""

from __future__ import annotations

import pytest

from simulator.framework.engine import SimEnvironment
from simulator.framework.hooks import LINK_SEND, PORT_PUT, Hooks
from simulator.framework.ports import Link, Port, ReadReq, ReadRsp, line_addresses
from simulator.framework.stats import (
    STATS_COLUMNS,
    LinkTracer,
    PortTracer,
    Stat,
    StatSheet,
    concat_stats,
    stats_frame,
)


def test_fire_reaches_listeners_of_that_position_only():
    """A listener attached at PORT_PUT sees PORT_PUT events with their data, nothing else."""
    hooks = Hooks("l2.slice0")
    seen = []
    hooks.attach(lambda owner, position, data: seen.append((owner, position, dict(data))),
                 (PORT_PUT,))
    hooks.fire(PORT_PUT, queued=3)
    hooks.fire(LINK_SEND, size_bytes=9)
    assert seen == [("l2.slice0", PORT_PUT, {"queued": 3})]


def test_hooks_listen_only_while_a_listener_is_attached():
    """`listening` is the one flag `fire` tests; detaching the last listener clears it."""
    hooks = Hooks("x")
    assert not hooks.listening

    def listener(owner, position, data):
        return None

    hooks.attach(listener)
    assert hooks.listening
    hooks.detach(listener)
    assert not hooks.listening


def test_hook_positions_must_be_upper_snake():
    """Attaching at a position that is not UPPER_SNAKE is refused."""
    with pytest.raises(ValueError, match="UPPER_SNAKE"):
        Hooks("x").attach(lambda *a: None, ("portPut",))


def test_undeclared_stat_is_refused():
    """Recording a stat nobody declared raises, so no value is ever unitless."""
    with pytest.raises(KeyError, match="not declared"):
        StatSheet().add("sm0", "mystery")


def test_stat_cannot_change_unit():
    """Declaring a stat name twice with two units is an error."""
    sheet = StatSheet()
    sheet.declare(Stat("bytes", "B"))
    with pytest.raises(ValueError, match="declared as"):
        sheet.declare(Stat("bytes", "KiB"))


def _traced_run() -> StatSheet:
    env = SimEnvironment()
    sheet = StatSheet()
    port = Port(env, "l1.mem_side", capacity=8)
    link = Link(env, "l2_to_l1", port, latency_ps=1_000, bandwidth_gbps=128.0)
    PortTracer(sheet).attach(port.hooks)
    LinkTracer(sheet).attach(link.hooks)

    def sender():
        for i in range(3):
            req = ReadReq(i * 128, 128, line_addresses(i * 128, 128, 128))
            yield link.send(ReadRsp(req))

    env.process(sender())
    env.run()
    return sheet


def test_tracers_turn_port_and_link_events_into_stats():
    """Three 128-B responses: 3 transfers, 384 B, 3 ns busy at 128 GB/s, 3 messages queued."""
    sheet = _traced_run()
    assert sheet.value("l2_to_l1", "transfers") == 3
    assert sheet.value("l2_to_l1", "bytes") == 384
    assert sheet.value("l2_to_l1", "busy_ps") == 3 * 1_000
    assert sheet.value("l1.mem_side", "messages_in") == 3
    assert sheet.value("l1.mem_side", "max_queued") == 3


def test_stats_table_has_exact_columns_and_declared_units():
    """The table's columns are exactly run_id..unit and each row carries its stat's unit."""
    frame = _traced_run().to_frame(run_id="r1", kernel="copy")
    assert tuple(frame.columns) == STATS_COLUMNS
    units = dict(zip(frame["stat"], frame["unit"], strict=True))
    assert units == {"transfers": "count", "bytes": "B", "busy_ps": "ps",
                     "messages_in": "count", "payload_bytes_in": "B", "max_queued": "messages"}
    assert set(frame["run_id"]) == {"r1"} and set(frame["kernel"]) == {"copy"}


def test_stats_tables_stack_into_one_long_table():
    """Stacking two runs' tables keeps the columns and adds the rows."""
    a = _traced_run().to_frame("a", "k")
    b = _traced_run().to_frame("b", "k")
    both = concat_stats([a, b, stats_frame()])
    assert tuple(both.columns) == STATS_COLUMNS and len(both) == len(a) + len(b)


def test_fire_batch_gives_the_batch_whole_or_its_events_one_by_one():
    """Listeners of the batch's position get it whole and not its events; the others get
    the events of their positions in order, as if each were fired."""
    hooks = Hooks("sm0")
    whole, per_event, everything = [], [], []

    def batch_listener(owner, position, data):
        whole.append((position, dict(data)))

    hooks.attach(batch_listener, ("BATCH", PORT_PUT))
    hooks.attach(lambda o, p, d: per_event.append((p, dict(d))), (PORT_PUT,))
    hooks.attach(lambda o, p, d: everything.append(p))

    def events():
        yield PORT_PUT, {"queued": 1}
        yield LINK_SEND, {"size_bytes": 2}
        yield PORT_PUT, {"queued": 3}

    hooks.fire_batch("BATCH", {"n": 3}, events)
    assert whole == [("BATCH", {"n": 3})]
    assert per_event == [(PORT_PUT, {"queued": 1}), (PORT_PUT, {"queued": 3})]
    assert everything == [PORT_PUT, LINK_SEND, PORT_PUT]
