"""GEMM op: C[M, N] = A[M, K] · B[N, K]ᵀ through the warp-specialized Hopper template
(`workloads.kernels.templates.gemm`), with a small tile heuristic.

Template by ISA target (`workloads.kernels.templates.targets.pick_template`): the Hopper
template is `sm_90a` PTX; an sm_80 chip (a100_sxm) runs the multistage Ampere template through
`workloads.ops.gemm_sm80` (bf16/fp16, one GEMM; fp8, tf32 and grouped GEMMs are refused
there, naming the op and the target). Launches record the template in `detail["template"]`.

Tile heuristic (`choose_tiles`), the same for every shape — no per-shape factors:

* m_tile 128 with two cooperative consumer warpgroups (64 rows each); m_tile 64 with one
  consumer when M <= 64 (decode-like GEMMs waste less of the tile).
* n_tile by `rule` (the config's `kernels.gemm_tile_rule`, or the op's `--rule`; one of
  `TILE_RULES`, chosen on the calibration fit subset by `python -m
  workloads.calibration.gemm_accuracy --fit`: the 42 fit rows of the three families
  (h100_sxm, sampled) read MAPE n128 19.6 %, n256 30.8 %, waves 18.2 %, fill 17.5 %,
  last_wave 17.1 %, last_wave_pairs 15.9 % (per family bf16 7.6, fp8 25.1, fp8_block
  15.1 % against last_wave's 17.6, 19.6, 14.1 %), so "last_wave_pairs"): "n128" always
  128; "n256" 256 when N >= 256;
  "waves" the one of {128, 256} that needs the fewer tile-columns x waves of SMs (cost
  ceil(tiles / SMs) x n_tile, ties to 256, the larger tile reads less per FLOP);
  "fill" also picks m_tile (and the consumers) among `FILL_SHAPES` by a per-tile roofline
  (`TileRates` of the preset): waves x max(tensor cycles, operand bytes / the SM's share of
  the L2) per k-tile, so a GEMM with few tiles takes smaller ones and more SMs, as cuBLAS's
  64x64 kernel at M = 128 (workloads/reference/h100/gemm_ncu_l2.csv);
  "last_wave" (`_last_wave`) keeps the m_tile and picks the n_tile (16 to 256) with the
  fewest waves, then the fullest last wave, DeepGEMM's criteria: narrow tiles at small M
  (M = 16, N = 4096: 64x32 tiles on 128 SMs). On the fit rows it differs from "waves" on the
  18 with M <= 128 (per family last_wave / waves: bf16 17.6 / 16.6 %, fp8 19.6 / 19.5 %,
  fp8_block 14.1 / 18.5 %): M <= 16 rows closer (fp8_block 16x4096x8192 +38.7 -> +1.5 %),
  M = 128 rows further (bf16 128x8192x4096 +5.8 -> +18.9 %: 128x32 tiles re-read A from the
  L2 in every CTA, where cuBLAS's clusters multicast it). Every rule keeps the tiles whose
  accumulators fit the consumers' registers (`templates.gemm.fits_registers`); with
  DeepSeek scaling (two sets of accumulators) that is n_tile <= 128, as DeepGEMM's own list
  (which stops at 160): on an H100 the 256-column DeepSeek kernel spilled (416 B per
  thread) and ran 4096x1536x7168 in 223.6 us against 78.6 simulated
  (`workloads/reference/h100/template_ops.csv`).
  "last_wave_pairs": last_wave's tiles run persistent in 2-CTA thread-block clusters
  (`templates.gemm` `multicast`) that multicast the operand more tiles share: A when the
  tile grid has at least as many n-blocks as m-blocks (or n_tile is no multiple of 16),
  else B, as cuBLAS's and DeepGEMM's Hopper kernels run clusters of 2; grouped GEMMs keep
  plain CTAs (the grouped template has no cluster variant).
* k_tile = one 128-byte swizzle row (64 bf16/fp16, 128 fp8, 32 tf32 elements).
* stages: as many as fit in 227 KiB of shared memory beside the epilogue's C staging buffer
  (two 32-column sub-tiles, CUTLASS's; with DeepSeek scaling the whole tile, DeepGEMM's),
  at most `MAX_STAGES`.
* epilogue (`epilogue`, default the config's `kernels.gemm_epilogue`, "tma"): C staged in
  shared memory and written with TMA stores, as CUTLASS 3's sm90 kernels and DeepGEMM do;
  "registers" stores the accumulator fragments with 4-byte `st.global` (the program our H100
  run measured, `workloads/reference/h100/template_ops.csv`). Grouped GEMMs and a C whose
  rows are no 16-byte multiple take "registers" (`templates.gemm`). Recorded in
  `detail["epilogue"]`.
* L2 cache policy of the operand TMA loads (`l2_policy`, `--l2-policy`, default the
  config's `kernels.gemm_l2_policy`, "normal": no hint, as DeepGEMM's EVICT_NORMAL loads):
  "stream_weights" puts B (the weights) under an evict_first and A (the activations) under
  an evict_last policy (`templates.gemm`), grouped and DeepSeek-scaled GEMMs too. Recorded
  in `detail["l2_policy"]`; the kernel name ends in `_l2sw` under "stream_weights". The
  sm_80 template issues no hint (the option is not read there).
* accumulators within the consumers' registers (above: `fits_registers`; an n_tile that
  does not fit falls back to 128).
* registers: the launch count is what one CTA per SM leaves (registers per SM / threads,
  down to a multiple of 8, at most 255), as CUTLASS's launch bounds give; `setmaxnreg`
  then moves them from the producer to the consumers.
* persistent when the output has more tiles than the compute SMs (`sm.count -
  sm.comm_count`), so the stage ring keeps running across tiles.

Grouped GEMM (MoE): `groups` > 1 with `layout` "contiguous" | "masked" and `ragged`
"m" | "k" (DeepGEMM's layouts, `templates.gemm_groups`); `m` is then the rows per group
(masked: the max rows per group), `m_total` / `valid_m` / `k_total` the totals split over
the groups. FLOPs 2·ΣM_g·N·K_g (= 2·G·M·N·K for equal groups); the tile heuristic counts
the grouped tiles. `dtype="e4m3"` is fp8; `out_dtype` "bf16" | "f32" (default bf16, f32
for tf32).

Sampled fidelity: the plan carries the reduced launches of `workloads.ops.gemm_sampling`
(1 and 2 rounds of tiles, two K depths, bilinear extrapolation); `simulate_op` times those
instead of the whole persistent launch.

Arguments: below `FUNCTIONAL_ELEMENTS` elements of A, B and C together the GEMM runs with
real random data (functional + timing); above, in timing mode with `isa.ShapeOnly`
tensors (tensor-core data skipped; control flow, addresses and traffic still execute).
FP8 GEMMs write bf16 C (as TensorRT-LLM's); `scaling="deepseek"` adds DeepSeek-V3's
1x128 / 128x128 block scales (f32) as inputs.
Units: elements, bytes, FLOP.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import ml_dtypes
import numpy as np

import isa
import models
from isa.errors import InputError
from isa.tensor_map import make_tensor_map
from simulator.framework.policy_spec import (
    GEMM_EPILOGUES,
    GEMM_L2_POLICIES,
    GEMM_TILE_RULES,
    KernelsSpec,
)
from simulator.runner.work_synthesis import CtaWork
from workloads.codesign.codesign_ops import gemm_hook
from workloads.kernels.templates.gemm import (
    ELEM,
    MAX_SHARED,
    OUT_BYTES,
    c_map,
    c_staging_bytes,
    default_c_buffers,
    fits_registers,
    fits_scale_blocks,
    gemm_kernel,
    pairs,
    scale_bytes,
    sfa_map,
    sfa_rows,
    tma_store_fits,
)
from workloads.kernels.templates.gemm_groups import LAYOUTS, GroupedShape, grouped_shape
from workloads.kernels.templates.targets import pick_template
from workloads.ops import gemm_sm80
from workloads.ops.gemm_sampling import mean_k_tiles, plain_footprint, reduced_k, sample_points
from workloads.ops.registry import (
    HOST_BYTES_PER_CTA,
    Flag,
    Launch,
    OpPlan,
    check_op_size,
    positive,
    register,
)

DTYPES = tuple(ELEM)                       # bf16, fp16, fp8, tf32
TILE_RULES = GEMM_TILE_RULES               # the values of the config's kernels.gemm_tile_rule
MAX_STAGES = 8
FUNCTIONAL_ELEMENTS = 1 << 20
NUMPY = {"bf16": ml_dtypes.bfloat16, "fp16": np.float16, "fp8": ml_dtypes.float8_e4m3fn,
         "tf32": np.float32}
NUMPY_OUT = {"bf16": ml_dtypes.bfloat16, "f32": np.float32}
SCALINGS = ("none", "deepseek")
DTYPE_ALIASES = {"e4m3": "fp8"}           # workload graphs name FP8 GEMMs by the format
TILE_HOST_BYTES = 320
"""Host bytes per output tile of a persistent launch's work tables (`cta_work`): tracemalloc
peaks of building one measured 124 (plain) and 276 (grouped), rounded up."""
SCHEDULE_ROW_HOST_BYTES = 512
"""Host bytes per row of a grouped GEMM's tile schedule while it is built (a Python list of
8 ints per row, then an int32 array)."""


def compute_sms(config) -> int:
    return int(config.sm.count - config.sm.comm_count)


@dataclass(frozen=True)
class TileRates:
    """What rule "fill" weighs a tile with: tensor FMAs per SM cycle for the dtype, bytes per
    SM cycle the L2 returns to all SMs together (the slices' sum, or the crossbar's read
    return `noc.read_return_gbps` where that is less), bytes per cycle of one SM's port."""
    fma_per_clk: float
    l2_bytes_per_clk: float
    port_bytes_per_clk: float


