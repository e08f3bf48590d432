"""`--dtype fp16` of the softmax and layernorm ops: PyTorch's fp16 kernels
(`workloads/kernels/aten/torch_softmax.cu`, `torch_layer_norm.cu`) launched the way ATen's host
code launches them (PyTorch 2.0: aten/src/ATen/native/cuda/SoftMax.cu host_softmax,
PersistentSoftmax.cuh dispatch_softmax_forward, layer_norm_kernel.cu
LayerNormKernelImplInternal), so that a `torch.softmax` or `torch.layer_norm` of an fp16
[rows, cols] tensor is timed as PyTorch runs it.

softmax (last dim, inner size 1):
* cols <= 1024 (and cols x 2 bytes <= 4096): `softmax_warp_forward_f16_<L>`, L = ceil(log2
  cols); WARP_SIZE = min(2^L, 32) lanes, WARP_BATCH = 2 rows per warp up to 2^L = 128, else 1;
  128 threads per block as (WARP_SIZE, 128 / WARP_SIZE); blocks = ceil(rows / rows per
  block); one launch per 2^30 / cols rows (ATen's chunk loop).
* longer rows: `cunn_softmax_forward_f16`, a block per row, blockDim.x from
  SoftMax_getBlockSize with ILP 8: the power of two not below min(cols / 8, 1024) / 2, at
  least 32; blockDim.x floats of dynamic shared memory.

layernorm (eps 1e-5, fp16 gamma and beta):
* cols % 4 == 0 (the tensors are aligned here): `vectorized_layer_norm_f16`, a (32, 8) block
  per row, 8 x 3 / 2 floats of dynamic shared memory.
* other widths: `rowwise_moments_f16` (512 threads per row) then `layer_norm_forward_f16`
  (256 threads per row).
Both also write the f32 mean and rstd per row that ATen's native_layer_norm returns.

rmsnorm (bf16 x, gamma and y, `torch_rms_norm_launches`; `rmsnorm --kernel aten`): PyTorch
2.11's `vectorized_layer_norm_kernel<c10::BFloat16, float, true>`, the layer-norm kernel
built for RMS (`workloads/kernels/aten/torch_rms_norm.cu`: sum of squares, no mean, no
beta), a (32, 4) block per row (num_threads() = 128, the trace's launch) with 4 x 3 / 2
floats of dynamic shared memory; it writes the f32 rstd per row. Widths not divisible by 4
(ATen's two-kernel fallback) are refused.

Left out: ATen's shared-memory softmax variant of later releases (cunn_SoftMaxForwardSmem,
which keeps the row in shared memory between passes) and its other block-size rule, inputs
that are not contiguous or not aligned, and the f32/bf16 instantiations. FLOPs per element
are the catalog kernels' (`workloads.ops.norms.FLOPS_PER_ELEMENT`); bytes: x read once, y
written once (2 bytes each), plus gamma and beta and the 8 bytes of mean and rstd per row
for layernorm, x read once, y written once, gamma and 4 bytes of rstd per row for rmsnorm.
Units: elements, bytes, threads.
"""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np

import isa
from isa.errors import InputError
from workloads.kernels.case import load_ptx
from workloads.ops.registry import Launch

