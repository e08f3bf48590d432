"""Read a run folder (`ptxsim run --out DIR`) back: its summary, its kernels table and its
error beside time.

`load_run(DIR)` returns a `RunOutput`: `summary` (run.json as a dict: workload, layer,
deployment, kernels, units, `numerics`, ...), `kernels` (kernels.parquet, the per-kernel
table `reports.kernel_table` wrote, with the error columns of the run's numerics:
`error_category`, `rel_error`, `max_abs_error`, `argmax_change`, `rel_error_vs_stock`),
`config` (config.json, the resolved hardware config). `RunOutput.numerics` is run.json's
`numerics` section (computed or not, why, the reduced layer, seed, FP64 reference,
settings) and `RunOutput.errors()` its categories as a DataFrame (one row per category:
gemm, attention, layer; relative and max error and argmax change against FP64 and against
the stock precision); a run written before runs had a `numerics` section reads as not
computed.
Left out: the stats and timeline tables (read them with pandas from the folder's Parquet
files), plots. Units: as in run.json and the kernels table (microseconds, fractions).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from isa.errors import InputError

RUN_FILES = ("run.json", "kernels.parquet", "config.json")
NOT_RECORDED = {"computed": False, "reason": "the run recorded no numerics", "categories": []}


@dataclass(frozen=True)
class RunOutput:
    """What a `ptxsim run` folder holds (module docstring)."""

    summary: dict = field(repr=False)
    kernels: pd.DataFrame = field(repr=False)
    config: dict = field(repr=False)
    path: Path = Path(".")

    @property
    def numerics(self) -> dict:
        """run.json's `numerics` section."""
        return self.summary.get("numerics", NOT_RECORDED)

    def errors(self) -> pd.DataFrame:
        """The numerics' categories, one row each (empty when not computed)."""
        rows = self.numerics.get("categories", [])
        frame = pd.DataFrame(rows)
        frame.attrs.update({k: v for k, v in self.numerics.items() if k != "categories"})
        return frame


def load_run(path: str | Path) -> RunOutput:
    """The `RunOutput` of the run folder `path`; an `InputError` names a missing file."""
    folder = Path(path)
    missing = [name for name in RUN_FILES if not (folder / name).is_file()]
    if missing:
        raise InputError(f"{folder}: not a ptxsim run folder, missing {', '.join(missing)} "
                         "(accepted: a folder written by ptxsim run --out)")
    return RunOutput(summary=json.loads((folder / "run.json").read_text(encoding="utf-8")),
                     kernels=pd.read_parquet(folder / "kernels.parquet"),
                     config=json.loads((folder / "config.json").read_text(encoding="utf-8")),
                     path=folder)
