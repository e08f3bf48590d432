"""The FlashAttention-2 style Ampere attention template: generated PTX has only sm_80
instructions, runs through `isa.run_kernel` and matches numpy at odd sizes (causal, GQA,
split-KV decode), assembles with `ptxas -arch=sm_80` with no spill at the register counts the
launch uses, and is what the attention op runs on a100_sxm."""

from __future__ import annotations

import re
import shutil
import subprocess

import ml_dtypes
import numpy as np
import pytest

import isa
import models
from isa.errors import InputError
from isa.targets import verify_target
from workloads.kernels.templates.attention import reference
from workloads.kernels.templates.attention_sm80 import PTXAS_REGISTERS, attention_sm80_kernel
from workloads.ops.registry import build_op, simulate_op

IN = {"bf16": ml_dtypes.bfloat16, "fp16": np.float16}
UNIT = {"bf16": 2.0 ** -8, "fp16": 2.0 ** -11}     # unit roundoff of the output type

# (generator arguments, batch, heads, kv_heads, seqlen_q, seqlen_k, splits, swap)
VARIANTS = {
    "d128-noncausal-77x200": (dict(warps=8), 1, 2, 1, 77, 200, 1, False),
    "d128-causal-gqa-77x200": (dict(warps=8, causal=True), 2, 4, 2, 77, 200, 1, False),
    "d64-causal-4warps-2x16rows-130x130": (dict(headdim=64, kv_block=128, causal=True),
                                           1, 2, 2, 130, 130, 1, False),
    "d192v128-causal-8warps-fp16": (dict(headdim=192, headdim_v=128, warps=8, causal=True,
                                         dtype="fp16"), 1, 2, 2, 130, 200, 1, False),
    "d256-8warps-33x300": (dict(headdim=256, warps=8), 1, 2, 1, 33, 300, 1, False),
    "decode-gqa-swapped-split3": (dict(m_tile=64, kv_block=128, split=True), 2, 8, 2, 1, 300,
                                  3, True),
    "small-q-split2": (dict(headdim=64, m_tile=64, kv_block=32, split=True), 1, 4, 4, 5, 70, 2,
                       False),
}


