"""Memory spaces of the functional model: global, shared, local and param.

Global memory is one flat byte array holding every buffer (kernel arguments and
module variables) at 256-byte-aligned addresses from `GLOBAL_BASE`, with a gap
between buffers, so a stray pointer lands outside every buffer and is reported.
Shared memory is one byte array per CTA, local and per-thread param memory one per
thread. Generic addresses put shared and local memory in windows above the global
range (`cvta` adds/subtracts the window base). Every access is checked: bounds and
natural alignment; a fault is a `PtxError` naming the instruction and the lane.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

GLOBAL_BASE = 0x0000_1000_0000
SHARED_WINDOW = 0x7F00_0000_0000
LOCAL_WINDOW = 0x7E00_0000_0000
KPARAM_BASE = 0x7D00_0000_0000
TPARAM_BASE = 0x7C00_0000_0000
WINDOW_SIZE = 0x0100_0000_0000
ALLOC_ALIGN = 256
ALLOC_GAP = 256


@dataclass(frozen=True, slots=True)
class Buffer:
    name: str
    start: int       # address
    size_bytes: int

    @property
    def end(self) -> int:
        return self.start + self.size_bytes


class GlobalLayout:
    """Address assignment for global buffers (no data): used at decode and launch."""

    def __init__(self):
        self.buffers: list[Buffer] = []
        self.top = GLOBAL_BASE

    def allocate(self, name: str, size_bytes: int, align: int = ALLOC_ALIGN) -> Buffer:
        align = max(align, ALLOC_ALIGN)
        start = -(-self.top // align) * align
        buf = Buffer(name, start, size_bytes)
        self.buffers.append(buf)
        self.top = start + max(size_bytes, 1) + ALLOC_GAP
        return buf


class GlobalMemory:
    """The bytes behind a `GlobalLayout`, with checked gather/scatter. The array is
    zero-filled pages from the operating system, materialised where written, so address
    ranges nothing copies into (`isa.ShapeOnly` tensors) cost memory only where touched."""

    def __init__(self, layout: GlobalLayout):
        self.buffers = list(layout.buffers)
        total = -(-(layout.top - GLOBAL_BASE) // 16) * 16 + 16
        self.data = np.zeros(total, dtype=np.uint8)
        self.starts = np.array([b.start for b in self.buffers], dtype=np.int64)
        self.ends = np.array([b.end for b in self.buffers], dtype=np.int64)

    def bytes_of(self, buf: Buffer) -> np.ndarray:
        off = buf.start - GLOBAL_BASE
        return self.data[off:off + buf.size_bytes]

    def check(self, addr: np.ndarray, nbytes: int) -> np.ndarray:
        """Boolean mask of lanes whose access lies wholly inside one buffer."""
        if not self.buffers:
            return np.zeros(addr.shape, dtype=bool)
        i = np.searchsorted(self.starts, addr, side="right") - 1
        ok = i >= 0
        ic = np.where(ok, i, 0)
        return ok & (addr + nbytes <= self.ends[ic])

    def describe(self) -> str:
        return ", ".join(f"{b.name} [{b.start:#x}, {b.end:#x})" for b in self.buffers) or "none"


class SpaceArrays:
    """Flat byte arrays for shared (per CTA), local and per-thread param memory."""

    def __init__(self, n_cta: int, shared_bytes: int, n_threads: int, local_bytes: int,
                 tparam_bytes: int, kparam: np.ndarray):
        self.shared_bytes = _round8(shared_bytes)
        self.local_bytes = _round8(local_bytes)
        self.tparam_bytes = _round8(tparam_bytes)
        self.shared = np.zeros(max(n_cta * self.shared_bytes, 8), dtype=np.uint8)
        self.local = np.zeros(max(n_threads * self.local_bytes, 8), dtype=np.uint8)
        self.tparam = np.zeros(max(n_threads * self.tparam_bytes, 8), dtype=np.uint8)
        self.kparam = np.zeros(max(_round8(kparam.size), 8), dtype=np.uint8)
        self.kparam[:kparam.size] = kparam


def _round8(n: int) -> int:
    return -(-int(n) // 8) * 8
