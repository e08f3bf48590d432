"""How much the streams of a kernel table run at the same time.

Each stream's kernels are merged into disjoint busy intervals (kernels on one stream may
touch or, in a profile, overlap by a rounding microsecond). A sweep over the interval ends
of all streams then gives, for every concurrency level k >= 1, the time during which
exactly k streams are busy. From it: union busy time (k >= 1), overlap (k >= 2), and the
identity sum(k * t_k) = sum of per-stream busy times. Units: microseconds, as in the table
(`start_us`, `dur_us`). Zero-length activities add no busy time.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd


@dataclass(frozen=True, slots=True)
class StreamOverlap:
    """Busy time per stream, their union, overlap and the time at each concurrency level."""

    busy_us_by_stream: dict[int, float]
    union_us: float
    overlap_us: float
    span_us: float
    concurrency_us: dict[int, float]

    def table(self) -> pd.DataFrame:
        """One row per stream and rows `union`, `overlap`, `span`: columns `what`, `us`."""
        rows = [(f"stream {s}", t) for s, t in sorted(self.busy_us_by_stream.items())]
        rows += [("union", self.union_us), ("overlap", self.overlap_us),
                 ("span", self.span_us)]
        return pd.DataFrame(rows, columns=["what", "us"])


def merged_intervals(starts, ends) -> list[tuple[float, float]]:
    """Disjoint, sorted intervals covering the union of [start, end) pairs."""
    out: list[list[float]] = []
    for start, end in sorted(zip(starts, ends, strict=True)):
        if end <= start:
            continue
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return [(a, b) for a, b in out]


def stream_overlap(df: pd.DataFrame) -> StreamOverlap:
    """Busy/union/overlap figures of the table's `stream`, `start_us`, `dur_us` columns."""
    ends = df["start_us"] + df["dur_us"]
    busy, edges = {}, []
    for stream, group in df.assign(end_us=ends).groupby("stream"):
        intervals = merged_intervals(group["start_us"], group["end_us"])
        busy[int(stream)] = float(sum(b - a for a, b in intervals))
        edges += [(a, 1) for a, _ in intervals] + [(b, -1) for _, b in intervals]
    concurrency: dict[int, float] = {}
    level, last = 0, None
    for at, step in sorted(edges, key=lambda e: (e[0], e[1])):
        if level > 0 and at > last:
            concurrency[level] = concurrency.get(level, 0.0) + (at - last)
        level, last = level + step, at
    union = sum(concurrency.values())
    overlap = sum(t for k, t in concurrency.items() if k >= 2)
    span = float(ends.max() - df["start_us"].min()) if len(df) else 0.0
    return StreamOverlap(busy, union, overlap, span, dict(sorted(concurrency.items())))
