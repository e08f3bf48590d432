"""Generic simulation machinery: time, ports, hooks, stats and config loading.

Public names of the machinery are imported here eagerly (they import nothing from `models`).
Names that assemble hardware (`build_system`, `simulate_kernel`, ...) import `models`, which
itself imports this package's machinery; they are therefore resolved lazily through
`__getattr__` from the modules listed in `_LAZY`, so `import models` and `import simulator`
work in either order. Importing starts nothing and writes nothing.
"""

from __future__ import annotations

import importlib
from types import MappingProxyType
from typing import Any

from simulator.config import ConfigError, SpecMixin, build_spec, spec_field
from simulator.engine import Clock, SimEnvironment, make_rng
from simulator.hooks import LINK_DELIVER, LINK_SEND, PORT_GET, PORT_PUT, Hooks
from simulator.ports import Link, Port, ReadReq, ReadRsp, WriteReq, WriteRsp, coalesce
from simulator.stats import (
    STATS_COLUMNS,
    LinkTracer,
    PortTracer,
    Stat,
    StatSheet,
    Tracer,
    concat_stats,
    stats_frame,
)

_LAZY: MappingProxyType[str, str] = MappingProxyType({
    "build_system": "simulator.system", "System": "simulator.system",
    "simulate_kernel": "simulator.simulate", "KernelResult": "simulator.simulate",
    "simulate_workload": "simulator.workload", "WorkloadResult": "simulator.workload",
    "TraceRecorder": "simulator.trace", "WarpTrace": "simulator.trace",
})
"""Public name -> module that defines it, for names that need `models` (filled as they land)."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'simulator' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = [
    "LINK_DELIVER",
    "LINK_SEND",
    "PORT_GET",
    "PORT_PUT",
    "STATS_COLUMNS",
    "Clock",
    "ConfigError",
    "Hooks",
    "Link",
    "LinkTracer",
    "Port",
    "PortTracer",
    "ReadReq",
    "ReadRsp",
    "SimEnvironment",
    "SpecMixin",
    "Stat",
    "StatSheet",
    "Tracer",
    "WriteReq",
    "WriteRsp",
    "build_spec",
    "coalesce",
    "concat_stats",
    "make_rng",
    "spec_field",
    "stats_frame",
    *_LAZY,
]
