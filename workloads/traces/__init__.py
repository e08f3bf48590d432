"""Reference-trace importers: Kineto JSON and per-kernel CSV -> one kernel table, mapping
of kernel names to simulator ops, and stream-overlap analysis (units: microseconds)."""

from workloads.traces.csv_trace import read_kernel_csv
from workloads.traces.errors import TraceFormatError
from workloads.traces.kineto import KINETO_COLUMNS, read_kineto
from workloads.traces.mapping import RULES, MappingRule, category_totals, map_kernels, unmatched
from workloads.traces.overlap import StreamOverlap, stream_overlap

__all__ = ["KINETO_COLUMNS", "RULES", "MappingRule", "StreamOverlap", "TraceFormatError",
           "category_totals", "map_kernels", "read_kernel_csv", "read_kineto",
           "stream_overlap", "unmatched"]