def tile_rates(config, dtype: str) -> TileRates:
    """`TileRates` of a preset (`dtype` a `DTYPES` name)."""
    precision = {"fp8": "fp8", "tf32": "tf32", "fp16": "fp16"}.get(dtype, "bf16")
    l2 = float(config.l2.slices * config.l2.slice_bandwidth_bytes_per_clk)
    if config.noc.read_return_gbps > 0:
        l2 = min(l2, config.noc.read_return_gbps / config.chip.clock_ghz)
    return TileRates(float(config.units.tensor.fma_per_clk_per_sm(precision)), l2,
                     float(config.noc.port_bandwidth_bytes_per_clk))


FILL_SHAPES = ((128, 256, 2), (128, 128, 2), (64, 128, 1), (64, 64, 1))
"""(m_tile, n_tile, consumers) rule "fill" weighs for M > 64, largest first; for M <= 64 the
64-row ones with n_tile 256, 128, 64."""


def _fill(m: int, n: int, dtype: str, sm_count: int, blocks, rates: TileRates):
    """Rule "fill": the tile shape with the least waves x per-k-tile time, the time of a
    k-tile being the larger of its tensor cycles and its operand bytes over the SM's share
    of the L2 (all slices over the SMs busy, at most one crossbar port)."""
    shapes = FILL_SHAPES if m > 64 else tuple((64, nt, 1) for nt in (256, 128, 64))
    k_tile = 128 // ELEM[dtype]
    best, best_cost = None, None
    for m_tile, n_tile, consumers in shapes:
        if n_tile > max(n, 8):
            continue
        tiles = blocks(m_tile) * math.ceil(n / n_tile)
        busy = min(tiles, sm_count)
        share = min(rates.port_bytes_per_clk, rates.l2_bytes_per_clk / busy)
        per_k = max(m_tile * n_tile * k_tile / rates.fma_per_clk,
                    (m_tile + n_tile) * 128 / share)
        cost = math.ceil(tiles / sm_count) * per_k
        if best_cost is None or cost < best_cost * (1 - 1e-9):
            best, best_cost = (m_tile, n_tile, consumers), cost
    return best


