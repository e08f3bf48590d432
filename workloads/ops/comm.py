"""Communication ops: expert-parallel all-to-all (dispatch / combine) and all-reduce (ring, tree),
as kernels on the communication SMs (`workloads.kernels.comm.collectives`).

alltoall (rank 0 of `--ranks`, peers symmetric; balanced routing unless `routing` is given)
* Each token picks `--topk` of `--experts` experts spread evenly over the ranks; it is sent
  once to every distinct rank holding one of them (expected count of distinct ranks under
  uniform choice). Token bytes: fp8 = hidden + one f32 scale per 128 values (DeepSeek-V3's
  1x128 tiles), bf16 = 2 x hidden.
* One node (`ranks <= links.gpus_per_node`): every copy to another rank goes over NVLink.
* Several nodes: node-limited routing (at most `MAX_NODES_PER_TOKEN` = 4 nodes per token,
  DeepSeek-V3 §2.1.2); a token crosses to each target node once over InfiniBand, to the GPU
  with rank 0's local index, which forwards it over NVLink to the GPUs of that node holding
  its experts; tokens whose target node is rank 0's own go straight over NVLink.
* `--mode low-latency` (decode): pure RDMA, one message per (token, expert) pair, no
  deduplication and no NVLink forwarding, as DeepEP's low-latency kernels.
* combine sends the same volumes back and adds the contributions per token on arrival.
* `gbps` = bytes rank 0 sends over its bottleneck link domain (NVLink within a node, RDMA
  across nodes) / time, as DeepEP reports: `plan.bytes` holds those bytes so that
  `simulate_op`'s `bytes / time` is that figure.

allreduce (`--ranks` GPUs of one node over NVLink, `--bytes` per rank)
* ring: each chunk of bytes / ranks goes round 2 (ranks - 1) steps, adding on the first
  ranks - 1. tree: a binary tree, each chunk reduced up and broadcast down (the busiest
  rank sends it `min(3, ranks - 1)` times; the depth is waited for on the way).
* `gbps` is NCCL's bus bandwidth 2 (ranks - 1) / ranks x bytes / time: `plan.bytes` holds
  2 (ranks - 1) / ranks x bytes.
* `--compress topk4bit` (f32 gradients): `grad_compress` keeps about 10 % of each block as
  4-bit codes, a ring all-gather moves the compressed buffers (7.9 % of the bytes, rounds
  of plain copies), `grad_decompress` sums the ranks' blocks
  (`workloads.kernels.comm.compression`); `gbps` stays the bus bandwidth of the
  uncompressed buffer, so it shows the effective speed-up.

`--comm-sms` (default: the preset's `sm.comm_count`, else `DEFAULT_COMM_SMS`) SMs run
`--channels-per-sm` channels (CTAs) each; `--chunk-bytes` is the largest message (chunk)
size, smaller when the data would not give every channel a chunk. Long collectives are op-level
sampled (`collectives.sampled_launches`). The result's `roofline_us` is the HBM roofline of
`plan.bytes` (the op counts no FLOPs), not a link bound.
Left out: multi-node all-reduce, NVLink SHARP, the layout/notify kernels of DeepEP.
Units: bytes, tokens, GB/s.
"""

from __future__ import annotations

import math

from isa.errors import InputError
from workloads.kernels.comm.collectives import (
    Channels,
    PipelineShape,
    check_chunk_bytes,
    pipeline_launch,
    sampled_launches,
    split_chunk,
)
from workloads.kernels.comm.compression import BLOCK_BYTES, compression_launches, n_blocks
from workloads.ops.registry import (
    HOST_BYTES_PER_CTA,
    Flag,
    OpPlan,
    check_op_size,
    positive,
    register,
)

