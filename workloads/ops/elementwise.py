"""Element-wise and row-wise layer ops through the catalog's bf16 CUDA kernels (nvcc PTX).

* swiglu        `swiglu_bf16` / `swiglu_bwd_bf16`: [rows, 2 cols] gate|up -> [rows, cols]
* gelu          `gelu_bf16` / `gelu_bwd_bf16` (tanh form) on [rows, cols]
* rope          `rope_bf16`: interleaved pairs, f32 cos/sin table [seqlen, rot_dim / 2]
                (grid x = row: the launch declares its table rows start over every seqlen
                CTAs in x, `simulate_kernel(cta_wrap_x=...)`, for trace synthesis)
                (backward: the same kernel rotating back, sin_sign = -1)
* residual-add  `add_n_bf16`: sum of `inputs` stacked [rows, cols] tensors (residual add,
                MoE combine sum, gradient accumulation)
* quantize      `quantize_e4m3_1x128` (+ `quantize_e4m3_128x1_t` with --transpose):
                bf16 -> e4m3 with DeepSeek-V3's 1x128 scales (and the 128x1 transposed copy);
                `quantize_e4m3_tensor` with --scaling tensor: one static per-tensor scale
* --kernel vllm (swiglu, rope forward): the fp16 CTA-per-token kernels vLLM ran in 2024
                (`workloads.ops.vllm_kernels`)
* rmsnorm-bwd, layernorm-bwd  `rmsnorm_bwd_bf16` / `layernorm_bwd_bf16`: input gradients

The vector kernels move 16 bytes (8 bf16) per thread access, a CTA per (row, chunk of up to
256 vectors): cols must be a multiple of 8. Launch geometry comes from
`workloads.kernels.cases_layer_ops`, the same the catalog tests check against numpy.

FLOPs use the per-element counts of `workloads.layers.ops` (for the roofline only); bytes
are the inputs read once and the outputs written once (the cos/sin table and norm weights
included). Below `FUNCTIONAL_ELEMENTS` the kernels run with real random data; above, in
timing mode with `isa.ShapeOnly` tensors (no branch of these kernels depends on data).
Each kernel runs from the catalog's PTX build for the chip's ISA target
(`workloads.kernels.case.load_ptx`: nvcc's sm_80 build on a100_sxm); quantize has FP8 builds
only, which an sm_80 chip refuses (`check_plan_target` names the op and the kernel).
Left out: the weight gradients of the norms (a separate column reduction), f16 variants
(the bf16 kernels stand for them: same bytes, same instruction count).
Units: elements, bytes, FLOP.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

import isa
from isa.errors import InputError
from workloads.codesign.zce_store import store_hook
from workloads.kernels import cases_layer_ops as geo
from workloads.kernels.case import load_ptx
from workloads.layers import ops as counts
from workloads.ops.registry import Flag, Launch, OpPlan, positive, register
from workloads.ops.vllm_kernels import KERNEL_FLAG, check_kernel, vllm_rope, vllm_swiglu

BF16 = ml_dtypes.bfloat16
E4M3 = ml_dtypes.float8_e4m3fn
FUNCTIONAL_ELEMENTS = 1 << 20
BF16_BYTES = 2
SCALE_BYTES = 4
QUANT_BLOCK = geo.STRIP_ELEMS
PEAK = "vector_fp32_tflops"

ROWS = Flag("--rows", "rows (tokens)", required=True)
COLS = Flag("--cols", "columns (hidden size)", required=True)
BACKWARD = Flag("--backward", "the backward (input-gradient) kernel", kind="switch")


class Tensors:
    """Random bf16/f32 arrays, or ShapeOnly tensors in timing mode."""

    def __init__(self, shape_only: bool, seed: int):
        self.shape_only = shape_only
        self.rng = np.random.default_rng(seed)

    def __call__(self, shape, dtype=BF16, zeros: bool = False):
        if self.shape_only:
            return isa.ShapeOnly(tuple(shape), dtype)
        if zeros:
            return np.zeros(shape, dtype)
        return self.rng.standard_normal(shape).astype(dtype)


def _tensors(rows: int, cols: int, seed: int, shape_only: bool | None) -> Tensors:
    positive("--rows", rows)
    positive("--cols", cols)
    if shape_only is None:
        shape_only = rows * cols > FUNCTIONAL_ELEMENTS
    return Tensors(bool(shape_only), seed)


def _multiple(flag: str, value: int, of: int, why: str) -> None:
    if value % of:
        raise InputError(f"{flag} {value}: accepted a multiple of {of} ({why})")


def _launch(config, name: str, file: str, entry: str, launch, args, t: Tensors,
            options: dict | None = None) -> Launch:
    """The launch of `entry` from `file`'s PTX build for the chip's ISA target."""
    grid, block = launch
    return Launch(name, load_ptx(file, config.chip.isa_target), entry, grid, block, args, 0,
                  timing_only=t.shape_only, options=options or {})


def _plan(kind, sizes, launches, flops, nbytes) -> OpPlan:
    return OpPlan(kind, sizes, tuple(launches), float(flops), float(nbytes), PEAK)


@register("swiglu", (ROWS, Flag("--cols", "output columns (the input holds gate|up, 2 x cols)",
                                required=True), BACKWARD, KERNEL_FLAG),
          "SwiGLU silu(gate) * up, bf16 (catalog CUDA kernel; --kernel vllm: vLLM-style fp16)")
@store_hook(out_arg=1)   # ZCE: the activation stored compressed (workloads/codesign/zce_store)
def swiglu_op(config, rows: int, cols: int, backward: bool = False, kernel: str = "vector",
              seed: int = 0, shape_only: bool | None = None) -> OpPlan:
    """SwiGLU of a bf16 [rows, 2 cols] gate|up tensor (or its gradient); with
    `kernel="vllm"` the fp16 CTA-per-token forward kernel."""
    t = _tensors(rows, cols, seed, shape_only)
    if check_kernel(kernel, backward) == "vllm":
        return vllm_swiglu(rows, cols, t, config.chip.isa_target)
    _multiple("--cols", cols, geo.VECTOR_ELEMS, "16-byte bf16 vectors")
    gu = t((rows, 2 * cols))
    launch = geo.row_vector_launch(rows, cols)
    flops = counts.SWIGLU_FLOPS_PER_OUT * rows * cols
    if backward:
        args = [gu, t((rows, cols)), t((rows, 2 * cols), zeros=True), rows, cols]
        lau = _launch(config, "swiglu_bwd", "swiglu.cu", "swiglu_bwd_bf16", launch, args, t)
        nbytes = BF16_BYTES * rows * cols * 5
        flops *= counts.BACKWARD_ELEMENTWISE_FACTOR
    else:
        args = [gu, t((rows, cols), zeros=True), rows, cols]
        lau = _launch(config, "swiglu", "swiglu.cu", "swiglu_bf16", launch, args, t)
        nbytes = BF16_BYTES * rows * cols * 3
    return _plan("swiglu", {"rows": rows, "cols": cols, "backward": backward}, [lau], flops,
                 nbytes)


@register("gelu", (ROWS, COLS, BACKWARD), "GELU (tanh form), bf16 (catalog CUDA kernel)")
@store_hook(out_arg=1)   # ZCE: the activation stored compressed (workloads/codesign/zce_store)
def gelu_op(config, rows: int, cols: int, backward: bool = False, seed: int = 0,
            shape_only: bool | None = None) -> OpPlan:
    """GELU of a bf16 [rows, cols] tensor (or its gradient)."""
    t = _tensors(rows, cols, seed, shape_only)
    _multiple("--cols", cols, geo.VECTOR_ELEMS, "16-byte bf16 vectors")
    launch = geo.row_vector_launch(rows, cols)
    flops = counts.GELU_FLOPS_PER_ELEM * rows * cols
    if backward:
        args = [t((rows, cols)), t((rows, cols)), t((rows, cols), zeros=True), rows, cols]
        lau = _launch(config, "gelu_bwd", "gelu_bf16.cu", "gelu_bwd_bf16", launch, args, t)
        nbytes, flops = BF16_BYTES * rows * cols * 3, flops * counts.BACKWARD_ELEMENTWISE_FACTOR
    else:
        args = [t((rows, cols)), t((rows, cols), zeros=True), rows, cols]
        lau = _launch(config, "gelu", "gelu_bf16.cu", "gelu_bf16", launch, args, t)
        nbytes = BF16_BYTES * rows * cols * 2
    return _plan("gelu", {"rows": rows, "cols": cols, "backward": backward}, [lau], flops,
                 nbytes)


@register("rope", (ROWS, Flag("--cols", "rotated columns per row (heads x rot-dim)",
                              required=True),
                   Flag("--rot-dim", "rotary dimension per head (default 64)", default=64),
                   Flag("--seqlen", "positions in the cos/sin table (default: rows)"),
                   BACKWARD, KERNEL_FLAG),
          "rotary position embedding, bf16 (catalog CUDA kernel; --kernel vllm: vLLM-style "
          "fp16 GPT-NeoX)")
def rope_op(config, rows: int, cols: int, rot_dim: int = 64, seqlen: int | None = None,
            backward: bool = False, kernel: str = "vector", seed: int = 0,
            shape_only: bool | None = None) -> OpPlan:
    """RoPE of a bf16 [rows, cols] tensor; row r is at position r % seqlen. With
    `kernel="vllm"` the fp16 CTA-per-token GPT-NeoX kernel, heads of --rot-dim columns."""
    t = _tensors(rows, cols, seed, shape_only)
    positive("--rot-dim", rot_dim)
    seqlen = rows if seqlen is None else positive("--seqlen", seqlen)
    if check_kernel(kernel, backward) == "vllm":
        return vllm_rope(rows, cols, rot_dim, seqlen, t, config.chip.isa_target)
    _multiple("--rot-dim", rot_dim, geo.VECTOR_ELEMS, "16-byte bf16 vectors of pairs")
    _multiple("--cols", cols, rot_dim, "whole heads of --rot-dim columns")
    table = (isa.ShapeOnly((seqlen, rot_dim // 2, 2), np.float32) if t.shape_only
             else geo.rope_table(seqlen, rot_dim))
    args = [t((rows, cols)), table, t((rows, cols), zeros=True), rows, cols, rot_dim, seqlen,
            np.float32(-1.0 if backward else 1.0)]
    # grid x is the row: the cos/sin rows start over every seqlen CTAs in x
    lau = _launch(config, "rope_bwd" if backward else "rope", "rope.cu", "rope_bf16",
                  geo.row_vector_launch(rows, cols), args, t,
                  {"cta_wrap_x": seqlen} if seqlen < rows else None)
    nbytes = BF16_BYTES * 2 * rows * cols + 4 * seqlen * rot_dim
    return _plan("rope", {"rows": rows, "cols": cols, "rot_dim": rot_dim, "seqlen": seqlen,
                          "backward": backward}, [lau],
                 counts.ROPE_FLOPS_PER_ELEM * rows * cols, nbytes)


@register("residual-add", (ROWS, COLS, Flag("--inputs", "tensors summed (default 2)",
                                            default=2)),
          "sum of n bf16 tensors (residual add, MoE combine; catalog CUDA kernel)")
def residual_add_op(config, rows: int, cols: int, inputs: int = 2, seed: int = 0,
                    shape_only: bool | None = None) -> OpPlan:
    """y = x_0 + ... + x_{inputs-1} over bf16 [rows, cols] tensors stacked in one buffer."""
    t = _tensors(rows, cols, seed, shape_only)
    positive("--inputs", inputs)
    _multiple("--cols", cols, geo.VECTOR_ELEMS, "16-byte bf16 vectors")
    args = [t((inputs, rows, cols)), inputs, rows * cols, t((rows, cols), zeros=True), rows,
            cols]
    lau = _launch(config, "residual_add", "residual_add.cu", "add_n_bf16",
                  geo.row_vector_launch(rows, cols), args, t)
    return _plan("residual-add", {"rows": rows, "cols": cols, "inputs": inputs}, [lau],
                 max(inputs - 1, 1) * rows * cols, BF16_BYTES * (inputs + 1) * rows * cols)


QUANT_SCALINGS = ("deepseek", "tensor")


@register("quantize", (ROWS, COLS, Flag("--block", "scale block (DeepSeek-V3: 128)",
                                        default=QUANT_BLOCK),
                       Flag("--transpose", "also write the 128x1-scaled transposed copy",
                            kind="switch"),
                       Flag("--scaling", "deepseek (1x128 blocks) or tensor (one static "
                            "per-tensor scale)", kind="str", default="deepseek",
                            choices=QUANT_SCALINGS)),
          "bf16 -> e4m3 with 1x128 block scales or one per-tensor scale (catalog CUDA kernels)")
def quantize_op(config, rows: int, cols: int, block: int = QUANT_BLOCK,
                transpose: bool = False, scaling: str = "deepseek", seed: int = 0,
                shape_only: bool | None = None) -> OpPlan:
    """FP8 quantization of a bf16 [rows, cols] tensor with one f32 scale per 128 strip
    (`scaling="deepseek"`) or one static f32 scale for the tensor (`"tensor"`)."""
    t = _tensors(rows, cols, seed, shape_only)
    if scaling not in QUANT_SCALINGS:
        raise InputError(f"--scaling {scaling!r}: accepted {', '.join(QUANT_SCALINGS)}")
    _multiple("--cols", cols, geo.VECTOR_ELEMS, "16-byte bf16 vectors")
    x = t((rows, cols))
    if scaling == "tensor":
        if transpose or block != QUANT_BLOCK:
            raise InputError("--transpose / --block: accepted with --scaling deepseek only "
                             "(the per-tensor kernel writes the row-major copy, one scale)")
        n = rows * cols
        if n >= 1 << 31:
            raise InputError(f"--rows {rows} --cols {cols}: accepted rows x cols < 2^31 with "
                             "--scaling tensor (the kernel's element count is an int)")
        scale = (t((1,), np.float32) if t.shape_only     # normal data: |x| < 3 in range
                 else np.full(1, 3.0 / float(E4M3(448)), np.float32))
        args = [x, t((rows, cols), E4M3, zeros=True), scale, n]
        launch = _launch(config, "quantize", "quantize_block.cu", "quantize_e4m3_tensor",
                         geo.quantize_tensor_launch(n), args, t)
        return _plan("quantize", {"rows": rows, "cols": cols, "scaling": scaling}, [launch],
                     counts.QUANTIZE_FLOPS_PER_ELEM * n, BF16_BYTES * n + n + SCALE_BYTES)
    if block != QUANT_BLOCK:
        raise InputError(f"--block {block}: accepted {QUANT_BLOCK} (the kernels' strip)")
    strips = geo.ceil_div(cols, QUANT_BLOCK)
    row_args = [x, t((rows, cols), E4M3, zeros=True), t((rows, strips), np.float32, True),
                rows, cols]
    launches = [_launch(config, "quantize", "quantize_block.cu", "quantize_e4m3_1x128",
                        geo.quantize_rows_launch(rows, cols), row_args, t)]
    out = rows * cols + SCALE_BYTES * rows * strips
    if transpose:
        _multiple("--rows", rows, 16, "16-byte transposed stores")
        _multiple("--cols", cols, 2, "column pairs of the transposed kernel")
        col_strips = geo.ceil_div(rows, QUANT_BLOCK)
        col_args = [x, t((cols, rows), E4M3, zeros=True),
                    t((cols, col_strips), np.float32, True), rows, cols]
        launches.append(_launch(config, "quantize_t", "quantize_block.cu",
                                "quantize_e4m3_128x1_t", geo.quantize_cols_launch(rows, cols),
                                col_args, t))
        out += rows * cols + SCALE_BYTES * cols * col_strips
    copies = 2 if transpose else 1
    return _plan("quantize", {"rows": rows, "cols": cols, "transpose": transpose}, launches,
                 counts.QUANTIZE_FLOPS_PER_ELEM * rows * cols * copies,
                 BF16_BYTES * rows * cols + out)


def _norm_bwd(config, kind: str, entry: str, flops_per_elem: int, rows, cols, seed, shape_only):
    t = _tensors(rows, cols, seed, shape_only)
    _multiple("--cols", cols, 2, "bf16x2 accesses")
    eps = np.float32(1e-6 if kind == "rmsnorm-bwd" else 1e-5)
    args = [t((rows, cols)), t((cols,)), t((rows, cols)), t((rows, cols), zeros=True), rows,
            cols, eps]
    lau = _launch(config, kind, "norm_backward.cu", entry, geo.rows_launch(rows), args, t)
    return _plan(kind, {"rows": rows, "cols": cols}, [lau],
                 flops_per_elem * counts.BACKWARD_ELEMENTWISE_FACTOR * rows * cols,
                 BF16_BYTES * (3 * rows * cols + cols))


@register("rmsnorm-bwd", (ROWS, COLS), "RMSNorm input gradient, bf16 (catalog CUDA kernel)")
def rmsnorm_bwd_op(config, rows: int, cols: int, seed: int = 0,
                   shape_only: bool | None = None) -> OpPlan:
    """dx of RMSNorm over bf16 [rows, cols] (x, w and dy read; dx written)."""
    return _norm_bwd(config, "rmsnorm-bwd", "rmsnorm_bwd_bf16", counts.RMSNORM_FLOPS_PER_ELEM, rows,
                     cols, seed, shape_only)


@register("layernorm-bwd", (ROWS, COLS),
          "LayerNorm input gradient, bf16 (catalog CUDA kernel)")
def layernorm_bwd_op(config, rows: int, cols: int, seed: int = 0,
                     shape_only: bool | None = None) -> OpPlan:
    """dx of LayerNorm over bf16 [rows, cols] (x, gamma and dy read; dx written)."""
    return _norm_bwd(config, "layernorm-bwd", "layernorm_bwd_bf16", counts.LAYERNORM_FLOPS_PER_ELEM,
                     rows, cols, seed, shape_only)
