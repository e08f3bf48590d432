"""Fit the front end a Kineto (CUPTI) kernel duration holds beyond the SMs' simulated span,
and the fixed cost of a driver memset's activity record.

    python -m workloads.traces.kineto_front_end [--trace FILE] [--model h100_sxm]

A CUPTI kernel activity record times a kernel from the GPU's start of the grid to its
completion; the simulator's span (`cycles` at the SM clock) starts at the first CTA and ends
at the last. What lies between is a fixed cost per launch, shorter than what ncu's
`gpu__time_duration` adds (`launch.kernel_front_end_us`, fitted on ncu rows). It is fitted on
the FIT rows only, declared before any simulated figure was looked at: the single-CTA kernels
(grid 1x1x1) of the LLaMA-3-8B prefill trace, whose span is a few hundred cycles, so that
their duration is mostly this cost. Every multi-CTA kernel and the whole decode trace are
held back. The estimate is the median over the FIT rows of measured duration minus simulated
span (`simulate_reference` with a front end of 0 and no host launch overhead, simulated as
`ptxsim compare` simulates a Kineto trace: at the SM clock the trace's sidecar recorded,
`workloads.traces.recorded_clock`, and with element-wise, copy and norm kernels starting
with their inputs in the L2, `reference_ops.WARM_KINDS`); the result is
`reference_ops.KINETO_FRONT_END_US`, which `ptxsim compare` uses for Kineto traces.

Memsets (`fit_memset`): a Kineto memset activity (category `gpu_memset`) is the driver's
`cudaMemsetAsync`, not a kernel launch, and `ptxsim compare` times it as a fixed cost plus
its bytes over the HBM's peak bandwidth (`reference_ops.driver_memset_us`). The fixed cost
is fitted on FIT rows declared before any figure was computed: the memset activities of
the LLaMA-3-8B prefill trace at even positions in trace order (0, 2, 4, ...); those at odd
positions are held back, and the decode trace (no memsets) has none to hold. The estimate
is the median over the FIT rows of measured duration minus bytes over the rate; the result
is `reference_ops.KINETO_MEMSET_US`. The trace's memsets are all 4 bytes, so the rate is
not fitted: it is the preset's HBM peak (a large memset writes at the DRAM's rate), which
moves a 4-byte memset by a millionth of a microsecond.

Units: microseconds.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

import models
from workloads.traces.kineto import read_kineto
from workloads.traces.mapping import map_kernels
from workloads.traces.recorded_clock import at_sm_clock, recorded_sm_clock
from workloads.traces.reference_ops import driver_memset_us, simulate_reference

FIT_TRACE = Path(__file__).resolve().parents[1] / "reference" / "h100" / \
    "llama3_8b_layer_prefill.json"


def fit_rows(mapped: pd.DataFrame) -> pd.DataFrame:
    """The FIT rows of a mapped Kineto table: kernels of one CTA."""
    one = mapped["grid"].map(lambda g: tuple(g) == (1, 1, 1)) & (mapped["kind"] == "kernel")
    return mapped[one]


def fit_front_end(trace: Path = FIT_TRACE, model: str = "h100_sxm",
                  fidelity: str = "sampled") -> tuple[float, pd.DataFrame]:
    """(median of measured - simulated span over the FIT rows, the rows with
    `span_us` and `gap_us`)."""

    rows = fit_rows(map_kernels(read_kineto(trace)))
    config = models.load_preset(model)
    recorded = recorded_sm_clock(trace)
    if recorded is not None:
        config = at_sm_clock(config, recorded[0])
    done = simulate_reference(rows, config, fidelity, front_end_us=0.0,
                              l2_start="warm-inputs")
    done = done[done["status"] == "simulated"].copy()
    done["span_us"] = done["simulated_us"].astype(float)
    done["gap_us"] = done["dur_us"] - done["span_us"]
    return float(np.median(done["gap_us"])), done


def memset_fit_rows(mapped: pd.DataFrame) -> pd.DataFrame:
    """The memset FIT rows of a mapped Kineto table: its memsets at even positions."""
    return mapped[mapped["kind"] == "memset"].iloc[0::2]


def fit_memset(trace: Path = FIT_TRACE, model: str = "h100_sxm") -> tuple[float, pd.DataFrame]:
    """(median of measured - bytes over the HBM peak over the memset FIT rows, the rows with
    `bytes_us` and `gap_us`)."""

    rows = memset_fit_rows(map_kernels(read_kineto(trace))).copy()
    config = models.load_preset(model)
    rows["bytes_us"] = [driver_memset_us(config, int(b), 0.0) for b in rows["bytes"]]
    rows["gap_us"] = rows["dur_us"] - rows["bytes_us"]
    return float(np.median(rows["gap_us"])), rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=FIT_TRACE)
    parser.add_argument("--model", default="h100_sxm")
    args = parser.parse_args(argv)
    front_end, rows = fit_front_end(args.trace, args.model)
    short = rows.assign(name=rows["name"].str.slice(0, 60))
    with pd.option_context("display.width", 160):
        print(short[["name", "dur_us", "span_us", "gap_us"]].to_string(index=False))
    print(f"front end (median of {len(rows)} FIT rows): {front_end:.3f} us")
    memset, rows = fit_memset(args.trace, args.model)
    with pd.option_context("display.width", 160):
        print(rows[["name", "bytes", "dur_us", "bytes_us", "gap_us"]].to_string(index=False))
    print(f"driver memset fixed cost (median of {len(rows)} FIT rows): {memset:.3f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
