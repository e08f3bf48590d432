"""Declared statistics, tracers that fill them from hooks, and the one long stats table.

What it models
--------------
* A `Stat` is declared once with a name, a unit and a help line. Values are only ever
  recorded against declared stats, so every number in a result carries its unit.
* A `StatSheet` accumulates values per (component, stat) with `add`, `maximum` or `set`, and
  turns them into the project's single result format: a long pandas table with exactly the
  columns `STATS_COLUMNS = (run_id, kernel, component, stat, value, unit)`.
* A `Tracer` subscribes to components' `Hooks` from outside and turns hook events into stat
  updates. `PortTracer` and `LinkTracer` cover the generic machinery; hardware blocks add
  their own tracers next to their models.

`within_peak(amounts, capacity)` is the one rule for amounts over time that may not exceed
a rate: what a time bucket holds beyond its capacity moved before (a request's bytes are
counted when it completes, and cross the level no later), so the excess goes to the buckets
before it, the latest schedule the capacity allows; totals are kept.

Left out: time series (a tracer that needs one keeps its own list and reports a summary),
histograms. Units: as declared per stat (`count`, `B`, `ps`, `messages`, ...).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from simulator.framework.hooks import LINK_SEND, PORT_GET, PORT_PUT, Hooks

STATS_COLUMNS = ("run_id", "kernel", "component", "stat", "value", "unit")


@dataclass(frozen=True, slots=True)
class Stat:
    """A statistic: its `name`, the `unit` of its value and one line of `help`."""

    name: str
    unit: str
    help: str = ""


class StatSheet:
    """Values of declared stats per component, in first-recorded order."""

    def __init__(self) -> None:
        self._declared: dict[str, Stat] = {}
        self._values: dict[tuple[str, str], float] = {}

    def declare(self, stat: Stat) -> None:
        """Declare `stat`; declaring the same name twice with another unit is an error."""
        known = self._declared.get(stat.name)
        if known is not None and known.unit != stat.unit:
            raise ValueError(f"stat {stat.name!r} declared as {known.unit!r} and {stat.unit!r}")
        self._declared[stat.name] = stat

    def declared(self) -> tuple[Stat, ...]:
        """All declared stats."""
        return tuple(self._declared.values())

    def _key(self, component: str, stat: str) -> tuple[str, str]:
        if stat not in self._declared:
            raise KeyError(f"stat {stat!r} was not declared; declared: {sorted(self._declared)}")
        return component, stat

    def add(self, component: str, stat: str, amount: float = 1) -> None:
        """Add `amount` to the stat (starting from 0)."""
        key = self._key(component, stat)
        self._values[key] = self._values.get(key, 0) + amount

    def maximum(self, component: str, stat: str, value: float) -> None:
        """Keep the largest value seen."""
        key = self._key(component, stat)
        self._values[key] = max(self._values.get(key, value), value)

    def set(self, component: str, stat: str, value: float) -> None:
        """Overwrite the stat's value."""
        self._values[self._key(component, stat)] = value

    def value(self, component: str, stat: str) -> float:
        """The recorded value (0 when nothing was recorded)."""
        return self._values.get(self._key(component, stat), 0)

    def to_frame(self, run_id: str, kernel: str) -> pd.DataFrame:
        """The long table: one row per (component, stat), columns `STATS_COLUMNS`."""
        rows = [(run_id, kernel, component, stat, float(value), self._declared[stat].unit)
                for (component, stat), value in self._values.items()]
        return stats_frame(rows)


def stats_frame(rows: Iterable[tuple] = ()) -> pd.DataFrame:
    """A stats table with the standard columns and dtypes from `rows` (possibly empty)."""
    frame = pd.DataFrame(list(rows), columns=list(STATS_COLUMNS))
    frame["value"] = frame["value"].astype("float64")
    for column in ("run_id", "kernel", "component", "stat", "unit"):
        frame[column] = frame[column].astype("object")
    return frame


