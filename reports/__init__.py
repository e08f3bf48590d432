"""Report builders: they read result tables (Parquet parts, stats frames), never live objects.

`load_sweep(DIR)` reads a sweep folder written by `ptxsim sweep` into one DataFrame;
`reports.sweep_plots` draws sweep line plots and heatmaps as matplotlib figures (Agg).
`write_report(result, DIR)` writes a run's tables, plots, HTML page and Chrome trace;
`reports.compare` (`write_compare`) holds simulated times against a reference trace.
Importing starts nothing and writes nothing; the names below load their modules when first
used, so a simulation that needs only `reports.roofline` does not import matplotlib (~1.4 s
of CPU).
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "load_sweep": "reports.sweep_loading", "chrome_trace": "reports.chrome_trace",
    "write_compare": "reports.compare", "KERNEL_COLUMNS": "reports.kernel_table",
    "kernel_table": "reports.kernel_table", "chip_peaks": "reports.roofline",
    "roofline_time_us": "reports.roofline", "write_report": "reports.writer",
}
"""Public name -> module that defines it."""


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'reports' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = ["KERNEL_COLUMNS", "chip_peaks", "chrome_trace", "kernel_table", "load_sweep",
           "roofline_time_us", "write_compare", "write_report"]
