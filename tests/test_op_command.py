"""`ptxsim op`: JSON fields and their closed forms, roofline bound, errors, small ops run.

Conventions checked: tflops = FLOP / time (2·M·N·K for a GEMM), gbps = bytes of inputs
and outputs (each once) / time, roofline_us = max(FLOP / peak, bytes / HBM peak) with the
peaks of the resolved preset, bound = the larger roofline term. GEMM runs are skipped
while this simulator build cannot time wgmma (the command then says so in one line).
"""

import json

import pytest

import models
from simulator.app.cli import main
from workloads.ops import build_op, simulate_op
from workloads.ops.gemm import choose_tiles

H100 = models.load_preset("h100_sxm")


def run_json(capsys, *argv) -> dict:
    assert main(["op", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def gemm_timing_available() -> bool:
    from isa.errors import InputError
    try:
        simulate_op(build_op("gemm", H100, m=64, n=64, k=64, dtype="bf16"), H100)
    except InputError as exc:
        if "wgmma timing not available" in str(exc):
            return False
        raise
    return True


needs_gemm_timing = pytest.mark.skipif(not gemm_timing_available(),
                                       reason="wgmma timing not available in this build")


def test_softmax_json_fields_follow_the_closed_forms(capsys):
    """softmax: gbps = 8·R·C / time, tflops = 5·R·C / time, roofline = bytes / HBM peak."""
    rows, cols = 64, 256
    r = run_json(capsys, "softmax", "--rows", str(rows), "--cols", str(cols), "--model",
                 "h800_sxm")
    for key in ("time_us", "tflops", "gbps", "hbm_bytes", "bound", "roofline_us", "cycles",
                "kernel", "fidelity"):
        assert key in r
    assert r["kernel"]["name"] == "softmax_rows" and r["kernel"]["block"] == [32, 4, 1]
    assert r["kernel"]["grid"] == [rows // 4, 1, 1]
    assert r["bytes"] == 8 * rows * cols and r["flops"] == 5 * rows * cols
    assert r["gbps"] == pytest.approx(r["bytes"] / (r["time_us"] * 1e3))
    assert r["tflops"] == pytest.approx(r["flops"] / (r["time_us"] * 1e6))
    cfg = models.load_preset("h800_sxm")
    assert r["roofline_us"] == pytest.approx(r["bytes"] / (cfg.hbm_peak_tbps * 1e6))
    assert r["bound"] == "memory" and r["time_us"] >= r["roofline_us"]
    assert 0 < r["hbm_bytes"] <= 2 * r["bytes"] and r["cycles"] > 0


@pytest.mark.parametrize("op", ["rmsnorm", "layernorm"])
def test_norm_ops_run_on_small_shapes(capsys, op):
    """rmsnorm and layernorm run through the catalog kernels and report positive times."""
    r = run_json(capsys, op, "--rows", "8", "--cols", "300")
    assert r["op"] == op and r["time_us"] > 0 and r["kernel"]["mode"] == "functional"


def test_gemm_plan_roofline_and_bound():
    """M=1 (decode) is memory-bound, 4096^3 compute-bound; the bound is the larger term."""
    from models.roofline import chip_peaks, roofline_bound, roofline_time_us
    peaks = chip_peaks(H100.to_dict())
    decode = build_op("gemm", H100, m=1, n=8192, k=8192, dtype="bf16")
    big = build_op("gemm", H100, m=4096, n=4096, k=4096, dtype="fp8")
    assert decode.flops == 2 * 8192 * 8192 and big.flops == 2 * 4096**3
    assert decode.bytes == 2 * (8192 + 8192 * 8192) + 2 * 8192
    for plan, bound in ((decode, "memory"), (big, "compute")):
        peak = peaks[plan.peak]
        assert roofline_bound(plan.flops, plan.bytes, peak, peaks["hbm_gbps"]) == bound
        closed = max(plan.flops / (peak * 1e6), plan.bytes / (peaks["hbm_gbps"] * 1e3))
        assert float(roofline_time_us(plan.flops, plan.bytes, peak,
                                      peaks["hbm_gbps"])) == pytest.approx(closed)
    assert big.peak == "tensor_fp8_tflops" and big.launches[0].timing_only


def test_tile_heuristic_is_documented_shape_rules():
    """M<=64 takes a 64-row tile, large outputs go persistent, stages fit in 227 KiB."""
    small = choose_tiles(1, 4096, 4096, "bf16", 132)
    assert (small["m_tile"], small["consumers"]) == (64, 1)
    big = choose_tiles(4096, 8192, 8192, "fp8", 132)
    assert big["m_tile"] == 128 and big["persistent"] and big["k_tile"] == 128
    assert big["stages"] * (big["m_tile"] + big["n_tile"]) * 128 <= 232448
    assert choose_tiles(4096, 8192, 8192, "bf16", 132, "n128")["n_tile"] == 128


@needs_gemm_timing
def test_gemm_json_tflops_is_2mnk_over_time(capsys):
    """gemm: tflops = 2·M·N·K / time, gbps = (A + B + C bytes) / time."""
    m, n, k = 128, 256, 256
    r = run_json(capsys, "gemm", "--m", str(m), "--n", str(n), "--k", str(k), "--dtype", "bf16")
    assert r["tflops"] == pytest.approx(2 * m * n * k / (r["time_us"] * 1e6))
    assert r["gbps"] == pytest.approx(2 * (m * k + n * k + m * n) / (r["time_us"] * 1e3))
    assert r["kernel"]["name"].startswith("gemm_bf16") and r["time_us"] >= r["roofline_us"]


@needs_gemm_timing
def test_gemm_decode_is_memory_bound_and_square_compute_bound(capsys):
    """The command's bound: M=1 memory, 1024x1024x2048 fp8 compute (AI 683 > ridge 590)."""
    dec = run_json(capsys, "gemm", "--m", "1", "--n", "4096", "--k", "4096")
    assert dec["bound"] == "memory"
    sq = run_json(capsys, "gemm", "--m", "1024", "--n", "1024", "--k", "2048", "--dtype", "fp8")
    assert sq["bound"] == "compute" and sq["kernel"]["mode"] == "timing"


@pytest.mark.parametrize("argv, flag", [
    (["gemm", "--m", "0", "--n", "8", "--k", "16"], "--m"),
    (["gemm", "--m", "8", "--n", "-1", "--k", "16"], "--n"),
    (["gemm", "--m", "8", "--n", "8", "--k", "16", "--dtype", "int4"], "--dtype"),
    (["gemm", "--m", "8", "--n", "8", "--k", "12", "--dtype", "fp8"], "--k"),
    (["softmax", "--rows", "0", "--cols", "8"], "--rows"),
    (["rmsnorm", "--rows", "4", "--cols", "8", "--set", "sm.bogus=1"], "--set"),
    (["softmax", "--rows", "4", "--cols", "8", "--model", "nope"], "--model"),
])
def test_bad_flags_are_one_line_errors_naming_the_flag(capsys, argv, flag):
    """Bad sizes, dtype, --set key or preset: exit 2 and one stderr line naming the flag."""
    assert main(["op", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("ptxsim op: error:") and flag in err


def test_set_override_reaches_the_preset(capsys):
    """--set hbm bandwidth halves the memory roofline term of a memory-bound op."""
    base = run_json(capsys, "softmax", "--rows", "8", "--cols", "64")
    cfg = models.load_preset("h100_sxm")
    half = cfg.hbm.channel_bandwidth_gbps / 2
    slow = run_json(capsys, "softmax", "--rows", "8", "--cols", "64", "--set",
                    f"hbm.channel_bandwidth_gbps={half}")
    assert slow["roofline_us"] == pytest.approx(2 * base["roofline_us"])


def test_rmsnorm_rows_kernel_streams_near_hbm_bandwidth():
    """Rows whose width is a multiple of 8 go to the block-per-row kernel with 16-byte loads,
    which moves a large RMSNorm at more than half the HBM peak (the warp-per-row kernel is
    latency-bound there); other widths keep the warp-per-row kernel. Kernel time alone (no
    launch overhead)."""
    import models
    from workloads.ops import build_op, simulate_op

    cfg = models.load_preset("h100_sxm", {"launch.kernel_overhead_us": 0.0})
    wide = simulate_op(build_op("rmsnorm", cfg, rows=2048, cols=4096), cfg)
    assert wide["kernel"]["name"] == "rmsnorm_bf16_rows"
    assert wide["gbps"] > 0.5 * cfg.hbm.peak_bandwidth_gbps, wide["gbps"]
    odd = build_op("rmsnorm", cfg, rows=4, cols=130)
    assert odd.launches[0].entry == "rmsnorm_bf16"
