"""A Kineto memset activity is the driver's memset: a fixed cost plus bytes over the HBM's
peak, fitted on the declared FIT rows (the prefill trace's memsets at even positions)."""

from __future__ import annotations

import pandas as pd
import pytest

import models
import workloads.ops as op_registry
from models.roofline import chip_peaks
from workloads.traces import kineto_front_end
from workloads.traces.reference_ops import (
    KINETO_MEMSET_US,
    driver_memset_us,
    simulate_reference,
)


def _memset_row(nbytes: int) -> dict:
    return {"name": "Memset (Device)", "kind": "memset", "op": "memset",
            "sizes": f'{{"bytes": {nbytes}}}', "rule": "memset", "dur_us": 1.0}


def test_driver_memset_is_fixed_cost_plus_bytes_over_hbm_peak():
    """1 GB at the h100_sxm's HBM peak, plus the fixed cost: the closed form."""
    config = models.load_preset("h100_sxm")
    peak_gbps = chip_peaks(config.to_dict())["hbm_gbps"]
    expected = KINETO_MEMSET_US + 1e9 / (peak_gbps * 1e3)
    assert driver_memset_us(config, 10**9) == pytest.approx(expected, rel=1e-12)


def test_kineto_memset_rows_simulate_no_kernel(monkeypatch):
    """With a Kineto front end a memset row is timed by `driver_memset_us`, no op built;
    a kernel CSV's memset (no front end) still runs the fill kernel."""
    config = models.load_preset("h100_sxm")
    built = []
    real_build = op_registry.build_op
    monkeypatch.setattr(op_registry, "build_op",
                        lambda kind, cfg, **sizes: built.append(kind) or
                        real_build(kind, cfg, **sizes))
    frame = pd.DataFrame([_memset_row(4), _memset_row(4096)])
    done = simulate_reference(frame, config, "sampled", front_end_us=0.94)
    assert built == []
    assert list(done["simulated_us"]) == [driver_memset_us(config, 4),
                                          driver_memset_us(config, 4096)]
    csv = simulate_reference(frame.iloc[:1], config, "sampled")
    assert built == ["memset"] and csv["simulated_us"].iloc[0] > KINETO_MEMSET_US


def test_memset_fixed_cost_is_the_median_of_the_fit_rows():
    """`KINETO_MEMSET_US` is the fit on the even-position memsets, to 0.01 us."""
    fitted, rows = kineto_front_end.fit_memset()
    assert len(rows) == 5 and set(rows["kind"]) == {"memset"}
    assert fitted == pytest.approx(KINETO_MEMSET_US, abs=0.005)
