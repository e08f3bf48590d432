"""Per-step lane arithmetic of the trace recorder (`simulator.runner.trace.TraceRecorder`): the
warps a step's sorted thread slots fall in, the distinct sectors or words of each warp, the
most lanes of a warp on one address.

What it models
--------------
Nothing of the chip: these turn the lanes and byte addresses of one interpreter step into
per-warp facts (runs of lanes per warp slot, each warp's distinct 32-byte sectors or 4-byte
words, an atomic's serialization depth), with numpy or numba over all warps of the step
at once. Units: thread slots, lanes, sectors, words.
"""

from __future__ import annotations

import numba as nb
import numpy as np


def with_successors(first: np.ndarray, group: np.ndarray, count: int
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Each of `first` followed by count-1 successors, with the group ids repeated."""
    if count <= 1:
        return first, group
    steps = np.arange(count, dtype=np.int64)
    return (first[:, None] + steps).reshape(-1), np.repeat(group, count)


_INSERTION_MAX = 64
"""Groups up to this size are sorted in place by insertion (a warp's sectors or words)."""


@nb.njit(cache=True)
def distinct_per_group(values: np.ndarray, group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(values, groups) with duplicates inside each group removed, each group's values
    ascending; `group` is non-decreasing (the lanes of a warp are contiguous)."""
    n = values.size
    out_v = np.empty(n, values.dtype)
    out_g = np.empty(n, group.dtype)
    k = 0
    i = 0
    while i < n:
        j = i
        while j < n and group[j] == group[i]:
            j += 1
        if j - i > _INSERTION_MAX:
            run = np.sort(values[i:j])
        else:                      # a warp's few values: insertion sort, no allocation
            run = out_v[k:k + j - i]
            for t in range(j - i):
                v = values[i + t]
                u = t
                while u > 0 and run[u - 1] > v:
                    run[u] = run[u - 1]
                    u -= 1
                run[u] = v
        for t in range(run.size):
            if t == 0 or run[t] != out_v[k - 1]:
                out_v[k] = run[t]
                out_g[k] = group[i]
                k += 1
        i = j
    return out_v[:k], out_g[:k]


def lane_depth(addr: np.ndarray, group: np.ndarray, n_groups: int) -> np.ndarray:
    """Per group (warp), the most of its lanes with one address `addr` (int32, 0 for a
    group without lanes): how many operations an atomic serializes on one address."""
    depth = np.zeros(n_groups, np.int32)
    if addr.size == 0:
        return depth
    order = np.lexsort((addr, group))
    a, g = addr[order], group[order]
    new = np.ones(a.size, np.bool_)
    new[1:] = (a[1:] != a[:-1]) | (g[1:] != g[:-1])
    starts = np.flatnonzero(new)
    runs = np.diff(np.append(starts, a.size)).astype(np.int32)
    np.maximum.at(depth, g[starts], runs)
    return depth


@nb.njit(cache=True)
def warp_runs(lanes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first index, warp slot, lane count) of each run of `lanes` (sorted thread slots)
    that lies in one warp slot."""
    n = lanes.size
    starts = np.empty(n, np.int64)
    slots = np.empty(n, np.int64)
    k = 0
    prev = -1
    for i in range(n):
        w = lanes[i] >> 5
        if w != prev:
            starts[k] = i
            slots[k] = w
            k += 1
            prev = w
    active = np.empty(k, np.int16)
    for j in range(k):
        active[j] = (starts[j + 1] if j + 1 < k else n) - starts[j]
    return starts[:k], slots[:k], active
