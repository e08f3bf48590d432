"""ZCE compressed stores: an op's output leaves the SM as bitmap + packed non-zeros.

What it models
--------------
With `units.zce.enabled` and a non-zero `units.zce.activation_sparsity`, the ops whose
output is a ReLU-like activation the next GEMM reads as its A operand store that output in
the ZCE format (`zce_format`: per 128-element block a bitmap and the packed non-zeros):

* the forward SwiGLU and GELU element-wise ops (`store_hook` on their builders in
  `workloads.ops.elementwise`; backward outputs are gradients and stay dense);
* a GEMM whose epilogue applies the activation (`compressed_output` on its plan; the
  standard layer graphs run the activation as its own op, so no graph GEMM does this).

The compressed/dense byte ratio is the one the consuming GEMM's compressed loads use
(`codesign_ops`: the seeded ReLU-activation tile of `zce_layer.sample_operands` at
`units.zce.activation_sparsity` / `seed`, measured in the ZCE format at the output's dtype
with `zce_layer.BLOCK_ELEMS`-element blocks); the consumer's TMA boxes round it up to their
16-byte granule.

Timing (`CompressedStoreMemory`, a `MemoryInterface` wrapper around the memory model, the
way `models.link_memory` wraps it): the output buffer is a window of addresses. A store
into it goes through the SM's compression engine, a first-come-first-served pipe of
`units.zce.compress_bytes_per_clk_per_sm` dense bytes per cycle; each dense 32-byte sector
is charged once (the first store to it; a later partial store to the same sector merges in
the engine's buffer, as the GEMM epilogue's two 16-byte halves do). The packed stream lies
at the start of the buffer: dense sector `s` (counted from the window start) lands in
compressed sector `floor(s * ratio)`, and only compressed sectors not yet written go on to
L2 (and HBM on write-back): `ratio` of the dense bytes. Overlap assumption: the engine sits
on the store path beside the epilogue (it is not an instruction the warps wait on), so a
streaming output costs max(compressed bytes / the memory's store rate, dense bytes / the
engines' rate); the compressed bytes are booked on the memory pipes at the store's issue
time (the memory contract wants times in order per SM) and the store completes when both
the engine and the memory are done with it. With the preset's engine at the L1 rate
(128 B/clk/SM, 31 TB/s over 132 SMs) against 3.35 TB/s of HBM, the engine is hidden until
the ratio drops under ~0.11.

`compressed_output(plan, config, out_arg, dtype)` puts the wrapper on every launch (and
sampled launch) of a plan; its sizes carry `output_bytes`, `output_bytes_stored` and
`compress_cycles` (the closed form `zce_format.compression_cycles` over the compute SMs).
The kernels' functional results are unchanged (timing only: the bytes a consumer reads
are those of `zce_format.decompress(zce_format.compress(output))`, equal to the output
with -0.0 read as +0.0).

Left out: compressed loads by non-GEMM consumers (a residual add would read dense), the
engine's latency (only its throughput), compressed stores under `simulator.runner.concurrent`
contention runs (the shared memory there is built without this wrapper), and the output
dtype's format ratio for fp8 outputs (GELU/SwiGLU write bf16). Units: bytes, sectors of
32 bytes, ps at the memory interface, SM cycles.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import math

import numpy as np

import isa
from isa.errors import InputError
from isa.launch import marshal_args
from isa.memory import GlobalLayout
from models.flat_memory import SECTOR_BYTES, BandwidthPipe
from simulator.runner.system import MEMORY_MODELS
from workloads.codesign import zce_format as Z
from workloads.codesign.codesign_ops import _zce_sample

ZCE_DTYPE = {"bf16": "bf16", "fp16": "f16", "f16": "f16", "f32": "f32", "tf32": "f32",
             "fp8": "e4m3", "e4m3": "e4m3"}
"""Name of an output dtype in `zce_layer`'s ratio table."""
SIZE_KEYS = ("output_bytes", "output_bytes_stored", "compress_cycles", "store_ratio")


def stores_compressed(config) -> bool:
    """Whether outputs that are activations are stored compressed on `config`."""
    z = config.units.zce
    return bool(z.enabled and z.activation_sparsity > 0)


