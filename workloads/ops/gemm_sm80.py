"""The GEMM op on an sm_80 chip (`chip.isa_target` sm_80, a100_sxm): the multistage Ampere
template (`workloads.kernels.templates.gemm_sm80`), with cuBLAS's tile choice.

Tile choice: CTA tiles 128 x 128, 64 rows (columns) where M (N) is at most 64, as the smaller
kernels cuBLAS picks for skinny GEMMs; the K depth and stages by the config's
`kernels.gemm_sm80_k_tile` (an op's `k_tile` wins), each the pair of one cuBLAS kernel name:

* "32": 32 elements of K a stage (64 B of each operand row), 5 stages (cuBLAS's
  `ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn`): 128x128 takes 80 KiB of
  shared memory and 224 registers, so two CTAs share an A100 SM.
* "64": 64 elements (128 B a row visit, half the k-tiles), 3 stages (`..._128x128_ldg8_f2f_
  stages_64x3_tn`): 128x128 takes 96 KiB and 244 registers, one CTA an SM; 64x128 72 KiB,
  two.
* "one_wave": 64 where the output tiles are at most the compute SMs, 32 elsewhere: one CTA an
  SM then holds the whole grid, so the second CTA slot that the 32-deep ring's smaller
  footprint leaves room for has no CTA to run, and the deeper k-tile halves the k-tiles (and
  their barriers) a CTA walks. An occupancy argument, an assumption: cuBLAS's heuristics are
  not published.

Source of the two kernels: cuBLAS's sm80 bf16 kernels as profiles of PyTorch GEMMs on A100s
name them (`..._stages_32x5`, `..._stages_32x6`, `..._stages_64x3`, `..._stages_64x4`; recalled,
not in the reference folder); which one cuBLAS picks for which shape is not known. The rule is
chosen by the declared rule, the lower MAPE over the LLMCompass A100 GEMM FIT rows
(`workloads.calibration.llmcompass_a100_accuracy`, even file positions), before the held-back
rows are read. The stages shrink to what `sm.max_shared_memory_per_cta_bytes` holds.

The grid is one CTA per output tile (not persistent), rasterized as CUTLASS's library
generates its Ampere GEMMs (`SwizzlingFunctor.Identity8`: runs of up to 8 n-tiles per m-tile,
`swizzle_log`), which keeps a wave's operand panels in the L2 where the grid's A is larger
than it; which rasterization cuBLAS picks per shape is not known. The simulator's own
sampling (wave extrapolation, chip slices) shortens the grid.

Split-K, parallel (CUTLASS 2.x's `GemmSplitKParallel` with `ReduceSplitK`; cuBLASLt's
skinny GEMMs run a GEMM kernel and then `cublasLt::splitKreduce_kernel`, recalled from
profiles, not in the reference folder; the template's docstring): the K slices Z are
`choose_split_k`'s, an occupancy rule, not a fit: slots = the compute SMs x the CTAs of this
kernel one SM holds (`models.cta_dispatch.occupancy` at its registers and shared memory), tiles
= the output tiles; Z = min(slots // tiles, k-tiles // (4 x stages)), and K is split where Z >=
2: as many slices as one wave of the chip's CTA slots holds beside the output tiles (the
tiles alone leave at least half the slots idle), each slice at least four rings of the stage
ring long so that the prologue (stages - 1 k-tiles in flight before the first mma) stays
under a quarter of it. Then the GEMM writes f32 partial sums to a workspace [Z, M, N] and a
second launch reduces them into C. On a100_sxm (108 SMs) with the default k-tile rule: 64 x
12288 x 12288 (96 tiles of 64x128x64, 2 CTAs an SM: 216 slots) takes Z = 2; 128 x 12288 x
12288 (96 tiles of 128x128x64, one CTA an SM: 108 slots) and every other shape of the
LLMCompass rows run unsplit. `split_k=1` (a `tiles` key) turns it off. Effect with 32-element
k-tiles: 512x512x4096 (16 tiles, 6 slices) 86.97 -> 33.05 µs; 64x12288x12288 352.6 -> 325.6
µs sampled, 319.2 -> 319.6 µs full, where the HBM's row activations (64 B of each weight row a
k-tile), not the CTA count, bound it; 64-element k-tiles visit each row for 128 B (234.1 µs
sampled).

Accepted: bf16 or fp16 operands (f32 accumulation), C in bf16 or f32, K a multiple of 8.
Refused with an `InputError` naming the op, the target and what exists: fp8 (needs sm_89),
tf32, and grouped GEMMs (no sm_80 template for them yet).
Sampled fidelity cuts K as the Hopper op does (`workloads.ops.gemm_sampling`, depths only:
the grid is not persistent, so its tile rounds are the simulator's waves): two reduced
launches of 2 and 8 rings of k-tiles ((stages + 1) k-tiles each; 12 and 48 of 32 elements at
5 stages, 8 and 32 of 64 at 3), every one wave-sampled, extrapolated linearly in the
k-tiles, when K has at least 1.5 x the deeper one. A reduced
launch passes the cut K as the kernel's K, which is also its operands' row stride, so its A
and B rows lie closer together than the real operands'. Against full runs on a100_sxm
(32-element k-tiles): 1024x1024x8192 164.59 against 164.89 µs, 2048x4096x4096 287.11 against
286.19 µs. HBM bytes
extrapolate with the time's weights, linearly in K, so they read low where the whole
operands outgrow the L2 and the reduced ones do not (2048x4096x4096: 70.7 against 104.8 MB).

With split-K the reduced launches cut each slice's k-tiles (K cut to Z x the depth) and the
reduction runs as it is.

Left out: serial split-K, the tile heuristics of cuBLAS beyond the two tile widths and two
K depths (its 256x128 and 128x256 tiles, 8-warp CTAs). Units:
elements, bytes, FLOP.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

import isa
from isa.errors import InputError
from models.cta_dispatch import occupancy
from simulator.framework.policy_spec import GEMM_SM80_K_TILES
from workloads.kernels.templates.gemm_sm80 import (
    DTYPES,
    MAX_STAGES,
    PTXAS_REGISTERS,
    THREADS,
    gemm_sm80_kernel,
    splitk_reduce_kernel,
    swizzle_log,
)
from workloads.ops.gemm_sampling import reduced_k, sample_points
from workloads.ops.registry import Launch, OpPlan

STAGES = {32: 5, 64: 3}        # by k-tile: cuBLAS's ..._stages_32x5 and ..._stages_64x3
SMALL = 64                     # M or N up to this: 64-row (column) tiles
FUNCTIONAL_ELEMENTS = 1 << 20  # as the Hopper GEMM op: above, timing mode (ShapeOnly)
NUMPY = {"bf16": ml_dtypes.bfloat16, "fp16": np.float16}
NUMPY_OUT = {"bf16": ml_dtypes.bfloat16, "f32": np.float32}
ELEM = 2
SWIZZLE = 8                    # CUTLASS library's default rasterization (Identity8)
OUT_BYTES = {"bf16": 2, "f32": 4}
MIN_SLICE_RINGS = 4            # a K slice runs at least this many rings of the stage ring


def choose_tiles(m: int, n: int, k: int, config, k_tile: int | None = None) -> dict:
    """m_tile, n_tile, k_tile, stages and split_k (module docstring); `k_tile` None: the
    config's `kernels.gemm_sm80_k_tile` rule."""
    m_tile = SMALL if m <= SMALL else 128
    n_tile = SMALL if n <= SMALL else 128
    if k_tile is None:
        k_tile = choose_k_tile(m, n, m_tile, n_tile, config.kernels.gemm_sm80_k_tile, config)
    if k_tile not in STAGES:
        raise InputError(f"k_tile {k_tile}: the sm_80 GEMM template takes "
                         f"{', '.join(map(str, STAGES))}")
    stage_bytes = (m_tile + n_tile) * k_tile * ELEM
    fits = config.sm.max_shared_memory_per_cta_bytes // stage_bytes
    stages = max(2, min(STAGES[k_tile], MAX_STAGES, fits))
    return {"m_tile": m_tile, "n_tile": n_tile, "k_tile": k_tile, "stages": stages,
            "split_k": choose_split_k(m, n, k, m_tile, n_tile, stages, config, k_tile)}


