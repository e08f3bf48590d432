"""GEMM op: C[M, N] = A[M, K] · B[N, K]ᵀ through the warp-specialized Hopper template
(`workloads.kernels.templates.gemm`), with a small tile heuristic.

Tile heuristic (`choose_tiles`), the same for every shape — no per-shape factors:

* m_tile 128 with two cooperative consumer warpgroups (64 rows each); m_tile 64 with one
  consumer when M <= 64 (decode-like GEMMs waste less of the tile).
* n_tile by `rule` (one of `TILE_RULES`, to be chosen once on the calibration fit subset
  by `python -m workloads.calibration.gemm_accuracy --fit`; "waves" is provisional until
  that run is made): "n128" always 128; "n256" 256 when N >= 256;
  "waves" the one of {128, 256} that needs the fewer tile-columns x waves of SMs (cost
  ceil(tiles / SMs) x n_tile, ties to 256, the larger tile reads less per FLOP).
* k_tile = one 128-byte swizzle row (64 bf16/fp16, 128 fp8, 32 tf32 elements).
* stages: as many as fit in 227 KiB of shared memory, at most `MAX_STAGES`.
* registers: the launch count is what one CTA per SM leaves (registers per SM / threads,
  down to a multiple of 8, at most 255), as CUTLASS's launch bounds give; `setmaxnreg`
  then moves them from the producer to the consumers.
* persistent when the output has more tiles than the compute SMs (`sm.count -
  sm.comm_count`), so the stage ring keeps running across tiles.

Arguments: below `FUNCTIONAL_ELEMENTS` elements of A, B and C together the GEMM runs with
real random data (functional + timing); above, in timing mode with `isa.ShapeOnly`
tensors (tensor-core data skipped; control flow, addresses and traffic still execute).
FP8 GEMMs write bf16 C (as TensorRT-LLM's); `scaling="deepseek"` adds DeepSeek-V3's
1x128 / 128x128 block scales (f32) as inputs.
Units: elements, bytes, FLOP.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

import isa
from isa.errors import InputError
from isa.tensor_map import make_tensor_map
from workloads.kernels.templates.gemm import ELEM, MAX_SHARED, OUT_BYTES, gemm_kernel
from workloads.ops.registry import Flag, Launch, OpPlan, positive, register

DTYPES = tuple(ELEM)                       # bf16, fp16, fp8, tf32
TILE_RULES = ("n128", "n256", "waves")
DEFAULT_RULE = "waves"                     # provisional: not yet scored on the fit subset
MAX_STAGES = 8
FUNCTIONAL_ELEMENTS = 1 << 20
NUMPY = {"bf16": ml_dtypes.bfloat16, "fp16": np.float16, "fp8": ml_dtypes.float8_e4m3fn,
         "tf32": np.float32}
NUMPY_OUT = {"bf16": ml_dtypes.bfloat16, "f32": np.float32}
SCALINGS = ("none", "deepseek")


def compute_sms(config) -> int:
    return int(config.sm.count - config.sm.comm_count)


def choose_tiles(m: int, n: int, k: int, dtype: str, sm_count: int,
                 rule: str = DEFAULT_RULE) -> dict:
    """Template arguments for an M x N x K GEMM by the heuristic of the module docstring."""
    if rule not in TILE_RULES:
        raise InputError(f"--rule {rule!r}: accepted {', '.join(TILE_RULES)}")
    m_tile, consumers = (64, 1) if m <= 64 else (128, 2)
    if rule == "n128" or n < 256:
        n_tile = 128 if n >= 128 else max(8, 8 * math.ceil(n / 8))
    elif rule == "n256":
        n_tile = 256
    else:
        def cost(nt: int) -> int:
            tiles = math.ceil(m / m_tile) * math.ceil(n / nt)
            return math.ceil(tiles / sm_count) * nt
        n_tile = 256 if cost(256) <= cost(128) else 128
    k_tile = 128 // ELEM[dtype]
    stage_bytes = (m_tile + n_tile) * 128
    stages = max(2, min(MAX_STAGES, MAX_SHARED // (stage_bytes + 16)))
    tiles = math.ceil(m / m_tile) * math.ceil(n / n_tile)
    return {"m_tile": m_tile, "n_tile": n_tile, "k_tile": k_tile, "stages": stages,
            "consumers": consumers, "persistent": tiles > sm_count}


def _check(m, n, k, dtype, scaling) -> None:
    for flag, v in (("--m", m), ("--n", n), ("--k", k)):
        positive(flag, v)
    if dtype not in DTYPES:
        raise InputError(f"--dtype {dtype!r}: accepted {', '.join(DTYPES)}")
    if scaling not in SCALINGS:
        raise InputError(f"--scaling {scaling!r}: accepted {', '.join(SCALINGS)}")
    if scaling == "deepseek" and dtype != "fp8":
        raise InputError(f"--scaling deepseek needs --dtype fp8, got --dtype {dtype}")
    if (k * ELEM[dtype]) % 16:
        raise InputError(f"--k {k}: rows of A and B must be a multiple of 16 bytes "
                         f"(K a multiple of {16 // ELEM[dtype]} for {dtype})")


def _args(kernel, m, n, k, dtype, out_dtype, scaling, shape_only, rng) -> list:
    """Kernel arguments: random arrays, or ShapeOnly tensors with tensor maps over them."""
    cfg = kernel.config
    ks = math.ceil(k / 128)
    scale_shapes = (((m, ks), (math.ceil(n / 128), ks)) if scaling == "deepseek" else ())
    if not shape_only:
        a = rng.uniform(-1, 1, (m, k)).astype(NUMPY[dtype])
        b = rng.uniform(-1, 1, (n, k)).astype(NUMPY[dtype])
        c = np.zeros((m, n), NUMPY_OUT[out_dtype])
        scales = [rng.uniform(0.5, 2, s).astype(np.float32) for s in scale_shapes]
        return kernel.args(a, b, c, *scales)
    ta = make_tensor_map(0, (cfg.m_tile, cfg.atom), swizzle=128, arg=2, shape=(m, k),
                         dtype=NUMPY[dtype])
    tb = make_tensor_map(0, (cfg.n_tile, cfg.atom), swizzle=128, arg=3, shape=(n, k),
                         dtype=NUMPY[dtype])
    out = [ta, tb, isa.ShapeOnly((m, k), NUMPY[dtype]), isa.ShapeOnly((n, k), NUMPY[dtype]),
           isa.ShapeOnly((m, n), NUMPY_OUT[out_dtype])]
    out += [isa.ShapeOnly(s, np.float32) for s in scale_shapes]
    return out + [m, n, k]


GEMM_FLAGS = (
    Flag("--m", "rows of A and C", required=True),
    Flag("--n", "rows of B, columns of C", required=True),
    Flag("--k", "reduction length", required=True),
    Flag("--dtype", "bf16, fp16, fp8 or tf32 (default bf16)", kind="str", default="bf16"),
    Flag("--scaling", "fp8 scaling: none (per tensor) or deepseek (1x128/128x128 blocks)",
         kind="str", default="none"),
    Flag("--rule", "GEMM tile rule: n128, n256 or waves (default: the one chosen on the "
         "calibration fit subset)", kind="str"),
)


@register("gemm", GEMM_FLAGS, "C[M,N] = A[M,K] B[N,K]^T (warp-specialized TMA+wgmma)")
def gemm_op(config, m: int, n: int, k: int, dtype: str = "bf16", scaling: str = "none",
            rule: str = DEFAULT_RULE, seed: int = 0, shape_only: bool | None = None,
            **tiles) -> OpPlan:
    """The plan of one GEMM: one template launch; `tiles` override `choose_tiles` keys."""
    _check(m, n, k, dtype, scaling)
    sms = compute_sms(config)
    choice = {**choose_tiles(m, n, k, dtype, sms, rule), **tiles}
    out_dtype = "f32" if dtype == "tf32" else "bf16"
    kernel = gemm_kernel(dtype=dtype, out_dtype=out_dtype, sm_count=sms,
                         fp8_scaling="deepseek" if scaling == "deepseek" else None, **choice)
    if shape_only is None:
        shape_only = m * k + n * k + m * n > FUNCTIONAL_ELEMENTS
    args = _args(kernel, m, n, k, dtype, out_dtype, scaling, shape_only,
                 np.random.default_rng(seed))
    e = ELEM[dtype]
    scale_bytes = 4 * math.ceil(k / 128) * (m + math.ceil(n / 128)) if scaling == "deepseek" \
        else 0
    nbytes = (m * k + n * k) * e + m * n * OUT_BYTES[out_dtype] + scale_bytes
    launch = Launch("gemm", kernel.ptx, kernel.entry, kernel.grid(m, n), kernel.block, args,
                    kernel.shared_bytes, timing_only=shape_only,
                    detail={"tiles": choice, "rule": rule, "uses_wgmma": True},
                    regs_per_thread=min(255, config.sm.registers_per_sm
                                        // kernel.block[0] // 8 * 8))
    return OpPlan("gemm", {"m": m, "n": n, "k": k, "dtype": dtype, "scaling": scaling},
                  (launch,), 2.0 * m * n * k, float(nbytes), f"tensor_{dtype}_tflops")