def store_ratio(config, dtype: str = "bf16") -> float:
    """Compressed/dense bytes of an activation output of `dtype` in the ZCE format: the
    seeded sample the consuming GEMM's compressed loads use (`codesign_ops._zce_sample`)."""

    if dtype not in ZCE_DTYPE:
        raise InputError(f"compressed store of dtype {dtype!r} (accepted: "
                         f"{', '.join(ZCE_DTYPE)})")
    z = config.units.zce
    sample = _zce_sample(z.activation_sparsity, z.weight_sparsity, z.seed, z.granularity,
                         z.kblock_elements, z.min_issue_fraction)
    return float(sample["ratios"][ZCE_DTYPE[dtype]][0])


@dataclasses.dataclass(frozen=True)
class StoreWindow:
    """A dense output buffer [start, end) (bytes) stored compressed to `ratio`."""

    start: int
    end: int
    ratio: float

    def __post_init__(self) -> None:
        if self.end <= self.start or not 0 < self.ratio <= 1:
            raise InputError(f"store window [{self.start:#x}, {self.end:#x}) ratio "
                             f"{self.ratio} (accepted: a non-empty range, 0 < ratio <= 1)")


class _Window:
    """Per-run state of one window: sectors charged to the engine, compressed sectors
    written."""

    def __init__(self, w: StoreWindow) -> None:
        self.first = w.start // SECTOR_BYTES
        self.last = -(-w.end // SECTOR_BYTES)
        self.ratio = w.ratio
        n = self.last - self.first
        self.charged = np.zeros(n, dtype=bool)
        self.written = np.zeros(int(math.floor((n - 1) * w.ratio)) + 1, dtype=bool)


class CompressedStoreMemory:
    """`MemoryInterface` that compresses stores into its windows (module docstring)."""

    def __init__(self, config, inner, windows) -> None:
        self.inner = inner
        self.hooks = inner.hooks
        self.windows = [_Window(w) for w in sorted(windows, key=lambda w: w.start)]
        self._firsts = np.array([w.first for w in self.windows], np.int64)
        self._lasts = np.array([w.last for w in self.windows], np.int64)
        self._rate = config.units.zce.compress_bytes_per_clk_per_sm \
            * config.chip.clock_ghz * 1e9
        self.engines: dict[int, BandwidthPipe] = {}

    def attach_tracers(self, sheet) -> list:
        attach = getattr(self.inner, "attach_tracers", None)
        return attach(sheet) if attach else []

    def access(self, sm_id: int, kind: str, sectors: np.ndarray, now_ps: int,
               ops: int = 1, policy: np.ndarray | None = None) -> int:
        """Completion time in ps of one warp's access (`models.flat_memory` Contract; the
        policy row goes with every part handed to the inner memory)."""
        if kind != "store" or sectors.size == 0 or not self.windows:
            return self.inner.access(sm_id, kind, sectors, now_ps, ops, policy)
        which = np.searchsorted(self._firsts, sectors, side="right") - 1
        inside = (which >= 0) & (sectors < self._lasts[np.maximum(which, 0)])
        if not inside.any():
            return self.inner.access(sm_id, kind, sectors, now_ps, ops, policy)
        done = now_ps
        if not inside.all():
            done = self.inner.access(sm_id, kind, sectors[~inside], now_ps, ops, policy)
        charged, packed = 0, []
        for index in np.unique(which[inside]).tolist():
            w = self.windows[index]
            rel = sectors[inside & (which == index)] - w.first
            new = rel[~w.charged[rel]]
            w.charged[new] = True
            charged += int(new.size)
            out = np.unique(np.floor(rel * w.ratio).astype(np.int64))
            out = out[~w.written[out]]
            w.written[out] = True
            packed.append(out + w.first)
        if charged:
            engine = self.engines.get(sm_id)
            if engine is None:
                engine = self.engines[sm_id] = BandwidthPipe(self._rate)
            done = max(done, engine.reserve(now_ps, charged * SECTOR_BYTES))
        fresh = np.concatenate(packed)
        if fresh.size:
            done = max(done, self.inner.access(sm_id, kind, fresh, now_ps, ops, policy))
        return done


@dataclasses.dataclass(frozen=True)
class CompressedStoreFactory:
    """A `build_system` memory factory: `CompressedStoreMemory` with `stores` around the
    memory model named `inner`."""

    stores: tuple[StoreWindow, ...]
    inner: str = "cached"

    def __call__(self, config, n_sms: int, carveout: int) -> CompressedStoreMemory:

        if self.inner not in MEMORY_MODELS:
            raise InputError(f"memory {self.inner!r} (accepted: {', '.join(MEMORY_MODELS)})")
        return CompressedStoreMemory(config, MEMORY_MODELS[self.inner](config, n_sms, carveout),
                                     self.stores)


def arg_window(ptx: str, entry: str, args: list, index: int) -> tuple[int, int]:
    """Byte range [start, end) that `isa.run_kernel` gives pointer argument `index` of a
    launch (the same allocation, replayed)."""

    program = isa.compile_kernel(ptx, entry)
    layout = GlobalLayout()
    layout.buffers = list(program.global_layout.buffers)
    layout.top = program.global_layout.top
    marshal_args(program, list(args), layout)
    for buf in layout.buffers[len(program.global_layout.buffers):]:
        if buf.name.startswith(f"arg {index} "):
            return buf.start, buf.end
    raise InputError(f"{entry}: argument {index} is not a pointer to a buffer (accepted: an "
                     "array or ShapeOnly argument)")


def with_compressed_store(launch, out_arg: int, ratio: float, inner: str = "cached"):
    """`launch` whose stores into argument `out_arg` are compressed to `ratio`."""
    if "memory" in launch.options:
        raise InputError(f"{launch.entry}: a launch with its own memory model cannot also "
                         "store compressed (accepted: a launch on the default memory)")
    start, end = arg_window(launch.ptx, launch.entry, launch.args, out_arg)
    factory = CompressedStoreFactory((StoreWindow(start, end, ratio),), inner)
    return dataclasses.replace(launch, options={**launch.options, "memory": factory})


def compressed_output(plan, config, out_arg: int, dtype: str = "bf16",
                      inner: str = "cached"):
    """`plan` (an `OpPlan`) whose launches store argument `out_arg`, an activation of
    `dtype`, compressed (module docstring); unchanged unless `stores_compressed(config)`."""
    if not stores_compressed(config):
        return plan
    ratio = store_ratio(config, dtype)
    dense = int(_arg_nbytes(plan.launches[0], out_arg))
    sms = int(config.sm.count - config.sm.comm_count)
    sizes = {**plan.sizes, "output_bytes": float(dense),
             "output_bytes_stored": float(dense * ratio), "store_ratio": ratio,
             "compress_cycles": Z.compression_cycles(
                 dense, config.units.zce.compress_bytes_per_clk_per_sm, sms)}

    def adapt(x):
        return with_compressed_store(x, out_arg, ratio, inner)

    return dataclasses.replace(plan, sizes=sizes,
                               launches=tuple(adapt(x) for x in plan.launches),
                               samples=tuple((w, adapt(x)) for w, x in plan.samples))


GEMM_C_ARG = 4      # [tmap_a, tmap_b, a, b, c, ...] (templates.gemm.GemmKernel.args)


def gemm_activation_output(plan, config):
    """A GEMM `plan` (from `workloads.ops`) whose epilogue applies a ReLU-like activation:
    its C stored compressed (module docstring). The template's epilogue computes no
    activation; the bytes and the engine are what change."""
    if plan.kind != "gemm":
        raise InputError(f"gemm_activation_output of a {plan.kind!r} plan (accepted: gemm)")
    out = plan.launches[0].args[GEMM_C_ARG]
    dtype = {"bfloat16": "bf16", "float32": "f32"}.get(np.dtype(out.dtype).name)
    if dtype is None:
        raise InputError(f"GEMM output dtype {out.dtype} (accepted: bf16, f32)")
    return compressed_output(plan, config, GEMM_C_ARG, dtype)


def _arg_nbytes(launch, index: int) -> int:
    arg = launch.args[index]
    if not hasattr(arg, "nbytes"):
        raise InputError(f"{launch.entry}: argument {index} is not a tensor")
    return int(arg.nbytes)


def store_hook(out_arg: int, dtype: str = "bf16"):
    """Decorator of an element-wise op builder whose forward output (launch argument
    `out_arg`) is an activation: stored compressed when `stores_compressed(config)`."""

    def wrap(builder):
        signature = inspect.signature(builder)

        @functools.wraps(builder)
        def op(config, *args, **kwargs):
            plan = builder(config, *args, **kwargs)
            bound = signature.bind(config, *args, **kwargs)
            bound.apply_defaults()
            if bound.arguments.get("backward") or not stores_compressed(config):
                return plan
            return compressed_output(plan, config, out_arg, dtype)

        return op

    return wrap
