"""Row-wise ops through the catalog's real CUDA kernels (nvcc PTX) at the requested shape.

* softmax   `softmax_rows` (f32 in/out): a warp per row, 4 rows per 128-thread block.
  `--dtype fp16`: PyTorch's fp16 kernels as ATen launches them (`workloads.ops.torch_norms`:
  the persistent warp softmax up to 1024 columns, a block per row with three passes above).
* rmsnorm   `rmsnorm_bf16_rows` (bf16 x, w, y) when the columns are a multiple of 8: a block
  per row as production kernels do it, 16-byte loads held in registers between the passes,
  `rmsnorm_block_threads(cols)` threads (up to 4 vectors of 8 each); other widths use
  `rmsnorm_bf16`, a warp per row, 4 rows per block. `--kernel vllm`: `rms_norm_f16`, the
  fp16 scalar kernel vLLM ran in 2024 (`workloads.ops.vllm_kernels`). `--kernel aten`:
  PyTorch 2.11's `vectorized_layer_norm_kernel<c10::BFloat16, float, true>`, what
  torch.rms_norm runs on CUDA (`workloads.ops.torch_norms`: a (32, 4) block per row, the row
  read twice in 8-byte vectors).
* layernorm `layernorm_rows` (f32 x, gamma, beta, y): a block per row, 128 threads for
  rows up to 2048 columns, 256 above (one block-stride pass per 128/256 columns).
  `--dtype fp16`: PyTorch's fp16 kernels (`workloads.ops.torch_norms`: the vectorized Welford
  kernel, a (32, 8) block per row, for widths divisible by 4; its two-kernel fallback else).

FLOPs per element, counted as the kernels' arithmetic (for the roofline only): softmax 5
(max, subtract, exp, sum, scale), rmsnorm 4 (square, add, two products), layernorm 8.
Bytes: the input read once and the output written once, plus the weight vectors; the
kernels read x more than once (softmax three times, layernorm three times), which the
simulated `hbm_bytes` shows when the rows do not stay in cache; at `--dtype fp16` 2 bytes
per element (`workloads.ops.torch_norms`). `--dtype` is in the op's sizes.
Below `FUNCTIONAL_ELEMENTS` elements the kernels run with real random data; above, in
timing mode with `isa.ShapeOnly` tensors (the data decides no branch in these kernels).
Units: elements, bytes, FLOP.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

import isa
from isa.errors import InputError
from workloads.kernels.case import load_ptx
from workloads.ops import torch_norms
from workloads.ops.elementwise import Tensors
from workloads.ops.registry import Flag, Launch, OpPlan, positive, register
from workloads.ops.vllm_kernels import KERNEL_FLAG, check_kernel, vllm_rmsnorm

FUNCTIONAL_ELEMENTS = 1 << 20
ROWS_PER_BLOCK = 4
RMSNORM_VECTOR = 8   # bf16 per 16-byte load
RMSNORM_HELD = 4     # vectors a thread keeps in registers (VECS in rmsnorm_rows.cu)
FLOPS_PER_ELEMENT = {"softmax": 5, "rmsnorm": 4, "layernorm": 8}
ROW_FLAGS = (Flag("--rows", "rows (tokens)", required=True),
             Flag("--cols", "columns (hidden size)", required=True))
DTYPES = ("f32", "fp16")
DTYPE_FLAG = Flag("--dtype", "f32 (catalog kernels, default) or fp16 (PyTorch's kernels, "
                  "as ATen launches them)", kind="str", default="f32", choices=DTYPES)


def _tensor(shape, dtype, shape_only: bool, rng):
    if shape_only:
        return isa.ShapeOnly(tuple(shape), dtype)
    return rng.standard_normal(shape).astype(dtype)


def _sizes(rows, cols, shape_only):
    positive("--rows", rows)
    positive("--cols", cols)
    if shape_only is None:
        shape_only = rows * cols > FUNCTIONAL_ELEMENTS
    return shape_only


def check_dtype(dtype: str) -> str:
    if dtype not in DTYPES:
        raise InputError(f"--dtype {dtype!r}: accepted {', '.join(DTYPES)}")
    return dtype


def _plan(config, kind, file, entry, grid, block, args, rows, cols, nbytes,
          shape_only) -> OpPlan:
    launch = Launch(kind, load_ptx(file, config.chip.isa_target), entry, grid, block, args, 0,
                    timing_only=shape_only)
    return _rows_plan(kind, rows, cols, "f32", (launch,), nbytes)


def _rows_plan(kind, rows, cols, dtype, launches, nbytes) -> OpPlan:
    return OpPlan(kind, {"rows": rows, "cols": cols, "dtype": dtype}, tuple(launches),
                  float(FLOPS_PER_ELEMENT[kind] * rows * cols), float(nbytes),
                  "vector_fp32_tflops")


@register("softmax", (*ROW_FLAGS, DTYPE_FLAG),
          "row softmax, f32 (catalog CUDA kernel; --dtype fp16: PyTorch's kernels)")
def softmax_op(config, rows: int, cols: int, dtype: str = "f32", seed: int = 0,
               shape_only: bool | None = None) -> OpPlan:
    """Row softmax of an f32 [rows, cols] tensor; with `dtype="fp16"` of an fp16 one through
    PyTorch's kernels (`workloads.ops.torch_norms`)."""
    shape_only = _sizes(rows, cols, shape_only)
    if check_dtype(dtype) == "fp16":
        launches = torch_norms.torch_softmax_launches(rows, cols, shape_only, seed,
                                                      config.chip.isa_target)
        return _rows_plan("softmax", rows, cols, dtype, launches,
                          torch_norms.softmax_bytes(rows, cols))
    rng = np.random.default_rng(seed)
    x = _tensor((rows, cols), np.float32, shape_only, rng)
    y = _tensor((rows, cols), np.float32, shape_only, rng)
    grid = (-(-rows // ROWS_PER_BLOCK), 1, 1)
    return _plan(config, "softmax", "softmax.cu", "softmax_rows", grid, (32, ROWS_PER_BLOCK, 1),
                 [x, y, rows, cols], rows, cols, 8 * rows * cols, shape_only)


RMSNORM_KERNEL_FLAG = Flag("--kernel", "vector (16-byte bf16 kernels, default), vllm "
                           "(vLLM-style fp16, a CTA per token, scalar accesses) or aten "
                           "(PyTorch's vectorized_layer_norm_kernel built for RMS, bf16)",
                           kind="str", default="vector", choices=(*KERNEL_FLAG.choices, "aten"))


@register("rmsnorm", (*ROW_FLAGS, RMSNORM_KERNEL_FLAG),
          "RMSNorm, bf16 (catalog CUDA kernel; --kernel vllm: vLLM-style fp16; --kernel aten: "
          "PyTorch's)")
def rmsnorm_op(config, rows: int, cols: int, kernel: str = "vector", seed: int = 0,
               shape_only: bool | None = None) -> OpPlan:
    """RMSNorm of a bf16 [rows, cols] tensor with a bf16 weight vector (eps 1e-6); with
    `kernel="vllm"` the fp16 CTA-per-token kernel (`workloads.ops.vllm_kernels`), with
    `kernel="aten"` PyTorch's kernel (eps 1e-5, `workloads.ops.torch_norms`)."""
    shape_only = _sizes(rows, cols, shape_only)
    if kernel == "aten":
        launches = torch_norms.torch_rms_norm_launches(rows, cols, shape_only, seed,
                                                       config.chip.isa_target)
        return OpPlan("rmsnorm", {"rows": rows, "cols": cols, "dtype": "bf16",
                                  "kernel": "aten"}, launches,
                      float(FLOPS_PER_ELEMENT["rmsnorm"] * rows * cols),
                      float(torch_norms.rms_norm_bytes(rows, cols)), "vector_fp32_tflops")
    if check_kernel(kernel) == "vllm":
        return vllm_rmsnorm(rows, cols, Tensors(shape_only, seed),
                            config.chip.isa_target)
    rng = np.random.default_rng(seed)
    bf16 = ml_dtypes.bfloat16
    x = _tensor((rows, cols), bf16, shape_only, rng)
    w = _tensor((cols,), bf16, shape_only, rng)
    y = _tensor((rows, cols), bf16, shape_only, rng)
    nbytes = 2 * (2 * rows * cols + cols)
    if cols % RMSNORM_VECTOR == 0:
        return _plan(config, "rmsnorm", "rmsnorm_rows.cu", "rmsnorm_bf16_rows", (rows, 1, 1),
                     (rmsnorm_block_threads(cols), 1, 1),
                     [x, w, y, cols // RMSNORM_VECTOR, np.float32(1e-6)], rows, cols, nbytes,
                     shape_only)
    grid = (-(-rows // ROWS_PER_BLOCK), 1, 1)
    return _plan(config, "rmsnorm", "rmsnorm.cu", "rmsnorm_bf16", grid, (32, ROWS_PER_BLOCK, 1),
                 [x, w, y, rows, cols, np.float32(1e-6)], rows, cols, nbytes, shape_only)


def rmsnorm_block_threads(cols: int) -> int:
    """Threads per row of `rmsnorm_bf16_rows`: enough for 4 held 8-element vectors each,
    whole warps, 32 to 1024 (wider rows loop over the rest)."""
    vectors = -(-cols // RMSNORM_VECTOR)
    threads = -(-vectors // RMSNORM_HELD)
    return min(1024, max(32, -(-threads // 32) * 32))


@register("layernorm", (*ROW_FLAGS, DTYPE_FLAG),
          "LayerNorm, f32 (catalog CUDA kernel; --dtype fp16: PyTorch's kernels)")
def layernorm_op(config, rows: int, cols: int, dtype: str = "f32", seed: int = 0,
                 shape_only: bool | None = None) -> OpPlan:
    """LayerNorm of an f32 [rows, cols] tensor with f32 gamma and beta (eps 1e-5); with
    `dtype="fp16"` of fp16 ones through PyTorch's kernels (`workloads.ops.torch_norms`)."""
    shape_only = _sizes(rows, cols, shape_only)
    if check_dtype(dtype) == "fp16":
        launches = torch_norms.torch_layer_norm_launches(rows, cols, shape_only, seed,
                                                         config.chip.isa_target)
        return _rows_plan("layernorm", rows, cols, dtype, launches,
                          torch_norms.layer_norm_bytes(rows, cols))
    rng = np.random.default_rng(seed)
    x = _tensor((rows, cols), np.float32, shape_only, rng)
    gamma = _tensor((cols,), np.float32, shape_only, rng)
    beta = _tensor((cols,), np.float32, shape_only, rng)
    y = _tensor((rows, cols), np.float32, shape_only, rng)
    block = 128 if cols <= 2048 else 256
    return _plan(config, "layernorm", "layernorm.cu", "layernorm_rows", (rows, 1, 1), (block, 1, 1),
                 [x, gamma, beta, y, cols, np.float32(1e-5)], rows, cols,
                 4 * (2 * rows * cols + 2 * cols), shape_only)
