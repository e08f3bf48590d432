"""The fidelity plan (`simulator.runner.fidelity`): decided before a launch runs from its shape and
the config, carried out by the executors, and recorded on every result (KernelResult, op
dict and kernel entries, workload kernels table, run.json) with its method, parameters,
share of CTAs simulated and share of time extrapolated."""

from __future__ import annotations

import contextlib
import io
import json

import numpy as np
import pytest

import isa
import models
import simulator
from simulator.app.cli import main
from simulator.runner.fidelity import METHODS, FidelityPlan, LaunchShape, plan
from workloads.kernels.case import load_ptx
from workloads.ops import build_op, explain_op, plan_op
from workloads.ops.registry import _simulate_launch, _supported

H800 = models.load_preset("h800_sxm")
SMALL = models.load_preset("h100_sxm", {"sm.count": 16, "fidelity.chip_slicing": False})


def saxpy(n: int):
    return (load_ptx("saxpy.cu"), "saxpy", -(-n // 256), 256,
            [n, np.float32(2), isa.ShapeOnly((n,)), isa.ShapeOnly((n,))])


def test_full_run_reports_full_with_every_cta_and_nothing_extrapolated():
    """`fidelity="full"`: method full, CTA share 1.0, time share 0.0."""
    ptx, entry, grid, block, args = saxpy(64 * 256)
    res = simulator.simulate_kernel(ptx, entry, grid, block, args, SMALL, timing_only=True)
    assert res.plan.method == "full"
    assert (res.plan.simulated_cta_share, res.plan.extrapolated_time_share) == (1.0, 0.0)
    assert res.plan.params["ctas"] == 64


def test_chip_sliced_launch_reports_chip_slice_with_its_factor():
    """A residual add of 2048 x 7168 on h800_sxm (10.3 waves) timed on a quarter of the
    chip: method chip_slice, factor 4, a quarter of its CTAs simulated, no time
    extrapolated; the plan decided before the run named the same slice."""
    (launch,) = build_op("residual-add", H800, rows=2048, cols=7168, inputs=2).launches
    res = _simulate_launch(launch, H800, "sampled", _supported())
    done = res.plan
    assert done.method == "chip_slice" and done.params["factor"] == 4
    n_ctas = int(np.prod(launch.grid))
    assert done.params["ctas_timed"] == -(-n_ctas // 4) and done.params["slice_sms"] == 33
    assert done.simulated_cta_share == pytest.approx(0.25)
    assert done.extrapolated_time_share == 0.0 == res.extrapolated_fraction
    planned = plan_op(build_op("residual-add", H800, rows=2048, cols=7168, inputs=2), H800,
                      "sampled")
    assert planned.method == "chip_slice" and planned.params["factor"] == 4
    assert planned.fallback is not None and planned.condition


def test_wave_sampled_launch_reports_its_waves_and_the_extrapolated_share():
    """A saxpy of 20 waves on 16 SMs with chip slicing off: method wave_extrapolation, the
    waves simulated (4 or 7) of the 20, the share of CTAs those waves hold and a nonzero
    extrapolated share of the time, the result's own extrapolated fraction."""
    ptx, entry, grid, block, args = saxpy(20 * 128 * 256)
    res = simulator.simulate_kernel(ptx, entry, grid, block, args, SMALL, timing_only=True,
                                    fidelity="sampled")
    done = res.plan
    assert done.method == "wave_extrapolation"
    k = done.params["waves_simulated"]
    assert k in (4, 7) and done.params["waves_total"] == pytest.approx(20.0)
    assert done.simulated_cta_share == pytest.approx(k / 20)
    assert 0 < done.extrapolated_time_share == res.extrapolated_fraction < 1


def test_plan_is_a_pure_function_of_shape_and_config():
    """The same shape and config give the same plan; the config's keys move it: slicing
    off leaves the whole chip, fewer minimum waves extrapolate a grid timed in full."""
    shape = LaunchShape((6 * 1056, 1, 1), 1056)                        # 6 waves of 1056 CTAs
    first, again = plan(shape, H800), plan(shape, H800)
    assert first == again and first.method == "chip_slice"
    off = H800.with_overrides({"fidelity.chip_slicing": False})
    assert plan(shape, off).method == "full"
    low = off.with_overrides({"fidelity.wave_sampling_min_waves": 5.0})
    assert plan(shape, low).method == "wave_extrapolation"
    assert plan(shape, low).params["max_waves"] == 5                 # a wave left over
    assert plan(shape, H800, "full").method == "full"
    persistent = LaunchShape((132, 1, 1), 132, has_work=True)
    assert plan(persistent, H800).method == "full+synthesized_ctas"
    assert plan(persistent, H800).fallback.method == "full"
    with pytest.raises(ValueError, match="accepted"):
        FidelityPlan("approximate")
    assert set(METHODS) >= {"full", "full+synthesized_ctas", "chip_slice", "row_slice",
                            "wave_extrapolation", "op_model"}


def _cli(*argv: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert main(list(argv)) == 0
    return out.getvalue(), err.getvalue()


def test_op_json_carries_the_plan_of_the_op_and_its_kernel():
    """`ptxsim op gemm --m 4096 --n 7168 --k 16384 --dtype fp8 --model h800_sxm --json`:
    the op model from 4 reduced launches, its weights and methods, the share of the GEMM's
    tile k-steps they ran and the share of its cycles extrapolated, on the op and on its
    kernel entry."""
    out, _ = _cli("op", "gemm", "--m", "4096", "--n", "7168", "--k", "16384", "--dtype",
                  "fp8", "--model", "h800_sxm", "--json", "--quiet")
    result = json.loads(out)
    for entry in (result, result["kernel"]):
        assert entry["fidelity_method"] == "op_model"
        params = entry["fidelity_params"]
        assert params["reduced_launches"] == 4 == len(params["weights"])
        assert set(params["reduced_launch_methods"]) <= set(METHODS)
        assert 0 < entry["simulated_cta_share"] < 0.5
        assert 0.5 < entry["extrapolated_time_share"] < 1


def test_explain_prints_the_plan_before_the_result():
    """`--explain` prints the op's plan in words ahead of the timing (stderr with
    --json), from the pure plan function: the method, its condition and fallback."""
    out, _ = _cli("op", "rmsnorm", "--rows", "4096", "--cols", "7168", "--model", "h800_sxm",
                  "--explain", "--quiet")
    assert out.index("fidelity plan of rmsnorm") < out.index("time ")
    assert "chip_slice" in out and "otherwise" in out
    words = explain_op(build_op("gemm", H800, m=4096, n=7168, k=16384, dtype="fp8"), H800,
                       "sampled")
    assert words.startswith("fidelity plan of gemm at sampled fidelity: op_model")
    assert sum(line.lstrip().startswith("reduced launch") for line in words.splitlines()) == 4


def test_workload_kernels_table_carries_each_nodes_plan():
    """Every row of `WorkloadResult.kernels` names its method, its parameters (JSON text),
    the CTA share and the time share."""
    import workloads

    graph = workloads.layer("bert-base", batch=1, seqlen=128)
    result = simulator.simulate_workload(graph, H800, timeline=False)
    table = result.kernels
    assert set(table["fidelity_method"]) <= set(METHODS)
    for text in table["fidelity_params"]:
        assert isinstance(json.loads(text), dict)
    assert table["simulated_cta_share"].between(0, 1).all()
    assert table["extrapolated_time_share"].between(0, 1).all()
