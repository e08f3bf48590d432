"""Rules of the sectored tag array: LRU per set, sector fills, dirty write-backs, batch = serial."""

from __future__ import annotations

import numpy as np

from models.tag_array import TagArray
from simulator.framework.engine import make_rng

LINE = 128


def _lines(*ids: int) -> np.ndarray:
    return np.array(ids, dtype=np.int64) * LINE


def test_cold_lookup_misses_every_sector_and_fill_makes_it_hit():
    """A cold cache misses all asked sectors; after a fill the same lookup hits."""
    tags = TagArray(4 * 2 * LINE, LINE, 32, 2)
    assert tags.lookup(_lines(0, 1), np.array([0b0011, 0b1000], np.uint8)).tolist() == [3, 8]
    tags.fill(_lines(0, 1), np.array([0b0011, 0b1000], np.uint8))
    assert tags.lookup(_lines(0, 1), np.array([0b0011, 0b1000], np.uint8)).tolist() == [0, 0]


def test_missing_sectors_of_a_present_line_are_reported():
    """A line holding sectors 0-1 misses only sector 2 when asked for 0-2."""
    tags = TagArray(4 * 2 * LINE, LINE, 32, 2)
    tags.fill(_lines(5), np.array([0b0011], np.uint8))
    assert tags.lookup(_lines(5), np.array([0b0111], np.uint8)).tolist() == [0b0100]


def test_least_recently_used_way_is_evicted():
    """In a 2-way set, touching A then filling C evicts B."""
    tags = TagArray(4 * 2 * LINE, LINE, 32, 2)  # 4 sets: lines 0, 4, 8 share set 0
    tags.fill(_lines(0, 4))
    tags.lookup(_lines(0))
    tags.fill(_lines(8))
    assert tags.contains(_lines(0, 4, 8)).tolist() == [True, False, True]


def test_evicting_dirty_sectors_returns_them_for_write_back():
    """A dirty line pushed out reports its address and only its dirty sectors."""
    tags = TagArray(1 * 1 * LINE, LINE, 32, 1)
    tags.fill(_lines(3), np.array([0b1111], np.uint8))
    tags.fill(_lines(3), np.array([0b0100], np.uint8), dirty=True)
    evicted, masks = tags.fill(_lines(7))
    assert evicted.tolist() == [3 * LINE] and masks.tolist() == [0b0100]


def test_update_marks_present_lines_only():
    """A write-through update never allocates an absent line."""
    tags = TagArray(4 * 2 * LINE, LINE, 32, 2)
    tags.fill(_lines(1), np.array([0b0001], np.uint8))
    tags.update(_lines(1, 2), np.array([0b0010, 0b1111], np.uint8))
    assert tags.lookup(_lines(1), np.array([0b0011], np.uint8)).tolist() == [0]
    assert tags.contains(_lines(2)).tolist() == [False]


def test_zero_sized_cache_always_misses():
    """An L1 left with 0 bytes by the carve-out misses everything and holds nothing."""
    tags = TagArray(0, LINE, 32, 4)
    tags.fill(_lines(1))
    assert tags.lookup(_lines(1)).tolist() == [15]


class _SerialModel:
    """Reference: a dict-of-lists LRU cache, one line at a time (MRU at the end)."""

    def __init__(self, sets: int, ways: int) -> None:
        self.sets, self.ways = sets, ways
        self.content: dict[int, list[list[int]]] = {s: [] for s in range(sets)}  # [line, mask]

    def _find(self, line: int) -> list[int] | None:
        entries = self.content[line % self.sets]
        for entry in entries:
            if entry[0] == line:
                entries.remove(entry)
                entries.append(entry)
                return entry
        return None

    def lookup(self, line: int, mask: int) -> int:
        entry = self._find(line)
        return mask if entry is None else mask & ~entry[1]

    def fill(self, line: int, mask: int) -> None:
        entry = self._find(line)
        if entry is None:
            entries = self.content[line % self.sets]
            if len(entries) == self.ways:
                entries.pop(0)
            entries.append([line, mask])
        else:
            entry[1] |= mask


def test_batched_lookup_and_fill_equal_a_serial_lru_cache():
    """Random batches through lookup then fill equal a line-by-line LRU model doing the same."""
    rng = make_rng(3)
    tags, model = TagArray(8 * 4 * LINE, LINE, 32, 4), _SerialModel(8, 4)
    for _ in range(300):
        ids = rng.choice(64, size=int(rng.integers(1, 9)), replace=False)
        masks = rng.integers(1, 16, size=ids.size).astype(np.uint8)
        expected = [model.lookup(int(i), int(m)) for i, m in zip(ids, masks, strict=True)]
        for i, m in zip(ids, masks, strict=True):
            model.fill(int(i), int(m))
        missing = tags.lookup(ids * LINE, masks)
        tags.fill(ids * LINE, masks)
        assert missing.tolist() == expected
