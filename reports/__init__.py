"""Report builders: they read result tables (Parquet parts, stats frames), never live objects.

`load_sweep(DIR)` reads a sweep folder written by `ptxsim sweep` into one DataFrame (a row
per point: its parameters and metrics), `load_sweep_kernels(DIR)` into the long per-kernel
table; `reports.sweep_plots` draws sweep line plots, heatmaps and per-category time bars as
matplotlib figures (Agg).
`write_report(result, DIR)` writes a run's tables, plots, HTML page and Chrome trace;
`reports.compare` (`write_compare`) holds simulated times against a reference trace.
`load_run(DIR)` reads a `ptxsim run` folder back (`reports.run_loading.RunOutput`: run.json,
the kernels table with its error columns, the config; `.numerics` and `.errors()` the
run's error beside time).
Importing starts nothing and writes nothing; matplotlib loads when the first figure is
drawn (`reports.plot_kernels.new_figure`), so a simulation that reads only the roofline
helpers does not pay its import (~1.4 s of CPU).
"""

from reports.sweep_loading import load_sweep, load_sweep_kernels

__all__ = ["load_sweep", "load_sweep_kernels"]

from models.roofline import chip_peaks, roofline_time_us  # noqa: E402
from reports.chrome_trace import chrome_trace  # noqa: E402
from reports.compare import write_compare  # noqa: E402
from reports.kernel_table import KERNEL_COLUMNS, kernel_table  # noqa: E402
from reports.output_dir import output_unchanged  # noqa: E402
from reports.run_loading import RunOutput, load_run  # noqa: E402
from reports.writer import report_digest, write_report  # noqa: E402

__all__ += ["KERNEL_COLUMNS", "RunOutput", "chip_peaks", "chrome_trace", "kernel_table",
            "load_run", "output_unchanged", "report_digest", "roofline_time_us",
            "write_compare", "write_report"]
