"""Hooks: named positions where a component reports what happened, for tracers to observe.

What it models
--------------
A component owns one `Hooks` object and calls `self.hooks.fire(POSITION, **data)` at the points
worth observing (a message queued, a transfer started, a cache lookup). Positions are
`UPPER_SNAKE` string constants declared next to the code that fires them; the generic ones of
ports and links are declared here. Listeners are attached from outside (by tracers), so a
component holds no counters, prints or file I/O.

A component that logs many events in compiled code may report them with `fire_batch`: one
call with the whole batch for the listeners attached to the batch's own position (tracers
that sum it with numpy), the events one by one for every other listener.

Cost when nothing listens: `fire` tests one attribute (`self.listening`) and returns. Hot paths
that would build expensive data for a hook may test `hooks.listening` themselves first.
`benchmarks/hooks_overhead.py` measures both paths.

A listener is `listener(owner: str, position: str, data: dict) -> None`. It must not change the
component or schedule events: observing never changes timing.

Left out: filtering by data content, listener priorities (listeners run in attach order).
Units: whatever the firing component states for each data key (`*_ps`, `*_bytes`, ...).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

Listener = Callable[[str, str, Mapping[str, Any]], None]

_POSITION_PATTERN = re.compile(r"^[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)*$")

# Positions fired by `simulator.framework.ports`.
PORT_PUT = "PORT_PUT"
"""A message was accepted into a port's queue. data: msg, queued, time_ps."""
PORT_GET = "PORT_GET"
"""A message left a port's queue. data: msg, queued, time_ps."""
LINK_SEND = "LINK_SEND"
"""A transfer was scheduled on a link. data: msg, size_bytes, start_ps, end_ps, arrival_ps."""
LINK_DELIVER = "LINK_DELIVER"
"""A transfer reached the destination port. data: msg, arrival_ps, time_ps."""


def check_position(position: str) -> str:
    """Return `position` if it is an UPPER_SNAKE name, else raise ValueError."""
    if not isinstance(position, str) or not _POSITION_PATTERN.match(position):
        raise ValueError(f"hook position must be an UPPER_SNAKE name, got {position!r}")
    return position


class Hooks:
    """The hook positions of one component (`owner`) and the listeners attached to them."""

    __slots__ = ("owner", "listening", "_by_position", "_everywhere")

    def __init__(self, owner: str) -> None:
        self.owner = owner
        self.listening = False
        self._by_position: dict[str, list[Listener]] = {}
        self._everywhere: list[Listener] = []

    def fire(self, position: str, **data: Any) -> None:
        """Report `position` with `data` to the listeners; one attribute test when none."""
        if not self.listening:
            return
        for listener in self._by_position.get(position, ()):
            listener(self.owner, position, data)
        for listener in self._everywhere:
            listener(self.owner, position, data)

    def fire_batch(self, position: str, data: Mapping[str, Any],
                   events: Callable[[], Iterator[tuple[str, Mapping[str, Any]]]]) -> None:
        """Report many events at once: listeners attached to the batch's `position` get
        `data` whole (and not its events), every other listener gets the events `events()`
        yields ((position, data) pairs, in order) as if each were fired; each listener sees
        the batch in order, the listeners one after the other."""
        if not self.listening:
            return
        whole = self._by_position.get(position, ())
        for listener in whole:
            listener(self.owner, position, data)
        rest = {p: [fn for fn in fns if fn not in whole]
                for p, fns in self._by_position.items() if p != position}
        everywhere = [fn for fn in self._everywhere if fn not in whole]
        if not everywhere and not any(rest.values()):
            return
        for at, item in events():
            for listener in rest.get(at, ()):
                listener(self.owner, at, item)
            for listener in everywhere:
                listener(self.owner, at, item)

    def attach(self, listener: Listener, positions: tuple[str, ...] | None = None) -> None:
        """Call `listener` at each of `positions` (every position when None)."""
        if positions is None:
            self._everywhere.append(listener)
        else:
            for position in positions:
                self._by_position.setdefault(check_position(position), []).append(listener)
        self.listening = True

    def detach(self, listener: Listener) -> None:
        """Stop calling `listener` anywhere; unknown listeners are ignored."""
        self._everywhere = [fn for fn in self._everywhere if fn != listener]
        for position, listeners in list(self._by_position.items()):
            kept = [fn for fn in listeners if fn != listener]
            if kept:
                self._by_position[position] = kept
            else:
                del self._by_position[position]
        self.listening = bool(self._everywhere or self._by_position)

    def __repr__(self) -> str:
        return f"Hooks({self.owner!r}, listening={self.listening})"
