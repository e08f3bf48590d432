"""Golden figures: a fixed list of small catalogued kernels timed on `h100_sxm`.

Each golden case builds a catalogue kernel (`workloads.kernels.catalog.KERNELS`) at one of
its small variants with `numpy.random.default_rng(0)`, runs `simulate_kernel` on the
`h100_sxm` preset and keeps a flat record: `cycles`, `warp_instructions`,
`thread_instructions`, `issued.<unit>` (warp instructions issued per unit) and
`bytes.<component>` (bytes through HBM and L2, per direction). `tests/golden/kernels.json`
holds the accepted records; `compare` checks new ones against it: instruction and issue
counts must match exactly, cycles and bytes within `TOLERANCE` (relative). Units: cycles,
counts, bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import models
import simulator
from workloads.kernels.case import load_ptx
from workloads.kernels.catalog import KERNELS

GOLDEN_FILE = Path(__file__).resolve().parents[2] / "tests" / "golden" / "kernels.json"
PRESET = "h100_sxm"
TOLERANCE = 0.02
EXACT_PREFIXES = ("warp_instructions", "thread_instructions", "issued.")

# (golden name, catalogue kernel, index of its variant)
GOLDEN_CASES: tuple[tuple[str, str, int], ...] = (
    ("saxpy_n77", "saxpy", 1),
    ("softmax_rows_5x200", "softmax_rows", 1),
    ("sgemm_tiled_37x29x45", "sgemm_tiled", 0),
    ("histogram_shared_n500", "histogram_shared", 1),
    ("mma_bf16_gemm_45x13x64", "mma_bf16_gemm", 1),
)


@dataclass(frozen=True, slots=True)
class Change:
    """One figure of one golden case that differs: old and new value, relative change."""

    case: str
    figure: str
    old: float | None
    new: float | None
    allowed: bool

    @property
    def relative(self) -> float | None:
        """(new - old) / old, or None where either side is missing or old is 0."""
        if self.old in (None, 0) or self.new is None:
            return None
        return (self.new - self.old) / self.old

    def line(self) -> str:
        """`case figure: old -> new (+x.xx %)`, marked when outside the tolerance."""
        pct = "" if self.relative is None else f" ({self.relative * 100:+.2f} %)"
        mark = ("  [new]" if self.old is None else "  [gone]" if self.new is None
                else "" if self.allowed else "  [outside tolerance]")
        return f"{self.case} {self.figure}: {self.old} -> {self.new}{pct}{mark}"


def measure(kernel: str, variant: int) -> dict[str, float]:
    """The golden record of one catalogue kernel variant (see the module docstring)."""
    import numpy as np


    spec = KERNELS[kernel]
    case = spec.build(np.random.default_rng(0), **spec.variants[variant])
    result = simulator.simulate_kernel(load_ptx(case.file), case.entry, case.grid, case.block,
                                       case.args, config=models.load_preset(PRESET),
                                       shared_bytes=case.shared_bytes)
    return _record(result)


def _record(result) -> dict[str, float]:
    stats = result.stats
    record = {"cycles": int(result.cycles)}
    kernel = stats[stats["component"] == "kernel"].set_index("stat")["value"]
    for name in ("warp_instructions", "thread_instructions"):
        record[name] = int(kernel[name])
    issued = stats[(stats["stat"] == "issued") & stats["component"].str.startswith("sm.units.")]
    for component, value in issued.groupby("component")["value"].sum().items():
        record[f"issued.{component.removeprefix('sm.units.')}"] = int(value)
    moved = stats[(stats["stat"] == "bytes")
                  & stats["component"].str.match(r"memory\.(hbm|l2)\b")]
    for component, value in moved.groupby("component")["value"].sum().items():
        record[f"bytes.{component.removeprefix('memory.')}"] = int(value)
    return dict(sorted(record.items()))


def measure_all(cases=GOLDEN_CASES) -> dict[str, dict[str, float]]:
    """Records of every golden case, by golden name."""
    return {name: measure(kernel, variant) for name, kernel, variant in cases}


def load_golden(path: Path = GOLDEN_FILE) -> dict[str, dict[str, float]]:
    """The accepted records (empty when the file does not exist yet)."""
    if not path.exists():
        return {}
    return json.loads(path.read_text())["cases"]


def write_golden(records: dict, path: Path = GOLDEN_FILE) -> None:
    """Write the records with a note of how they were made."""
    doc = {"about": f"simulator.app.golden records on preset {PRESET}; regenerate with "
                    "`ptxsim golden --update`", "cases": records}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")


def figure_allowed(figure: str, old, new) -> bool:
    """Exact for instruction/issue counts; within TOLERANCE for cycles and bytes."""
    if old is None or new is None:
        return False
    if figure.startswith(EXACT_PREFIXES):
        return old == new
    if old == 0:
        return new == 0
    return abs(new - old) <= TOLERANCE * abs(old)


def compare(old: dict, new: dict) -> list[Change]:
    """Every differing figure of every case in either set, with whether it is allowed."""
    changes = []
    for case in sorted(set(old) | set(new)):
        before, after = old.get(case, {}), new.get(case, {})
        for figure in sorted(set(before) | set(after)):
            a, b = before.get(figure), after.get(figure)
            if a != b:
                changes.append(Change(case, figure, a, b, figure_allowed(figure, a, b)))
    return changes