DEFAULT_COMM_SMS = 20           # DeepSeek-V3 §3.2.2: 20 of 132 SMs for communication
DEFAULT_CHUNK_BYTES = 65536
DEFAULT_WARPS = 8               # warps per channel (ESTIMATE)
DEFAULT_CHANNELS_PER_SM = 4     # chunks in flight per comm SM (ESTIMATE; NCCL keeps 8 steps)
MAX_NODES_PER_TOKEN = 4         # DeepSeek-V3 §2.1.2 node-limited routing
FP8_SCALE_GROUP = 128           # one f32 scale per 128 fp8 values (DeepSeek-V3 §3.3.1)
KINDS = ("dispatch", "combine")
MODES = ("normal", "low-latency")
ALGOS = ("ring", "tree")
COMPRESSIONS = ("none", "topk4bit")
DTYPES = ("fp8", "bf16")
COMPRESS_HOST_BYTES_PER_BYTE = 8
"""Host bytes per gradient byte a compressed all-reduce's build holds (the gradients, their
compressed reference and the dense output): tracemalloc peak measured 6.5, rounded up."""
PEAK = "vector_fp32_tflops"

COMMON_FLAGS = (
    Flag("--ranks", "ranks (GPUs) taking part", required=True),
    Flag("--comm-sms", "SMs reserved for the collective (default: sm.comm_count, else 20)"),
    Flag("--chunk-bytes", "bytes per message (chunk), a multiple of 512",
         default=DEFAULT_CHUNK_BYTES),
    Flag("--warps", "warps per channel (CTA)", default=DEFAULT_WARPS),
    Flag("--channels-per-sm", "channels (CTAs, chunks in flight) per comm SM",
         default=DEFAULT_CHANNELS_PER_SM),
)


def expected_distinct(groups: float, members: int, picks: int) -> float:
    """Expected number of distinct groups hit when `picks` of `groups * members` items are
    drawn without replacement (uniform)."""
    total = groups * members
    miss = 1.0
    for i in range(int(picks)):
        miss *= max(total - members - i, 0) / (total - i)
    return groups * (1.0 - miss)


def _channels(config, comm_sms, per_sm, warps) -> Channels:
    if comm_sms is None:
        comm_sms = config.sm.comm_count or DEFAULT_COMM_SMS
    positive("--comm-sms", comm_sms)
    positive("--channels-per-sm", per_sm)
    positive("--warps", warps)
    if comm_sms >= config.sm.count:
        raise InputError(f"--comm-sms {comm_sms}: accepted 1 .. {config.sm.count - 1} "
                         f"(sm.count = {config.sm.count})")
    return Channels(comm_sms, per_sm, warps, config.kernels.comm_cache_hints)


def _choice(flag: str, value, accepted: tuple) -> str:
    if value not in accepted:
        raise InputError(f"{flag} {value!r}: accepted {', '.join(accepted)}")
    return value


