"""`--kernel vllm` of the rmsnorm, swiglu and rope ops: the fp16 layer kernels written the way
vLLM's were in 2024 (`workloads/kernels/vllm_layer_ops.cu`), the kernels behind Vidur's
profile of LLaMA-2-7B (`workloads.calibration.vidur_accuracy`). A CTA per token, one 2-byte
element per thread access, rows read twice by the RMSNorm; our default kernels
(`--kernel vector`) move 16 bytes per access instead.

* rmsnorm  `rms_norm_f16` [rows, cols], weight [cols], eps 1e-6
* swiglu   `silu_and_mul_f16` [rows, 2 cols] gate | up -> [rows, cols] (forward only)
* rope     `rotary_neox_f16`: the row's cols / rot_dim heads of rot_dim columns rotated in
           place (GPT-NeoX halves), fp16 cos | sin cache [seqlen, rot_dim], int32 positions
           r % seqlen (real data even in timing mode: they pick the cache rows)

FLOPs and bytes are those of the default kernels' plans (the same tensors move).
Units: elements, bytes, FLOP.
"""

from __future__ import annotations

import numpy as np

import isa
from isa.errors import InputError
from workloads.kernels import cases_vllm as geo
from workloads.kernels.case import load_ptx
from workloads.layers import ops as counts
from workloads.ops.registry import Flag, Launch, OpPlan

KERNELS = ("vector", "vllm")
KERNEL_FLAG = Flag("--kernel", "vector (16-byte bf16 kernels, default) or vllm (vLLM-style "
                   "fp16, a CTA per token, scalar accesses)", kind="str", default="vector",
                   choices=KERNELS)
FILE = "vllm_layer_ops.cu"
F16 = np.float16
F16_BYTES = 2
RMS_EPS = np.float32(1e-6)


def check_kernel(kernel: str, backward: bool = False) -> str:
    if kernel not in KERNELS:
        raise InputError(f"--kernel {kernel!r}: accepted {', '.join(KERNELS)}")
    if kernel == "vllm" and backward:
        raise InputError("--kernel vllm: accepted for the forward kernels only (no --backward)")
    return kernel


def _launch(name, entry, launch, args, shape_only, target: str) -> Launch:
    grid, block = launch
    return Launch(name, load_ptx(FILE, target), entry, grid, block, args, 0,
                  timing_only=shape_only)


def _plan(kind, sizes, launch, flops, nbytes) -> OpPlan:
    return OpPlan(kind, {**sizes, "kernel": "vllm"}, (launch,), float(flops), float(nbytes),
                  "vector_fp32_tflops")


def vllm_rmsnorm(rows: int, cols: int, t, target: str) -> OpPlan:
    """`t`: the op's tensor maker (`workloads.ops.elementwise.Tensors`); `target`: the chip's
    ISA target, whose build of the kernels' PTX runs."""
    args = [t((rows, cols), F16, zeros=True), t((rows, cols), F16), t((cols,), F16), RMS_EPS,
            rows, cols]
    launch = _launch("rmsnorm", "rms_norm_f16", geo.vllm_launch("rmsnorm", rows, cols), args,
                     t.shape_only, target)
    return _plan("rmsnorm", {"rows": rows, "cols": cols}, launch, 4 * rows * cols,
                 F16_BYTES * (2 * rows * cols + cols))


def vllm_swiglu(rows: int, cols: int, t, target: str) -> OpPlan:
    args = [t((rows, cols), F16, zeros=True), t((rows, 2 * cols), F16), cols]
    launch = _launch("swiglu", "silu_and_mul_f16", geo.vllm_launch("swiglu", rows, cols), args,
                     t.shape_only, target)
    return _plan("swiglu", {"rows": rows, "cols": cols, "backward": False}, launch,
                 counts.SWIGLU_FLOPS_PER_OUT * rows * cols, F16_BYTES * 3 * rows * cols)


def vllm_rope(rows: int, cols: int, rot_dim: int, seqlen: int, t,
              target: str) -> OpPlan:
    if rot_dim % 2 or cols % rot_dim:
        raise InputError(f"--cols {cols} --rot-dim {rot_dim}: accepted an even --rot-dim "
                         "dividing --cols (whole heads)")
    heads = cols // rot_dim
    positions = (np.arange(rows) % seqlen).astype(np.int32)
    cache = (isa.ShapeOnly((seqlen, rot_dim), F16) if t.shape_only
             else geo.rope_cache(seqlen, rot_dim))
    args = [positions, t((rows, cols), F16), t((1, rot_dim), F16), cache, rot_dim, cols, 0,
            heads, 0, rot_dim]
    launch = _launch("rope", "rotary_neox_f16",
                     geo.vllm_launch("rope", rows, heads * rot_dim // 2), args, t.shape_only,
                     target)
    return _plan("rope", {"rows": rows, "cols": cols, "rot_dim": rot_dim, "seqlen": seqlen,
                          "backward": False}, launch, counts.ROPE_FLOPS_PER_ELEM * rows * cols,
                 F16_BYTES * (2 * rows * cols + seqlen * rot_dim) + 4 * rows)
