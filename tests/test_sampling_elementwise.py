"""Wave sampling of the element-wise op families (quantize, SwiGLU, RMSNorm, residual add,
RoPE): the sampled kernel time and HBM bytes agree with the full run within 3 %."""

from __future__ import annotations

import pytest

import models
from workloads.ops import build_op
from workloads.ops.registry import _simulate_launch, _supported

TOLERANCE = 0.03
CONFIG = models.load_preset("h800_sxm", {"sm.count": 8})

# (op kind, sizes): grids of 7 to 28 waves on 8 SMs (each is wave-sampled, k >= 4)
CASES = [
    pytest.param("quantize", dict(rows=1024, cols=2048, block=128, transpose=False),
                 id="quantize"),
    pytest.param("swiglu", dict(rows=512, cols=2048), id="swiglu"),
    pytest.param("rmsnorm", dict(rows=512, cols=7168), id="rmsnorm"),
    pytest.param("residual-add", dict(rows=512, cols=7168, inputs=2), id="residual-add"),
    pytest.param("rope", dict(rows=256, cols=8256, rot_dim=64, seqlen=256), id="rope",
                 marks=pytest.mark.xfail(strict=True, reason=(
                     "known deviation: sampled +5.6 % cycles, +10.7 % HBM bytes (k = 7 of "
                     "17.8 waves); the early waves read more from HBM per CTA than the "
                     "later ones"))),
]


def _hbm_bytes(result) -> float:
    frame = result.stats
    rows = frame[frame.component.str.startswith("memory.hbm") & (frame.stat == "bytes")]
    return float(rows.value.sum())


@pytest.mark.parametrize("kind, sizes", CASES)
def test_sampled_elementwise_kernel_within_3_percent_of_full(kind, sizes):
    """Kernel cycles and HBM bytes of the sampled run within 3 % of timing every CTA."""
    (launch,) = build_op(kind, CONFIG, **sizes).launches
    params = _supported()
    full = _simulate_launch(launch, CONFIG, "full", params)
    sampled = _simulate_launch(launch, CONFIG, "sampled", params)
    assert sampled.fidelity == "sampled" and sampled.waves_simulated >= 4
    assert abs(sampled.cycles / full.cycles - 1) <= TOLERANCE, (sampled.cycles, full.cycles)
    bytes_error = _hbm_bytes(sampled) / _hbm_bytes(full) - 1
    assert abs(bytes_error) <= TOLERANCE, (_hbm_bytes(sampled), _hbm_bytes(full))


def test_op_result_says_how_each_launch_was_timed():
    """`simulate_op`'s kernel entry carries what the wave sampler did: a grid of many waves
    is sampled (waves simulated, a share extrapolated), one of few waves timed in full."""
    from workloads.ops import simulate_op

    many = simulate_op(build_op("residual-add", CONFIG, rows=512, cols=7168, inputs=2),
                       CONFIG, "sampled")["kernel"]
    assert many["fidelity"] == "sampled" and many["waves_simulated"] >= 4
    assert 0 < many["extrapolated_fraction"] < 1
    few = simulate_op(build_op("residual-add", CONFIG, rows=8, cols=448, inputs=2),
                      CONFIG, "sampled")["kernel"]
    assert few["fidelity"] == "full" and few["extrapolated_fraction"] == 0.0
