"""Multistage Ampere GEMM kernels, generated as PTX (sm_80) the way CUTLASS 2.x builds them.

`gemm_sm80_kernel(...)` -> `GemmSm80Kernel` computes C[M, N] = A[M, K] x B[N, K]^T (both
operands K-major, the "TN" GEMM cuBLAS runs for `torch.nn.Linear`), bf16 or fp16 inputs, f32
accumulation, C in bf16 or f32, with no instruction newer than sm_80.

Kernel structure (CUTLASS 2.x `DefaultGemm` for `OpClassTensorOp` on `Sm80`, cuBLAS's
`ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn` and `..._stages_64x3_tn`):

* CTA tile m_tile x n_tile x k_tile (k_tile 32 or 64; 128x128x32 by default), 4 warps in
  2 x 2, each warp owning an (m_tile / 2) x (n_tile / 2) tile of C (64x64: 4 x 8 `mma`
  tiles, 128 f32 accumulators per thread). Grid (ceil(M / m_tile), ceil(N / n_tile)):
  consecutive CTAs share B's tile;
  with `swizzle_log` s > 0, CUTLASS's `GemmIdentityThreadblockSwizzle` rasterization: grid
  (m-tiles x 2^s, ceil(n-tiles / 2^s)), CTA (x, y) computes tile (x >> s, (y << s) +
  (x & (2^s - 1))), so consecutive CTAs walk 2^s n-tiles of one m-tile before the next
  m-tile and a wave covers a compact block of C (both operands' panels reused in the L2);
  a CTA past N exits at once.
* shared memory (dynamic, `shared_bytes`): a ring of `stages` buffers, each the A tile
  (m_tile rows x 2 k_tile B) then the B tile (n_tile rows x 2 k_tile B). A row of 32 K
  elements is four 16-byte chunks, chunk c of row r stored at chunk c ^ ((r >> 1) & 3); a row
  of 64 is eight, chunk c at c ^ (r & 7) (CUTLASS's 128-byte XOR swizzle). Either way the 8
  rows an `ldmatrix` reads at one logical chunk fall in 8 distinct 16-byte bank groups, and a
  warp's 16-byte `cp.async` stores fill whole rows: no bank conflict either way.
* global -> shared: `cp.async.cg.shared.global` of 16 bytes (`ldg8` in cuBLAS's name: eight
  16-bit elements), k_tile / 8 threads a row, m_tile k_tile / 1024 chunks of A and n_tile
  k_tile / 1024 of B per thread per k-tile, the source size 0 (zero fill) outside M, N or K;
  addresses are clamped into the operand so none points outside it. One
  `cp.async.commit_group` per k-tile.
* main loop (multistage): the prologue issues k-tiles 0 .. stages-2; iteration kt waits
  for its tile (`cp.async.wait_group stages-2`), `bar.sync`s (the tile is visible to all
  warps, and every warp has finished reading the slot the next copy overwrites), issues
  k-tile kt + stages - 1 into that slot, then runs k_tile / 16 k16 steps: per warp 4
  `ldmatrix.x4` of A, 4 of B and 32 `mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}` a step
  (m_tile or n_tile 64: 2 m16 or 4 n8 tiles per warp).
* epilogue: each fragment pair (two neighbouring columns of one row) inside C with N even
  is converted (`cvt.rn.bf16x2.f32`) and stored with one `st.global.b32` (f32:
  `st.global.v2.f32`); pairs at the M and N edges, or any pair when N is odd, store each
  element alone, predicated off outside M x N.

* parallel split-K (`split_k=True`, CUTLASS 2.x's `device::GemmSplitKParallel`): grid z is
  the K slice; slice z of Z runs k-tiles [z q, min((z + 1) q, k-tiles)), q = ceil(k-tiles /
  Z) (CUTLASS's `gemm_k_size`), and writes its f32 partial tile to slice z of C, an f32
  workspace [Z, M, N]. `splitk_reduce_kernel` then sums the slices into C
  (`reduction::kernel::ReduceSplitK`; cuBLASLt's `splitKreduce_kernel`): one thread per 4
  elements (16-byte loads) or per element where M N is not a multiple of 4, 256 threads a
  CTA. CUTLASS's other form, serial split-K (`SplitKSerial`: slices take turns on C behind
  a semaphore), is left out.

Requirements: K a multiple of 8 (each 16-byte chunk of a row lies inside or outside K, and
rows stay 16-byte aligned, the `cp.async` alignment rule); M, N >= 1 of any size.
Left out: serial split-K, tf32 inputs, other warp arrangements, `ldmatrix` double-buffering of
fragments across k16 steps (ptxas schedules the loads of both k16 steps ahead of the mmas
itself).
Units: elements, bytes, threads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from isa.errors import InputError

DTYPES = {"bf16": "bf16", "fp16": "f16"}          # op dtype -> PTX mma type
OUT_DTYPES = ("bf16", "f32")
OUT_BYTES = {"bf16": 2, "f32": 4}
K_TILES = (32, 64)                                 # accepted k_tile: elements of K per stage
CHUNK_BYTES = 16                                   # one cp.async, one ldmatrix row
THREADS = 128                                      # 4 warps, 2 x 2
WARPS_M = WARPS_N = 2
TILES = (64, 128)                                  # accepted m_tile and n_tile
MAX_STAGES = 8
K_ALIGN = 8                                        # K elements per 16-byte chunk
ENTRY_LOOP = "MAIN_K"                              # the main loop's head label
PTXAS_REGISTERS = {(128, 128, 32): 224, (128, 64, 32): 128, (64, 128, 32): 128,
                   (64, 64, 32): 72,
                   (128, 128, 64): 244, (128, 64, 64): 162, (64, 128, 64): 166,
                   (64, 64, 64): 96}
"""Registers per thread ptxas allocates, by (m_tile, n_tile, k_tile), with no spill (`ptxas
-arch=sm_80 -v`, CUDA 13.0): the launch count the occupancy uses. k_tile 32: the same at any
stage count and type; k_tile 64: the most over 2-5 stages, both types, the rasterizations and
split-K (they differ by up to 2, within one 8-register allocation step)."""


@dataclass(frozen=True)
class Config:
    """A validated choice of the template's parameters."""

    m_tile: int = 128
    n_tile: int = 128
    stages: int = 4
    k_tile: int = 32           # elements of K per stage: 32 (64-byte rows) or 64 (128-byte)
    dtype: str = "bf16"
    out_dtype: str = "bf16"
    swizzle_log: int = 0       # CTA rasterization: 2 ** swizzle_log n-tiles per m-tile run
    split_k: bool = False      # a K slice per grid z, partial sums to slice z of an f32 C

    @property
    def warp_m(self) -> int:
        return self.m_tile // WARPS_M

    @property
    def warp_n(self) -> int:
        return self.n_tile // WARPS_N

    @property
    def mi(self) -> int:
        """m16 tiles per warp."""
        return self.warp_m // 16

    @property
    def ni(self) -> int:
        """n8 tiles per warp."""
        return self.warp_n // 8

    @property
    def row_bytes(self) -> int:
        """Bytes of one operand row of a k-tile in shared memory."""
        return self.k_tile * 2

    @property
    def chunks(self) -> int:
        """16-byte chunks of one row of a k-tile (threads that copy one row together)."""
        return self.row_bytes // CHUNK_BYTES

    @property
    def k_shift(self) -> int:
        """log2(k_tile)."""
        return self.k_tile.bit_length() - 1

    @property
    def k16_steps(self) -> int:
        """mma k16 steps per k-tile."""
        return self.k_tile // 16

    @property
    def stage_bytes(self) -> int:
        return (self.m_tile + self.n_tile) * self.row_bytes

    @property
    def shared_bytes(self) -> int:
        return self.stages * self.stage_bytes

    @property
    def entry(self) -> str:
        return (f"gemm_sm80_{self.dtype}_{self.out_dtype}_m{self.m_tile}n{self.n_tile}"
                f"k{self.k_tile}_s{self.stages}"
                + (f"_sw{1 << self.swizzle_log}" if self.swizzle_log else "")
                + ("_splitk" if self.split_k else ""))