def _fp8_scaling(scaling: str) -> str | None:
    """The template's `fp8_scaling` for the op's `scaling` ("none" -> None)."""
    return None if scaling == "none" else scaling


def _last_wave(m_tile: int, consumers: int, n: int, sm_count: int, blocks,
               scaling: str) -> int:
    """Rule "last_wave": the n_tile for `m_tile` by the criteria of DeepGEMM's
    `get_best_configs` (recalled, not in the reference): the fewest waves of tiles over the
    SMs, then the fullest last wave, then the narrower tile; n_tile from 16 to 256 in steps
    of 8 (wgmma N; DeepGEMM's own list stops at 160), with DeepSeek scaling only the
    tiles that `fits_scale_blocks`, and no wider than N rounded up to 8 (N <= 8: one
    8-column tile)."""
    widest = 8 * math.ceil(n / 8)
    if widest < 16:
        return widest

    def key(n_tile: int) -> tuple[int, int, int]:
        tiles = blocks(m_tile) * math.ceil(n / n_tile)
        waves = math.ceil(tiles / sm_count)
        return waves, -(tiles - (waves - 1) * sm_count), n_tile

    m_sub = m_tile // consumers // 64
    return min((nt for nt in range(16, min(widest, 256) + 1, 8)
                if (scaling != "deepseek" or fits_scale_blocks(nt))
                and fits_registers(m_sub, nt, _fp8_scaling(scaling), consumers)), key=key)


