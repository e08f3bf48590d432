"""`run_kernel`: the functional run of one PTX kernel launch on numpy data.

Checks the launch (grid/block shape, shared memory, argument kinds) before anything
runs, copies pointer arguments into the simulated global memory, runs the grid in
batches of CTAs (CTAs are independent except through global atomics, which any
batch order serialises legally), and only when the whole grid has finished copies
the results back into the caller's arrays, so a fault leaves them untouched.

Pointer arguments, as a device would see them:

* One device buffer per distinct memory region: arguments whose memory overlaps (the
  same array twice, or views of one array, `np.shares_memory`) and that are C-contiguous
  in native byte order share one buffer spanning them, each argument pointing at its own
  offset, so a kernel given `(y, y)` reads what it wrote. Other layouts are passed as a
  dense copy in native byte order (a big-endian array is converted on the way in and
  back); identical views share one copy; overlapping arguments the device cannot see as
  one buffer (a strided or byte-swapped view overlapping another argument) get separate
  copies, and a kernel that writes any of them is refused after the run.
* Written means changed: after the whole grid, an argument is copied back only if its
  bytes in device memory differ from the caller's (a store of the value already there
  changes nothing, so it is not a write). Read-only arrays (`flags.writeable = False`,
  `np.broadcast_to` views) are accepted as inputs; a kernel that changes one is a
  `LaunchError` naming the parameter, raised before any caller array is touched.
* `ShapeOnly` tensors (timing mode) take address ranges backed by zero pages that the
  operating system materialises only where the kernel writes; nothing is copied.

Resource guards, checked before the first thread runs: the launch's memory (global
buffers, registers and per-thread state of a batch of CTAs, shared memory of the batch,
local and param memory) is estimated and must fit `memory_budget_bytes`; a batch is
made smaller to fit when one cluster of CTAs would, otherwise the launch is refused
with the estimate. A batch of CTAs runs at most `max_steps` steps (one step executes
one instruction for the threads of the batch waiting at it): a kernel that does not
end stops with a `StepLimitError` (a `LaunchError`) naming the kernel and the limit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from numpy.lib.array_utils import byte_bounds

from isa.cluster import cluster_order, cluster_shape, dim3
from isa.dataflow import data_only_pcs
from isa.decode import Program, decode
from isa.errors import LaunchError
from isa.interpreter import StepCounts, run_machine
from isa.machine import Machine
from isa.memory import GLOBAL_BASE, Buffer, GlobalLayout, GlobalMemory
from isa.parser import parse
from isa.schedule import hoist_loads
from isa.targets import has_target, verify_target
from isa.types import TYPES
from isa.verify import verify

MAX_BLOCK_THREADS = 1024
MAX_BLOCK_DIMS = (1024, 1024, 64)
MAX_GRID_DIMS = (2 ** 31 - 1, 65535, 65535)
MAX_SHARED_BYTES = 232448          # 227 KiB opt-in per CTA on sm_90 (CUDA guide, table 21)
DEFAULT_BATCH_THREADS = 1 << 17
DEFAULT_MAX_STEPS = 1 << 24
"""Steps of one batch of CTAs. Converged code takes one step per instruction of a thread,
so this is a per-thread budget of about 16.8 million instructions (divergent warps take a
few steps per instruction). The longest batch in the tests takes about 41,000 steps (a
persistent FP8 GEMM); a full-size persistent GEMM or long-context attention is estimated
below a million. An endless loop reaches the limit in about a minute and a half."""
DEFAULT_MEMORY_BUDGET_BYTES = 16 << 30
"""Host memory a launch may take (`memory_budget_bytes`). The largest launch in the tests
is estimated at about 100 MiB; an absurd one is refused before anything is allocated."""
MACHINE_BYTES_PER_THREAD = 256
"""Per-thread state of `isa.machine.Machine` besides registers (pc, barrier and call state,
thread and CTA ids) and the per-step lane arrays of the semantics, rounded up."""
TIMING_ONLY_SKIPPED_UNITS = frozenset({"tensor"})
CLUSTER_TARGET = "sm_90"          # thread-block clusters are new in Hopper (CUDA guide)


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

    def __post_init__(self):
        shape = tuple(self.shape) if isinstance(self.shape, (tuple, list)) else (self.shape,)
        if not all(isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 0
                   for n in shape):
            raise LaunchError(f"ShapeOnly shape {self.shape!r}: accepted a tuple of ints >= 0")
        try:
            np.dtype(self.dtype)
        except TypeError:
            raise LaunchError(f"ShapeOnly dtype {self.dtype!r}: accepted a numpy dtype") from None
        object.__setattr__(self, "shape", tuple(int(n) for n in shape))

    @property
    def nbytes(self) -> int:
        """Exact (Python ints: a product past 2^63 cannot wrap below the memory budget)."""
        return math.prod(self.shape) * np.dtype(self.dtype).itemsize


@dataclass
class FunctionalResult:
    """Instruction counts of a functional run (pointer arguments hold the outputs)."""
    program: Program
    launch: Launch
    warp_instructions: int
    thread_instructions: int
    steps: int
    per_instruction: np.ndarray = field(repr=False)   # warp-instructions per static pc
    written_args: tuple[int, ...] = ()    # pointer arguments the kernel changed (copied back)

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


def check_cluster_target(launch: Launch, target: str) -> None:
    """Thread-block clusters of several CTAs need sm_90 (a `LaunchError` below it)."""
    if launch.cluster_ctas > 1 and not has_target(target, CLUSTER_TARGET):
        raise LaunchError(f"cluster {launch.cluster} of {launch.cluster_ctas} CTAs needs "
                          f"{CLUSTER_TARGET} or newer; the chip's target is {target} "
                          "(accepted: a cluster of 1 CTA)")


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


@dataclass(slots=True)
class PointerArg:
    """A numpy array given for a pointer parameter."""
    index: int                   # argument position
    name: str                    # parameter name
    array: np.ndarray
    lo: int                      # host byte range [lo, hi) of its memory
    hi: int
    direct: bool                 # its bytes are what the device sees (C order, native)

    @property
    def label(self) -> str:
        return f"argument {self.index} ('{self.name}')"

    def device_bytes(self) -> np.ndarray:
        """The bytes the device sees: a view of the caller's memory when `direct`, else a
        dense copy in native byte order."""
        a = self.array
        if not self.direct:
            a = np.ascontiguousarray(a, dtype=_native(a.dtype))
        return a.reshape(-1).view(np.uint8)

    def same_view(self, other: PointerArg) -> bool:
        a, b = self.array, other.array
        return (self.lo, a.shape, a.strides, a.dtype) == (other.lo, b.shape, b.strides, b.dtype)


@dataclass(slots=True)
class Region:
    """One device buffer and the pointer arguments it holds, each at a byte offset."""
    buffer: Buffer
    members: list[tuple[PointerArg, int]]
    separate: tuple[PointerArg, ...] = ()   # overlapping arguments with buffers of their own


def _native(dtype: np.dtype) -> np.dtype:
    return dtype if dtype.isnative else dtype.newbyteorder("=")


def marshal_args(program: Program, args, layout: GlobalLayout):
    """Kernel parameter bytes, and the `Region`s to copy in and out. Buffers are allocated
    in parameter order, a region at its first argument (`isa.launch` module docstring)."""
    params = program.kparams
    if len(args) != len(params):
        names = ", ".join(p.name for p, _ in params)
        raise LaunchError(f"kernel '{program.entry}' takes {len(params)} arguments ({names}), "
                          f"got {len(args)}")
    kparam = np.zeros(max(program.kparam_bytes, 8), dtype=np.uint8)
    pointers = {}
    for k, ((decl, _), arg) in enumerate(zip(params, args, strict=True)):
        if isinstance(arg, np.ndarray) and decl.count == 1 and decl.vec == 1:
            ty = TYPES[decl.type]
            if ty.bits != 64 or ty.kind == "f":
                raise LaunchError(f"{_where(decl, k)} is a .{decl.type} scalar; got an array "
                                  "(pointer parameters are .u64/.b64)")
            pointers[k] = _pointer_arg(k, decl.name, arg)
    placed = _regions(pointers.values())
    regions, address = [], {}
    for k, ((decl, off), arg) in enumerate(zip(params, args, strict=True)):
        size = decl.size_bytes
        where = _where(decl, k)
        if decl.count > 1 or decl.vec > 1:          # by-value aggregate
            raw = _aggregate_bytes(arg, size, where)
            kparam[off:off + size] = raw
            continue
        ty = TYPES[decl.type]
        if isinstance(arg, ShapeOnly):
            if ty.bits != 64 or ty.kind == "f":
                raise LaunchError(f"{where} is a .{decl.type} scalar; got a ShapeOnly tensor")
            buf = layout.allocate(f"arg {k} '{decl.name}' (shape only)", arg.nbytes)
            kparam[off:off + 8] = _address_bytes(buf.start)
            continue
        if k in pointers:
            if k not in address:
                region = _allocate_region(layout, *placed[k])
                regions.append(region)
                for p, offset in region.members:
                    address[p.index] = region.buffer.start + offset
            kparam[off:off + 8] = _address_bytes(address[k])
            continue
        kparam[off:off + size] = _scalar_bytes(arg, ty, where)
    return kparam, regions


def _allocate_region(layout: GlobalLayout, members: list[PointerArg],
                     separate: tuple[PointerArg, ...]) -> Region:
    """The buffer of `members`: the span of their memory (direct arguments, lowest first,
    each at its offset from the lowest), or one dense copy (identical views)."""
    first = members[0]
    size_bytes = max(p.hi for p in members) - first.lo if first.direct else first.array.nbytes
    names = " = ".join(f"arg {p.index} '{p.name}'" for p in members)
    buf = layout.allocate(names, size_bytes)
    return Region(buf, [(p, p.lo - first.lo if p.direct else 0) for p in members], separate)


def _where(decl, k: int) -> str:
    dims = f"[{decl.count}]" if decl.count > 1 else ""
    return f"argument {k} ('{decl.name}', .{decl.type}{dims})"


def _address_bytes(address: int) -> np.ndarray:
    return np.frombuffer(np.uint64(address).tobytes(), np.uint8)


def _pointer_arg(k: int, name: str, arr: np.ndarray) -> PointerArg:
    if arr.dtype.hasobject:
        raise LaunchError(f"argument {k} ('{name}') is an array of Python objects "
                          f"(dtype {arr.dtype}); accepted: numbers (numeric, bool or "
                          "structured dtypes)")
    lo, hi = byte_bounds(arr)
    direct = bool(arr.flags.c_contiguous) and arr.dtype.isnative
    return PointerArg(k, name, arr, lo, hi if arr.size else lo, direct)


def _overlap(a: PointerArg, b: PointerArg) -> bool:
    if a.lo >= b.hi or b.lo >= a.hi:
        return False
    if a.direct and b.direct:
        return True
    try:
        return bool(np.shares_memory(a.array, b.array, max_work=1 << 20))
    except np.exceptions.TooHardError:
        return True


def _regions(pointers) -> dict[int, tuple[list[PointerArg], tuple[PointerArg, ...]]]:
    """For each pointer argument, the members of its buffer (in argument order) and the
    overlapping arguments in buffers of their own: arguments that share memory form a
    group (transitively); a group of direct arguments, or of identical views, is one
    buffer; any other group is one buffer per argument, all marked as `separate`."""
    pointers = list(pointers)
    group = list(range(len(pointers)))

    def root(i: int) -> int:
        while group[i] != i:
            i = group[i]
        return i

    for i, a in enumerate(pointers):
        for j in range(i):
            if _overlap(a, pointers[j]):
                group[root(i)] = root(j)
    groups: dict[int, list[PointerArg]] = {}
    for i, p in enumerate(pointers):
        groups.setdefault(root(i), []).append(p)
    out = {}
    for members in groups.values():
        if len(members) == 1 or all(p.direct for p in members) or \
                all(p.same_view(members[0]) for p in members):
            ordered = sorted(members, key=lambda p: (p.lo, p.index)) if members[0].direct \
                else members
            for p in members:
                out[p.index] = (ordered, ())
        else:
            for p in members:
                out[p.index] = ([p], tuple(m for m in members if m is not p))
    return out


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
               max_steps: int | None = DEFAULT_MAX_STEPS, cta_range: tuple[int, int] | None = None,
               timing_only: bool = False, cluster=None, ctas=None,
               memory_budget_bytes: int | None = DEFAULT_MEMORY_BUDGET_BYTES,
               target: str | None = None, extensions=frozenset()) -> FunctionalResult:
    """Run a kernel functionally. Pointer arguments (numpy arrays) the kernel writes are
    updated in place (aliasing, byte order and read-only arrays: the module docstring).

    `ptx` is PTX text or a `Program` from `compile_kernel`. Raises `isa.PtxError` on
    bad PTX or a fault (with file:line:col and the instruction), `isa.LaunchError` on
    an impossible launch, wrong arguments, a launch beyond `memory_budget_bytes` (None:
    no budget) or a batch of CTAs running past `max_steps` steps (`StepLimitError`; None:
    no limit); the caller's arrays are then unchanged.

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

    `target` (an ISA target of `isa.targets.TARGETS`, e.g. "sm_80") refuses, before anything
    runs, a program that target lacks (`isa.targets.verify_target`, with `extensions` the
    co-design units the chip has) and clusters of several CTAs below sm_90; None runs every
    instruction the interpreter knows.
    """
    limit = _positive_or_none(max_steps, "max_steps")
    budget = _positive_or_none(memory_budget_bytes, "memory_budget_bytes")
    program = ptx if isinstance(ptx, Program) else compile_kernel(ptx, entry, file)
    if target is not None:
        verify_target(program, target, extensions)
    launch = check_launch(program, grid, block, shared_bytes, cluster)
    if target is not None:
        check_cluster_target(launch, target)
    layout = GlobalLayout()
    layout.buffers = list(program.global_layout.buffers)
    layout.top = program.global_layout.top
    kparam, regions = marshal_args(program, list(args), layout)
    partial = timing_only or cta_range is not None or ctas is not None
    batch_threads = fit_batch(program, launch, layout, max_batch_threads, budget)
    gmem = _global_memory(program, layout)
    for decl, buf in program.module_globals:
        if decl.init:
            vals = np.asarray(decl.init, dtype=np.float64 if TYPES[decl.type].kind == "f"
                              else np.int64).astype(TYPES[decl.type].dtype)
            gmem.bytes_of(buf)[:vals.nbytes] = vals.view(np.uint8)
    for region in regions:
        _copy_in(gmem, region)
    counts = StepCounts(len(program.instrs))
    steps = 0
    skip = TIMING_ONLY_SKIPPED_UNITS if timing_only else None
    skip_pcs = data_only_pcs(program) if timing_only else None
    for cta_ids in cta_batches(launch, batch_threads, cta_range, ctas):
        m = Machine(program, launch, cta_ids, gmem, kparam)
        m.copies_bulk_data = not timing_only
        run_machine(m, counts, observer, limit or 0, skip_units=skip, skip_pcs=skip_pcs)
        steps += m.steps
    written = () if partial else _copy_back(program, gmem, regions)
    return FunctionalResult(program, launch, int(counts.warp.sum()), int(counts.thread.sum()),
                            steps, counts.warp, written)


def _positive_or_none(value, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
            or value < 1:
        raise LaunchError(f"{name} = {value!r}: accepted a positive int, or None for no limit")
    return int(value)


# -- copy in and out ---------------------------------------------------------------------
def _copy_in(gmem: GlobalMemory, region: Region) -> None:
    data = gmem.bytes_of(region.buffer)
    for p, offset in region.members:
        src = p.device_bytes()
        data[offset:offset + src.size] = src
        if not p.direct:
            break                   # identical views: one copy holds them all


def _copy_back(program: Program, gmem: GlobalMemory, regions: list[Region]) -> tuple[int, ...]:
    """Copy the arguments whose bytes the kernel changed back into the caller's arrays, in
    their own byte order; first refuse (`LaunchError`, nothing copied) a change to a
    read-only array or to an overlap one buffer could not hold. The indices copied back."""
    changed = []
    for region in regions:
        data = gmem.bytes_of(region.buffer)
        for p, offset in region.members:
            new = data[offset:offset + p.array.nbytes]
            if not np.array_equal(new, p.device_bytes()):
                changed.append((region, p, offset, new))
    for region, p, offset, _ in changed:
        _check_writable(program.entry, region, p, offset)
    for _, p, _, new in changed:
        if p.array.flags.writeable:
            p.array[...] = new.view(_native(p.array.dtype)).reshape(p.array.shape)
    return tuple(sorted(p.index for _, p, _, _ in changed))


def _check_writable(entry: str, region: Region, p: PointerArg, offset: int) -> None:
    """A changed argument can be copied back: it is writeable, or writeable arguments of its
    buffer cover its bytes; and it shares no memory with arguments in other buffers."""
    if region.separate:
        others = ", ".join(o.label for o in region.separate)
        raise LaunchError(f"kernel '{entry}' wrote {p.label}, whose memory overlaps {others} "
                          "in a layout one device buffer cannot hold (a strided or byte-swapped "
                          "view); nothing was copied back. Accepted: arguments that share "
                          "memory as C-contiguous arrays in native byte order, or separate "
                          "arrays (x.copy())")
    if p.array.flags.writeable:
        return
    start, stop = offset, offset + p.array.nbytes
    for q, q_offset in sorted(region.members, key=lambda m: m[1]):
        if q.array.flags.writeable and q_offset <= start < q_offset + q.array.nbytes:
            start = q_offset + q.array.nbytes
    if start >= stop:
        return
    why = "a broadcast view" if 0 in p.array.strides and p.array.size > 1 else \
        "flags.writeable is False"
    raise LaunchError(f"kernel '{entry}' wrote {p.label}, a read-only array ({why}); nothing "
                      "was copied back. Accepted for an argument the kernel writes: a "
                      "writeable array (np.array(x) makes one)")


# -- resources ---------------------------------------------------------------------------
def register_bytes_per_thread(program: Program) -> int:
    """Host bytes of one thread's register files (`isa.machine.Machine.files`)."""
    width = {"P": 1, "R16": 2, "R32": 4, "R64": 8}
    return sum(max(program.nregs.get(f, 0), 1) * b for f, b in width.items())


