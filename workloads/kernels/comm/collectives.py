"""Collectives as kernels on the communication SMs: launches of `comm_pipeline.cu` and the link
windows they write into.

What it models
--------------
`PipelineShape` says what one rank's collective kernel does (see the header of
`comm_pipeline.cu`): chunks that cross nodes (InfiniBand, then NVLink forwarding in the
target node), chunks that go straight over NVLink, the chunk size, the sends and rounds per
chunk and the local combine. `pipeline_launch` turns it into a `workloads.ops.Launch` that
runs on `Channels.comm_sms` reserved SMs (`per_sm` channels = CTAs on each, so that several
chunks per SM are in flight, `warps` warps each) in timing mode: every buffer is an
`isa.ShapeOnly` tensor; the buffers of other ranks get address windows that
`models.link_memory.LinkMemory` routes to the links (rank 0's own receive buffers are where
the symmetric peers' chunks land, so they fill rank 0's L2).

`sampled_launches` gives the op-level sampling of a long collective: the same kernel with
`r1` and `r2` rounds of chunks per channel instead of all `R`, weighted
`(r2 - R) / (r2 - r1)` and `(R - r1) / (r2 - r1)`, i.e. a straight line through the two
sampled times (a collective's time is a fill/drain part plus one steady cost per round).

Left out: warp specialisation inside a channel with a shared-memory hand-off between sender,
forwarder and receiver warps (here the roles are per channel: a channel runs its chunk
through all its stages, with all its warps), the queue head/tail bookkeeping of DeepEP's
buffers, and the all-to-all layout notification kernel. Units: bytes, chunks, counts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

import isa
from isa.errors import InputError
from isa.launch import ShapeOnly, marshal_args
from isa.memory import GlobalLayout
from models.link_memory import LinkMemory, LinkWindow
from workloads.ops.registry import Launch

ENTRIES = {"plain": "comm_pipeline", "deepep": "comm_pipeline_deepep",
           "deepep_evict_first": "comm_pipeline_deepep_evict_first"}
"""The kernel entry per `kernels.comm_cache_hints` (the header of `comm_pipeline.cu`)."""
PTX_FILE = Path(__file__).with_name("comm_pipeline.ptx")
REGS_PER_THREAD = {"comm_pipeline": 34, "comm_pipeline_deepep": 48,
                   "comm_pipeline_deepep_evict_first": 48}
"""ptxas -arch=sm_90 -v comm_pipeline.ptx: "Used 34 / 48 / 48 registers"."""
VECTOR_BYTES = 16
WARP_THREADS = 32
SAMPLE_ROUNDS = (2, 4)


@dataclass(frozen=True)
class PipelineShape:
    """One rank's collective kernel (the parameters of `comm_pipeline`)."""

    n_ib_chunks: int = 0         # chunks crossing nodes: RDMA, then NVLink forwarding
    n_direct_chunks: int = 0     # chunks sent straight over NVLink
    chunk_bytes: int = 65536
    ib_ctas: int = 0             # channels (CTAs) carrying the crossing chunks
    fwd_num: int = 0             # NVLink forwards per crossing chunk = fwd_num / fwd_den
    fwd_den: int = 1
    fanout: int = 1              # NVLink sends per round of a direct chunk
    steps: int = 1               # rounds per chunk (ring all-reduce: 2 (ranks - 1))
    reduce_steps: int = 0        # rounds that add the received chunk to the local one
    wait_hops: int = 0           # extra signal waits per round (tree depth)
    reduce_inputs: int = 1       # received vectors combined into one output (0: none)

    @property
    def slots(self) -> int:
        """Receive slots per chunk (the most NVLink sends one chunk makes)."""
        fwd = -(-self.fwd_num // self.fwd_den) if self.fwd_num else 0
        return max(self.fanout, fwd, 1)


def check_chunk_bytes(chunk_bytes) -> int:
    """`chunk_bytes` as a positive multiple of 512 (one warp's 16-byte vectors), else an
    InputError naming --chunk-bytes."""
    if (isinstance(chunk_bytes, bool) or not isinstance(chunk_bytes, int)
            or chunk_bytes < 512 or chunk_bytes % 512):
        raise InputError(f"--chunk-bytes {chunk_bytes!r}: accepted a multiple of 512 "
                         f"(32 lanes x 16 B), at least 512")
    return chunk_bytes


def _program(entry: str):
    return isa.compile_kernel(PTX_FILE.read_text(), entry)


def _args(shape: PipelineShape) -> list:
    vecs = shape.chunk_bytes // VECTOR_BYTES
    n_total = shape.n_ib_chunks + shape.n_direct_chunks
    slots = shape.slots

    def vectors(n):
        return ShapeOnly((max(n, 1), 4), np.uint32)

    def words(n):
        return ShapeOnly((max(n, 1),), np.uint32)

    return [vectors(n_total * vecs), vectors(shape.n_ib_chunks * vecs), words(shape.n_ib_chunks),
            vectors(shape.n_ib_chunks * vecs), vectors(n_total * slots * vecs),
            words(n_total * slots), vectors(n_total * slots * vecs), vectors(n_total * vecs),
            shape.n_ib_chunks, shape.n_direct_chunks, vecs, shape.ib_ctas, shape.fwd_num,
            shape.fwd_den, shape.fanout, shape.steps, shape.reduce_steps, shape.wait_hops,
            shape.reduce_inputs]


def link_windows(program, args: list, ingress_scale: float = 1.0) -> tuple[LinkWindow, ...]:
    """The peer windows of a `comm_pipeline` launch, at the addresses `isa.run_kernel` gives
    its arguments (the same allocation, replayed)."""
    layout = GlobalLayout()
    layout.buffers = list(program.global_layout.buffers)
    layout.top = program.global_layout.top
    marshal_args(program, list(args), layout)
    src, ib_win, ib_sig, ib_recv, nvl_win, nvl_sig, nvl_recv, _ = \
        layout.buffers[len(program.global_layout.buffers):][:8]
    return (LinkWindow(ib_win.start, ib_win.end, "network", mirror_start=ib_recv.start,
                       ingress_scale=ingress_scale),
            LinkWindow(ib_sig.start, ib_sig.end, "network", signal=True),
            LinkWindow(nvl_win.start, nvl_win.end, "nvlink", mirror_start=nvl_recv.start,
                       ingress_scale=ingress_scale),
            LinkWindow(nvl_sig.start, nvl_sig.end, "nvlink", signal=True))


@dataclass(frozen=True)
class Channels:
    """Where a collective runs: `comm_sms` reserved SMs, `per_sm` channels (CTAs) on each
    (chunks in flight per SM), `warps` warps per channel, and the cache qualifiers of its
    chunk accesses (`cache_hints`, a key of `ENTRIES`)."""

    comm_sms: int
    per_sm: int = 4
    warps: int = 8
    cache_hints: str = "deepep"

    @property
    def entry(self) -> str:
        return ENTRIES[self.cache_hints]

    @property
    def ctas(self) -> int:
        return self.comm_sms * self.per_sm


def pipeline_launch(name: str, shape: PipelineShape, channels: Channels,
                    ingress_scale: float = 1.0, detail: dict | None = None) -> Launch:
    """A timing-mode launch of `comm_pipeline` on `channels.comm_sms` reserved SMs."""
    program = _program(channels.entry)
    args = _args(shape)
    windows = link_windows(program, args, ingress_scale)
    return Launch(name, PTX_FILE.read_text(), channels.entry, (channels.ctas, 1, 1),
                  (channels.warps * WARP_THREADS, 1, 1), args, timing_only=True,
                  detail={"chunk_bytes": shape.chunk_bytes,
                          "chunks": shape.n_ib_chunks + shape.n_direct_chunks,
                          "cache_hints": channels.cache_hints, **(detail or {})},
                  regs_per_thread=REGS_PER_THREAD[channels.entry],
                  overrides={"sm.comm_count": channels.comm_sms},
                  options={"sms": "comm", "memory": LinkMemory.factory(windows)})


def rounds(shape: PipelineShape, ctas: int) -> int:
    """Rounds of chunks per channel: the most chunks one channel of either role carries."""
    ib = -(-shape.n_ib_chunks // max(shape.ib_ctas, 1))
    direct = -(-shape.n_direct_chunks // max(ctas - shape.ib_ctas, 1))
    return max(ib if shape.n_ib_chunks else 0, direct if shape.n_direct_chunks else 0, 1)


def with_rounds(shape: PipelineShape, total: int, r: int) -> PipelineShape:
    """`shape` cut to `r` of its `total` rounds (chunk counts scaled alike, rounded up)."""
    return replace(shape, n_ib_chunks=math.ceil(shape.n_ib_chunks * r / total),
                   n_direct_chunks=math.ceil(shape.n_direct_chunks * r / total))


def sampled_launches(name: str, shape: PipelineShape, channels: Channels,
                     ingress_scale: float = 1.0) -> tuple[tuple[tuple[float, Launch], ...], str]:
    """Op-level samples (weight, launch) of a long collective, and the note saying how they
    extrapolate; empty when the collective is no longer than the samples."""
    total = rounds(shape, channels.ctas)
    r1, r2 = SAMPLE_ROUNDS
    if total <= r2:
        return (), ""
    w2 = (total - r1) / (r2 - r1)
    samples = tuple((w, pipeline_launch(name, with_rounds(shape, total, r), channels,
                                        ingress_scale))
                    for w, r in ((1.0 - w2, r1), (w2, r2)))
    note = (f"{total} rounds of chunks per channel extrapolated on a line through {r1} and "
            f"{r2} simulated rounds")
    return samples, note


def split_chunk(nbytes: float, channels: int, chunk_bytes: int) -> int:
    """The chunk size for `nbytes` over `channels`: `chunk_bytes`, or less so that every
    channel gets a chunk (a multiple of 512 bytes)."""
    per_channel = math.ceil(nbytes / max(channels, 1))
    return max(512, min(chunk_bytes, -(-per_channel // 512) * 512))
