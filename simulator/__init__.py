"""ptxsim's simulator: the front door to the generic machinery (`simulator.framework`),
the runner that assembles and runs a chip (`simulator.runner`) and the workload runner
(`simulate_workload`, defined in `workloads.execute`).

Layers, each importing only those before it: `isa`, `simulator.framework`, `models`,
`simulator.runner`, `workloads`, then `reports` and the app layer (`simulator.app`). This
module re-exports the public names for users; project code imports from the layer that
defines a name, never from here. Python runs this file before any `simulator.*` submodule,
so `models` and `workloads` start by importing the layer below them (see their
`__init__`), which loads this front door before any of their own modules is half-built.
Importing starts nothing and writes nothing.
"""

from __future__ import annotations

from simulator.framework import (
    LINK_DELIVER,
    LINK_SEND,
    PORT_GET,
    PORT_PUT,
    STATS_COLUMNS,
    Clock,
    ConfigError,
    Hooks,
    Link,
    LinkTracer,
    Port,
    PortTracer,
    ReadReq,
    ReadRsp,
    SimEnvironment,
    SpecMixin,
    Stat,
    StatSheet,
    Tracer,
    WriteReq,
    WriteRsp,
    build_spec,
    coalesce,
    concat_stats,
    make_rng,
    spec_field,
    stats_frame,
)
from simulator.runner import (
    KernelResult,
    System,
    TraceRecorder,
    WarpTrace,
    build_system,
    simulate_kernel,
)
from workloads.execute import WorkloadResult, simulate_workload

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
    "KernelResult",
    "System",
    "TraceRecorder",
    "WarpTrace",
    "WorkloadResult",
    "build_system",
    "simulate_kernel",
    "simulate_workload",
]
