"""`run_kernel`: the functional run of one PTX kernel launch on numpy data.

Checks the launch (grid/block shape, shared memory, argument kinds) before anything
runs, copies pointer arguments into the simulated global memory, runs the grid in
batches of CTAs (CTAs are independent except through global atomics, which any
batch order serialises legally), and only when the whole grid has finished copies
the results back into the caller's arrays, so a fault leaves them untouched.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from isa.cluster import cluster_order, cluster_shape
from isa.dataflow import data_only_pcs
from isa.decode import Program, decode
from isa.errors import LaunchError
from isa.interpreter import StepCounts, run_machine
from isa.machine import Machine
from isa.memory import GlobalLayout, GlobalMemory
from isa.parser import parse
from isa.types import TYPES

MAX_BLOCK_THREADS = 1024
MAX_BLOCK_DIMS = (1024, 1024, 64)
MAX_GRID_DIMS = (2 ** 31 - 1, 65535, 65535)
MAX_SHARED_BYTES = 232448          # 227 KiB opt-in per CTA on sm_90 (CUDA guide, table 21)
DEFAULT_BATCH_THREADS = 1 << 17
TIMING_ONLY_SKIPPED_UNITS = frozenset({"tensor"})


@dataclass(frozen=True, slots=True)
class Launch:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int = 0
    cluster: tuple[int, int, int] = (1, 1, 1)    # CTAs per cluster (`isa.cluster`)
    explicit_cluster: bool = False

    @property
    def cluster_ctas(self) -> int:
        return self.cluster[0] * self.cluster[1] * self.cluster[2]

    @property
    def n_ctas(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    @property
    def block_threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]


@dataclass(frozen=True, slots=True)
class ShapeOnly:
    """A pointer argument with a shape and dtype but no data (timing mode).

    The kernel gets an address range of the right size backed by zero pages that are only
    materialised where the kernel writes; nothing is copied in or out.
    """
    shape: tuple[int, ...]
    dtype: object = np.float32

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize


@dataclass
class FunctionalResult:
    """Instruction counts of a functional run (pointer arguments hold the outputs)."""
    program: Program
    launch: Launch
    warp_instructions: int
    thread_instructions: int
    steps: int
    per_instruction: np.ndarray = field(repr=False)   # warp-instructions per static pc

    def by_opcode(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for ins, n in zip(self.program.instrs, self.per_instruction.tolist(), strict=True):
            if n:
                out[ins.text] = out.get(ins.text, 0) + n
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    def by_unit(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for ins, n in zip(self.program.instrs, self.per_instruction.tolist(), strict=True):
            if n:
                out[ins.unit] = out.get(ins.unit, 0) + n
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def dim3(value, what: str) -> tuple[int, int, int]:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        t = (int(value),)
    else:
        try:
            if isinstance(value, (str, bytes)) or any(
                    isinstance(v, (bool, float, np.floating)) for v in value):
                raise TypeError
            t = tuple(int(v) for v in value)
        except (TypeError, ValueError):
            raise LaunchError(f"{what} must be an int or a tuple of 1-3 ints, got {value!r}") \
                from None
    if not 1 <= len(t) <= 3:
        raise LaunchError(f"{what} must have 1 to 3 dimensions, got {value!r}")
    t = t + (1,) * (3 - len(t))
    if any(v < 1 for v in t):
        raise LaunchError(f"{what} dimensions must be >= 1, got {t}")
    return t


def compile_kernel(ptx: str, entry: str, file: str = "<ptx>") -> Program:
    """Parse, decode and verify one entry of a PTX module, its global loads hoisted as ptxas
    schedules them (`isa.schedule`). The program is kept for the next compile of the same
    entry of the same text (`_compiled`): launches read a `Program` and never change it (a
    launch copies its global layout and writes module globals into its own memory)."""
    return _compiled(ptx, entry, file)


@lru_cache(maxsize=64)
def _compiled(ptx: str, entry: str, file: str) -> Program:
    """`compile_kernel` uncached (the ops of a layer compile the same entries again: a
    reduced launch of op-level sampling, a probe CTA, a second wave)."""
    from isa.schedule import hoist_loads
    from isa.verify import verify
    program = decode(_parsed(ptx, file), entry)
    verify(program)
    return hoist_loads(program)


@lru_cache(maxsize=32)
def _parsed(ptx: str, file: str):
    """`parse` of a module text, kept for the next compile of the same text (a layer's ops
    compile 38 programs of 21 texts; the syntax tree is read-only to `decode`)."""
    return parse(ptx, file)


def check_launch(program: Program, grid, block, shared_bytes: int, cluster=None) -> Launch:
    grid = dim3(grid, "grid")
    shape, explicit = cluster_shape(program, grid, cluster)
    launch = Launch(grid, dim3(block, "block"), int(shared_bytes), shape, explicit)
    if launch.block_threads > MAX_BLOCK_THREADS:
        raise LaunchError(f"block {launch.block} has {launch.block_threads} threads; "
                          f"at most {MAX_BLOCK_THREADS} are allowed")
    for k, (v, lim) in enumerate(zip(launch.block, MAX_BLOCK_DIMS, strict=True)):
        if v > lim:
            raise LaunchError(f"block dimension {'xyz'[k]} = {v} exceeds {lim}")
    for k, (v, lim) in enumerate(zip(launch.grid, MAX_GRID_DIMS, strict=True)):
        if v > lim:
            raise LaunchError(f"grid dimension {'xyz'[k]} = {v} exceeds {lim}")
    if shared_bytes < 0:
        raise LaunchError(f"shared_bytes must be >= 0, got {shared_bytes}")
    total = program.shared_bytes + launch.shared_bytes
    if total > MAX_SHARED_BYTES:
        raise LaunchError(f"kernel '{program.entry}' needs {total} bytes of shared memory "
                          f"({program.shared_bytes} static + {shared_bytes} dynamic); at most "
                          f"{MAX_SHARED_BYTES} per CTA")
    _check_block_directives(program, launch)
    return launch


def _check_block_directives(program: Program, launch: Launch) -> None:
    """`.reqntid X[,Y[,Z]]` fixes the block shape; `.maxntid` bounds its thread count."""
    req = program.directives.get(".reqntid")
    if req:
        want = tuple(req) + (1,) * (3 - len(req))
        if want != launch.block:
            raise LaunchError(f"kernel '{program.entry}' requires block {want} (.reqntid), "
                              f"got block {launch.block}")
    maxn = program.directives.get(".maxntid")
    if maxn:
        limit = int(np.prod(maxn))
        if launch.block_threads > limit:
            raise LaunchError(f"kernel '{program.entry}' allows at most {limit} threads per "
                              f"block (.maxntid {', '.join(map(str, maxn))}), got block "
                              f"{launch.block} = {launch.block_threads} threads")


def marshal_args(program: Program, args, layout: GlobalLayout):
    """Kernel parameter bytes, and the (array, buffer) pairs to copy in and out."""
    params = program.kparams
    if len(args) != len(params):
        names = ", ".join(p.name for p, _ in params)
        raise LaunchError(f"kernel '{program.entry}' takes {len(params)} arguments ({names}), "
                          f"got {len(args)}")
    kparam = np.zeros(max(program.kparam_bytes, 8), dtype=np.uint8)
    arrays = []
    for k, ((decl, off), arg) in enumerate(zip(params, args, strict=True)):
        size = decl.size_bytes
        dims = f"[{decl.count}]" if decl.count > 1 else ""
        where = f"argument {k} ('{decl.name}', .{decl.type}{dims})"
        if decl.count > 1 or decl.vec > 1:          # by-value aggregate
            raw = _aggregate_bytes(arg, size, where)
            kparam[off:off + size] = raw
            continue
        ty = TYPES[decl.type]
        if isinstance(arg, ShapeOnly):
            if ty.bits != 64 or ty.kind == "f":
                raise LaunchError(f"{where} is a .{decl.type} scalar; got a ShapeOnly tensor")
            buf = layout.allocate(f"arg {k} '{decl.name}' (shape only)", arg.nbytes)
            kparam[off:off + 8] = np.frombuffer(np.uint64(buf.start).tobytes(), np.uint8)
            continue
        if isinstance(arg, np.ndarray):
            if ty.bits != 64 or ty.kind == "f":
                raise LaunchError(f"{where} is a .{decl.type} scalar; got an array (pointer "
                                  "parameters are .u64/.b64)")
            buf = layout.allocate(f"arg {k} '{decl.name}'", arg.nbytes)
            arrays.append((arg, buf))
            kparam[off:off + 8] = np.frombuffer(np.uint64(buf.start).tobytes(), np.uint8)
            continue
        kparam[off:off + size] = _scalar_bytes(arg, ty, where)
    return kparam, arrays


def _aggregate_bytes(arg, size: int, where: str) -> np.ndarray:
    if isinstance(arg, (bytes, bytearray, memoryview)):
        raw = np.frombuffer(bytes(arg), dtype=np.uint8)
    elif isinstance(arg, np.ndarray):
        raw = np.ascontiguousarray(arg).view(np.uint8).reshape(-1)
    else:
        raise LaunchError(f"{where} is passed by value; give bytes or a numpy array of "
                          f"{size} bytes, got {type(arg).__name__}")
    if raw.size != size:
        raise LaunchError(f"{where} needs exactly {size} bytes, got {raw.size}")
    return raw


def _scalar_bytes(arg, ty, where: str) -> np.ndarray:
    """Bytes of a scalar argument, checked against the parameter's type.

    Float parameters take any real number. Integer parameters take integers only (a
    float is an error, not a silent truncation). `.sN` takes [-2^(N-1), 2^(N-1));
    `.uN`/`.bN` take [-2^(N-1), 2^N), negative values as two's complement, because
    nvcc declares C `int` parameters `.u32`.
    """
    if isinstance(arg, (bool, np.bool_)) or not isinstance(arg, (int, float, np.integer,
                                                                 np.floating)):
        raise LaunchError(f"{where} needs a number, got {type(arg).__name__} {arg!r}")
    if ty.kind == "f":
        return np.frombuffer(np.asarray(arg, dtype=ty.dtype).tobytes(), np.uint8)
    if isinstance(arg, (float, np.floating)):
        raise LaunchError(f"{where} is an integer parameter; got float {arg!r} "
                          f"(pass an int)")
    v = int(arg)
    lo = -(1 << (ty.bits - 1))
    hi = (1 << (ty.bits - 1)) - 1 if ty.kind == "s" else (1 << ty.bits) - 1
    if not lo <= v <= hi:
        raise LaunchError(f"{where} = {v} does not fit in .{ty.name} (range {lo}..{hi})")
    return np.frombuffer((v & ((1 << ty.bits) - 1)).to_bytes(ty.bits // 8, "little"), np.uint8)


def run_kernel(ptx, entry: str, grid, block, args: list, shared_bytes: int = 0, *,
               file: str = "<ptx>", observer=None, max_batch_threads: int = DEFAULT_BATCH_THREADS,
               max_steps: int = 0, cta_range: tuple[int, int] | None = None,
               timing_only: bool = False, cluster=None, ctas=None) -> FunctionalResult:
    """Run a kernel functionally. Pointer arguments (numpy arrays) are updated in place.

    `ptx` is PTX text or a `Program` from `compile_kernel`. Raises `isa.PtxError` on
    bad PTX or a fault (with file:line:col and the instruction), `isa.LaunchError` on
    an impossible launch or wrong arguments; the caller's arrays are then unchanged.

    Timing mode: `cta_range=(first, stop)` runs only the CTAs with those linear indices
    (x fastest), for sampled simulation, and `ctas` (ascending linear indices, whole
    clusters) only those; `timing_only=True` skips the data of tensor-core
    instructions (`mma`, `wmma.mma`, `wgmma.mma_async`: their destination registers keep
    stale values), which is where large GEMMs and attention spend their arithmetic, and of
    the register-only instructions whose results reach no address, guard or branch
    (`isa.dataflow.data_only_pcs`: FP32 promotion, softmax, epilogue conversions), while
    control flow, addresses and memory traffic still execute. Pointer arguments may be
    `ShapeOnly`. With either option the results are not meaningful, so nothing is copied
    back into the caller's arrays.

    `cluster` (1 to 3 ints) launches thread-block clusters of that shape, as the entry's
    `.reqnctapercluster` does (`isa.cluster`); a `cta_range` must then hold whole clusters.
    """
    program = ptx if isinstance(ptx, Program) else compile_kernel(ptx, entry, file)
    launch = check_launch(program, grid, block, shared_bytes, cluster)
    layout = GlobalLayout()
    layout.buffers = list(program.global_layout.buffers)
    layout.top = program.global_layout.top
    kparam, arrays = marshal_args(program, list(args), layout)
    partial = timing_only or cta_range is not None or ctas is not None
    gmem = GlobalMemory(layout)
    for decl, buf in program.module_globals:
        if decl.init:
            vals = np.asarray(decl.init, dtype=np.float64 if TYPES[decl.type].kind == "f"
                              else np.int64).astype(TYPES[decl.type].dtype)
            gmem.bytes_of(buf)[:vals.nbytes] = vals.view(np.uint8)
    for arr, buf in arrays:
        gmem.bytes_of(buf)[:] = np.ascontiguousarray(arr).view(np.uint8).reshape(-1)
    counts = StepCounts(len(program.instrs))
    steps = 0
    skip = TIMING_ONLY_SKIPPED_UNITS if timing_only else None
    skip_pcs = data_only_pcs(program) if timing_only else None
    for cta_ids in cta_batches(launch, max_batch_threads, cta_range, ctas):
        m = Machine(program, launch, cta_ids, gmem, kparam)
        m.copies_bulk_data = not timing_only
        run_machine(m, counts, observer, max_steps, skip_units=skip, skip_pcs=skip_pcs)
        steps += m.steps
    for arr, buf in ([] if partial else arrays):
        out = gmem.bytes_of(buf).view(arr.dtype).reshape(arr.shape)
        arr[...] = out
    return FunctionalResult(program, launch, int(counts.warp.sum()), int(counts.thread.sum()),
                            steps, counts.warp)


def cta_batches(launch: Launch, max_batch_threads: int,
                cta_range: tuple[int, int] | None = None, ctas=None):
    """CTA index triples in launch order (x fastest), in batches; optionally a sub-range,
    or the CTAs of `ctas` (ascending linear indices). With clusters, cluster after
    cluster, whole clusters per batch (`isa.cluster`)."""
    tpc = -(-launch.block_threads // 32) * 32
    per = max(1, max_batch_threads // tpc)
    gx, gy, _ = launch.grid
    if ctas is not None:
        order = _listed(launch, np.asarray(ctas, np.int64))
    else:
        first, total = 0, launch.n_ctas
        if cta_range is not None:
            first, stop = int(cta_range[0]), int(cta_range[1])
            if not 0 <= first < stop <= total:
                raise LaunchError(f"cta_range {cta_range} must satisfy 0 <= first < stop <= "
                                  f"{total} (the grid's CTA count)")
            total = stop
        order = cluster_order(launch.grid, launch.cluster, first, total)
    size = launch.cluster_ctas
    if size > 1:
        per = max(size, per // size * size)
    for start in range(0, order.size, per):
        lin = order[start:start + per]
        yield np.stack([lin % gx, (lin // gx) % gy, lin // (gx * gy)], axis=1)


def _listed(launch: Launch, ctas: np.ndarray) -> np.ndarray:
    """The listed CTAs in launch order: ascending, in the grid, whole clusters (else a
    `LaunchError` naming what is accepted), cluster after cluster."""
    if ctas.ndim != 1 or not ctas.size or (np.diff(ctas) <= 0).any() or ctas[0] < 0 \
            or ctas[-1] >= launch.n_ctas:
        raise LaunchError(f"ctas {ctas.tolist()[:8]}...: accepted ascending distinct linear "
                          f"CTA indices in [0, {launch.n_ctas})")
    size = launch.cluster_ctas
    if size == 1:
        return ctas
    clusters = cluster_order(launch.grid, launch.cluster).reshape(-1, size)
    listed = np.isin(clusters, ctas)
    if (listed.any(axis=1) & ~listed.all(axis=1)).any():
        raise LaunchError(f"ctas {ctas.tolist()[:8]}... cut a cluster of "
                          f"{launch.cluster}; accepted whole clusters")
    return clusters[listed.all(axis=1)].reshape(-1)