@dataclass(frozen=True)
class GemmSm80Kernel:
    """A generated kernel: its PTX, entry and launch shape."""

    config: Config
    ptx: str

    @property
    def entry(self) -> str:
        return self.config.entry

    @property
    def block(self) -> tuple[int, int, int]:
        return (THREADS, 1, 1)

    @property
    def shared_bytes(self) -> int:
        return self.config.shared_bytes

    @property
    def registers(self) -> int:
        """Registers per thread (`PTXAS_REGISTERS`)."""
        return PTXAS_REGISTERS[(self.config.m_tile, self.config.n_tile, self.config.k_tile)]

    def grid(self, m: int, n: int, splits: int = 1) -> tuple[int, int, int]:
        """(m-tiles x 2^s, ceil(n-tiles / 2^s), splits) for `swizzle_log` s (CUTLASS's
        `GemmIdentityThreadblockSwizzle::get_grid_shape`, whose z is the K slices)."""
        if splits != 1 and not self.config.split_k:
            raise InputError(f"splits {splits}: {self.entry} has no K slices; accepted: 1, "
                             "or a kernel generated with split_k=True")
        s = self.config.swizzle_log
        tiles_m = math.ceil(m / self.config.m_tile)
        tiles_n = math.ceil(n / self.config.n_tile)
        return (tiles_m << s, -(-tiles_n // (1 << s)), splits)

    def args(self, a, b, c, k: int | None = None) -> list:
        """Kernel arguments for A [M, K], B [N, K], C [M, N] (arrays or `isa.ShapeOnly`);
        a split-K kernel's C is the f32 workspace [splits, M, N]."""
        m, kk = a.shape
        n = b.shape[0]
        c_mn = tuple(c.shape)[-2:] if self.config.split_k else tuple(c.shape)
        if b.shape[1] != kk or c_mn != (m, n):
            want = "[splits, M, N]" if self.config.split_k else "[M, N]"
            raise InputError(f"operand shapes A {tuple(a.shape)}, B {tuple(b.shape)}, C "
                             f"{tuple(c.shape)}: accepted A [M, K], B [N, K], C {want}")
        k = kk if k is None else k
        return [a, b, c, np.uint32(m), np.uint32(n), np.uint32(k)]


def swizzle_log(n_tiles: int, most: int = 8) -> int:
    """CUTLASS's `GemmIdentityThreadblockSwizzle<most>::get_log_tile` for a grid of `n_tiles`
    tiles along N: 3 when most >= 8 and n_tiles >= 6, 2 when most >= 4 and n_tiles >= 3, 1
    when most >= 2 and n_tiles >= 2, else 0 (few idle CTAs)."""
    for log, least in ((3, 6), (2, 3), (1, 2)):
        if most >= 1 << log and n_tiles >= least:
            return log
    return 0


def gemm_sm80_kernel(m_tile: int = 128, n_tile: int = 128, stages: int = 4,
                     dtype: str = "bf16", out_dtype: str = "bf16",
                     swizzle_log: int = 0, split_k: bool = False,
                     k_tile: int = 32) -> GemmSm80Kernel:
    """The kernel for these parameters (module docstring); an `InputError` for a choice the
    template does not have."""
    if dtype not in DTYPES:
        raise InputError(f"dtype {dtype!r}: accepted {', '.join(DTYPES)}")
    if out_dtype not in OUT_DTYPES:
        raise InputError(f"out_dtype {out_dtype!r}: accepted {', '.join(OUT_DTYPES)}")
    for name, value in (("m_tile", m_tile), ("n_tile", n_tile)):
        if value not in TILES:
            raise InputError(f"{name} {value}: accepted {', '.join(map(str, TILES))}")
    if k_tile not in K_TILES:
        raise InputError(f"k_tile {k_tile}: accepted {', '.join(map(str, K_TILES))}")
    if not 2 <= stages <= MAX_STAGES:
        raise InputError(f"stages {stages}: accepted 2 .. {MAX_STAGES}")
    if swizzle_log not in (0, 1, 2, 3):
        raise InputError(f"swizzle_log {swizzle_log}: accepted 0, 1, 2, 3")
    if split_k and out_dtype != "f32":
        raise InputError(f"out_dtype {out_dtype!r} with split_k: accepted f32 (the partial "
                         "sums' workspace; `splitk_reduce_kernel` writes C in its type)")
    cfg = Config(m_tile, n_tile, stages, k_tile, dtype, out_dtype, swizzle_log, split_k)
    return GemmSm80Kernel(cfg, emit(cfg))


REDUCE_THREADS = 256


@dataclass(frozen=True)
class SplitKReduceKernel:
    """The split-K reduction: C = sum over slices of the f32 workspace [slices, M, N]."""

    out_dtype: str
    vector: int                # elements per thread: 4 (16-byte loads) or 1
    ptx: str

    @property
    def entry(self) -> str:
        return f"gemm_sm80_splitk_reduce_f32_{self.out_dtype}_v{self.vector}"

    @property
    def block(self) -> tuple[int, int, int]:
        return (REDUCE_THREADS, 1, 1)

    @property
    def registers(self) -> int:
        """Registers per thread (`REDUCE_REGISTERS`)."""
        return REDUCE_REGISTERS[(self.out_dtype, self.vector)]

    def grid(self, m: int, n: int) -> tuple[int, int, int]:
        """One thread per `vector` elements of C."""
        return (-(-m * n // (self.vector * REDUCE_THREADS)), 1, 1)

    def args(self, workspace, c) -> list:
        """Arguments for the workspace [slices, M, N] (f32) and C [M, N]."""
        splits, m, n = workspace.shape
        if tuple(c.shape) != (m, n):
            raise InputError(f"workspace {tuple(workspace.shape)} and C {tuple(c.shape)}: "
                             "accepted workspace [slices, M, N], C [M, N]")
        return [workspace, c, np.uint32(m * n), np.uint32(splits)]


REDUCE_REGISTERS = {("bf16", 4): 30, ("f32", 4): 32, ("bf16", 1): 18, ("f32", 1): 16}
"""Registers per thread of the reduction, by (out_dtype, vector) (`ptxas -arch=sm_80 -v`,
CUDA 13.0, no spill)."""


def splitk_reduce_kernel(out_dtype: str = "bf16", vector: int = 4) -> SplitKReduceKernel:
    """The reduction of a parallel split-K GEMM (CUTLASS's `reduction::kernel::ReduceSplitK`,
    cuBLASLt's `splitKreduce_kernel`): thread i sums elements [v i, v i + v) of every slice
    of the f32 workspace in slice order and writes them to C in `out_dtype`; `vector` 4
    (16-byte loads, CUTLASS's 128-bit access) needs M N a multiple of 4, 1 takes any."""
    if out_dtype not in OUT_DTYPES:
        raise InputError(f"out_dtype {out_dtype!r}: accepted {', '.join(OUT_DTYPES)}")
    if vector not in (1, 4):
        raise InputError(f"vector {vector}: accepted 1, 4")
    entry = SplitKReduceKernel(out_dtype, vector, "").entry
    return SplitKReduceKernel(out_dtype, vector, _emit_reduce(entry, out_dtype, vector))


def _emit_reduce(entry: str, out_dtype: str, vector: int) -> str:
    acc = [f"%a{j}" for j in range(vector)]
    val = [f"%x{j}" for j in range(vector)]
    load = (f"    ld.global.v4.f32 {{{', '.join(val)}}}, [%rd0];" if vector == 4
            else "    ld.global.f32 %x0, [%rd0];")
    lines = [
        ".version 8.0", ".target sm_80", ".address_size 64", "",
        f".visible .entry {entry}(",
        "    .param .u64 ws,", "    .param .u64 c,", "    .param .u32 count,",
        "    .param .u32 splits", ")", f".maxntid {REDUCE_THREADS}, 1, 1", "{",
        "    .reg .pred %p<2>;", "    .reg .b32 %r<8>;", "    .reg .b64 %rd<4>;",
        f"    .reg .f32 %a<{vector}>, %x<{vector}>;", "    .reg .b16 %h0;",
        "    mov.u32 %r0, %tid.x;", "    mov.u32 %r1, %ctaid.x;",
        f"    mad.lo.u32 %r0, %r1, {REDUCE_THREADS}, %r0;",
        f"    mul.lo.u32 %r0, %r0, {vector};",                         # first element
        "    ld.param.u32 %r2, [count];", "    ld.param.u32 %r3, [splits];",
        "    setp.ge.u32 %p0, %r0, %r2;", "    @%p0 exit;",
        "    ld.param.u64 %rd0, [ws];", "    ld.param.u64 %rd1, [c];",
        "    cvta.to.global.u64 %rd0, %rd0;", "    cvta.to.global.u64 %rd1, %rd1;",
        "    mul.wide.u32 %rd2, %r0, 4;", "    add.s64 %rd0, %rd0, %rd2;",
        "    mul.wide.u32 %rd3, %r2, 4;",                              # slice stride
    ] + [f"    mov.f32 {a}, 0f00000000;" for a in acc] + [
        "    mov.u32 %r4, 0;",
        "SLICE:", load,
    ] + [f"    add.f32 {a}, {a}, {x};" for a, x in zip(acc, val, strict=True)] + [
        "    add.s64 %rd0, %rd0, %rd3;", "    add.u32 %r4, %r4, 1;",
        "    setp.lt.u32 %p1, %r4, %r3;", "    @%p1 bra SLICE;",
        f"    mul.wide.u32 %rd2, %r0, {OUT_BYTES[out_dtype]};", "    add.s64 %rd1, %rd1, %rd2;",
    ]
    if out_dtype == "f32":
        lines.append(f"    st.global.v4.f32 [%rd1], {{{', '.join(acc)}}};" if vector == 4
                     else "    st.global.f32 [%rd1], %a0;")
    elif vector == 4:
        lines += ["    cvt.rn.bf16x2.f32 %r5, %a1, %a0;", "    cvt.rn.bf16x2.f32 %r6, %a3, %a2;",
                  "    st.global.v2.b32 [%rd1], {%r5, %r6};"]
    else:
        lines += ["    cvt.rn.bf16.f32 %h0, %a0;", "    st.global.b16 [%rd1], %h0;"]
    return "\n".join(lines + ["    ret;", "}"]) + "\n"


def check_k(k: int) -> None:
    """K must be a multiple of `K_ALIGN` (16-byte rows for `cp.async`)."""
    if k < 1 or k % K_ALIGN:
        raise InputError(f"--k {k}: the sm_80 GEMM template needs a positive multiple of "
                         f"{K_ALIGN} (16-byte operand rows for cp.async)")


# -- PTX ------------------------------------------------------------------------------------
def emit(cfg: Config) -> str:
    lines = (_head(cfg) + _setup(cfg) + _prologue(cfg) + _main_loop(cfg) + _epilogue(cfg)
             + ["    ret;", "}"])
    return "\n".join(lines) + "\n"


def _loads(cfg: Config) -> tuple[int, int]:
    """16-byte chunks of A and of B each thread copies per k-tile."""
    return cfg.m_tile * cfg.chunks // THREADS, cfg.n_tile * cfg.chunks // THREADS


def _copy_rows(cfg: Config) -> int:
    """Rows one pass of the CTA's 128 threads copies (`cfg.chunks` threads a row)."""
    return THREADS // cfg.chunks


def _head(cfg: Config) -> list[str]:
    la, lb = _loads(cfg)
    acc = cfg.mi * cfg.ni * 4
    return [
        ".version 8.0", ".target sm_80", ".address_size 64",
        ".extern .shared .align 128 .b8 smem[];", "",
        f".visible .entry {cfg.entry}(",
        "    .param .u64 a,", "    .param .u64 b,", "    .param .u64 c,",
        "    .param .u32 m,", "    .param .u32 n,", "    .param .u32 k", ")",
        f".maxntid {THREADS}, 1, 1", "{",
        "    .reg .pred %p<8>;", f"    .reg .pred %pr<{2 * cfg.mi}>;",
        f"    .reg .pred %pc<{2 * cfg.ni}>;",
        "    .reg .b32 %r<24>;", "    .reg .b64 %rd<8>;",
        f"    .reg .f32 %d<{acc}>;",
        f"    .reg .b32 %fa<{4 * cfg.mi}>;", f"    .reg .b32 %fb<{2 * cfg.ni}>;",
        f"    .reg .b64 %ga<{la}>;", f"    .reg .b64 %gb<{lb}>;",
        f"    .reg .b32 %sa<{la}>;", f"    .reg .b32 %sb<{lb}>;",
        f"    .reg .b64 %cr<{2 * cfg.mi}>;",
        "    .reg .b32 %thr, %lane, %warp, %M, %N, %K, %kt, %ktiles, %slot, %ldslot;",
        "    .reg .b32 %sts, %smem, %kcol, %ksz;",
        f"    .reg .b32 %lda<{cfg.k16_steps}>, %ldb<{cfg.k16_steps}>;",
        "    .reg .b64 %rdk;",
    ] + (["    .reg .b32 %kbeg;"] if cfg.split_k else [])


def _setup(cfg: Config) -> list[str]:
    """Thread indices, operand row pointers (clamped into the operands), shared offsets."""
    la, lb = _loads(cfg)
    lines = [
        "    mov.u32 %thr, %tid.x;", "    and.b32 %lane, %thr, 31;",
        "    shr.u32 %warp, %thr, 5;",
        "    ld.param.u32 %M, [m];", "    ld.param.u32 %N, [n];", "    ld.param.u32 %K, [k];",
        "    ld.param.u64 %rd0, [a];", "    ld.param.u64 %rd1, [b];",
        "    ld.param.u64 %rd2, [c];",
        "    cvta.to.global.u64 %rd0, %rd0;", "    cvta.to.global.u64 %rd1, %rd1;",
        "    cvta.to.global.u64 %rd2, %rd2;",
        "    mov.u32 %smem, smem;",
        f"    add.u32 %ktiles, %K, {cfg.k_tile - 1};",
        f"    shr.u32 %ktiles, %ktiles, {cfg.k_shift};",
    ] + (_split_range() if cfg.split_k else []) + [
        # this thread's copy slot: row tid / chunks + rows i, chunk tid % chunks, swizzled
        # (the swizzle term (tid >> 3) % chunks is the row's: (row >> 1) & 3 or row & 7)
        f"    shr.u32 %r0, %thr, {cfg.chunks.bit_length() - 1};",
        f"    and.b32 %r1, %thr, {cfg.chunks - 1};",
        "    shr.u32 %r2, %thr, 3;", f"    and.b32 %r2, %r2, {cfg.chunks - 1};",
        "    xor.b32 %r2, %r1, %r2;",
        f"    shl.b32 %r2, %r2, 4;\n    mad.lo.u32 %sts, %r0, {cfg.row_bytes}, %r2;",
        "    shl.b32 %r3, %r1, 4;",                      # byte offset of the chunk in K
        "    mov.u32 %r4, %ctaid.x;", "    mov.u32 %r5, %ctaid.y;",
    ]
    if cfg.swizzle_log:       # tile (x >> s, (y << s) + (x & (2^s - 1))); past N: no work
        s = cfg.swizzle_log
        lines += [f"    and.b32 %r8, %r4, {(1 << s) - 1};", f"    shr.u32 %r4, %r4, {s};",
                  f"    shl.b32 %r5, %r5, {s};", "    add.u32 %r5, %r5, %r8;"]
    lines += [
        f"    mul.lo.u32 %r4, %r4, {cfg.m_tile};",                                 # m0
        f"    mul.lo.u32 %r5, %r5, {cfg.n_tile};",                                 # n0
    ]
    if cfg.swizzle_log:
        lines += ["    setp.ge.u32 %p0, %r5, %N;", "    @%p0 exit;"]
    lines += [
        "    sub.u32 %r6, %M, 1;", "    sub.u32 %r7, %N, 1;",
    ]
    rows = _copy_rows(cfg)
    for i in range(la):       # A rows: m0 + tid / chunks + rows i, clamped to M - 1
        lines += [f"    add.u32 %r8, %r4, %r0;\n    add.u32 %r8, %r8, {rows * i};",
                  "    setp.lt.u32 %p0, %r8, %M;", "    min.u32 %r8, %r8, %r6;",
                  f"    selp.b32 %sa{i}, {CHUNK_BYTES}, 0, %p0;",
                  "    mul.wide.u32 %rd3, %r8, %K;", "    shl.b64 %rd3, %rd3, 1;",
                  f"    add.s64 %ga{i}, %rd0, %rd3;"]
    for i in range(lb):       # B rows: n0 + tid / chunks + rows i, clamped to N - 1
        lines += [f"    add.u32 %r8, %r5, %r0;\n    add.u32 %r8, %r8, {rows * i};",
                  "    setp.lt.u32 %p0, %r8, %N;", "    min.u32 %r8, %r8, %r7;",
                  f"    selp.b32 %sb{i}, {CHUNK_BYTES}, 0, %p0;",
                  "    mul.wide.u32 %rd3, %r8, %K;", "    shl.b64 %rd3, %rd3, 1;",
                  f"    add.s64 %gb{i}, %rd1, %rd3;"]
    # ldmatrix offsets for k16 step ks: A rows (l & 7) + 8 ((l >> 3) & 1), logical chunk
    # 2 ks + (l >> 4); B rows (l & 7) + 8 (l >> 4), chunk 2 ks + ((l >> 3) & 1); the swizzle
    # term is (l >> 1) & 3 for both with 64-byte rows (%r12), l & 7 with 128-byte rows (%r9)
    wm = f"{cfg.warp_m * cfg.row_bytes}"
    wn = f"{cfg.warp_n * cfg.row_bytes}"
    swz = "%r12" if cfg.k_tile == 32 else "%r9"
    lines += [
        "    and.b32 %r9, %lane, 7;", "    shr.u32 %r10, %lane, 3;",
        "    and.b32 %r10, %r10, 1;", "    shr.u32 %r11, %lane, 4;",
        "    shr.u32 %r12, %lane, 1;", "    and.b32 %r12, %r12, 3;",
        "    shl.b32 %r13, %r10, 3;\n    add.u32 %r13, %r13, %r9;",          # A row
        "    shl.b32 %r14, %r11, 3;\n    add.u32 %r14, %r14, %r9;",          # B row
        "    and.b32 %r15, %warp, 1;", "    shr.u32 %r16, %warp, 1;",         # wm, wn
        f"    mul.lo.u32 %r17, %r15, {wm};", f"    mul.lo.u32 %r18, %r16, {wn};",
    ]
    for ks in range(cfg.k16_steps):
        lines += [f"    add.u32 %r19, %r11, {2 * ks};", f"    xor.b32 %r19, %r19, {swz};",
                  "    shl.b32 %r19, %r19, 4;",
                  f"    mad.lo.u32 %lda{ks}, %r13, {cfg.row_bytes}, %r19;",
                  f"    add.u32 %lda{ks}, %lda{ks}, %r17;",
                  f"    add.u32 %r19, %r10, {2 * ks};", f"    xor.b32 %r19, %r19, {swz};",
                  "    shl.b32 %r19, %r19, 4;",
                  f"    mad.lo.u32 %ldb{ks}, %r14, {cfg.row_bytes}, %r19;",
                  f"    add.u32 %ldb{ks}, %ldb{ks}, %r18;",
                  f"    add.u32 %ldb{ks}, %ldb{ks}, {cfg.m_tile * cfg.row_bytes};"]
    lines += [f"    mov.f32 %d{j}, 0f00000000;" for j in range(cfg.mi * cfg.ni * 4)]
    return lines


def _split_range() -> list[str]:
    """Slice z = %ctaid.z of %nctaid.z: k-tiles [z q, min((z + 1) q, k-tiles)), q = ceil(k-tiles
    / slices) (CUTLASS's `gemm_k_size`, in k-tiles); C moves to its slice z of [slices, M, N]
    f32 (4-byte elements)."""
    return [
        "    mov.u32 %r20, %nctaid.z;", "    add.u32 %r21, %ktiles, %r20;",
        "    sub.u32 %r21, %r21, 1;", "    div.u32 %r21, %r21, %r20;",
        "    mov.u32 %r22, %ctaid.z;", "    mul.lo.u32 %kbeg, %r22, %r21;",
        "    add.u32 %r21, %kbeg, %r21;", "    min.u32 %ktiles, %r21, %ktiles;",
        "    mul.wide.u32 %rd3, %M, %N;", "    cvt.u64.u32 %rd4, %r22;",
        "    mul.lo.u64 %rd3, %rd3, %rd4;", "    shl.b64 %rd3, %rd3, 2;",
        "    add.s64 %rd2, %rd2, %rd3;",
    ]


def _load_tile(cfg: Config, kt: str, slot_bytes: str, guard: str = "") -> list[str]:
    """cp.async of k-tile `kt` (a register) into the slot at shared offset `slot_bytes`."""
    la, lb = _loads(cfg)
    step = _copy_rows(cfg) * cfg.row_bytes
    g = f"@{guard} " if guard else ""
    lines = [f"    shl.b32 %kcol, {kt}, {cfg.k_shift};",
             "    shl.b32 %r20, %r1, 3;\n    add.u32 %kcol, %kcol, %r20;",   # first K element
             "    setp.lt.u32 %p1, %kcol, %K;",
             f"    sub.u32 %r20, %K, {K_ALIGN};\n    min.u32 %r20, %kcol, %r20;",
             "    mul.wide.u32 %rdk, %r20, 2;",
             f"    add.u32 %r21, %smem, {slot_bytes};\n    add.u32 %r21, %r21, %sts;"]
    for i in range(la):
        lines += [f"    add.s64 %rd4, %ga{i}, %rdk;",
                  f"    selp.b32 %ksz, %sa{i}, 0, %p1;",
                  f"    {g}cp.async.cg.shared.global [%r21+{i * step}], [%rd4], "
                  f"{CHUNK_BYTES}, %ksz;"]
    for i in range(lb):
        lines += [f"    add.s64 %rd4, %gb{i}, %rdk;",
                  f"    selp.b32 %ksz, %sb{i}, 0, %p1;",
                  f"    {g}cp.async.cg.shared.global "
                  f"[%r21+{cfg.m_tile * cfg.row_bytes + i * step}], [%rd4], "
                  f"{CHUNK_BYTES}, %ksz;"]
    return lines


def _prologue(cfg: Config) -> list[str]:
    lines = []
    for s in range(cfg.stages - 1):
        first = f"    add.u32 %kt, %kbeg, {s};" if cfg.split_k else f"    mov.u32 %kt, {s};"
        lines += [first, "    setp.lt.u32 %p2, %kt, %ktiles;"]
        lines += _load_tile(cfg, "%kt", str(s * cfg.stage_bytes), "%p2")
        lines.append("    cp.async.commit_group;")
    start = "%kbeg" if cfg.split_k else "0"
    return lines + [f"    mov.u32 %kt, {start};", "    mov.u32 %slot, 0;",
                    f"    mov.u32 %ldslot, {(cfg.stages - 1) * cfg.stage_bytes};"]


def _main_loop(cfg: Config) -> list[str]:
    mma_type = DTYPES[cfg.dtype]
    lines = [f"{ENTRY_LOOP}:", "    setp.ge.u32 %p3, %kt, %ktiles;", "    @%p3 bra MAIN_END;",
             f"    cp.async.wait_group {cfg.stages - 2};", "    bar.sync 0;",
             f"    add.u32 %r22, %kt, {cfg.stages - 1};", "    setp.lt.u32 %p2, %r22, %ktiles;"]
    lines += _load_tile(cfg, "%r22", "%ldslot", "%p2")
    lines.append("    cp.async.commit_group;")
    lines.append("    add.u32 %r23, %smem, %slot;")
    for ks in range(cfg.k16_steps):
        lines.append(f"    add.u32 %r20, %r23, %lda{ks};")
        for mi in range(cfg.mi):
            regs = ", ".join(f"%fa{4 * mi + j}" for j in range(4))
            lines.append(f"    ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{regs}}}, "
                         f"[%r20+{mi * 16 * cfg.row_bytes}];")
        lines.append(f"    add.u32 %r21, %r23, %ldb{ks};")
        for nj in range(cfg.ni // 2):
            regs = ", ".join(f"%fb{4 * nj + j}" for j in range(4))
            lines.append(f"    ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{regs}}}, "
                         f"[%r21+{nj * 16 * cfg.row_bytes}];")
        for mi in range(cfg.mi):
            a = ", ".join(f"%fa{4 * mi + j}" for j in range(4))
            for nj in range(cfg.ni):
                d = ", ".join(f"%d{(mi * cfg.ni + nj) * 4 + e}" for e in range(4))
                lines.append(f"    mma.sync.aligned.m16n8k16.row.col.f32.{mma_type}."
                             f"{mma_type}.f32 {{{d}}}, {{{a}}}, "
                             f"{{%fb{2 * nj}, %fb{2 * nj + 1}}}, {{{d}}};")
    last = (cfg.stages - 1) * cfg.stage_bytes
    lines += ["    add.u32 %kt, %kt, 1;",
              f"    add.u32 %slot, %slot, {cfg.stage_bytes};",
              f"    setp.gt.u32 %p4, %slot, {last};", "    selp.b32 %slot, 0, %slot, %p4;",
              f"    add.u32 %ldslot, %ldslot, {cfg.stage_bytes};",
              f"    setp.gt.u32 %p4, %ldslot, {last};", "    selp.b32 %ldslot, 0, %ldslot, %p4;",
              f"    bra {ENTRY_LOOP};", "MAIN_END:", "    cp.async.wait_all;"]
    return lines


def _epilogue(cfg: Config) -> list[str]:
    """Row pointers and predicates of the thread's 2 mi rows, column predicates of its ni
    pairs, then one (or two predicated) stores per pair."""
    ob = OUT_BYTES[cfg.out_dtype]
    lines = ["    shr.u32 %r0, %lane, 2;", "    and.b32 %r1, %lane, 3;",
             "    shl.b32 %r1, %r1, 1;",
             f"    mad.lo.u32 %r0, %r15, {cfg.warp_m}, %r0;\n    add.u32 %r0, %r0, %r4;",  # row
             f"    mad.lo.u32 %r1, %r16, {cfg.warp_n}, %r1;\n    add.u32 %r1, %r1, %r5;",  # col
             "    and.b32 %r2, %N, 1;", "    setp.eq.u32 %p5, %r2, 0;"]          # N even
    for h in range(2 * cfg.mi):     # rows row + 16 (h >> 1) + 8 (h & 1)
        off = 16 * (h >> 1) + 8 * (h & 1)
        lines += [f"    add.u32 %r2, %r0, {off};", f"    setp.lt.u32 %pr{h}, %r2, %M;",
                  "    mul.wide.u32 %rd3, %r2, %N;", "    cvt.u64.u32 %rd4, %r1;",
                  "    add.s64 %rd3, %rd3, %rd4;", f"    mul.lo.u64 %rd3, %rd3, {ob};",
                  f"    add.s64 %cr{h}, %rd2, %rd3;"]
    for nj in range(cfg.ni):        # columns col + 8 nj and col + 8 nj + 1
        lines += [f"    add.u32 %r2, %r1, {8 * nj};",
                  f"    setp.lt.u32 %pc{2 * nj}, %r2, %N;",
                  "    add.u32 %r2, %r2, 1;", f"    setp.lt.u32 %pc{2 * nj + 1}, %r2, %N;"]
    for h in range(2 * cfg.mi):
        mi, half = h >> 1, h & 1
        for nj in range(cfg.ni):
            base = (mi * cfg.ni + nj) * 4 + 2 * half
            lo, hi = f"%d{base}", f"%d{base + 1}"
            addr = f"%cr{h}+{8 * nj * ob}"
            lines += [f"    and.pred %p6, %pr{h}, %pc{2 * nj + 1};",
                      "    and.pred %p6, %p6, %p5;",
                      f"    and.pred %p7, %pr{h}, %pc{2 * nj};", "    xor.pred %p7, %p7, %p6;",
                      f"    and.pred %p0, %pr{h}, %pc{2 * nj + 1};", "    xor.pred %p0, %p0, %p6;"]
            if cfg.out_dtype == "bf16":
                lines += [f"    cvt.rn.bf16x2.f32 %r3, {hi}, {lo};",
                          f"    @%p6 st.global.b32 [{addr}], %r3;",
                          f"    @%p7 st.global.b16 [{addr}], %r3;",
                          "    shr.u32 %r2, %r3, 16;",
                          f"    @%p0 st.global.b16 [{addr}+2], %r2;"]
            else:
                lines += [f"    @%p6 st.global.v2.f32 [{addr}], {{{lo}, {hi}}};",
                          f"    @%p7 st.global.f32 [{addr}], {lo};",
                          f"    @%p0 st.global.f32 [{addr}+4], {hi};"]
    return lines
