"""Report builders: they read result tables (Parquet parts, stats frames), never live objects.

`load_sweep(DIR)` reads a sweep folder written by `ptxsim sweep` into one DataFrame;
`reports.sweep_plots` draws sweep line plots and heatmaps as matplotlib figures (Agg).
Importing starts nothing and writes nothing.
"""

from reports.sweep_loading import load_sweep

__all__ = ["load_sweep"]