def fit_batch(program: Program, launch: Launch, layout: GlobalLayout, max_batch_threads: int,
              budget: int | None) -> int:
    """The thread count per batch (`cta_batches`): `max_batch_threads`, or fewer so that
    global memory plus one batch (registers, per-thread state, local, param and shared
    memory) fits `budget`. A `LaunchError` with the estimate when one cluster of CTAs
    does not fit."""
    tpc = -(-launch.block_threads // 32) * 32
    per_thread = (register_bytes_per_thread(program) + MACHINE_BYTES_PER_THREAD
                  + _round8(program.local_bytes) + _round8(program.tparam_bytes))
    per_cta = tpc * per_thread + _round8(program.shared_bytes + launch.shared_bytes)
    global_bytes = layout.top - GLOBAL_BASE
    size = launch.cluster_ctas
    per = max(1, max_batch_threads // tpc)
    if size > 1:
        per = max(size, per // size * size)
    batch = min(per, launch.n_ctas)
    if budget is None or global_bytes + batch * per_cta <= budget:
        return max_batch_threads
    fits = (budget - global_bytes) // per_cta // size * size
    if fits >= size:
        return int(fits) * tpc
    largest = max(layout.buffers, key=lambda b: b.size_bytes, default=None)
    biggest = f", the largest {largest.name} with {_size(largest.size_bytes)}" if largest else ""
    raise LaunchError(
        f"kernel '{program.entry}' needs an estimated {_size(global_bytes + size * per_cta)} "
        f"of host memory, beyond the budget of {_size(budget)}: {_size(global_bytes)} of "
        f"global buffers{biggest}; {_size(size * per_cta)} for {size} CTA(s) of {tpc} "
        f"threads ({register_bytes_per_thread(program)} bytes of registers, "
        f"{_round8(program.local_bytes)} of local memory per thread, "
        f"{_round8(program.shared_bytes + launch.shared_bytes)} of shared memory per CTA). "
        "Accepted: smaller tensors or register declarations, or a larger "
        "run_kernel(memory_budget_bytes=...)")


def _global_memory(program: Program, layout: GlobalLayout) -> GlobalMemory:
    try:
        return GlobalMemory(layout)
    except MemoryError:
        raise LaunchError(f"kernel '{program.entry}': the host could not reserve "
                          f"{_size(layout.top - GLOBAL_BASE)} of simulated global memory; "
                          "accepted: smaller tensors, or a memory_budget_bytes below what the "
                          "host can give") from None


def _round8(n: int) -> int:
    return -(-int(n) // 8) * 8


def _size(n: int) -> str:
    """Bytes in binary units, e.g. '7.8 GiB'."""
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.1f} {unit}"
    return f"{n} bytes"


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