def choose_k_tile(m: int, n: int, m_tile: int, n_tile: int, rule: str, config) -> int:
    """The CTA tile's K depth by `rule` (`kernels.gemm_sm80_k_tile`): "32" or "64" as named;
    "one_wave" 64 where the output tiles are at most the compute SMs, else 32."""
    if rule not in GEMM_SM80_K_TILES:
        raise InputError(f"kernels.gemm_sm80_k_tile {rule!r}: accepted "
                         f"{', '.join(GEMM_SM80_K_TILES)}")
    if rule != "one_wave":
        return int(rule)
    tiles = -(-m // m_tile) * -(-n // n_tile)
    return 64 if tiles <= config.sm.count - config.sm.comm_count else 32


def choose_split_k(m: int, n: int, k: int, m_tile: int, n_tile: int, stages: int,
                   config, k_tile: int = 32) -> int:
    """K slices (module docstring): as many as one wave of the chip's CTA slots holds beside
    the output tiles, each slice at least `MIN_SLICE_RINGS` rings of k-tiles; 1 (no split)
    where that is under 2."""
    resident = occupancy(config, THREADS, PTXAS_REGISTERS[(m_tile, n_tile, k_tile)],
                         stages * (m_tile + n_tile) * k_tile * ELEM).ctas_per_sm
    slots = (config.sm.count - config.sm.comm_count) * resident
    tiles = -(-m // m_tile) * -(-n // n_tile)
    longest = -(-k // k_tile) // (MIN_SLICE_RINGS * stages)
    return max(1, min(slots // tiles, longest))


def plan(config, template, m: int, n: int, k: int, dtype: str, out_dtype: str | None,
         grouped: bool, seed: int, shape_only: bool | None, **tiles) -> OpPlan:
    """The plan of one GEMM through the sm_80 template (sizes already checked by the op)."""
    if dtype not in DTYPES or grouped:
        what = "a grouped GEMM" if grouped else f"--dtype {dtype}"
        raise InputError(f"op gemm on ISA target {config.chip.isa_target}: {what} has no "
                         f"kernel template there; {template.name} ({template.source}) takes "
                         f"one GEMM of {' or '.join(DTYPES)}; accepted: those, or a preset "
                         "whose chip.isa_target is sm_90a (ptxsim models lists them)")
    out_dtype = out_dtype or "bf16"
    choice = {**choose_tiles(m, n, k, config, tiles.get("k_tile")), **tiles}
    choice.setdefault("swizzle_log", swizzle_log(-(-n // choice["n_tile"]), SWIZZLE))
    splits = choice["split_k"]
    kernel = gemm_sm80_kernel(choice["m_tile"], choice["n_tile"], choice["stages"], dtype,
                              "f32" if splits > 1 else out_dtype, choice["swizzle_log"],
                              split_k=splits > 1, k_tile=choice["k_tile"])
    if shape_only is None:
        shape_only = m * k + n * k + m * n > FUNCTIONAL_ELEMENTS
    if shape_only:
        a = isa.ShapeOnly((m, k), NUMPY[dtype])
        b = isa.ShapeOnly((n, k), NUMPY[dtype])
        c = isa.ShapeOnly((m, n), NUMPY_OUT[out_dtype])
        workspace = isa.ShapeOnly((splits, m, n), np.float32)
    else:
        rng = np.random.default_rng(seed)
        a = rng.uniform(-1, 1, (m, k)).astype(NUMPY[dtype])
        b = rng.uniform(-1, 1, (n, k)).astype(NUMPY[dtype])
        c = np.zeros((m, n), NUMPY_OUT[out_dtype])
        workspace = np.zeros((splits, m, n), np.float32)
    detail = {"tiles": choice, "template": template.name}

    grid = kernel.grid(m, n, splits)

    def launch(k_arg: int | None, timing_only: bool) -> Launch:
        return Launch("gemm", kernel.ptx, kernel.entry, grid, kernel.block,
                      kernel.args(a, b, workspace if splits > 1 else c, k_arg),
                      kernel.shared_bytes, timing_only=timing_only, detail=detail,
                      regs_per_thread=kernel.registers)

    launches = [launch(None, shape_only)]
    if splits > 1:
        reduce = splitk_reduce_kernel(out_dtype, 4 if m * n % 4 == 0 else 1)
        launches.append(Launch("gemm-splitk-reduce", reduce.ptx, reduce.entry,
                               reduce.grid(m, n), reduce.block, reduce.args(workspace, c),
                               timing_only=shape_only, detail=detail,
                               regs_per_thread=reduce.registers))
    k_tile = choice["k_tile"]
    k_tiles = -(-k // k_tile)
    slice_k_tiles = -(-k_tiles // splits)
    ctas = grid[0] * grid[1] * splits
    points, note = sample_points(ctas, ctas, slice_k_tiles, choice["stages"], persistent=False)
    samples = tuple((p.weight, launch(reduced_k(k, k_tile * splits, p.k_tiles), True))
                    for p in points)
    shares = tuple(p.k_tiles / slice_k_tiles for p in points)
    if samples and splits > 1:                  # the reduction, as it is
        samples += ((1.0, launches[1]),)
        shares += (math.nan,)
    flops = 2.0 * m * n * k
    nbytes = (m * k + n * k) * ELEM + m * n * OUT_BYTES[out_dtype]
    return OpPlan("gemm", {"m": m, "n": n, "k": k, "dtype": dtype, "scaling": "none"},
                  tuple(launches), flops, float(nbytes),
                  f"tensor_{dtype}_tflops", samples=samples, sample_note=note,
                  sample_work_shares=shares)
