"""The generic simulation machinery: time, ports, hooks, stats and config loading.

Nothing here knows a hardware block: `models` builds on these classes, the runner wires
models together. This package imports only `isa` (for its error types).
"""

from simulator.framework.config import ConfigError, SpecMixin, build_spec, spec_field
from simulator.framework.engine import Clock, SimEnvironment, make_rng
from simulator.framework.hooks import LINK_DELIVER, LINK_SEND, PORT_GET, PORT_PUT, Hooks
from simulator.framework.ports import (
    Link,
    Port,
    ReadReq,
    ReadRsp,
    WriteReq,
    WriteRsp,
    coalesce,
)
from simulator.framework.stats import (
    STATS_COLUMNS,
    LinkTracer,
    PortTracer,
    Stat,
    StatSheet,
    Tracer,
    concat_stats,
    stats_frame,
)

__all__ = [
    "LINK_DELIVER", "LINK_SEND", "PORT_GET", "PORT_PUT", "STATS_COLUMNS", "Clock",
    "ConfigError", "Hooks", "Link", "LinkTracer", "Port", "PortTracer", "ReadReq", "ReadRsp",
    "SimEnvironment", "SpecMixin", "Stat", "StatSheet", "Tracer", "WriteReq", "WriteRsp",
    "build_spec", "coalesce", "concat_stats", "make_rng", "spec_field", "stats_frame",
]
