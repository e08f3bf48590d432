"""What the L2 holds when a launch starts (`[fidelity] l2_start`).

What it models
--------------
`"cold"` (the default): every launch starts from an empty L2, as a kernel timed alone after a
cache flush (ncu's default) does. `"warm-inputs"`: the launch's inputs start resident, as
when the kernel just before it wrote them: a kernel of a model's layer reads the activations
its predecessor has just written, and at decode sizes they are still in the L2.

The inputs are the launch's pointer arguments it loads from (an argument the launch only
stores to is an output: where the allocator placed it, and what of it the L2 holds, the
launch does not say). They start resident, dirty (the L2 is write-back: what was just
written has not gone to HBM), only when the bytes of those arguments together fit in
`l2.size_bytes`: a producer of more than the L2 holds leaves only the tail it wrote last,
which a consumer streaming from the start evicts before it reaches it (LRU), so such a
launch starts cold. Exactly the sectors the replayed CTAs read are installed (for a sampled
launch those of the CTAs it times: a chip slice's first CTAs on its share of the L2), in
ascending address order (`models.cached_memory.CachedMemory.preload_l2`).
`KernelResult.stats` holds the sectors installed (`memory.l2`, `warm_start_sectors`; scaled
to the grid as other counts when sampled).

Left out: which input the kernel before really wrote (every input counts as just written:
the caller chooses the launches this applies to, `workloads.traces.reference_ops` only
element-wise, copy and norm kernels), partial residency, inputs in the L1s, a memory other
than the cached one (the others start as they are), launches run together
(`simulator.runner.concurrent` starts them cold). Units: bytes, 32-byte sectors.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from isa.launch import marshal_args
from isa.memory import GlobalLayout
from simulator.framework.stats import Stat
from simulator.runner import trace as trace_mod
from simulator.runner.trace_tiles import span_items

L2_STARTS = ("cold", "warm-inputs")
WARM_SECTORS = Stat("warm_start_sectors", "count",
                    "sectors of the launch's inputs resident in the L2 when it starts "
                    "(fidelity.l2_start = warm-inputs)")
_READ_KINDS = (trace_mod.KIND_LOAD, trace_mod.KIND_BULK_LOAD, trace_mod.KIND_LOAD_CG)


@dataclass(frozen=True)
class L2WarmStart:
    """The byte ranges [start, end) of a launch's pointer arguments, ascending, and the
    bytes its inputs may take (`l2.size_bytes`)."""

    starts: np.ndarray
    ends: np.ndarray
    limit_bytes: int

    def sectors(self, trace) -> np.ndarray:
        """The sectors `trace`'s loads read inside the arguments the launch loads from,
        or none when those arguments take more than `limit_bytes` together."""
        read = np.flatnonzero(np.isin(trace.kind, _READ_KINDS))
        counts = trace.detail[read].astype(np.int64)
        sectors = np.unique(trace.sectors[span_items(trace.sector_start[read], counts)])
        bytes_ = sectors << trace_mod.SECTOR_SHIFT
        arg = np.searchsorted(self.starts, bytes_, side="right") - 1
        inside = (arg >= 0) & (bytes_ < self.ends[np.maximum(arg, 0)])
        inputs = np.unique(arg[inside])
        if (self.ends[inputs] - self.starts[inputs]).sum() > self.limit_bytes:
            return sectors[:0]
        return sectors[inside]


def warm_start(program, args: list, config) -> L2WarmStart | None:
    """The launch's `L2WarmStart` under `config.fidelity.l2_start`, None when cold: its
    arguments placed as `isa.run_kernel` places them (the same layout, so the same
    addresses as the trace's)."""
    if config.fidelity.l2_start == "cold":
        return None
    layout = GlobalLayout()
    layout.buffers = list(program.global_layout.buffers)
    layout.top = program.global_layout.top
    own = len(layout.buffers)
    marshal_args(program, list(args), layout)
    placed = sorted((b.start, b.end) for b in layout.buffers[own:])
    starts = np.array([s for s, _ in placed], np.int64)
    ends = np.array([e for _, e in placed], np.int64)
    return L2WarmStart(starts, ends, int(config.l2.size_bytes))


def start_warm(warm: L2WarmStart | None, memory, trace, sheet) -> None:
    """Install `warm`'s sectors of `trace` in `memory`'s L2 (a memory with
    `preload_l2`) and record how many in `sheet`; nothing for a cold start."""
    if warm is None or not hasattr(memory, "preload_l2"):
        return
    sheet.declare(WARM_SECTORS)
    sheet.set("memory.l2", WARM_SECTORS.name, memory.preload_l2(warm.sectors(trace)))
