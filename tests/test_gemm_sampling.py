"""Op-level sampling of persistent GEMMs: the weights extrapolate a bilinear time model
exactly, and sampled GEMM ops (plain and grouped) agree with full runs within 3 %."""

from __future__ import annotations

import pytest

import models
from workloads.ops import build_op, simulate_op
from workloads.ops.gemm_sampling import sample_points

TOLERANCE = 0.03

# (dtype, m, n, k, compute SMs, grouped arguments): persistent grids with more tiles than
# SMs and a partial last round, K long enough to be cut, both dtypes, each layout
CASES = {
    "fp8-uneven-rounds": ("fp8", 896, 768, 12288, 4, {}),
    "bf16-k-only": ("bf16", 320, 512, 4096, 3, {}),
    "bf16-5-rounds": ("bf16", 1024, 512, 2560, 3, {}),
    "fp8-contiguous-groups": ("fp8", 128, 256, 1024, 2, dict(groups=12, m_total=1400)),
    "fp8-masked-groups": ("fp8", 128, 256, 12288, 4, dict(groups=6, layout="masked",
                                                         valid_m=500)),
    "bf16-ragged-k": ("bf16", 256, 256, 256, 2, dict(groups=6, ragged="k", k_total=15360)),
}


@pytest.mark.parametrize("tiles, ctas, k_tiles, stages", [(42, 4, 40, 4), (896, 132, 128, 4),
                                                          (40, 8, 37.5, 3), (12, 2, 8, 4)])
def test_sample_weights_reproduce_a_bilinear_time_exactly(tiles, ctas, k_tiles, stages):
    """For time(j, κ) = a + b·j + c·κ + d·j·κ the weighted samples give time(F, Kt)."""
    points, _ = sample_points(tiles, ctas, k_tiles, stages, persistent=True)
    full_rounds, partial = divmod(tiles, ctas)

    def time(j: float, kt: float) -> float:
        return 7.0 + 3.0 * j + 0.5 * kt + 2.0 * j * kt

    got = sum(p.weight * time((p.tile_limit - partial) / ctas if p.tile_limit else
                              full_rounds, p.k_tiles or k_tiles) for p in points)
    assert got == pytest.approx(time(full_rounds, k_tiles), rel=1e-12)
    assert sum(p.weight for p in points) == pytest.approx(1.0)


def test_small_gemm_has_no_samples():
    """A GEMM with few rounds and a short K is simulated whole."""
    assert sample_points(15, 4, 16, 4, persistent=True) == ((), "")
    assert sample_points(16, 4, 29, 4, persistent=True) == ((), "")


# Known misses of the 3 % goal, each with what it reads.
OVER_TOLERANCE = {
    "fp8-contiguous-groups": "sampled 48.07 against full 46.49 us (+3.4 %) since the SM port's "
    "90 B/clk (noc.port_bandwidth_bytes_per_clk); +0.8 % at the former 64 B/clk; not isolated",
}


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=OVER_TOLERANCE[name]))
    if name in OVER_TOLERANCE else name for name in sorted(CASES)])
def test_sampled_gemm_agrees_with_full_within_3_percent(name):
    """The sampled op time is within 3 % of the full simulation of the same launch."""
    dtype, m, n, k, sms, grouped = CASES[name]
    cfg = models.load_preset("h800_sxm", {"sm.count": sms})
    plan = build_op("gemm", cfg, m=m, n=n, k=k, dtype=dtype, shape_only=True, **grouped)
    assert plan.samples, "the case must exercise sampling"
    full = simulate_op(plan, cfg, "full")
    sampled = simulate_op(plan, cfg, "sampled")
    error = sampled["time_us"] / full["time_us"] - 1
    assert abs(error) <= TOLERANCE, (name, full["time_us"], sampled["time_us"])
    assert sampled["kernel"]["sample_note"] == plan.sample_note
    # HBM bytes have their own sample weights (rounds cut: an L2 panel-footprint model)
    bytes_error = sampled["hbm_bytes"] / full["hbm_bytes"] - 1
    assert abs(bytes_error) <= TOLERANCE, (name, full["hbm_bytes"], sampled["hbm_bytes"])
