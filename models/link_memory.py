"""Link memory: peer-GPU address windows go over NVLink or InfiniBand, the rest to local memory.

What it models
--------------
`LinkMemory` implements the synchronous `MemoryInterface` contract of `models.flat_memory`
(`access(sm_id, kind, sectors, now_ps) -> done_ps`) around an inner memory (normally the
cached hierarchy, so local reads and writes of a collective pass through L1/L2/HBM). A
kernel running on rank 0 sees the other ranks' buffers as address windows (`LinkWindow`:
a byte range, the link it is reached over, and whether it holds data or chunk signals).
Rank 0 is simulated in detail; the peers are symmetric: whatever rank 0 sends, it receives
the same amount at the same time (scaled by `ingress_scale` where a routing table makes
the traffic uneven).

* Data store into a window: its bytes queue on the link's egress pipe (first come, first
  served, at the usable rate `links.nvlink_achieved_gbps` or `links.network_pipe_gbps`)
  and land `latency` later. By symmetry the same bytes arrive from a peer into rank 0's
  receive buffer (`mirror_start`): they are written into the inner memory (so they
  occupy L2 and may evict a concurrent kernel's lines) and queue on the ingress pipe.
* Signal store (the flag that ends a chunk): one message; it costs the per-message
  overhead on the egress pipe (FIFO: it leaves after the chunk's data) plus the latency.
* Signal load (waiting for a peer's chunk): by symmetry the peer's chunk and flag arrive
  when rank 0's own chunk and flag have arrived, so it completes when everything queued
  on the link's egress and ingress before it has landed, plus the latency.
* Data load from a window (a remote read): a request leaves after the queued egress, the
  data comes back over the ingress: two latencies plus the bytes.

SMs in front of a `LinkMemory` around the cached memory serve these rules inside their
compiled loop (`inline_state`: the inner memory's arrays with the windows and the links'
pipes as tables, `models.link_memory_kernel`), with the same results; `LinkPipes` keeps its
pipes in the same table, so requests answered here and in the loop share them.

Each link fires `LINK_SEND` (size_bytes, start_ps, end_ps) on its own `Hooks`
(`link.nvlink`, `link.network`), so `simulator.framework.stats.LinkTracer`
reports bytes, messages and
busy time per link (`attach_tracers`); sends made inside the loop reach them from the SMs'
request logs (`fire_batch`).

Left out: per-peer links and NVSwitch contention (all NVLink traffic of a GPU shares one
pipe per direction: the switch is non-blocking), packet headers beyond the per-message
overhead, NVLink SHARP, retransmission. The mirrored writes use the sending SM's crossbar
port (they enter through the NVLink/NIC side in hardware). Units: ps (int), bytes, GB/s.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from models import link_memory_kernel as lk
from models.flat_memory import LOAD_KINDS, SECTOR_BYTES, BandwidthPipe
from models.memory_system import MEMORY_MODELS
from models.sm_memory import LOG_COUNTS, LOG_DONE, LOG_ISSUE, LOG_KIND
from simulator.framework.hooks import LINK_SEND, Hooks
from simulator.framework.stats import LinkTracer

LINKS = ("nvlink", "network")


@dataclass(frozen=True, slots=True)
class LinkWindow:
    """A peer buffer seen by rank 0: bytes [start, end) reached over `link`."""

    start: int
    end: int
    link: str
    signal: bool = False           # chunk flags rather than data
    mirror_start: int | None = None    # rank 0's own buffer the symmetric peer writes into
    ingress_scale: float = 1.0     # bytes received per byte sent (routing table; 1 = balanced)

    def __post_init__(self) -> None:
        if self.link not in LINKS:
            raise ValueError(f"link {self.link!r}; accepted: {', '.join(LINKS)}")
        if self.end <= self.start:
            raise ValueError(f"window [{self.start:#x}, {self.end:#x}) is empty")


class LinkPipes:
    """Egress and ingress pipe, latency and per-message cost of one link of rank 0, kept in
    row `row` of `links` (the table of `models.link_memory_kernel`, which the compiled loop
    books too, through the same functions); the pipes behave as
    `models.flat_memory.BandwidthPipe`s."""

    def __init__(self, name: str, gbps: float, latency_ns: float, overhead_ns: float,
                 links: np.ndarray, row: int) -> None:
        self.name = name
        self.links, self.row = links, row
        links[row, lk.L_EGRESS_FS] = links[row, lk.L_INGRESS_FS] = 0
        links[row, lk.L_FS_PER_BYTE] = BandwidthPipe(gbps * 1e9).fs_per_byte
        links[row, lk.L_LATENCY_PS] = round(latency_ns * 1000)
        links[row, lk.L_OVERHEAD_BYTES] = round(overhead_ns * gbps)   # ns x GB/s = bytes
        self.hooks = Hooks(f"link.{name}")

    @property
    def latency_ps(self) -> int:
        return int(self.links[self.row, lk.L_LATENCY_PS])

    def send(self, now_ps: int, size_bytes: int, message: bool = False) -> int:
        """Queue `size_bytes` (plus the per-message cost for a `message`) on the egress;
        return when the last byte has landed."""
        start, left = lk.send(self.links, self.row, now_ps, size_bytes, message)
        if self.hooks.listening:
            self.hooks.fire(LINK_SEND, size_bytes=size_bytes, start_ps=start, end_ps=left)
        return left + self.latency_ps

    def receive(self, now_ps: int, size_bytes: int) -> int:
        """Queue `size_bytes` arriving on the ingress; return when they are in."""
        return lk.reserve(self.links, self.row, lk.L_INGRESS_FS, now_ps, size_bytes)

    def drained(self, now_ps: int) -> int:
        """When everything queued so far on both directions has landed."""
        return lk.drained(self.links, self.row, now_ps)


class LinkMemory:
    """`MemoryInterface` routing peer windows to link pipes (see the module docstring)."""

    def __init__(self, config, inner, windows: tuple[LinkWindow, ...] | list[LinkWindow]) -> None:
        links = config.links
        self.inner = inner
        self.hooks = inner.hooks
        self.windows = tuple(sorted(windows, key=lambda w: w.start))
        for a, b in zip(self.windows, self.windows[1:], strict=False):
            if b.start < a.end:
                raise ValueError(f"link windows overlap at {b.start:#x}")
        self.links = np.zeros((len(lk.LINK_ROWS), lk.L_FIELDS), np.int64)
        row = lk.LINK_ROWS.index
        self.pipes = {
            "nvlink": LinkPipes("nvlink", links.nvlink_achieved_gbps, links.nvlink_latency_ns,
                                links.nvlink_message_overhead_ns, self.links, row("nvlink")),
            "network": LinkPipes("network", links.network_pipe_gbps, links.network_latency_ns,
                                 links.network_message_overhead_ns, self.links,
                                 row("network")),
        }
        self._starts = np.array([w.start // SECTOR_BYTES for w in self.windows], np.int64)
        self._ends = np.array([-(-w.end // SECTOR_BYTES) for w in self.windows], np.int64)
        table = np.zeros((len(self.windows), lk.W_FIELDS), np.int64)
        for i, w in enumerate(self.windows):
            table[i, lk.W_START], table[i, lk.W_END] = self._starts[i], self._ends[i]
            table[i, lk.W_LINK] = lk.LINK_ROWS.index(w.link)
            table[i, lk.W_SIGNAL] = w.signal
            if w.mirror_start is not None:
                table[i, lk.W_MIRROR] = 1
                table[i, lk.W_MIRROR_OFFSET] = (w.mirror_start // SECTOR_BYTES
                                                - w.start // SECTOR_BYTES)
        self._table = table
        self._scales = np.array([w.ingress_scale for w in self.windows], np.float64)
        self._inline: tuple | None = None
        self._inner_inline: tuple | None = None
        if getattr(inner, "inline_state", None) is None:
            self.inline_state = None          # SMs in front of it answer in Python

    @classmethod
    def factory(cls, windows, inner: str = "cached") -> LinkMemoryFactory:
        """A `build_system` memory factory: `(config, n_sms, carveout) -> LinkMemory`; its
        `windows` stay readable (`simulator.runner.concurrent` merges them)."""
        return LinkMemoryFactory(tuple(windows), inner)

    def inline_state(self, max_sectors: int = 0) -> tuple:
        """The inner cached memory's `inline_state` with this memory's link tables
        (`models.link_memory_kernel`), for SMs that serve their requests inside the compiled
        loop: the loop then sends window sectors over the links as `access` does."""
        inner = self.inner.inline_state(max_sectors)
        if inner is not self._inner_inline:
            size = inner[-1].size
            self._inline = (*inner[:7], self._table, self._scales, self.links,
                            np.zeros((2, size), np.int64), *inner[-2:])
            self._inner_inline = inner
        return self._inline

    @property
    def listening(self) -> bool:
        """Whether the inner memory's or a link's hooks listen (SMs then log their requests
        for `fire_batch`)."""
        return self.inner.hooks.listening or any(p.hooks.listening
                                                 for p in self.pipes.values())

    def fire_batch(self, sm_id: int, log: np.ndarray) -> None:
        """Hand requests served inside SM `sm_id`'s loop to the inner memory's listeners and
        its link sends (log kind `LINK_LOG_KIND - link row`) to the links' as `LINK_SEND`."""
        kinds = log[:, LOG_KIND]
        sends = kinds < 0
        if not sends.any():
            self.inner.fire_batch(sm_id, log)
            return
        if not sends.all():
            self.inner.fire_batch(sm_id, log[~sends])
        for row in log[sends]:
            hooks = self.pipes[lk.LINK_ROWS[lk.LINK_LOG_KIND - int(row[LOG_KIND])]].hooks
            if hooks.listening:
                hooks.fire(LINK_SEND, size_bytes=int(row[LOG_COUNTS]),
                           start_ps=int(row[LOG_ISSUE]), end_ps=int(row[LOG_DONE]))

    def attach_tracers(self, sheet) -> list:
        """A `LinkTracer` on every link's hooks (bytes, transfers, busy ps per link)."""
        tracer = LinkTracer(sheet)
        for pipes in self.pipes.values():
            tracer.attach(pipes.hooks)
        return [tracer]

    def access(self, sm_id: int, kind: str, sectors: np.ndarray, now_ps: int,
               ops: int = 1, policy: np.ndarray | None = None) -> int:
        """Completion time in ps of one warp's access (see `models.flat_memory` Contract;
        `policy` goes with the local part and with the mirrored write into rank 0's buffer,
        which the symmetric peer made with the same instruction)."""
        if not self.windows or sectors.size == 0:
            return self.inner.access(sm_id, kind, sectors, now_ps, ops, policy)
        which, inside = self._inside(sectors)
        if not inside.any():
            return self.inner.access(sm_id, kind, sectors, now_ps, ops, policy)
        done = now_ps
        local = sectors[~inside]
        if local.size:
            done = self.inner.access(sm_id, kind, local, now_ps, ops, policy)
        for index in np.unique(which[inside]):
            part = sectors[inside & (which == index)]
            done = max(done, self._remote(sm_id, kind, self.windows[index], part, now_ps,
                                          policy))
        return done

    def _inside(self, sectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per sector, the index of the window at or below it and whether it lies inside."""
        which = np.searchsorted(self._starts, sectors, side="right") - 1
        return which, (which >= 0) & (sectors < self._ends[np.maximum(which, 0)])

    def touches(self, sectors: np.ndarray) -> bool:
        """Whether any of `sectors` lies in a window (none does when no window meets their
        range)."""
        if not self.windows or not sectors.size:
            return False
        lo, hi = int(sectors.min()), int(sectors.max())
        if not ((self._starts <= hi) & (self._ends > lo)).any():
            return False
        return bool(self._inside(sectors)[1].any())

    def _remote(self, sm_id: int, kind: str, window: LinkWindow, sectors: np.ndarray,
                now_ps: int, policy: np.ndarray | None) -> int:
        pipes = self.pipes[window.link]
        size = int(sectors.size) * SECTOR_BYTES
        if window.signal:
            if kind in LOAD_KINDS:
                return pipes.drained(now_ps)
            return pipes.send(now_ps, size, message=True)
        if kind in LOAD_KINDS:
            request_left = pipes.send(now_ps, 0)
            return pipes.receive(request_left, size) + pipes.latency_ps
        arrived = pipes.send(now_ps, size)
        pipes.receive(now_ps, round(size * window.ingress_scale))
        if window.mirror_start is not None:
            offset = window.mirror_start // SECTOR_BYTES - window.start // SECTOR_BYTES
            self.inner.access(sm_id, "store", sectors + offset, now_ps, 1, policy)
        return arrived


@dataclass(frozen=True)
class LinkMemoryFactory:
    """Builds a `LinkMemory` with `windows` around the memory model named `inner`."""

    windows: tuple[LinkWindow, ...]
    inner: str = "cached"

    def __call__(self, config, n_sms: int, carveout: int) -> LinkMemory:
        return LinkMemory(config, MEMORY_MODELS[self.inner](config, n_sms, carveout),
                          self.windows)