def choose_tiles(m: int, n: int, k: int, dtype: str, sm_count: int,
                 rule: str | None = None, row_blocks=None,
                 rates: TileRates | None = None, scaling: str = "none",
                 k_max: int | None = None, epilogue: str = "registers",
                 out_bytes: int = 2) -> dict:
    """Template arguments for an M x N x K GEMM by the heuristic of the module docstring;
    `row_blocks(m_tile)` counts the m-blocks when they are not ceil(M / m_tile) (grouped
    GEMMs: M is then the rows per group). Rule "fill" weighs tiles with `rates` (default:
    the h100_sxm preset's, `tile_rates`). `scaling="deepseek"` leaves room in each stage
    for its scale_a chunk and for a tile's scale_b up to `k_max` (default K,
    `templates.gemm`). `rule` None: the default of `kernels.gemm_tile_rule`.
    `epilogue` "tma" leaves room for C's staging buffer (`out_bytes` per element; the
    template's default staging, `templates.gemm.default_c_buffers`)."""
    blocks = row_blocks or (lambda mt: math.ceil(m / mt))
    rule = KernelsSpec().gemm_tile_rule if rule is None else rule
    if rule not in TILE_RULES:
        raise InputError(f"--rule {rule!r}: accepted {', '.join(TILE_RULES)}")
    m_tile, consumers = (64, 1) if m <= 64 else (128, 2)
    if rule == "fill" and n >= 64:
        if rates is None:
            rates = tile_rates(models.load_preset("h100_sxm"), dtype)
        m_tile, n_tile, consumers = _fill(m, n, dtype, sm_count, blocks, rates)
    elif rule in ("last_wave", "last_wave_pairs"):
        n_tile = _last_wave(m_tile, consumers, n, sm_count, blocks, scaling)
    elif rule == "n128" or n < 256:
        n_tile = 128 if n >= 128 else max(8, 8 * math.ceil(n / 8))
    elif rule == "n256":
        n_tile = 256
    else:
        def cost(nt: int) -> int:
            tiles = blocks(m_tile) * math.ceil(n / nt)
            return math.ceil(tiles / sm_count) * nt
        n_tile = 256 if cost(256) <= cost(128) else 128
    while not fits_registers(m_tile // consumers // 64, n_tile, _fp8_scaling(scaling),
                             consumers):
        n_tile = 128 if n_tile > 128 else n_tile // 2      # DeepSeek scaling: 256 -> 128
    k_tile = 128 // ELEM[dtype]
    stage_bytes = (m_tile + n_tile) * 128
    room = MAX_SHARED
    if scaling == "deepseek":
        per_stage, per_tile = scale_bytes(m_tile, n_tile, k_tile, k_max or k)
        stage_bytes += per_stage
        room -= per_tile
    if epilogue == "tma":
        room -= c_staging_bytes(m_tile, n_tile, out_bytes,
                                default_c_buffers(_fp8_scaling(scaling)))
    stages = max(2, min(MAX_STAGES, room // (stage_bytes + 16)))
    tiles_m, tiles_n = blocks(m_tile), math.ceil(n / n_tile)
    multicast = None
    if rule == "last_wave_pairs" and sm_count >= 2:
        multicast = "a" if tiles_n >= tiles_m or n_tile % 16 else "b"
    return {"m_tile": m_tile, "n_tile": n_tile, "k_tile": k_tile, "stages": stages,
            "consumers": consumers, "persistent": tiles_m * tiles_n > sm_count or
            multicast is not None, "multicast": multicast}


def _check(m, n, k, dtype, scaling, groups, out_dtype) -> str:
    """Validate sizes and names; the canonical dtype (aliases resolved)."""
    for flag, v in (("--m", m), ("--n", n), ("--k", k), ("--groups", groups)):
        positive(flag, v)
    dtype = DTYPE_ALIASES.get(dtype, dtype)
    if dtype not in DTYPES:
        raise InputError(f"--dtype {dtype!r}: accepted {', '.join(DTYPES)} "
                         f"(or {', '.join(DTYPE_ALIASES)} for fp8)")
    if scaling not in SCALINGS:
        raise InputError(f"--scaling {scaling!r}: accepted {', '.join(SCALINGS)}")
    if scaling == "deepseek" and dtype != "fp8":
        raise InputError(f"--scaling deepseek needs --dtype fp8, got --dtype {dtype}")
    if out_dtype is not None and out_dtype not in NUMPY_OUT:
        raise InputError(f"out_dtype {out_dtype!r}: accepted {', '.join(NUMPY_OUT)}")
    if (k * ELEM[dtype]) % 16:
        raise InputError(f"--k {k}: rows of A and B must be a multiple of 16 bytes "
                         f"(K a multiple of {16 // ELEM[dtype]} for {dtype})")
    return dtype


@dataclass(frozen=True)
class Operands:
    """Shapes of one launch's operands: rows of A, B, C, the K columns, the output columns,
    and for a grouped GEMM its schedule table."""
    a_rows: int
    b_rows: int
    c_rows: int
    k: int
    n: int
    schedule: np.ndarray | None = None


def _args(kernel, ops: Operands, dtype, out_dtype, scaling, shape_only, rng,
          k_arg: int | None = None) -> list:
    """Kernel arguments: random arrays, or ShapeOnly tensors with tensor maps over them;
    `k_arg` replaces the K argument (a sampled launch cut in K, addresses unchanged)."""
    cfg = kernel.config
    ks = math.ceil(ops.k / 128)
    n_scale_rows = math.ceil(ops.n / 128) * (ops.b_rows // ops.n if cfg.grouped else 1)
    scale_shapes = ((ops.a_rows, ks), (n_scale_rows, ks)) if scaling == "deepseek" else ()
    extra = [] if ops.schedule is None else [ops.schedule]
    if not shape_only:
        a = rng.uniform(-1, 1, (ops.a_rows, ops.k)).astype(NUMPY[dtype])
        b = rng.uniform(-1, 1, (ops.b_rows, ops.k)).astype(NUMPY[dtype])
        c = np.zeros((ops.c_rows, ops.n), NUMPY_OUT[out_dtype])
        scales = [rng.uniform(0.5, 2, s).astype(np.float32) for s in scale_shapes]
        if len(scales) < 2:
            scales += [None] * (2 - len(scales))
        return kernel.args(a, b, c, *scales, schedule=ops.schedule)
    ta = make_tensor_map(0, (cfg.a_box_rows, cfg.atom), swizzle=128, arg=2,
                         shape=(ops.a_rows, ops.k), dtype=NUMPY[dtype])
    tb = make_tensor_map(0, (cfg.b_box_rows, cfg.atom), swizzle=128, arg=3,
                         shape=(ops.b_rows, ops.k), dtype=NUMPY[dtype])
    c = isa.ShapeOnly((ops.c_rows, ops.n), NUMPY_OUT[out_dtype])
    out = [ta, tb, isa.ShapeOnly((ops.a_rows, ops.k), NUMPY[dtype]),
           isa.ShapeOnly((ops.b_rows, ops.k), NUMPY[dtype]), c]
    if scale_shapes:       # the kernel reads scale_a MN-major (templates.gemm, DeepGEMM's)
        sfa = isa.ShapeOnly((ks, sfa_rows(ops.a_rows)), np.float32)
        out += [sfa, isa.ShapeOnly(scale_shapes[1], np.float32), sfa_map(cfg, sfa)]
    out += extra
    out += [ops.a_rows, ops.n, ops.k if k_arg is None else k_arg]
    out += [len(ops.schedule)] if ops.schedule is not None else []
    return out + ([c_map(cfg, c)] if cfg.epilogue == "tma" else [])


GEMM_FLAGS = (
    Flag("--m", "rows of A and C (grouped: rows per group; masked: max rows per group)",
         required=True),
    Flag("--n", "rows of B, columns of C", required=True),
    Flag("--k", "reduction length", required=True),
    Flag("--dtype", "bf16, fp16, fp8 (alias e4m3) or tf32 (default bf16)", kind="str",
         default="bf16"),
    Flag("--scaling", "fp8 scaling: none (per tensor) or deepseek (1x128/128x128 blocks)",
         kind="str", default="none"),
    Flag("--groups", "grouped GEMM (MoE): number of groups (default 1)", default=1),
    Flag("--layout", "grouped layout: contiguous (rows concatenated, padded to the tile) or "
         "masked ([groups, max_m, K] with valid rows per group)", kind="str",
         default="contiguous", choices=LAYOUTS),
    Flag("--rule", "GEMM tile rule: n128, n256, waves, fill, last_wave or last_wave_pairs "
         "(default: the config's kernels.gemm_tile_rule, chosen on the calibration fit "
         "subset)", kind="str"),
    Flag("--epilogue", "how C is written: tma (staged in shared memory, TMA stores) or "
         "registers (4-byte st.global of the fragments); default: the config's "
         "kernels.gemm_epilogue", kind="str", choices=GEMM_EPILOGUES),
    Flag("--l2-policy", "L2 cache policy of the A/B TMA loads: normal (no hint) or "
         "stream_weights (B evict_first, A evict_last); default: the config's "
         "kernels.gemm_l2_policy", kind="str", choices=GEMM_L2_POLICIES),
)


def _grouped(groups, layout, ragged, m, n, k, choice, m_total, valid_m, k_total):
    return grouped_shape(groups, layout, ragged, m, n, k, choice["m_tile"], choice["k_tile"],
                         m_total=m_total, valid_m=valid_m, k_total=k_total)


@register("gemm", GEMM_FLAGS, "C[M,N] = A[M,K] B[N,K]^T (sm_90a: warp-specialized TMA+wgmma; "
          "sm_80: multistage cp.async+mma.sync)")
@gemm_hook      # co-design units when the config enables them (workloads/codesign)
def gemm_op(config, m: int, n: int, k: int, dtype: str = "bf16", scaling: str = "none",
            groups: int = 1, layout: str = "contiguous", ragged: str = "m",
            out_dtype: str | None = None, rule: str | None = None, seed: int = 0,
            shape_only: bool | None = None, m_total: int | None = None,
            valid_m: int | None = None, k_total: int | None = None,
            epilogue: str | None = None, l2_policy: str | None = None,
            **tiles) -> OpPlan:
    """The plan of one GEMM (or grouped GEMM): one template launch plus, for sampled
    fidelity, the reduced launches of `workloads.ops.gemm_sampling`; `tiles` override
    `choose_tiles` keys. Grouped sizes (`m_total`, `valid_m`, `k_total`) as in
    `templates.gemm_groups`."""
    template = pick_template("gemm", config.chip.isa_target)   # refuses other generations
    dtype = _check(m, n, k, dtype, scaling, groups, out_dtype)
    if template.target == "sm_80":
        grouped = (groups > 1 or (layout, ragged) != ("contiguous", "m")
                   or bool(m_total or valid_m or k_total))
        return gemm_sm80.plan(config, template, m, n, k, dtype, out_dtype, grouped, seed,
                              shape_only, **tiles)
    asked = {"m": m, "n": n, "k": k, "dtype": dtype, "groups": groups}
    group_rows = max(m, -(-(m_total or valid_m or 0) // groups))
    fewest_tiles = groups * math.ceil(group_rows / 128) * math.ceil(n / 256)
    check_op_size(config, "gemm", asked, {      # before any tile choice: the largest tiles
        "tile work tables (at least)": float(fewest_tiles * TILE_HOST_BYTES),
        "grouped tile schedules": float(groups * math.ceil(group_rows / 64)
                                        * SCHEDULE_ROW_HOST_BYTES if groups > 1 else 0)})
    rule = rule or config.kernels.gemm_tile_rule
    epilogue = epilogue or config.kernels.gemm_epilogue
    if epilogue not in GEMM_EPILOGUES:
        raise InputError(f"--epilogue {epilogue!r}: accepted {', '.join(GEMM_EPILOGUES)}")
    l2_policy = l2_policy or config.kernels.gemm_l2_policy
    if l2_policy not in GEMM_L2_POLICIES:
        raise InputError(f"--l2-policy {l2_policy!r}: accepted "
                         f"{', '.join(GEMM_L2_POLICIES)}")
    sms = compute_sms(config)
    rates = tile_rates(config, dtype)
    out_dtype = out_dtype or ("f32" if dtype == "tf32" else "bf16")
    shape: GroupedShape | None = None
    row_blocks = None
    k_max = max(k, k_total or 0)           # the largest K a group's tiles walk
    grouped = groups > 1 or (layout, ragged) != ("contiguous", "m") or bool(
        m_total or valid_m or k_total)
    if grouped or not tma_store_fits(n, OUT_BYTES[out_dtype]):
        epilogue = "registers"               # the template's TMA store: plain, 16-B rows
    fit = {"epilogue": epilogue, "out_bytes": OUT_BYTES[out_dtype]}
    if grouped:
        probe = {**choose_tiles(m, n, k, dtype, sms, rule, rates=rates, scaling=scaling,
                                k_max=k_max, **fit), **tiles}
        _grouped(groups, layout, ragged, m, n, k, probe, m_total, valid_m, k_total)

        def row_blocks(mt: int) -> int:
            return len(_grouped(groups, layout, ragged, m, n, k, {**probe, "m_tile": mt},
                                m_total, valid_m, k_total).schedule(probe["k_tile"]))
    choice = {**choose_tiles(m, n, k, dtype, sms, rule, row_blocks, rates, scaling,
                             k_max, **fit), **tiles}
    if row_blocks is not None and choice["multicast"]:    # grouped: no clusters (template)
        tiles_all = row_blocks(choice["m_tile"]) * math.ceil(n / choice["n_tile"])
        choice.update(multicast=None, persistent=tiles_all > sms)
    make = dict(dtype=dtype, out_dtype=out_dtype, sm_count=sms, grouped=row_blocks is not None,
                fp8_scaling=_fp8_scaling(scaling), epilogue=epilogue,
                l2_policy=l2_policy, k_max=k_max, **choice)
    kernel = gemm_kernel(**make)
    if row_blocks is not None:
        shape = _grouped(groups, layout, ragged, m, n, k, choice, m_total, valid_m, k_total)
        ops = Operands(*shape.a_shape[:1], shape.b_shape[0], shape.c_rows, shape.k_cols, n,
                       shape.schedule(choice["k_tile"]))
        flops, nbytes = shape.flops, shape.min_bytes(ELEM[dtype], OUT_BYTES[out_dtype])
        blocks = len(ops.schedule)
        k_tiles = mean_k_tiles(shape.k_sizes, choice["k_tile"])
    else:
        ops = Operands(m, n, m, k, n)
        flops = 2.0 * m * n * k
        nbytes = (m * k + n * k) * ELEM[dtype] + m * n * OUT_BYTES[out_dtype]
        blocks, k_tiles = None, math.ceil(k / choice["k_tile"])
    if scaling == "deepseek":
        nbytes += 4 * math.ceil(ops.k / 128) * (ops.a_rows + math.ceil(ops.b_rows / 128))
    if shape_only is None:
        shape_only = ops.a_rows * ops.k + ops.b_rows * ops.k + ops.c_rows * n \
            > FUNCTIONAL_ELEMENTS
    rng = np.random.default_rng(seed)
    regs = min(255, config.sm.registers_per_sm // kernel.block[0] // 8 * 8)
    detail = {"tiles": choice, "rule": rule, "template": template.name, "uses_wgmma": True,
              "epilogue": epilogue, "l2_policy": l2_policy}

    def launch(kern, cut: Operands, timing_only: bool, k_arg: int | None = None) -> Launch:
        """The launch of `kern` on operands `cut` (K argument `k_arg`, `_args`), with the
        `CtaWork` its template gives for that K and schedule."""
        args = _args(kern, cut, dtype, out_dtype, scaling, timing_only, rng, k_arg)
        k_used = cut.k if k_arg is None else k_arg
        work = (kern.cta_work(cut.a_rows, n, k_used) if blocks is None
                else kern.cta_work(cut.a_rows, n, k_used, cut.schedule, cut.b_rows))
        options = {}
        if work is not None:
            options["cta_work"] = CtaWork(*work, kern.k_loop(k_used, cut.schedule))
        return Launch("gemm", kern.ptx, kern.entry, kern.grid(ops.a_rows, n, blocks),
                      kern.block, args, kern.shared_bytes, timing_only=timing_only,
                      detail=detail, regs_per_thread=regs, options=options)

    tm, tn = kernel.tiles(ops.a_rows, n, blocks)
    operand_bytes = ((ops.a_rows + ops.b_rows) * ops.k * ELEM[dtype]
                     + ops.c_rows * n * OUT_BYTES[out_dtype])
    check_op_size(config, "gemm", asked, {
        "tile work tables": float(tm * tn * TILE_HOST_BYTES if kernel.config.persistent else 0),
        "numpy tensors and their copy": 0.0 if shape_only else 2.0 * operand_bytes,
        "per-CTA state": float(math.prod(kernel.grid(ops.a_rows, n, blocks))
                               * HOST_BYTES_PER_CTA)}, operand_bytes)
    main = launch(kernel, ops, shape_only)
    walked = 2 * pairs(kernel.config.multicast, tm, tn) if kernel.config.multicast else tm * tn
    points, note = sample_points(walked, main.grid[0] * main.grid[1], k_tiles,
                                 choice["stages"], kernel.config.persistent,
                                 None if shape is not None
                                 else plain_footprint(tm, choice, ELEM[dtype], config, tn,
                                                      OUT_BYTES[out_dtype]))
    if points and l2_policy != "normal":
        note += (f"; L2 policy {l2_policy}: the reduced launches miss how the whole launch's "
                 "evict-first B lines lose their reuse between a round's m-blocks (a 4096x7168"
                 "x6144 fp8 GEMM: sampled -26 % HBM bytes, full +37 %; docs/communication.md"
                 "), so time this policy at full fidelity")
    samples, shares = [], []
    for p in points:
        shares.append((p.tile_limit or walked) * (p.k_tiles or k_tiles) / (walked * k_tiles))
        kern = gemm_kernel(**{**make, "tile_limit": p.tile_limit}) if p.tile_limit else kernel
        cut = ops
        if p.k_tiles and ops.schedule is not None:
            table = ops.schedule.copy()
            table[:, 5] = np.minimum(table[:, 5], p.k_tiles)
            cut = Operands(ops.a_rows, ops.b_rows, ops.c_rows, ops.k, n, table)
        k_arg = reduced_k(ops.k, choice["k_tile"], p.k_tiles) if ops.schedule is None else None
        samples.append((p.weight, launch(kern, cut, True, k_arg)))
    sizes = {"m": m, "n": n, "k": k, "dtype": dtype, "scaling": scaling}
    if shape is not None:
        rows_key = "valid_m" if layout == "masked" else "m_total"
        sizes.update({"groups": groups, "layout": layout, "ragged": ragged,
                      rows_key: sum(shape.m_sizes),
                      "k_total": shape.k_cols if ragged == "k" else k})
    return OpPlan("gemm", sizes, (main,), flops, float(nbytes), f"tensor_{dtype}_tflops",
                  samples=tuple(samples), sample_note=note,
                  sample_work_shares=tuple(shares),
                  sample_byte_weights=tuple(p.byte_weight for p in points
                                            if p.byte_weight is not None))