def concat_stats(frames: Iterable[pd.DataFrame]) -> pd.DataFrame:
    """Stack stats tables (each must have exactly `STATS_COLUMNS`)."""
    frames = list(frames)
    for frame in frames:
        if tuple(frame.columns) != STATS_COLUMNS:
            raise ValueError(f"stats table columns {tuple(frame.columns)} != {STATS_COLUMNS}")
    if not frames:
        return stats_frame()
    return pd.concat(frames, ignore_index=True)


class Tracer:
    """Base of tracers: declares `STATS` on a sheet and listens at `POSITIONS`.

    Subclasses set the two class tuples and implement `on_event`.
    """

    STATS: tuple[Stat, ...] = ()
    POSITIONS: tuple[str, ...] = ()

    def __init__(self, sheet: StatSheet) -> None:
        self.sheet = sheet
        for stat in self.STATS:
            sheet.declare(stat)

    def attach(self, hooks: Hooks) -> None:
        """Start observing the component that owns `hooks`."""
        hooks.attach(self.on_event, self.POSITIONS)

    def on_event(self, owner: str, position: str, data: Mapping[str, Any]) -> None:
        """Turn one hook event into stat updates."""
        raise NotImplementedError


class PortTracer(Tracer):
    """Messages and payload bytes through ports, and the deepest queue seen."""

    STATS = (
        Stat("messages_in", "count", "messages accepted into the port"),
        Stat("payload_bytes_in", "B", "payload bytes of the accepted messages"),
        Stat("max_queued", "messages", "largest queue length after a put"),
    )
    POSITIONS = (PORT_PUT, PORT_GET)

    def on_event(self, owner: str, position: str, data: Mapping[str, Any]) -> None:
        if position == PORT_PUT:
            self.sheet.add(owner, "messages_in")
            self.sheet.add(owner, "payload_bytes_in", getattr(data["msg"], "payload_bytes", 0))
            self.sheet.maximum(owner, "max_queued", data["queued"])


class LinkTracer(Tracer):
    """Transfers, bytes and transmitter busy time of links."""

    STATS = (
        Stat("transfers", "count", "messages sent over the link"),
        Stat("bytes", "B", "payload bytes sent over the link"),
        Stat("busy_ps", "ps", "time the transmitter spent sending"),
    )
    POSITIONS = (LINK_SEND,)

    def on_event(self, owner: str, position: str, data: Mapping[str, Any]) -> None:
        self.sheet.add(owner, "transfers")
        self.sheet.add(owner, "bytes", data["size_bytes"])
        self.sheet.add(owner, "busy_ps", data["end_ps"] - data["start_ps"])


def within_peak(amounts, capacity) -> np.ndarray:
    """`amounts` per time bucket (oldest first) with each bucket's excess over `capacity`
    (one value or one per bucket; inf: no limit) carried to the buckets before it; what
    the first bucket cannot take stays there. The sum is unchanged."""
    out = np.array(amounts, dtype=np.float64)
    cap = np.broadcast_to(np.asarray(capacity, dtype=np.float64), out.shape)
    carry = 0.0
    for b in range(out.size - 1, -1, -1):
        total = out[b] + carry
        out[b] = min(total, cap[b]) if b else total
        carry = total - out[b]
    return out


def level_bytes(runs: Iterable[tuple[float, pd.DataFrame]], level: str) -> float:
    """Bytes at memory level `level` (`memory.<level>` and its parts) of weighted long stats
    tables: the sum of weight x the level's `bytes` rows (an op's sampled launches)."""
    total = 0.0
    for weight, frame in runs:
        if not len(frame):
            continue
        rows = frame[frame["component"].str.match(rf"memory\.{level}(\.|$)")
                     & (frame["stat"] == "bytes")]
        total += weight * float(rows["value"].sum())
    return total


def link_bytes(runs: Iterable[tuple[float, pd.DataFrame]]) -> float:
    """Bytes sent over NVLink and the network (`link.*` `bytes` rows) of weighted long stats
    tables."""
    total = 0.0
    for weight, frame in runs:
        if not len(frame):
            continue
        rows = frame[frame["component"].str.startswith("link.") & (frame["stat"] == "bytes")]
        total += weight * float(rows["value"].sum())
    return total