def _ranks(config, ranks: int) -> tuple[int, int]:
    """(ranks, nodes) checked against the preset's topology."""
    positive("--ranks", ranks)
    per_node = config.links.gpus_per_node
    if ranks < 2:
        raise InputError(f"--ranks {ranks}: accepted 2 or more")
    if ranks > per_node and ranks % per_node:
        raise InputError(f"--ranks {ranks}: accepted up to {per_node} or a multiple of "
                         f"links.gpus_per_node ({per_node})")
    nodes = -(-ranks // per_node)
    if nodes > config.links.nodes:
        raise InputError(f"--ranks {ranks}: needs {nodes} nodes, the preset has links.nodes = "
                         f"{config.links.nodes} (set it with --set links.nodes=N)")
    return ranks, nodes


def _token_bytes(hidden: int, dtype: str) -> int:
    if dtype == "fp8":
        return hidden + 4 * -(-hidden // FP8_SCALE_GROUP)
    return 2 * hidden


def _chunks(nbytes: float, chunk_bytes: int) -> int:
    return math.ceil(nbytes / chunk_bytes) if nbytes > 0 else 0


def alltoall_volumes(config, ranks, tokens, hidden, topk, experts, dtype, mode,
                     routing=None) -> dict:
    """Bytes rank 0 sends per path: `ib` (crossing nodes), `forward_ratio` (NVLink forwards
    per crossing byte), `direct` (NVLink), `bottleneck` (DeepEP's count), `per_token`."""
    per_node = config.links.gpus_per_node
    ranks, nodes = _ranks(config, ranks)
    token = _token_bytes(hidden, dtype)
    if routing is not None:
        return _routed_volumes(routing, ranks, per_node, token)
    if mode == "low-latency":
        ib = tokens * topk * (ranks - 1) / ranks * token
        return {"ib": ib, "forward_ratio": 0.0, "direct": 0.0, "bottleneck": ib,
                "per_token": token}
    if nodes == 1:
        d = expected_distinct(ranks, experts // ranks, topk)
        direct = tokens * d * (ranks - 1) / ranks * token
        return {"ib": 0.0, "forward_ratio": 0.0, "direct": direct, "bottleneck": direct,
                "per_token": token}
    m_max = min(nodes, MAX_NODES_PER_TOKEN)
    per_node_experts = experts // nodes
    m = expected_distinct(m_max, per_node_experts, topk)
    g = expected_distinct(per_node, per_node_experts // per_node, round(topk / m))
    forwards = g * (per_node - 1) / per_node
    ib = tokens * m * (nodes - 1) / nodes * token
    direct = tokens * m / nodes * forwards * token
    return {"ib": ib, "forward_ratio": forwards, "direct": direct, "bottleneck": ib,
            "per_token": token}


def _routed_volumes(routing, ranks, per_node, token) -> dict:
    counts = list(routing)
    if len(counts) != ranks or any((not isinstance(c, int)) or c < 0 for c in counts):
        raise InputError(f"routing: accepted {ranks} non-negative token counts (one per "
                         f"destination rank), got {counts!r}")
    direct = sum(counts[1:per_node]) * token
    crossing = [counts[n * per_node:(n + 1) * per_node] for n in range(1, ranks // per_node)]
    ib = sum(max(node) for node in crossing) * token
    forwarded = sum(sum(node) for node in crossing) * token * (per_node - 1) / per_node
    return {"ib": ib, "forward_ratio": forwarded / ib if ib else 0.0, "direct": direct,
            "bottleneck": ib if ib else direct, "per_token": token}


def _ratio(x: float, den: int = 64) -> tuple[int, int]:
    return round(x * den), den


@register("alltoall", (
    Flag("--kind", "dispatch or combine", kind="str", default="dispatch", choices=KINDS),
    *COMMON_FLAGS,
    Flag("--tokens", "tokens on this rank", required=True),
    Flag("--hidden", "hidden size (values per token)", required=True),
    Flag("--topk", "experts per token", default=8),
    Flag("--experts", "routed experts in all", default=256),
    Flag("--dtype", "fp8 or bf16", kind="str", default="fp8", choices=DTYPES),
    Flag("--mode", "normal or low-latency (decode)", kind="str", default="normal",
         choices=MODES),
), help="expert-parallel all-to-all (dispatch/combine) on the communication SMs")
def alltoall_op(config, ranks: int, tokens: int, hidden: int, kind: str = "dispatch",
                topk: int = 8, experts: int = 256, dtype: str = "fp8",
                mode: str = "normal", comm_sms: int | None = None,
                chunk_bytes: int = DEFAULT_CHUNK_BYTES, warps: int = DEFAULT_WARPS,
                channels_per_sm: int = DEFAULT_CHANNELS_PER_SM, routing=None,
                seed: int = 0) -> OpPlan:
    """Rank 0's share of an EP all-to-all (see the module docstring)."""
    kind = _choice("--kind", kind, KINDS)
    dtype = _choice("--dtype", dtype, DTYPES)
    mode = _choice("--mode", mode, MODES)
    for flag, value in (("--tokens", tokens), ("--hidden", hidden), ("--topk", topk),
                        ("--experts", experts)):
        positive(flag, value)
    _ranks(config, ranks)
    check_op_size(config, "alltoall", {"tokens": tokens, "hidden": hidden, "dtype": dtype}, {},
                  float(tokens * _token_bytes(hidden, dtype)))      # this rank's tokens
    if experts % ranks or topk > experts:
        raise InputError(f"--experts {experts}: accepted a multiple of --ranks ({ranks}) "
                         f"and at least --topk ({topk})")
    channels = _channels(config, comm_sms, channels_per_sm, warps)
    comm_sms = channels.comm_sms
    chunk_bytes = check_chunk_bytes(chunk_bytes)
    vol = alltoall_volumes(config, ranks, tokens, hidden, topk, experts, dtype, mode, routing)
    if mode == "low-latency":
        chunk_bytes = -(-vol["per_token"] // 512) * 512
    fwd_num, fwd_den = _ratio(vol["forward_ratio"])
    inputs = 1 if kind == "dispatch" else max(1, round(vol["bottleneck"] / max(
        tokens * vol["per_token"], 1)))
    ctas = channels.ctas
    ib_ctas = (ctas if not vol["direct"] else ctas // 2) if vol["ib"] else 0
    if vol["ib"] and vol["direct"] and ctas < 2:
        raise InputError(f"--comm-sms {comm_sms}: accepted 2 or more channels in all when "
                         "tokens cross nodes (for the crossing and for the direct chunks)")
    if mode != "low-latency":
        chunk_bytes = min(split_chunk(vol["ib"], ib_ctas, chunk_bytes) if vol["ib"]
                          else chunk_bytes,
                          split_chunk(vol["direct"], ctas - ib_ctas, chunk_bytes)
                          if vol["direct"] else chunk_bytes)
    shape = PipelineShape(
        n_ib_chunks=_chunks(vol["ib"], chunk_bytes),
        n_direct_chunks=_chunks(vol["direct"], chunk_bytes), chunk_bytes=chunk_bytes,
        ib_ctas=ib_ctas, fwd_num=fwd_num, fwd_den=fwd_den, reduce_inputs=inputs)
    sizes = {"kind": kind, "ranks": ranks, "tokens": tokens, "hidden": hidden, "topk": topk,
             "experts": experts, "dtype": dtype, "mode": mode, "comm_sms": comm_sms,
             "chunk_bytes": chunk_bytes, "warps": warps, "channels_per_sm": channels.per_sm}
    return _plan("alltoall", sizes, shape, channels, vol["bottleneck"],
                 {"ib_bytes": vol["ib"], "nvlink_bytes": vol["direct"]
                  + vol["ib"] * vol["forward_ratio"]})


@register("allreduce", (
    *COMMON_FLAGS,
    Flag("--bytes", "bytes per rank to reduce", required=True),
    Flag("--algo", "ring or tree", kind="str", default="ring", choices=ALGOS),
    Flag("--compress", "none, or topk4bit (f32 gradients: top 10 % + 4-bit codes, "
         "all-gathered)", kind="str", default="none", choices=COMPRESSIONS),
), help="all-reduce (ring or tree) over NVLink on the communication SMs")
def allreduce_op(config, ranks: int, bytes: int, algo: str = "ring",
                 comm_sms: int | None = None, chunk_bytes: int = DEFAULT_CHUNK_BYTES,
                 warps: int = DEFAULT_WARPS, channels_per_sm: int = DEFAULT_CHANNELS_PER_SM,
                 compress: str = "none", seed: int = 0) -> OpPlan:
    """Rank 0's share of an all-reduce within one node (see the module docstring)."""
    algo = _choice("--algo", algo, ALGOS)
    compress = _choice("--compress", compress, COMPRESSIONS)
    ranks, nodes = _ranks(config, ranks)
    if nodes > 1:
        raise InputError(f"--ranks {ranks}: all-reduce is modelled within one node; accepted "
                         f"2 .. {config.links.gpus_per_node}")
    positive("--bytes", bytes)
    check_op_size(config, "allreduce", {"ranks": ranks, "bytes": bytes}, {},
                  float(bytes))                # the buffer reduced in place on each rank
    channels = _channels(config, comm_sms, channels_per_sm, warps)
    chunk_bytes = check_chunk_bytes(chunk_bytes)
    if compress != "none":
        blocks = n_blocks(bytes // 4)
        check_op_size(config, "allreduce", {"ranks": ranks, "bytes": bytes,
                                            "compress": compress}, {
            "numpy gradients, reference and buffers": float(
                COMPRESS_HOST_BYTES_PER_BYTE * bytes + ranks * blocks * BLOCK_BYTES),
            "per-CTA state": float(blocks * HOST_BYTES_PER_CTA)},
            float(2 * bytes + ranks * blocks * BLOCK_BYTES))
        return _compressed_allreduce(ranks, bytes, chunk_bytes, channels, seed)
    shape = allreduce_shape(ranks, bytes, algo, chunk_bytes, channels.ctas)
    sizes = {"ranks": ranks, "message_bytes": bytes, "algo": algo,
             "comm_sms": channels.comm_sms,
             "chunk_bytes": shape.chunk_bytes, "warps": warps,
             "channels_per_sm": channels.per_sm}
    return _plan("allreduce", sizes, shape, channels, 2 * (ranks - 1) / ranks * bytes,
                 {"algbw_bytes": bytes})


def _compressed_allreduce(ranks: int, nbytes: int, chunk_bytes: int, channels: Channels,
                          seed: int) -> OpPlan:
    """compress -> ring all-gather of the compressed buffers -> decompress and sum."""
    if nbytes % 4:
        raise InputError(f"--bytes {nbytes}: --compress topk4bit takes f32 gradients; "
                         "accepted a multiple of 4")
    compress, decompress, packed = compression_launches(nbytes // 4, ranks, seed)
    chunk = split_chunk(packed, channels.ctas, chunk_bytes)
    shape = PipelineShape(n_direct_chunks=_chunks(packed, chunk), chunk_bytes=chunk,
                          steps=ranks - 1, reduce_steps=0)
    gather = pipeline_launch("allgather", shape, channels,
                             detail={"compressed_bytes": packed})
    samples, note = sampled_launches("allgather", shape, channels)
    sizes = {"ranks": ranks, "message_bytes": nbytes, "algo": "ring", "compress": "topk4bit",
             "compressed_bytes": packed, "comm_sms": channels.comm_sms, "chunk_bytes": chunk,
             "warps": channels.warps, "channels_per_sm": channels.per_sm}
    gathered = samples or ((1.0, gather),)
    return OpPlan("allreduce", sizes, (compress, gather, decompress), 0.0,
                  2 * (ranks - 1) / ranks * nbytes, PEAK,
                  samples=((1.0, compress), *gathered, (1.0, decompress)),
                  sample_note=note or "compress and decompress kernels wave-sampled")


def allreduce_shape(ranks: int, nbytes: int, algo: str, chunk_bytes: int,
                    channels: int) -> PipelineShape:
    """The pipeline of a ring or tree all-reduce of `nbytes` on `ranks` GPUs over
    `channels` channels (the chunk shrinks so that every channel has one)."""
    if algo == "ring":
        segment = nbytes / ranks
        chunk = split_chunk(segment, channels, chunk_bytes)
        return PipelineShape(n_direct_chunks=_chunks(segment, chunk), chunk_bytes=chunk,
                             steps=2 * (ranks - 1), reduce_steps=ranks - 1)
    depth = math.ceil(math.log2(ranks))
    steps = min(3, ranks - 1)
    chunk = split_chunk(nbytes, channels, chunk_bytes)
    return PipelineShape(n_direct_chunks=_chunks(nbytes, chunk), chunk_bytes=chunk,
                         steps=steps, reduce_steps=1,
                         wait_hops=max(math.ceil(2 * depth / steps) - 1, 0))


def _plan(kind, sizes, shape, channels, counted_bytes, detail) -> OpPlan:
    launch = pipeline_launch(kind, shape, channels, detail=detail)
    samples, note = sampled_launches(kind, shape, channels)
    return OpPlan(kind, sizes, (launch,), 0.0, float(counted_bytes), PEAK, samples=samples,
                  sample_note=note)