SOFTMAX_FILE = "aten/torch_softmax.cu"
LAYER_NORM_FILE = "aten/torch_layer_norm.cu"
F16 = np.float16
F16_BYTES = 2
WARP = 32
PERSISTENT_MAX_COLS = 1024
PERSISTENT_MAX_ROW_BYTES = 4096
PERSISTENT_THREADS = 128
PERSISTENT_CHUNK_ELEMENTS = 1 << 30
"""ATen launches the persistent softmax once per 2^30 / cols rows."""
SOFTMAX_ILP = 8            # sizeof(float4) / sizeof(half)
MAX_THREADS = 1024
LN_VEC = 4                 # vec_size of vectorized_layer_norm_kernel
LN_BLOCK = (WARP, 8, 1)    # (warp size, num_threads() / warp size)
LN_SHARED_BYTES = LN_BLOCK[1] * 3 // 2 * 4
MOMENTS_THREADS = 512      # kCUDABlockReduceNumThreads
FORWARD_THREADS = 256      # kCUDANumThreads
LN_EPS = np.float32(1e-5)
RMS_NORM_FILE = "aten/torch_rms_norm.cu"
RMS_BLOCK = (WARP, 4, 1)   # (warp size, 128 / warp size): the traces' launch
RMS_SHARED_BYTES = RMS_BLOCK[1] * 3 // 2 * 4
RMS_EPS = np.float32(1e-5)
"""torch.rms_norm's eps as LLaMA-3 passes it (the traces' Concrete Inputs: 1e-05)."""
BF16_BYTES = 2
_TARGET_LINE = re.compile(r"^\.target\s+(sm_\w+)", re.M)
PTXAS_REGISTERS = {
    "sm_80": {"cunn_softmax_forward_f16": 38, "softmax_warp_forward_f16_0": 17,
              "softmax_warp_forward_f16_1": 21, "softmax_warp_forward_f16_2": 21,
              "softmax_warp_forward_f16_3": 18, "softmax_warp_forward_f16_4": 19,
              "softmax_warp_forward_f16_5": 19, "softmax_warp_forward_f16_6": 24,
              "softmax_warp_forward_f16_7": 31, "softmax_warp_forward_f16_8": 32,
              "softmax_warp_forward_f16_9": 40, "softmax_warp_forward_f16_10": 56,
              "vectorized_layer_norm_f16": 32, "rowwise_moments_f16": 26,
              "layer_norm_forward_f16": 23},
    "sm_90": {"cunn_softmax_forward_f16": 39, "softmax_warp_forward_f16_0": 17,
              "softmax_warp_forward_f16_1": 21, "softmax_warp_forward_f16_2": 21,
              "softmax_warp_forward_f16_3": 20, "softmax_warp_forward_f16_4": 18,
              "softmax_warp_forward_f16_5": 18, "softmax_warp_forward_f16_6": 24,
              "softmax_warp_forward_f16_7": 32, "softmax_warp_forward_f16_8": 30,
              "softmax_warp_forward_f16_9": 32, "softmax_warp_forward_f16_10": 48,
              "vectorized_layer_norm_f16": 32, "rowwise_moments_f16": 26,
              "layer_norm_forward_f16": 27},
    "sm_90a": {"vectorized_rms_norm_bf16": 23},
}
"""Registers per thread ptxas 13.0 gives each entry (`ptxas -arch=<target> -v` on the committed
X.sm_80.ptx and X.ptx; no spills), by the PTX build's target: the launches carry them, so
CTAs per SM follow from ptxas's count and not from the simulator's estimate."""


def _registers(ptx: str, entry: str) -> int:
    """ptxas's count for `entry` in the PTX build `ptx` (keyed by its `.target`)."""
    return PTXAS_REGISTERS[_TARGET_LINE.search(ptx).group(1)][entry]


def _tensor(shape, dtype, shape_only: bool, rng, zeros: bool = False):
    if shape_only:
        return isa.ShapeOnly(tuple(shape), dtype)
    if zeros:
        return np.zeros(shape, dtype)
    return rng.standard_normal(shape).astype(dtype)


def log2_ceil(n: int) -> int:
    """The smallest L with 2^L >= n (ATen's log2_ceil)."""
    return max(0, (n - 1).bit_length())


def persistent_softmax_geometry(cols: int) -> tuple[int, int, int]:
    """(log2 elements L, WARP_SIZE, WARP_BATCH) of `softmax_warp_forward` for `cols`."""
    log2 = log2_ceil(cols)
    return log2, min(1 << log2, WARP), 2 if (1 << log2) <= 128 else 1


