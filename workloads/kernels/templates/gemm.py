"""Warp-specialized Hopper GEMM kernels, generated as PTX (sm_90a) the way CUTLASS's
`KernelTmaWarpSpecialized{,Cooperative,Persistent}` and DeepGEMM build them.

`gemm_kernel(...)` -> `GemmKernel` computes C[M, N] = A[M, K] x B[N, K]^T (both
operands K-major, as TMA + wgmma want them), f32 accumulation, C in bf16 or f32.

Kernel structure (`block` = 128 x (consumers + 1) threads):

* warpgroups 0 .. consumers-1 are consumers (`setmaxnreg.inc`), the last warpgroup is
  the producer (`setmaxnreg.dec` to 40). A whole producer warpgroup, not a single warp,
  because `setmaxnreg` is warpgroup-wide; only its warp 0, one `elect.sync` lane,
  issues work, the other producer warps exit.
* shared memory (dynamic, `shared_bytes`): a ring of `stages` buffers, each holding the
  A box (m_tile x k_tile) and the B box (n_tile x k_tile) in 128-byte-swizzled K atoms
  (64 bf16/fp16, 128 fp8 or 32 tf32 elements: one TMA box per atom and operand), then
  full[stages] and empty[stages] mbarriers.
* producer: per k-tile, wait empty[s] (from the second round on), `arrive.expect_tx`
  the stage's bytes on full[s], issue the TMA boxes (`cp.async.bulk.tensor.2d`) that
  complete_tx on full[s]. Out-of-bounds box elements read as zero, so M, N and K need
  not be tile multiples (A and B rows must be 16-byte aligned: TMA's stride rule).
* consumers: wait full[s], `wgmma.fence`, wgmma m64 x n_tile over the stage (k16 for
  bf16/fp16, k32 fp8, k8 tf32; descriptors into the swizzled atoms), commit, then, as
  CUTLASS does, `wait_group 1` (this k-tile's batch stays in flight) and arrive on
  empty[] of the previous k-tile's stage; `wait_group 0` and the last release after
  the k loop (all consumer threads arrive: empty[s] expects 128 x consumers). With 2
  consumers each warpgroup owns m_tile / 2 rows of the tile (cooperative); a
  warpgroup with 128 rows issues two m64 wgmmas per k step. Epilogue: a thread whose
  fragment lies inside C (and N even) stores each pair of neighbouring columns with one
  `cvt.rn.bf16x2.f32` + `st.global.b32` (f32: `st.global.v2.f32`); at the M and N edges
  each element goes alone (`cvt.rn.bf16`, `st.global`) predicated off outside M x N
  (`epilogue="registers"`).
* `epilogue="tma"` (plain GEMMs; CUTLASS 3's sm90 `TmaWarpSpecialized` epilogues and
  DeepGEMM store C this way): the consumers write the tile, converted, into a staging
  buffer in shared memory laid out as C's tensor map wants it (`c_atom_bytes`-wide
  column atoms [slots][m_tile rows][atom bytes], swizzled by the atom width, 32-128 B,
  so that a warp's fragment stores are free of bank conflicts), `fence.proxy.async.
  shared::cta`, a named barrier over the consumers (`bar.sync 2`), then consumer thread
  0 issues one `cp.async.bulk.tensor.2d.global.shared::cta.bulk_group` per atom (box
  atom columns x m_tile rows) and `cp.async.bulk.commit_group`; before the buffer is
  written again it waits `cp.async.bulk.wait_group.read` (then `bar.sync 2`), and before
  exit `wait_group.read 0` (the source must outlive the CTA; the writes need not: CUTLASS's
  `store_tail`, DeepGEMM's `tma_store_wait<0>`). Two ways to stage (`c_buffers`):
  0, DeepGEMM's: the whole tile (atoms of up to 128 B) in one buffer, one wait, one
  commit per tile; n > 0, CUTLASS's sub-tiles: atoms of at most 64 B (32 bf16 columns,
  CUTLASS's 128 x 32 epilogue tile of a cooperative kernel) through n one-atom slots
  reused round-robin, each atom written, fenced, stored and committed on its own, and
  `wait_group.read n - 1` before a slot is written again, so that the staging costs n
  atoms of shared memory, not the tile (a 128 x 256 bf16 tile keeps 4 stages). `gemm_kernel`
  takes 0 with DeepSeek scaling (DeepGEMM) and `C_BUFFERS` otherwise (CUTLASS's `StagesD`).
  TMA clips the box at M and N, so edge tiles need no masks;
  C's rows must be 16-byte multiples (N a multiple of 8 for bf16, 4 for f32: TMA's
  stride rule). The tensor map over C is the last kernel argument (`tmap_c`).
  Descriptors: the stage-0 pair is built once, stage s adds s * stage_bytes / 16.
* `persistent=True`: grid = min(#tiles, sm_count); producer and consumers walk tiles
  t = ctaid.x, ctaid.x + nctaid.x, ... (tile_m = t % tiles_m) keeping the stage ring
  and phases running across tiles. Otherwise grid = (tiles_m, tiles_n).
* `grouped=True`: a grouped GEMM for MoE (`templates.gemm_groups`: contiguous, masked
  and ragged-K layouts). An extra `schedule` argument (int32 [blocks, 8]) and `blocks`
  parameter; each tile reads its schedule row (A row, B row, C row, valid rows, k0,
  k-tiles, scale_b block row) with two 16-byte loads per warp, TMA reads A at that row
  and B at the group's rows, the k loop starts at k0 and the epilogue masks to the
  valid rows. The tiles of all groups are one persistent round-robin.
* `tile_limit=L` (persistent only): only the first L tiles are walked (op-level sampling,
  `workloads.ops.gemm_sampling`); the grid is min(L, tiles, sm_count) CTAs (clusters: the
  first ceil(L / 2) pairs).
* `fp8_scaling="deepseek"` (fp8 only): DeepSeek-V3's fine-grained scaling. Each
  128-K chunk (4 k32 wgmmas) accumulates into a fresh wgmma accumulator, which is then
  promoted on the CUDA cores: acc += chunk * (scale_a[row, kc] * scale_b[n // 128, kc])
  with `fma.rn.f32`. `args` takes scale_a f32 [M, ceil(K/128)] (1x128 tiles of A) and
  scale_b f32 [ceil(N/128), ceil(K/128)] (128x128 blocks of B). As DeepGEMM, the kernel
  reads scale_a MN-major (a copy [ceil(K/128), M rounded up to 4], TMA's 16-byte stride
  rule): the producer's TMA brings the m_tile scales of a stage's chunks with the stage
  (a third tensor map, `tmap_sfa`, box m_tile x chunks; complete_tx on the same full[s]),
  into a region after the stage ring, and the consumers read them with `ld.shared`.
  scale_b, as DeepGEMM's, is staged in shared memory per tile: the consumer threads
  copy the tile's [n_blocks][chunks] scales (`ld.global`, `st.shared`) between two
  named barriers (`bar.sync 1`, consumers only), into a region sized for `k_max`
  (`sfb_chunks` = ceil(k_max / k_tile) x k_tile / 128; `args` refuses a larger K).

* `multicast="a"` / `"b"` (persistent, not grouped): thread-block clusters of 2 CTAs
  (`.reqnctapercluster 2, 1, 1`) walk pairs of tiles that share an A panel (neighbours
  in N) or a B panel (neighbours in M), pair p = clusterid, + nclusterid, ... Each CTA's
  producer loads its half of the shared box (the tensor map's box is half the tile) with
  `.multicast::cluster` into both CTAs (ctaMask 0b11) and its own other operand; full[s]
  expects the whole stage in each CTA as before. A stage's shared half may only be
  overwritten once both CTAs' consumers are done with it, so empty[s] counts both CTAs'
  consumer threads, and each consumer also arrives on the partner's empty[s] through
  `mapa` (CUTLASS's multicast pipeline). A cluster barrier after the mbarrier inits and
  one before exit keep remote arrivals and boxes within both CTAs' lifetimes.

* `l2_policy="stream_weights"` (every variant): the producer's elected lane builds two L2
  cache policies once, `createpolicy.fractional.L2::evict_first.b64 %polb, 1.0` for B (the
  weights, read once per m-block) and `...L2::evict_last.b64 %pola, 1.0` for A (the
  activations, read again by every n-block's tile), and every A and B TMA load (and, with
  DeepSeek scaling, the scale_a chunks, A's side) carries `.L2::cache_hint` with its
  policy as the last operand (PTX ISA order: `...complete_tx::bytes{.multicast::cluster}
  .L2::cache_hint [dst], [map, {c0, c1}], [mbar]{, ctaMask}, policy`), as CUTLASS's and
  DeepGEMM's TMA copies take a cache-hint argument. "normal" (the default) issues no hint,
  which is how DeepGEMM's EVICT_NORMAL loads leave a GEMM's own lines (normal class,
  `models.cached_memory`). The scale_b loads and C's stores carry no policy.

Left out (simplifications, named so timing studies know): the DeepSeek variant waits
each chunk's wgmmas to zero before promoting (as DeepGEMM); no ping-pong consumer
schedule, no TMA-store epilogue for grouped GEMMs (a tile's box may reach into the next
group's rows; they keep the register epilogue), the staging buffer is written with
`st.shared`, not `stmatrix`, and a sub-tile is one column atom (CUTLASS's 64-row
ping-pong epilogue tile and its C-source loads are not built),
clusters of 2 only and only for persistent plain GEMMs, no split-K or stream-K, no tile
rasterization swizzle.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from isa.errors import InputError
from isa.tensor_map import make_tensor_map
from simulator.framework.policy_spec import GEMM_L2_POLICIES
from simulator.runner.loop_synthesis import KLoop
from workloads.kernels.templates import gemm_ptx

SFA_ARG = 5                    # kernel argument index of the MN-major scale_a copy
C_ARG = 4                      # kernel argument index of C (the TMA-store map's base)
EPILOGUES = ("registers", "tma")
C_BUFFERS = 2                  # CUTLASS's sm90 epilogue: 2 sub-tile buffers (`StagesD`)
MAX_SHARED = 232448            # 227 KiB opt-in shared memory per CTA (sm_90)
SM_COUNT = 132                 # H100 SXM / H800 SXM
ELEM = {"bf16": 2, "fp16": 2, "fp8": 1, "tf32": 4}
PTX_TYPE = {"bf16": "bf16", "fp16": "f16", "fp8": "e4m3", "tf32": "tf32"}
KSHAPE = {"bf16": "k16", "fp16": "k16", "fp8": "k32", "tf32": "k8"}
NUMPY_IN = {"bf16": "bfloat16", "fp16": "float16", "fp8": "float8_e4m3fn", "tf32": "float32"}
OUT_BYTES = {"bf16": 2, "f32": 4}
NUMPY_OUT = {"bf16": "bfloat16", "f32": "float32"}


@dataclass(frozen=True)
class Config:
    """Validated generator arguments plus the layout every emitter piece shares."""
    m_tile: int
    n_tile: int
    k_tile: int
    stages: int
    dtype: str
    out_dtype: str
    consumers: int
    persistent: bool
    fp8_scaling: str | None
    sm_count: int
    grouped: bool = False
    tile_limit: int = 0
    k_max: int = 0             # DeepSeek scaling: the largest K (per group) it accepts
    multicast: str | None = None   # "a" / "b": 2-CTA clusters sharing that operand's box
    k_start: int = 0           # the k-tile every k-loop starts at (work synthesis's evidence)
    epilogue: str = "registers"    # "registers" (st.global) / "tma" (shared + TMA store)
    c_buffers: int = 0         # TMA store: 0 the whole tile staged, n: n one-atom sub-tiles
    l2_policy: str = "normal"  # "normal" (no hint) / "stream_weights" (B first, A last)

    ptx_type = property(lambda s: PTX_TYPE[s.dtype])
    kshape = property(lambda s: KSHAPE[s.dtype])
    elem_bytes = property(lambda s: ELEM[s.dtype])
    out_bytes = property(lambda s: OUT_BYTES[s.out_dtype])
    atom = property(lambda s: 128 // s.elem_bytes)          # K elements per swizzle row
    k_atoms = property(lambda s: s.k_tile // s.atom)
    m_sub = property(lambda s: s.m_tile // s.consumers // 64)   # m64 wgmmas per group
    a_bytes = property(lambda s: s.k_atoms * s.m_tile * 128)
    stage_bytes = property(lambda s: s.k_atoms * (s.m_tile + s.n_tile) * 128)
    # DeepSeek scaling: scale_a rows of a stage's 128-K chunks (TMA box after the stages)
    # and a tile's scale_b, [n_blocks][sfb_chunks] f32, staged by the consumers
    sfb_chunks = property(lambda s: scale_chunks(s.k_max, s.k_tile) if s.fp8_scaling else 0)
    sfa_bytes = property(lambda s: s._scale_bytes[0])
    sfb_bytes = property(lambda s: s._scale_bytes[1])
    _scale_bytes = property(lambda s: scale_bytes(s.m_tile, s.n_tile, s.k_tile, s.k_max)
                            if s.fp8_scaling else (0, 0))
    # TMA-store epilogue: C's staging buffer right after the stage ring (1024-aligned),
    # column atoms of `c_atom_bytes` (`c_atom_width`), `c_slots` of them
    c_atom_bytes = property(lambda s: c_atom_width(s.n_tile * s.out_bytes, s.c_buffers))
    c_atom_cols = property(lambda s: s.c_atom_bytes // s.out_bytes)
    c_atoms = property(lambda s: s.n_tile * s.out_bytes // s.c_atom_bytes)
    c_slots = property(lambda s: min(s.c_buffers, s.c_atoms) if s.c_buffers else s.c_atoms)
    c_swizzle = property(lambda s: s.c_atom_bytes if s.c_atom_bytes >= 32 else 0)
    c_offset = property(lambda s: s.stages * s.stage_bytes)
    c_bytes = property(lambda s: c_staging_bytes(s.m_tile, s.n_tile, s.out_bytes, s.c_buffers)
                       if s.epilogue == "tma" else 0)
    sfa_offset = property(lambda s: s.stages * s.stage_bytes + s.c_bytes)
    sfb_offset = property(lambda s: s.stages * (s.stage_bytes + s.sfa_bytes) + s.c_bytes)
    barrier_offset = property(lambda s: s.sfb_offset + s.sfb_bytes)
    shared_bytes = property(lambda s: s.barrier_offset + 16 * s.stages)
    threads = property(lambda s: 128 * (s.consumers + 1))
    acc_regs = property(lambda s: s.m_sub * s.n_tile // 2)
    chunks_per_tile = property(lambda s: max(1, s.k_tile // 128))
    n_blocks = property(lambda s: max(1, s.n_tile // 128))
    consumer_regs = property(lambda s: 240 if s.consumers == 1 else 232)
    cluster = property(lambda s: 2 if s.multicast else 1)
    # rows of the A and B tensor maps' boxes: half the tile for the operand each CTA of a
    # pair loads for both (`gemm_ptx`)
    a_box_rows = property(lambda s: s.m_tile // (2 if s.multicast == "a" else 1))
    b_box_rows = property(lambda s: s.n_tile // (2 if s.multicast == "b" else 1))
    # what `tile_limit` bounds in the kernel's loop: tiles, or a cluster's pairs of tiles
    work_limit = property(lambda s: -(-s.tile_limit // s.cluster))

    @property
    def entry(self) -> str:
        name = (f"gemm_{self.dtype}_{self.out_dtype}_m{self.m_tile}n{self.n_tile}k{self.k_tile}"
                f"_s{self.stages}_c{self.consumers}")
        return name + ("_persistent" if self.persistent else "") + \
            (f"_deepseek{self.sfb_chunks}" if self.fp8_scaling else "") + \
            ("_grouped" if self.grouped else "") + \
            (f"_t{self.tile_limit}" if self.tile_limit else "") + \
            (f"_mc{self.multicast}" if self.multicast else "") + \
            ("_tmastore" if self.epilogue == "tma" else "") + \
            (f"_sub{self.c_slots}x{self.c_atom_cols}" if self.epilogue == "tma" and
             self.c_buffers else "") + \
            ("_l2sw" if self.l2_policy == "stream_weights" else "")


@dataclass(frozen=True)
class GemmKernel:
    """A generated kernel: run with `isa.run_kernel(k.ptx, k.entry, k.grid(M, N), k.block,
    k.args(a, b, c), shared_bytes=k.shared_bytes)`."""
    ptx: str
    entry: str
    block: tuple[int, int, int]
    shared_bytes: int
    config: Config

    def tiles(self, m: int, n: int, blocks: int | None = None) -> tuple[int, int]:
        """(m-blocks, n-blocks) of the tile grid; a grouped kernel has `blocks` m-blocks
        (rows of its schedule table)."""
        tm = blocks if self.config.grouped else math.ceil(m / self.config.m_tile)
        if tm is None:
            raise InputError("a grouped kernel's tiles need blocks= (schedule rows)")
        return tm, math.ceil(n / self.config.n_tile)

    def grid(self, m: int, n: int, blocks: int | None = None) -> tuple[int, int, int]:
        tm, tn = self.tiles(m, n, blocks)
        if self.config.persistent:
            tiles = tm * tn
            if self.config.tile_limit:
                tiles = min(tiles, self.config.tile_limit)
            if self.config.multicast:         # clusters of 2 CTAs walk pairs of tiles
                walked = pairs(self.config.multicast, tm, tn)
                if self.config.tile_limit:
                    walked = min(walked, self.config.work_limit)
                return (2 * max(1, min(walked, self.config.sm_count // 2)), 1, 1)
            return (max(1, min(tiles, self.config.sm_count)), 1, 1)
        return (tm, tn, 1)

    def cta_work(self, m: int, n: int, k: int, schedule: np.ndarray | None = None,
                 b_rows: int = 0) -> tuple[np.ndarray, np.ndarray] | None:
        """Per CTA of a persistent kernel's grid (`grid`), its work class and coordinates
        (`simulator.runner.work_synthesis.CtaWork`), following the loop of `gemm_ptx` (tile t =
        ctaid, + nctaid, ...; a cluster walks pairs q = clusterid, + nclusterid, ..., rank
        r taking the pair's r-th tile; a grouped kernel's tile is schedule row t % rows
        and n-block t // rows). The class holds per round whether there is one, the tile's
        place at the N or M edge or outside C (grouped: its valid rows, k-tiles and whether
        its A or B box reaches past the m rows of A or the `b_rows` of B), and
        with DeepSeek scaling where in a 32-byte sector its first scale_b row starts (rows
        of ceil(K / 128) floats: the sectors a warp's `ld.global` of them touches); the
        coordinates are per round the tile's m- and n-block (grouped: the schedule row,
        its A, B and C rows, k0 and scale_b row), 0 past the CTA's last round. K is the
        launch's K argument; `schedule` the grouped kernel's table. None for a kernel
        that is not persistent."""
        cfg = self.config
        if not cfg.persistent:
            return None
        blocks = None if schedule is None else len(schedule)
        tm, tn = self.tiles(m, n, blocks)
        ctas = self.grid(m, n, blocks)[0]
        units = ctas // cfg.cluster
        walked = pairs(cfg.multicast, tm, tn) if cfg.multicast else tm * tn
        if cfg.tile_limit:
            walked = min(walked, cfg.work_limit)
        rounds = -(-walked // units)
        q = np.arange(units, dtype=np.int64)[:, None] + units * np.arange(rounds)[None, :]
        q = np.repeat(q, cfg.cluster, axis=0)                  # [CTAs, rounds]
        rank = (np.arange(ctas) % cfg.cluster)[:, None]
        if cfg.multicast == "a":
            mb, nb = q % tm, 2 * (q // tm) + rank
        elif cfg.multicast == "b":
            pairs_m = -(-tm // 2)
            mb, nb = 2 * (q % pairs_m) + rank, q // pairs_m
        else:
            mb, nb = q % tm, q // tm
        live = q < walked
        edge_n = np.where(nb >= tn, 2, (nb == tn - 1) & bool(n % cfg.n_tile))
        scale_row = np.minimum(nb * cfg.n_blocks, -(-n // 128) - 1)
        if schedule is not None:
            row = np.asarray(schedule, np.int64)[np.where(live, mb, 0)]   # [CTAs, rounds, 8]
            kind = [np.minimum(row[..., 3], cfg.m_tile), row[..., 5], edge_n,
                    row[..., 0] + cfg.m_tile > m,
                    row[..., 1] + nb * cfg.n_tile + cfg.n_tile > b_rows]
            where = [mb, nb, row[..., 0], row[..., 1], row[..., 2], row[..., 4], row[..., 6]]
            scale_row = scale_row + row[..., 6]
        else:
            kind = [np.where(mb >= tm, 2, (mb == tm - 1) & bool(m % cfg.m_tile)), edge_n]
            where = [mb, nb]
        if cfg.fp8_scaling:
            kind.append(scale_row * -(-k // 128) * 4 % 32)
        kind = np.where(live[..., None], np.stack([np.ones_like(q), *kind], axis=2), 0)
        _, classes = np.unique(kind.reshape(ctas, -1), axis=0, return_inverse=True)
        coords = np.where(live[..., None], np.stack(where, axis=2), 0).reshape(ctas, -1)
        return classes.reshape(-1).astype(np.int64), coords.astype(np.int64)

    def k_loop(self, k: int, schedule: np.ndarray | None = None):
        """What work synthesis needs to trace a persistent kernel's k-loops short
        (`simulator.runner.loop_synthesis.KLoop`): the lines that make this kernel's every k-loop
        start at k-tile S, the largest multiple of `stages` (the period of a loop
        iteration's stage) that leaves every tile at least 2 x stages + 1 k-tiles (its
        first `stages` iterations, `stages` to copy, the last); None when S would be 0
        or the kernel is not persistent. K is the launch's K argument; `schedule` the
        grouped kernel's table (column 5: each tile's k-tiles)."""

        cfg = self.config
        if not cfg.persistent or cfg.k_start:
            return None
        if schedule is None:
            k_tiles = -(-k // cfg.k_tile)
        else:
            k_tiles = int(np.asarray(schedule)[:, 5].min()) if len(schedule) else 0
        period = cfg.stages
        skip = (k_tiles - (cfg.stages + period + 1)) // period * period
        if skip <= 0:
            return None
        lines = self.ptx.split("\n")
        short = gemm_ptx.emit(replace(cfg, k_start=skip)).split("\n")
        changed = [(a, b) for a, b in zip(lines, short, strict=True) if a != b]
        return KLoop(skip, cfg.stages, gemm_ptx.K_LOOP_LABELS, tuple(dict(changed).items()),
                     len(changed))

    def args(self, a: np.ndarray, b: np.ndarray, c: np.ndarray, scale_a=None,
             scale_b=None, schedule: np.ndarray | None = None) -> list:
        """[tmap_a, tmap_b, a, b, c, (scale_a, scale_b,) (schedule,) M, N, K (, blocks)
        (, tmap_c)] for `isa.run_kernel`; a [M, K], b [N, K] (K-major), c [M, N], all
        row-major numpy arrays. A grouped kernel takes a, b, c of any row counts (the
        `schedule` table, int32 [blocks, 8] from `templates.gemm_groups`, says which rows a
        tile uses); its M is a's rows and N is c's columns."""
        cfg = self.config
        m, k = _shape2(a, "a")
        n, kb = _shape2(b, "b")
        if cfg.grouped:
            n = _shape2(c, "c")[1]
            if kb != k:
                raise InputError(f"shapes a {a.shape}, b {b.shape}: accepted a [rows, K], "
                                 "b [rows, K] (K-major) for a grouped kernel")
        elif kb != k or c.shape != (m, n):
            raise InputError(f"shapes a {a.shape}, b {b.shape}, c {c.shape}: accepted "
                             "a [M, K], b [N, K] (K-major), c [M, N]")
        for name, arr, want in (("a", a, NUMPY_IN[cfg.dtype]), ("b", b, NUMPY_IN[cfg.dtype]),
                                ("c", c, NUMPY_OUT[cfg.out_dtype])):
            if arr.dtype.name != want or not arr.flags.c_contiguous:
                raise InputError(f"{name}: {arr.dtype.name} array; accepted a C-contiguous "
                                 f"{want} array for dtype={cfg.dtype!r}, "
                                 f"out_dtype={cfg.out_dtype!r}")
        if (k * cfg.elem_bytes) % 16:
            raise InputError(f"K = {k}: rows of A and B must be a multiple of 16 bytes "
                             f"(K a multiple of {16 // cfg.elem_bytes} for {cfg.dtype})")
        ta = make_tensor_map(a, (cfg.a_box_rows, cfg.atom), swizzle=128, arg=2)
        tb = make_tensor_map(b, (cfg.b_box_rows, cfg.atom), swizzle=128, arg=3)
        out = [ta, tb, a, b, c]
        if cfg.fp8_scaling:
            ks = math.ceil(k / 128)
            b_groups = n and b.shape[0] // n if cfg.grouped else 1
            for name, arr, shape in (("scale_a", scale_a, (m, ks)),
                                     ("scale_b", scale_b, (b_groups * math.ceil(n / 128), ks))):
                if arr is None or arr.shape != shape or arr.dtype != np.float32:
                    got = None if arr is None else (arr.shape, arr.dtype.name)
                    raise InputError(f"{name}: got {got}; accepted a float32 array of "
                                     f"shape {shape} for fp8_scaling='deepseek'")
            need = scale_chunks(k, cfg.k_tile)
            if need > cfg.sfb_chunks:
                raise InputError(f"K = {k} needs {need} scale_b chunks per tile; this "
                                 f"kernel holds {cfg.sfb_chunks}: accepted K up to "
                                 f"{cfg.sfb_chunks * 128} (generate it with k_max >= K)")
            sfa = np.zeros((ks, sfa_rows(m)), np.float32)
            sfa[:, :m] = scale_a.T
            out += [sfa, scale_b, sfa_map(cfg, sfa)]
        elif scale_a is not None or scale_b is not None:
            raise InputError("scale_a/scale_b given to a kernel without fp8_scaling; "
                             "accepted: None")
        if not cfg.grouped:
            if schedule is not None:
                raise InputError("schedule given to a kernel without groups; accepted: None")
            return out + [m, n, k] + ([c_map(cfg, c)] if cfg.epilogue == "tma" else [])
        if (not isinstance(schedule, np.ndarray) or schedule.dtype != np.int32
                or schedule.ndim != 2 or schedule.shape[1] != 8 or not len(schedule)):
            raise InputError("schedule: accepted an int32 array [blocks >= 1, 8] "
                             "(templates.gemm_groups.schedule) for a grouped kernel")
        return out + [np.ascontiguousarray(schedule), m, n, k, len(schedule)]


def pairs(multicast: str, tiles_m: int, tiles_n: int) -> int:
    """Tile pairs of a 2-CTA cluster kernel: neighbours in N sharing an A panel ("a") or
    neighbours in M sharing a B panel ("b"); an odd last row or column pairs with a tile
    outside C (zero-filled, stored nowhere)."""
    if multicast == "a":
        return tiles_m * math.ceil(tiles_n / 2)
    return math.ceil(tiles_m / 2) * tiles_n


def fits_scale_blocks(n_tile: int) -> bool:
    """Whether a tile of `n_tile` columns can read DeepSeek's weight scales, one per 128
    columns: a divisor or a multiple of 128."""
    return 128 % n_tile == 0 or n_tile % 128 == 0


CONSUMER_REG_OVERHEAD = 32
"""Registers a consumer thread needs beside its accumulators (addresses, descriptors, loop
state, scales): ptxas gave 168 per thread (no spills) to every non-spilling variant
compiled for sm_90a."""


def accumulator_registers(m_sub: int, n_tile: int, fp8_scaling: str | None) -> int:
    """f32 registers per consumer thread for its accumulators: m_sub wgmma m64 x n_tile
    fragments of n_tile / 2 each, twice with DeepSeek scaling (the k-tile's sums and the
    promoted totals)."""
    return m_sub * n_tile // 2 * (2 if fp8_scaling else 1)


def fits_registers(m_sub: int, n_tile: int, fp8_scaling: str | None, consumers: int) -> bool:
    """Whether the accumulators fit the consumers' `setmaxnreg` budget (240 with one
    consumer warpgroup, 232 with two) without spilling: with DeepSeek scaling an n_tile
    of 256 needs 256 of them, and ptxas spills (measured on an H100: 416 B of spill
    stores per thread, 2.8x the simulated time, `workloads/reference/h100/
    template_ops.csv`)."""
    budget = 240 if consumers == 1 else 232
    return accumulator_registers(m_sub, n_tile, fp8_scaling) + CONSUMER_REG_OVERHEAD <= budget


def scale_chunks(k: int, k_tile: int) -> int:
    """128-K scale chunks of the k-tiles covering K (a partial last k-tile counts whole)."""
    return math.ceil(k / k_tile) * max(1, k_tile // 128)


def scale_bytes(m_tile: int, n_tile: int, k_tile: int, k_max: int) -> tuple[int, int]:
    """Shared bytes of DeepSeek scaling: (per stage: its scale_a chunks, per tile: the
    staged scale_b for K up to k_max, rounded up to 16)."""
    per_tile = 4 * max(1, n_tile // 128) * scale_chunks(k_max, k_tile)
    return 4 * m_tile * max(1, k_tile // 128), -(-per_tile // 16) * 16


def sfa_rows(m: int) -> int:
    """Columns of the MN-major scale_a copy: M rounded up to 4 (16-byte TMA strides)."""
    return -(-m // 4) * 4


def sfa_map(cfg: Config, sfa) -> np.ndarray:
    """Tensor map over the MN-major scale_a (kernel argument 5): box m_tile x chunks.
    `sfa` is the [ceil(K/128), sfa_rows(M)] f32 array or an `isa.ShapeOnly` of it."""
    box = (cfg.chunks_per_tile, cfg.m_tile)
    if isinstance(sfa, np.ndarray):
        return make_tensor_map(sfa, box, arg=SFA_ARG)
    return make_tensor_map(0, box, arg=SFA_ARG, shape=sfa.shape, dtype=np.float32)


def c_atom_width(row_bytes: int, c_buffers: int) -> int:
    """Bytes of a column atom of C's staging buffer for a tile row of `row_bytes`: the
    widest of 128/64/32/16 dividing it, at most 64 when staged in sub-tiles (`c_buffers` >
    0, CUTLASS's 32-column bf16 epilogue tile)."""
    return next(w for w in ((64, 32, 16) if c_buffers else (128, 64, 32, 16))
                if row_bytes % w == 0)


def c_staging_bytes(m_tile: int, n_tile: int, out_bytes: int, c_buffers: int) -> int:
    """Shared bytes of the TMA-store epilogue's staging buffer: the whole tile, or
    `c_buffers` one-atom sub-tiles (`Config.c_slots`)."""
    width = c_atom_width(n_tile * out_bytes, c_buffers)
    atoms = n_tile * out_bytes // width
    return m_tile * width * (min(c_buffers, atoms) if c_buffers else atoms)


def default_c_buffers(fp8_scaling: str | None) -> int:
    """How the TMA-store epilogue stages C by default: the whole tile with DeepSeek scaling
    (DeepGEMM's `smem_d`), `C_BUFFERS` sub-tiles otherwise (CUTLASS)."""
    return 0 if fp8_scaling else C_BUFFERS


def tma_store_fits(n: int, out_bytes: int) -> bool:
    """Whether C with N columns of `out_bytes` can be written by TMA: its row stride must
    be a multiple of 16 bytes (`cuTensorMapEncodeTiled`'s stride rule)."""
    return n * out_bytes % 16 == 0


def c_map(cfg: Config, c) -> np.ndarray:
    """Tensor map over C (kernel argument 4) for the TMA-store epilogue: box m_tile rows x
    `c_atom_cols`, swizzled by the atom width (`Config.c_swizzle`). `c` is the [M, N] array
    or an `isa.ShapeOnly` of it."""
    m, n = c.shape
    if not tma_store_fits(n, cfg.out_bytes):
        raise InputError(f"N = {n}: the TMA-store epilogue needs rows of C that are a "
                         f"multiple of 16 bytes (N a multiple of {16 // cfg.out_bytes} for "
                         f"out_dtype={cfg.out_dtype!r}); accepted: such an N, or "
                         "epilogue='registers'")
    box = (cfg.m_tile, cfg.c_atom_cols)
    if isinstance(c, np.ndarray):
        return make_tensor_map(c, box, swizzle=cfg.c_swizzle, arg=C_ARG)
    return make_tensor_map(0, box, swizzle=cfg.c_swizzle, arg=C_ARG, shape=c.shape,
                           dtype=c.dtype)


def _shape2(arr, name) -> tuple[int, int]:
    if not isinstance(arr, np.ndarray) or arr.ndim != 2:
        raise InputError(f"{name}: accepted a 2-D numpy array")
    return arr.shape


def _bad(arg: str, value, accepted: str) -> InputError:
    return InputError(f"gemm_kernel: {arg}={value!r} is not accepted; accepted: {accepted}")


def gemm_kernel(m_tile: int = 128, n_tile: int = 128, k_tile: int = 64, stages: int = 4,
                dtype: str = "bf16", out_dtype: str = "bf16", consumers: int = 1,
                persistent: bool = False, fp8_scaling: str | None = None,
                sm_count: int = SM_COUNT, grouped: bool = False,
                tile_limit: int = 0, k_max: int = 8192,
                multicast: str | None = None, epilogue: str = "registers",
                c_buffers: int | None = None, l2_policy: str = "normal") -> GemmKernel:
    """Generate a warp-specialized TMA + wgmma GEMM kernel (see the module docstring);
    `k_max` (DeepSeek scaling only) bounds the K (per group) it accepts; `multicast`
    ("a" or "b", persistent only) runs 2-CTA clusters that share that operand's box;
    `epilogue` "registers" (fragments stored with st.global) or "tma" (staged in shared
    memory, TMA stores; plain GEMMs only); `c_buffers` how the TMA store stages C (0: the
    whole tile, n: n one-atom sub-tiles; None: `default_c_buffers`); `l2_policy` the L2
    cache policy of the operand TMA loads ("normal": none; "stream_weights": B evict_first,
    A evict_last; `GEMM_L2_POLICIES`)."""
    if dtype not in ELEM:
        raise _bad("dtype", dtype, ", ".join(ELEM))
    if out_dtype not in OUT_BYTES:
        raise _bad("out_dtype", out_dtype, ", ".join(OUT_BYTES))
    if consumers not in (1, 2):
        raise _bad("consumers", consumers, "1 or 2 (consumer warpgroups)")
    if not isinstance(m_tile, int) or m_tile % (64 * consumers) or not 0 < m_tile <= 256:
        raise _bad("m_tile", m_tile, f"a multiple of {64 * consumers} (64 x consumers) "
                   "up to 256")
    if not isinstance(n_tile, int) or n_tile % 8 or not 0 < n_tile <= 256:
        raise _bad("n_tile", n_tile, "a multiple of 8 from 8 to 256 (wgmma N)")
    atom = 128 // ELEM[dtype]
    if not isinstance(k_tile, int) or k_tile <= 0 or k_tile % atom:
        raise _bad("k_tile", k_tile, f"a positive multiple of {atom} for {dtype} "
                   "(one 128-byte swizzle row)")
    if not isinstance(stages, int) or stages < 2:
        raise _bad("stages", stages, "an integer >= 2")
    if fp8_scaling not in (None, "deepseek"):
        raise _bad("fp8_scaling", fp8_scaling, "None or 'deepseek'")
    if fp8_scaling and dtype != "fp8":
        raise _bad("fp8_scaling", fp8_scaling, f"None for dtype={dtype!r} ('deepseek' "
                   "needs dtype='fp8')")
    if fp8_scaling and not fits_scale_blocks(n_tile):
        raise _bad("n_tile", n_tile, "a divisor or multiple of 128 with fp8_scaling "
                   "(one B scale block per 128 columns)")
    m_sub = m_tile // consumers // 64
    if not fits_registers(m_sub, n_tile, fp8_scaling, consumers):
        widest = max(nt for nt in range(8, 257, 8)
                     if fits_registers(m_sub, nt, fp8_scaling, consumers))
        raise _bad("n_tile", n_tile, f"at most {widest} for m_tile={m_tile}, consumers="
                   f"{consumers}{' with fp8_scaling' if fp8_scaling else ''}: the "
                   f"accumulators take {accumulator_registers(m_sub, n_tile, fp8_scaling)} "
                   "registers per consumer thread, beyond setmaxnreg's "
                   f"{240 if consumers == 1 else 232} less {CONSUMER_REG_OVERHEAD} (ptxas "
                   "would spill them)")
    if not isinstance(sm_count, int) or sm_count < 1:
        raise _bad("sm_count", sm_count, "a positive integer")
    if isinstance(tile_limit, bool) or not isinstance(tile_limit, int) or tile_limit < 0 \
            or (tile_limit and not persistent):
        raise _bad("tile_limit", tile_limit, "0 (all tiles) or, with persistent=True, "
                   "a positive tile count")
    if isinstance(k_max, bool) or not isinstance(k_max, int) or k_max < 1:
        raise _bad("k_max", k_max, "a positive integer (the largest K, for DeepSeek scaling)")
    if multicast not in (None, "a", "b"):
        raise _bad("multicast", multicast, "None, 'a' or 'b' (the operand a 2-CTA cluster "
                   "shares)")
    if multicast and (not persistent or grouped or sm_count < 2):
        raise _bad("multicast", multicast, "None unless persistent=True, grouped=False "
                   "and sm_count >= 2 (clusters walk pairs of tiles)")
    if multicast == "b" and n_tile % 16:
        raise _bad("n_tile", n_tile, "a multiple of 16 with multicast='b' (each CTA loads "
                   "half the B box)")
    if epilogue not in EPILOGUES:
        raise _bad("epilogue", epilogue, "'registers' or 'tma'")
    if epilogue == "tma" and grouped:
        raise _bad("epilogue", epilogue, "'registers' for grouped=True (a tile's TMA box "
                   "could reach into the next group's rows)")
    if l2_policy not in GEMM_L2_POLICIES:
        raise _bad("l2_policy", l2_policy, ", ".join(repr(p) for p in GEMM_L2_POLICIES))
    if c_buffers is None:
        c_buffers = default_c_buffers(fp8_scaling)
    if not isinstance(c_buffers, int) or c_buffers < 0:
        raise _bad("c_buffers", c_buffers, "0 (the whole tile) or a count of sub-tile "
                   "buffers >= 1")
    cfg = Config(m_tile, n_tile, k_tile, stages, dtype, out_dtype, consumers,
                 bool(persistent), fp8_scaling, sm_count, bool(grouped), tile_limit,
                 k_max if fp8_scaling else 0, multicast, epilogue=epilogue,
                 c_buffers=c_buffers if epilogue == "tma" else 0, l2_policy=l2_policy)
    if cfg.shared_bytes > MAX_SHARED:
        fixed = cfg.shared_bytes - stages * (cfg.stage_bytes + cfg.sfa_bytes + 16)
        raise _bad("stages", stages, f"a ring within {MAX_SHARED} bytes of shared memory "
                   f"(227 KiB): {stages} stages x {cfg.stage_bytes} B + barriers"
                   + (f" + C staging {cfg.c_bytes} B" if cfg.c_bytes else "") +
                   f" = {cfg.shared_bytes} B; at most "
                   f"{(MAX_SHARED - fixed) // (cfg.stage_bytes + cfg.sfa_bytes + 16)} "
                   "stages for these tiles")
    return GemmKernel(gemm_ptx.emit(cfg), cfg.entry, (cfg.threads, 1, 1), cfg.shared_bytes,
                      cfg)