def _run(kwargs, b, h, hkv, sq, sk, splits, swap):
    """Run the kernel (and its combine when split) on random data; (out, q, k, v, dtype)."""
    kernel = attention_sm80_kernel(**kwargs)
    cfg = kernel.config
    dt = IN[cfg.dtype]
    rng = np.random.default_rng(0)
    q = rng.standard_normal((b, sq, h, cfg.headdim)).astype(dt)
    k = rng.standard_normal((b, sk, hkv, cfg.headdim)).astype(dt)
    v = rng.standard_normal((b, sk, hkv, cfg.headdim_v)).astype(dt)
    out = np.zeros((b, sq, h, cfg.headdim_v), dt)
    lse = np.zeros((splits, b, sq, h), np.float32)
    o = np.zeros((splits, *out.shape), np.float32) if cfg.split else out
    grid = kernel.grid(b, hkv, h // hkv, splits) if swap else kernel.grid(b, h, sq, splits)
    isa.run_kernel(kernel.ptx, kernel.entry, grid, kernel.block,
                   kernel.args(q, k, v, o, lse, splits=splits, swap_groups=swap),
                   kernel.shared_bytes, target="sm_80")
    if cfg.split:
        rows = b * sq * h
        isa.run_kernel(kernel.combine_ptx, cfg.combine_entry, kernel.combine_grid(rows),
                       (cfg.headdim_v, 1, 1), [o, lse, out, np.uint32(splits), np.uint32(rows)],
                       target="sm_80")
    return out, q, k, v, cfg.dtype


def _check(out, q, k, v, causal, dtype):
    """O within its rounding of the float64 attention (plus the bf16/fp16 P of P V)."""
    exact = reference(q, k, v, causal)
    err = np.abs(out.astype(np.float64) - exact)
    assert np.all(err <= 2 * UNIT[dtype] * (np.abs(exact) + np.abs(exact).max()))


@pytest.mark.parametrize("name", VARIANTS)
def test_generated_kernel_matches_numpy_on_sm80(name):
    """Every variant runs on sm_80 and its O equals numpy's attention within rounding."""
    kwargs, *sizes = VARIANTS[name]
    out, q, k, v, dtype = _run(kwargs, *sizes)
    _check(out, q, k, v, kwargs.get("causal", False), dtype)


def test_instructions_are_the_ampere_ones():
    """cp.async, ldmatrix (.trans for V), mma.sync m16n8k16, ex2.approx and nothing of Hopper;
    the split kernel's combine too (.target sm_80)."""
    kernel = attention_sm80_kernel(split=True, m_tile=64, kv_block=128)
    ptx = attention_sm80_kernel(warps=8, causal=True).ptx
    assert ".target sm_80" in ptx
    for needed in ("cp.async.cg.shared.global", "cp.async.wait_group 0",
                   "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
                   "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
                   "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "ex2.approx.ftz.f32",
                   "shfl.sync.bfly.b32"):
        assert needed in ptx
    for text in (ptx, kernel.ptx, kernel.combine_ptx):
        for hopper in ("wgmma", "mbarrier", "cp.async.bulk", "setmaxnreg", "elect"):
            assert hopper not in text
    verify_target(isa.compile_kernel(ptx, attention_sm80_kernel(warps=8, causal=True).entry),
                  "sm_80")
    verify_target(isa.compile_kernel(kernel.combine_ptx, kernel.config.combine_entry), "sm_80")


@pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas is not on PATH")
@pytest.mark.parametrize("key", sorted(PTXAS_REGISTERS))
def test_ptxas_sm80_assembles_without_spills_at_the_listed_registers(key, tmp_path):
    """ptxas -arch=sm_80 -v: no spill stores or loads in any causal/split variant, and the
    most registers among them is what PTXAS_REGISTERS gives the launch."""
    d, dv, m_tile, kv_block, warps = key
    used = []
    for causal in (False, True):
        for split in (False, True):
            kernel = attention_sm80_kernel(d, dv, m_tile, kv_block, warps, "bf16", causal, split)
            path = tmp_path / f"{kernel.entry}.ptx"
            path.write_text(kernel.ptx)
            out = subprocess.run(["ptxas", "-arch=sm_80", "-v", str(path), "-o", "/dev/null"],
                                 capture_output=True, text=True, check=True, timeout=300).stderr
            assert "0 bytes spill stores, 0 bytes spill loads" in out
            used.append(int(re.search(r"Used (\d+) registers", out).group(1)))
    assert max(used) == PTXAS_REGISTERS[key] == kernel.registers


@pytest.mark.parametrize("kwargs, accepted", [
    (dict(dtype="fp8"), "bf16, fp16"), (dict(headdim=96), "a multiple of 64 up to 256"),
    (dict(warps=2), "4 or 8"), (dict(m_tile=64, warps=8), "at least 16 rows per warp"),
    (dict(warps=8, kv_block=48), "a multiple of 32")])
def test_bad_arguments_are_refused(kwargs, accepted):
    """A choice the template does not have names what it has."""
    with pytest.raises(InputError, match=accepted):
        attention_sm80_kernel(**kwargs)


def test_attention_op_on_a100_runs_the_ampere_template_and_computes_o():
    """On a100_sxm the attention op launches the sm_80 template (64 rows in 4 warps), and
    the simulated launch writes numpy's attention (causal, GQA, odd sizes)."""
    a100 = models.load_preset("a100_sxm")
    plan = build_op("attention", a100, batch=1, heads=4, kv_heads=2, seqlen=77, seqlen_k=200,
                    causal=True)
    launch = plan.launches[0]
    assert launch.detail["template"] == "attention_sm80_cpasync_mma"
    assert launch.entry == "attn_fwd_sm80_bf16_d128v128_m64n64_w4_causal"
    assert launch.regs_per_thread == PTXAS_REGISTERS[(128, 128, 64, 64, 4)]
    res = simulate_op(plan, a100, "full")
    assert res["kernel"]["ptx_target"] == "sm_80"
    q, k, v, o = launch.args[:4]
    _check(o, q, k, v, True, "bf16")


def test_decode_on_a100_swaps_the_group_in_as_queries_and_combines_splits():
    """One query of GQA heads: the kernel runs over the group's heads as queries of the kv
    heads, split over the keys, and the combine kernel's O is numpy's attention."""
    a100 = models.load_preset("a100_sxm")
    plan = build_op("attention", a100, batch=2, heads=8, kv_heads=2, seqlen=1, seqlen_k=300)
    fwd, combine = plan.launches
    assert fwd.detail["tiles"]["swap"] and fwd.detail["tiles"]["splits"] > 1
    assert fwd.grid[:2] == (1, 2) and combine.entry == "attn_combine_sm80_bf16_v128"
    simulate_op(plan, a100, "full")
    q, k, v = fwd.args[:3]
    _check(combine.args[2], q, k, v, False, "bf16")


@pytest.mark.parametrize("sizes, what", [
    ({"kv_page": 64}, "--kv-page 64"), ({"headdim": 64, "headdim_v": 128}, "--headdim 64 "
                                        "--headdim-v 128 has no kernel template there")])
def test_what_the_sm80_template_lacks_is_refused_naming_it(sizes, what):
    """A paged KV cache or a head-dim pair ptxas was not asked about: an InputError naming
    the op and the target."""
    with pytest.raises(InputError, match=rf"op attention on ISA target sm_80: {what}"):
        build_op("attention", models.load_preset("a100_sxm"),
                 **{"batch": 1, "heads": 2, "seqlen": 1, "seqlen_k": 256, **sizes})