def softmax_block_threads(cols: int) -> int:
    """blockDim.x of `cunn_SoftMaxForward` (SoftMax_getBlockSize with ILP 8)."""
    limit = min(cols // SOFTMAX_ILP, MAX_THREADS) // 2
    threads = 1
    while threads < limit:
        threads *= 2
    return max(threads, WARP)


def uses_persistent_softmax(cols: int) -> bool:
    """ATen's rule for the warp-per-row softmax: at most 1024 columns of at most 4096 bytes."""
    return cols <= PERSISTENT_MAX_COLS and cols * F16_BYTES <= PERSISTENT_MAX_ROW_BYTES


def torch_softmax_launches(rows: int, cols: int, shape_only: bool, seed: int,
                           target: str) -> tuple[Launch, ...]:
    """The launches of an fp16 softmax of [rows, cols] (module docstring)."""
    rng = np.random.default_rng(seed)
    ptx = load_ptx(SOFTMAX_FILE, target)
    if not uses_persistent_softmax(cols):
        x = _tensor((rows, cols), F16, shape_only, rng)
        y = _tensor((rows, cols), F16, shape_only, rng, zeros=True)
        threads = softmax_block_threads(cols)
        entry = "cunn_softmax_forward_f16"
        return (Launch("softmax", ptx, entry, (rows, 1, 1), (threads, 1, 1), [y, x, cols],
                       4 * threads, timing_only=shape_only,
                       regs_per_thread=_registers(ptx, entry)),)
    log2, warp_size, warp_batch = persistent_softmax_geometry(cols)
    warps_per_block = PERSISTENT_THREADS // warp_size
    rows_per_block = warps_per_block * warp_batch
    chunk = PERSISTENT_CHUNK_ELEMENTS // cols
    entry = f"softmax_warp_forward_f16_{log2}"
    launches = []
    for start in range(0, rows, chunk):
        n = min(chunk, rows - start)
        x = _tensor((n, cols), F16, shape_only, rng)
        y = _tensor((n, cols), F16, shape_only, rng, zeros=True)
        launches.append(Launch("softmax", ptx, entry, (-(-n // rows_per_block), 1, 1),
                               (warp_size, warps_per_block, 1), [y, x, n, cols, cols], 0,
                               timing_only=shape_only, regs_per_thread=_registers(ptx, entry)))
    return tuple(launches)


def torch_layer_norm_launches(rows: int, cols: int, shape_only: bool, seed: int,
                              target: str) -> tuple[Launch, ...]:
    """The launches of an fp16 LayerNorm of [rows, cols] (module docstring)."""
    rng = np.random.default_rng(seed)
    ptx = load_ptx(LAYER_NORM_FILE, target)
    x = _tensor((rows, cols), F16, shape_only, rng)
    gamma = _tensor((cols,), F16, shape_only, rng)
    beta = _tensor((cols,), F16, shape_only, rng)
    mean = _tensor((rows,), np.float32, shape_only, rng, zeros=True)
    rstd = _tensor((rows,), np.float32, shape_only, rng, zeros=True)
    y = _tensor((rows, cols), F16, shape_only, rng, zeros=True)
    if cols % LN_VEC == 0:
        return (Launch("layernorm", ptx, "vectorized_layer_norm_f16", (rows, 1, 1), LN_BLOCK,
                       [cols, LN_EPS, x, gamma, beta, mean, rstd, y], LN_SHARED_BYTES,
                       timing_only=shape_only,
                       regs_per_thread=_registers(ptx, "vectorized_layer_norm_f16")),)
    return (Launch("layernorm", ptx, "rowwise_moments_f16", (rows, 1, 1),
                   (MOMENTS_THREADS, 1, 1), [cols, LN_EPS, x, mean, rstd], 0,
                   timing_only=shape_only,
                   regs_per_thread=_registers(ptx, "rowwise_moments_f16")),
            Launch("layernorm", ptx, "layer_norm_forward_f16", (rows, 1, 1),
                   (FORWARD_THREADS, 1, 1), [cols, x, mean, rstd, gamma, beta, y], 0,
                   timing_only=shape_only,
                   regs_per_thread=_registers(ptx, "layer_norm_forward_f16")))


def torch_rms_norm_launches(rows: int, cols: int, shape_only: bool, seed: int,
                            target: str) -> tuple[Launch, ...]:
    """The launch of a bf16 RMSNorm of [rows, cols] with a bf16 weight (module docstring)."""
    if cols % LN_VEC:
        raise InputError(f"--cols {cols}: the aten RMSNorm kernel is ATen's vectorized one, "
                         f"accepted for widths divisible by {LN_VEC}")
    rng = np.random.default_rng(seed)
    ptx = load_ptx(RMS_NORM_FILE, target)
    bf16 = ml_dtypes.bfloat16
    x = _tensor((rows, cols), bf16, shape_only, rng)
    gamma = _tensor((cols,), bf16, shape_only, rng)
    rstd = _tensor((rows,), np.float32, shape_only, rng, zeros=True)
    y = _tensor((rows, cols), bf16, shape_only, rng, zeros=True)
    entry = "vectorized_rms_norm_bf16"
    return (Launch("rmsnorm", ptx, entry, (rows, 1, 1), RMS_BLOCK,
                   [cols, RMS_EPS, x, gamma, rstd, y], RMS_SHARED_BYTES,
                   timing_only=shape_only, regs_per_thread=_registers(ptx, entry)),)


def rms_norm_bytes(rows: int, cols: int) -> int:
    return BF16_BYTES * (2 * rows * cols + cols) + 4 * rows


def softmax_bytes(rows: int, cols: int) -> int:
    return F16_BYTES * 2 * rows * cols


def layer_norm_bytes(rows: int, cols: int) -> int:
    return F16_BYTES * (2 * rows * cols + 2 * cols) + 8 * rows
