"""Sectored, set-associative tag array with LRU replacement, looked up a whole request at once.

What it models
--------------
The tags of one cache (an L1, one L2 slice, one L3 slice): `sets x ways` entries, each holding
a line's tag, a valid-sector mask, a dirty-sector mask and an LRU stamp. Every call takes all
lines of one request (a warp's coalesced access, a TMA tile) as arrays and runs one compiled
(numba) loop over them; lines that fall into the same set are handled in order, so a batch
equals a line-by-line cache doing the same calls (all lookups of a request happen when it
arrives, its fills when the data returns).

* `lookup(lines, masks)` -> the sectors missing per line (0 = hit); hits refresh LRU.
* `fill(lines, masks, dirty)` installs sectors (allocating on a miss, evicting the LRU way)
  and returns the evicted lines that held dirty sectors, with those sectors.
* `update(lines, masks)` marks sectors valid in lines already present (write-through, no
  allocate).

Set index = line number modulo sets; the tag is the full line number. Left out: replacement
policies other than LRU, pseudo-LRU tree bits, tag-access energy. Units: byte addresses,
sector masks (bit i = sector i of the line).
"""

from __future__ import annotations

import numba
import numpy as np

EMPTY_TAG = -1


@numba.njit(cache=True)
def _lookup(tags, valid, stamps, line_ids, masks, clock):
    sets, ways = tags.shape
    missing = masks.copy()
    for i in range(line_ids.size):
        s = line_ids[i] % sets
        for w in range(ways):
            if tags[s, w] == line_ids[i]:
                missing[i] = masks[i] & ~valid[s, w]
                clock += 1
                stamps[s, w] = clock
                break
    return missing, clock


@numba.njit(cache=True)
def _fill(tags, valid, dirty, stamps, line_ids, masks, mark_dirty, clock):
    sets, ways = tags.shape
    evicted = np.full(line_ids.size, -1, np.int64)
    evicted_masks = np.zeros(line_ids.size, np.uint8)
    for i in range(line_ids.size):
        s = line_ids[i] % sets
        way = -1
        for w in range(ways):
            if tags[s, w] == line_ids[i]:
                way = w
                break
        if way < 0:
            way = 0
            for w in range(ways):
                if tags[s, w] == -1:
                    way = w
                    break
                if stamps[s, w] < stamps[s, way]:
                    way = w
            if tags[s, way] != -1 and dirty[s, way] != 0:
                evicted[i] = tags[s, way]
                evicted_masks[i] = dirty[s, way]
            tags[s, way] = line_ids[i]
            valid[s, way] = 0
            dirty[s, way] = 0
        valid[s, way] |= masks[i]
        if mark_dirty:
            dirty[s, way] |= masks[i]
        clock += 1
        stamps[s, way] = clock
    return evicted, evicted_masks, clock


@numba.njit(cache=True)
def _update(tags, valid, line_ids, masks):
    sets, ways = tags.shape
    for i in range(line_ids.size):
        s = line_ids[i] % sets
        for w in range(ways):
            if tags[s, w] == line_ids[i]:
                valid[s, w] |= masks[i]
                break


class TagArray:
    """Tags, valid/dirty sector masks and LRU stamps of one sectored set-associative cache."""

    def __init__(self, size_bytes: int, line_bytes: int, sector_bytes: int,
                 associativity: int) -> None:
        self.line_bytes = line_bytes
        self.sectors_per_line = line_bytes // sector_bytes
        self.full_mask = (1 << self.sectors_per_line) - 1
        self.sets = size_bytes // (line_bytes * associativity)
        shape = (max(self.sets, 1), associativity)
        self._tags = np.full(shape, EMPTY_TAG, dtype=np.int64)
        self._valid = np.zeros(shape, dtype=np.uint8)
        self._dirty = np.zeros(shape, dtype=np.uint8)
        self._stamps = np.zeros(shape, dtype=np.int64)
        self._clock = 0

    @property
    def capacity_bytes(self) -> int:
        """Bytes the array can hold (whole sets only)."""
        return self.sets * self._tags.shape[1] * self.line_bytes

    def masks_for(self, lines: np.ndarray, masks: np.ndarray | None) -> np.ndarray:
        """`masks` as uint8, or whole-line masks when None."""
        if masks is None:
            return np.full(len(lines), self.full_mask, dtype=np.uint8)
        return np.array(masks, dtype=np.uint8)  # a writable copy: one compiled signature

    def _ids(self, lines: np.ndarray) -> np.ndarray:
        return np.array(lines, dtype=np.int64) // self.line_bytes

    def lookup(self, lines: np.ndarray, masks: np.ndarray | None = None) -> np.ndarray:
        """Sectors missing per line (uint8; 0 means a hit). Hits refresh their LRU stamp."""
        wanted = self.masks_for(lines, masks)
        if self.sets == 0:
            return wanted.copy()
        missing, self._clock = _lookup(self._tags, self._valid, self._stamps, self._ids(lines),
                                       wanted, self._clock)
        return missing

    def fill(self, lines: np.ndarray, masks: np.ndarray | None = None,
             dirty: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """Install sectors; returns (evicted line addresses, their dirty masks) that need a
        write-back (only lines that held dirty sectors)."""
        wanted = self.masks_for(lines, masks)
        if self.sets == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.uint8)
        evicted, evicted_masks, self._clock = _fill(
            self._tags, self._valid, self._dirty, self._stamps, self._ids(lines), wanted,
            dirty, self._clock)
        keep = evicted >= 0
        return evicted[keep] * self.line_bytes, evicted_masks[keep]

    def update(self, lines: np.ndarray, masks: np.ndarray | None = None) -> None:
        """Mark sectors valid in lines already present; absent lines are left absent."""
        if self.sets:
            _update(self._tags, self._valid, self._ids(lines), self.masks_for(lines, masks))

    def contains(self, lines: np.ndarray) -> np.ndarray:
        """Whether each line has any valid sector (no LRU change)."""
        ids = self._ids(lines)
        if self.sets == 0:
            return np.zeros(ids.size, dtype=bool)
        rows = ids % self.sets
        match = (self._tags[rows] == ids[:, None]) & (self._valid[rows] != 0)
        return match.any(axis=1)
