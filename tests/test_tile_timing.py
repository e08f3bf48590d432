"""Timing of the Hopper tile ops: TMA streams, wgmma tensor rate, wait_group holds."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import models
import simulator
from workloads.kernels.templates.gemm import gemm_kernel

H100 = models.load_preset("h100_sxm")
RATES = {"bf16": H100.units.tensor.bf16_fma_per_clk_per_sm,
         "fp8": H100.units.tensor.fp8_fma_per_clk_per_sm}
NUMPY = {"bf16": ml_dtypes.bfloat16, "fp8": ml_dtypes.float8_e4m3fn}


def run_gemm(m: int, n: int, k: int, dtype: str, n_tile: int, consumers: int = 1,
             regs: int | None = None):
    """Cycles of the warp-specialized template GEMM in timing mode (zero inputs)."""
    kern = gemm_kernel(128, n_tile, 64 if dtype == "bf16" else 128, 4, dtype=dtype,
                       out_dtype="f32", consumers=consumers)
    a, b = np.zeros((m, k), NUMPY[dtype]), np.zeros((n, k), NUMPY[dtype])
    c = np.zeros((m, n), np.float32)
    return simulator.simulate_kernel(kern.ptx, kern.entry, kern.grid(m, n), kern.block,
                                     kern.args(a, b, c), H100, shared_bytes=kern.shared_bytes,
                                     timing_only=True, regs_per_thread=regs)


@pytest.mark.parametrize("dtype", ["bf16", "fp8"])
def test_ws_gemm_steady_state_runs_at_the_tensor_rate(dtype):
    """Extra K costs FMAs / (rate per SM) per SM: 128x256 tiles on 2 SMs, 4 stages."""
    k1, k2 = 1024, 2048
    short = run_gemm(256, 256, k1, dtype, 256, consumers=2, regs=168)
    long = run_gemm(256, 256, k2, dtype, 256, consumers=2, regs=168)
    want = 128 * 256 * (k2 - k1) / RATES[dtype]
    got = long.cycles - short.cycles
    assert abs(got - want) / want < 0.05, (got, want)


def test_tma_stream_moves_bytes_at_hbm_bandwidth():
    """An N=8 GEMM on all 132 SMs streams A through TMA at 75-100 % of the HBM peak."""
    m, n, k = 128 * 132, 8, 1024
    res = run_gemm(m, n, k, "bf16", 8)
    nbytes = (m + n) * k * 2
    achieved = nbytes / ((res.kernel_time_us - H100.launch.kernel_front_end_us) * 1e-6) / 1e9
    assert 0.75 <= achieved / H100.hbm.peak_bandwidth_gbps <= 1.0, achieved


CHAIN = 64
WAIT_KERNEL = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry wg(.param .u64 out)
{{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    .reg .f32 %f<128>;
    mov.u64 %rd1, 0;
    mov.u32 %r1, 0;
    setp.ne.u32 %p1, %r1, 0;
    wgmma.fence.sync.aligned;
{wgmmas}
    wgmma.commit_group.sync.aligned;
    wgmma.wait_group.sync.aligned {keep};
{chain}
    ret;
}}
"""


def wait_kernel(keep: int) -> str:
    regs = ", ".join(f"%f{i}" for i in range(128))
    op = (f"    wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {{{regs}}}, %rd1, %rd1, "
          "%p1, 1, 1, 0, 0;")
    return WAIT_KERNEL.format(wgmmas="\n".join([op] * 4), keep=keep,
                              chain="\n".join(["    add.u32 %r1, %r1, 1;"] * CHAIN))


def test_wait_group_zero_holds_the_warp_until_the_group_completes():
    """Work after wait_group 0 starts when the 4 wgmmas are done; after wait_group 1 at once."""
    out = np.zeros(4, np.float32)
    held, free = (simulator.simulate_kernel(wait_kernel(keep), "wg", 1, 128, [out], H100,
                                            timing_only=True).cycles for keep in (0, 1))
    interval = 16 * 256 * 16 // (RATES["bf16"] // 4)
    done = 3 * interval + max(H100.units.tensor.wgmma_latency_cycles, interval)
    chain = CHAIN * H100.units.int32.latency_cycles
    assert held >= done + chain
    assert held - free >= 0.9 * chain
