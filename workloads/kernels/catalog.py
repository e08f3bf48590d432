"""Catalog of the real-CUDA kernels in `workloads/kernels`: one row per kernel entry.

Each `KernelSpec` names the `.cu` file (its nvcc PTX sits beside it), the unmangled entry,
what the kernel covers, the builder that turns a seeded Generator and a problem size into
a runnable, checkable `Case`, and the problem sizes the tests use. The sizes are small
(a few thousand elements, GEMMs up to 64x64x64), odd where the kernel allows it, and the
two variants of each kernel launch with different grid or block shapes.

Usage::

    spec = KERNELS["softmax_rows"]
    case = spec.build(np.random.default_rng(0), **spec.variants[0])
    case.run()    # isa.run_kernel on the committed PTX
    case.check()  # outputs within tolerance, inputs untouched
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from . import cases_control as ctl
from . import cases_elementwise as ew
from . import cases_layer_ops as lo
from . import cases_lowprec as lp
from . import cases_matmul as mm
from . import cases_reductions as red
from . import cases_vllm as vl
from .case import Case


@dataclass(frozen=True, slots=True)
class KernelSpec:
    file: str
    entry: str
    covers: str
    build: Callable[..., Case]
    variants: tuple[dict, ...]


def _spec(file, entry, covers, build, *variants) -> KernelSpec:
    return KernelSpec(file, entry, covers, build, variants)


_SPECS = (
    _spec("saxpy.cu", "saxpy", "bounds check, fma.rn.f32", ew.saxpy,
          dict(n=1000, block=128), dict(n=77, block=32)),
    _spec("activations.cu", "gelu_tanh", "tanhf lowering: ex2/rcp.approx.ftz, copysign",
          ew.gelu_tanh, dict(n=1000, block=256), dict(n=333, block=64)),
    _spec("activations.cu", "silu", "__expf (ex2.approx.f32), div.rn.f32", ew.silu,
          dict(n=1000, block=256), dict(n=333, block=64)),
    _spec("grid_stride.cu", "scale_shift_grid_stride", "grid-stride loop (%nctaid.x)",
          ew.scale_shift_grid_stride, dict(n=3001, grid=3, block=128),
          dict(n=500, grid=1, block=96)),
    _spec("f64.cu", "daxpy", "f64 loads, fma.rn.f64", ew.daxpy,
          dict(n=1000, block=128), dict(n=77, block=64)),
    _spec("transpose.cu", "transpose_tiled", "padded 32x33 shared tile, 2-D grid",
          ew.transpose_tiled, dict(rows=45, cols=70), dict(rows=33, cols=20)),
    _spec("block_reduce.cu", "block_reduce_sum", "shared-memory tree, dynamic smem, bar.sync",
          red.block_reduce_sum, dict(n=3001, block=128), dict(n=777, block=64)),
    _spec("warp_reduce.cu", "warp_reduce_sum", "shfl.sync.down and shfl.sync.bfly",
          red.warp_reduce_sum, dict(n=3001, block=256), dict(n=500, block=96)),
    _spec("atomics.cu", "atomic_sum_f32", "atom.global.add.f32, all lanes one address",
          red.atomic_sum_f32, dict(n=1000, block=128), dict(n=77, block=64)),
    _spec("atomics.cu", "absmax_cas", "atom.global.cas.b32 retry loop",
          red.absmax_cas, dict(n=1000, block=128), dict(n=77, block=64)),
    _spec("softmax.cu", "softmax_rows", "warp per row, shfl.bfly max/sum, __expf",
          red.softmax_rows, dict(rows=13, cols=77, rows_per_block=4),
          dict(rows=5, cols=200, rows_per_block=2)),
    _spec("layernorm.cu", "layernorm_rows", "two-pass mean/var, shfl.down, rsqrt.approx",
          red.layernorm_rows, dict(rows=7, cols=333, block=128),
          dict(rows=4, cols=100, block=64)),
    _spec("rmsnorm.cu", "rmsnorm_bf16", "bf16 in/out, warp per row, shfl.bfly",
          red.rmsnorm_bf16, dict(rows=9, cols=130, rows_per_block=4),
          dict(rows=4, cols=257, rows_per_block=1)),
    _spec("rmsnorm_rows.cu", "rmsnorm_bf16_rows",
          "bf16 block per row, 16-byte loads held in registers, shfl + shared block sum",
          red.rmsnorm_bf16_rows, dict(rows=5, cols=1040, block=32),
          dict(rows=3, cols=7168, block=224)),
    _spec("scan.cu", "scan_inclusive_block", "shfl.sync.up scan, shared warp totals",
          red.scan_inclusive_block, dict(n=1000, block=128), dict(n=333, block=64)),
    _spec("histogram.cu", "histogram_shared", "atom.shared.add.u32, atom.global.add.u32, rem",
          red.histogram_shared, dict(n=3001, bins=37, grid=4, block=128),
          dict(n=500, bins=100, grid=2, block=64)),
    _spec("f64.cu", "ddot_atomic", "f64 shared tree, atom.global.add.f64",
          red.ddot_atomic, dict(n=3001, grid=3, block=128), dict(n=500, grid=1, block=256)),
    _spec("sgemm.cu", "sgemm_tiled", "16x16 shared tiles, 2-D grid and block",
          mm.sgemm_tiled, dict(m=37, n=29, k=45), dict(m=64, n=48, k=33)),
    _spec("wmma_gemm.cu", "wmma_gemm_f16", "wmma.load/mma/store m16n16k16 f16 -> f32",
          mm.wmma_gemm_f16, dict(m=48, n=32, k=32, warps=2), dict(m=32, n=48, k=64, warps=1)),
    _spec("mma_bf16.cu", "mma_bf16_gemm", "cp.async zfill + groups, ldmatrix, mma m16n8k16 bf16",
          mm.mma_bf16_gemm, dict(m=37, n=21, k=48, warps=2), dict(m=45, n=13, k=64, warps=1)),
    _spec("mma_fp8.cu", "mma_fp8_gemm", "mma m16n8k32 e4m3 -> f32, 32-bit fragment loads",
          mm.mma_fp8_gemm, dict(m=37, n=21, k=64, warps=2), dict(m=20, n=16, k=32, warps=1)),
    _spec("half2_math.cu", "half2_fma_relu_mul", "fma.rn.f16x2, max.f16x2, mul.f16x2",
          lp.half2_fma_relu_mul, dict(n_pairs=1000, block=128), dict(n_pairs=77, block=64)),
    _spec("fp8_convert.cu", "quantize_e4m3", "cvt.rn.satfinite.e4m3x2.f32, st.u8",
          lp.quantize_e4m3, dict(n=1000, block=128), dict(n=77, block=64)),
    _spec("fp8_convert.cu", "quantize_e4m3_pairs", "e4m3x2 packing order, ld.v2.f32",
          lp.quantize_e4m3_pairs, dict(n_pairs=500, block=128), dict(n_pairs=77, block=64)),
    _spec("fp8_convert.cu", "dequantize_e4m3", "cvt.rn.f16x2.e4m3x2, cvt.f32.f16, NaN codes",
          lp.dequantize_e4m3, dict(n=1000, block=128), dict(n=300, block=96)),
    _spec("collatz.cu", "collatz_steps", "data-dependent divergent while loop",
          ctl.collatz_steps, dict(n=500, block=128, max_steps=1000),
          dict(n=77, block=32, max_steps=40)),
    _spec("device_call.cu", "poly_derivative_call", "call.uni into .func, local array",
          ctl.poly_derivative_call, dict(n=1000, block=128), dict(n=77, block=64)),
    _spec("vote.cu", "ballot_popc", "vote.sync ballot/any/all, popc",
          ctl.ballot_popc, dict(n=1000, block=128), dict(n=70, block=128)),
    _spec("swiglu.cu", "swiglu_bf16", "16-byte bf16x8 vectors, __expf, 2-D grid (row, chunk)",
          lo.swiglu_bf16, dict(rows=5, cols=72, threads=32), dict(rows=3, cols=272, threads=32)),
    _spec("swiglu.cu", "swiglu_bwd_bf16", "SwiGLU gradient into the [gate | up] layout",
          lo.swiglu_bwd_bf16, dict(rows=3, cols=136, threads=64),
          dict(rows=2, cols=520, threads=32)),
    _spec("gelu_bf16.cu", "gelu_bf16", "tanh-form GELU on bf16x8 vectors", lo.gelu_bf16,
          dict(rows=5, cols=200, threads=32), dict(rows=2, cols=1024, threads=64)),
    _spec("gelu_bf16.cu", "gelu_bwd_bf16", "tanh-form GELU gradient on bf16x8 vectors",
          lo.gelu_bwd_bf16, dict(rows=4, cols=96, threads=256),
          dict(rows=3, cols=520, threads=32)),
    _spec("rope.cu", "rope_bf16", "interleaved RoPE from an f32 cos/sin table, float4 loads",
          lo.rope_bf16, dict(rows=9, heads=3, rot_dim=64, seqlen=4, threads=32),
          dict(rows=6, heads=2, rot_dim=16, seqlen=6, threads=256, sin_sign=-1.0)),
    _spec("residual_add.cu", "add_n_bf16", "n stacked bf16 inputs, f32 accumulation",
          lo.add_n_bf16, dict(rows=5, cols=72, inputs=3, threads=32),
          dict(rows=3, cols=520, inputs=9, threads=32)),
    _spec("quantize_block.cu", "quantize_e4m3_1x128",
          "1x128 strips per half-warp, 16-byte loads, shfl.bfly max, cvt e4m3x2 satfinite",
          lo.quantize_e4m3_1x128, dict(rows=5, cols=296), dict(rows=3, cols=1152)),
    _spec("quantize_block.cu", "quantize_e4m3_128x1_t",
          "128x1 column strips via shared memory, bf16x2 loads, transposed 16-byte stores",
          lo.quantize_e4m3_128x1_t, dict(rows=144, cols=40), dict(rows=128, cols=130)),
    _spec("quantize_block.cu", "quantize_e4m3_tensor",
          "per-tensor static scale from memory, rcp.rn, 16-byte loads, 8-byte stores",
          lo.quantize_e4m3_tensor, dict(n=1000, threads=64), dict(n=4104, threads=256)),
    _spec("vllm_layer_ops.cu", "rms_norm_f16",
          "vLLM-style RMSNorm: CTA per token, scalar fp16, two passes, block xor-reduce",
          vl.rms_norm_f16, dict(tokens=3, hidden=136), dict(tokens=2, hidden=1100)),
    _spec("vllm_layer_ops.cu", "silu_and_mul_f16",
          "vLLM-style SiLU x up: CTA per token, scalar fp16, expf, __ldg",
          vl.silu_and_mul_f16, dict(tokens=3, d=200), dict(tokens=2, d=1100)),
    _spec("vllm_layer_ops.cu", "rotary_neox_f16",
          "vLLM-style GPT-NeoX rotary embedding of q and k in place, fp16 cos|sin cache",
          vl.rotary_neox_f16, dict(tokens=3, heads=4, kv_heads=2, head_size=64, rot_dim=64),
          dict(tokens=2, heads=3, kv_heads=3, head_size=128, rot_dim=128)),
    _spec("moe_topk.cu", "moe_topk_sigmoid", "warp arg-max rounds over shfl.bfly, sigmoid",
          lo.moe_topk_sigmoid, dict(tokens=7, experts=256, topk=8),
          dict(tokens=5, experts=40, topk=3, rows_per_block=2)),
    _spec("norm_backward.cu", "rmsnorm_bwd_bf16", "RMSNorm input gradient, warp per row",
          lo.rmsnorm_bwd_bf16, dict(rows=9, cols=130, rows_per_block=4),
          dict(rows=4, cols=258, rows_per_block=1)),
    _spec("norm_backward.cu", "layernorm_bwd_bf16", "LayerNorm input gradient, warp per row",
          lo.layernorm_bwd_bf16, dict(rows=7, cols=258, rows_per_block=2),
          dict(rows=5, cols=100, rows_per_block=4)),
)

KERNELS: dict[str, KernelSpec] = {spec.entry: spec for spec in _SPECS}
