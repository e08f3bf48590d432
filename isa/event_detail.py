"""Per-event data that decides the timing of an extension op, read after it executes.

`EVENT_DETAILS[opname](m, ins, lanes)` returns one int32 per executing warp (in lane order):
for `vmma` the precision code its warp ran at, for `zmma` its operands' packed zero
statistics (int64). The trace recorder stores it as the event's
`detail`; `models.units.event_timings` turns it into that event's latency and interval.
Only ops whose timing depends on run-time data are listed. Units: as each op documents.
"""

from __future__ import annotations

from isa.semantics import vpcu, zce

EVENT_DETAILS = {"vmma": vpcu.event_detail, "zmma": zce.event_detail}
