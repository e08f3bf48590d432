"""The shape of one layer invocation and the builder that collects its kernel nodes.

`LayerShape` holds what the block modules need: phase, token counts, sequence lengths,
parallelism (ep, tp), the redundant experts a rank hosts beside its share, how the MoE
all-to-all routes (balanced, or a per-peer token table) and whether it holds SMs, and the
dtype of each kernel kind. `GraphBuilder` appends nodes in
issue order, refuses duplicate names, and inserts one FP8 `quantize` node per tensor a
FP8 GEMM reads (shared by every GEMM that reads the same tensor).

Left out: pipeline parallelism (one layer on one rank), sequence/context parallelism.

Units: token and sequence counts; sizes in elements.
"""

from __future__ import annotations

from dataclasses import dataclass

from workloads.graph import GraphError, KernelGraph, KernelNode
from workloads.layers import ops


@dataclass(frozen=True, slots=True)
class LayerShape:
    """One layer invocation on one rank."""

    phase: str  # "prefill", "decode" or "train"
    tokens: int  # rows of every token-wise GEMM on this rank (decode: batch)
    batch: int  # sequences
    seqlen_q: int  # new tokens per sequence (decode: 1)
    seqlen_k: int  # keys each sequence attends to (cached + new)
    causal: bool
    ep: int  # expert-parallel ranks
    tp: int  # tensor-parallel ranks
    gemm_dtype: str
    attention_dtype: str
    act_dtype: str
    kv_cache_dtype: str
    dispatch_dtype: str
    combine_dtype: str
    block: int  # FP8 scaling block edge
    redundant_experts: int = 0  # experts this rank hosts beside routed_experts / ep
    routing: tuple[int, ...] | None = None  # tokens sent to each rank (None: balanced)
    comm_holds_sms: bool = True  # False: RDMA all-to-all that frees the SMs once issued

    @property
    def fp8(self) -> bool:
        return ops.nbytes(self.gemm_dtype) == 1


class GraphBuilder:
    """Collects nodes in issue order; `add` returns the node's name for use as a dep."""

    def __init__(self, shape: LayerShape):
        self.shape = shape
        self._nodes: list[KernelNode] = []
        self._names: set[str] = set()
        self._quantized: dict[str, str] = {}

    @property
    def nodes(self) -> tuple[KernelNode, ...]:
        return tuple(self._nodes)

    def add(self, node: KernelNode) -> str:
        if node.name in self._names:
            raise GraphError(f"duplicate kernel node name {node.name!r}")
        self._names.add(node.name)
        self._nodes.append(node)
        return node.name

    def gemm_input(self, src: str | None, rows: int, cols: int) -> tuple[str, ...]:
        """What a GEMM reading tensor `src` [rows, cols] waits for: `src` itself, or its
        FP8 quantization (added once) when GEMMs run in FP8. `src` None is the layer
        input, produced before the layer starts."""
        s = self.shape
        deps = () if src is None else (src,)
        if not s.fp8:
            return deps
        key = src or "layer_input"
        if key not in self._quantized:
            self._quantized[key] = self.add(ops.quantize(
                f"{key}.quant", rows=rows, cols=cols, dtype=s.act_dtype,
                out_dtype=s.gemm_dtype, deps=deps, block=s.block))
        return (self._quantized[key],)

    def linear(self, name: str, src: str | None, *, rows: int, n: int, k: int,
               extra_deps: tuple[str, ...] = ()) -> str:
        """A weight GEMM [rows, k] . [k, n] in the recipe's GEMM dtype reading `src`."""
        s = self.shape
        deps = self.gemm_input(src, rows, k)
        return self.add(ops.gemm(name, m=rows, n=n, k=k, dtype=s.gemm_dtype,
                                 out_dtype=s.act_dtype, deps=(*deps, *extra_deps),
                                 block=s.block))

    def elementwise(self, name: str, op: str, deps: tuple[str, ...], *, rows: int,
                    cols: int, **kw) -> str:
        return self.add(ops.elementwise(name, op, rows=rows, cols=cols,
                                        dtype=self.shape.act_dtype, deps=deps, **kw))

    def allreduce(self, name: str, src: str, *, rows: int, cols: int) -> str:
        """Tensor-parallel all-reduce of `src` when tp > 1; otherwise `src` unchanged."""
        s = self.shape
        if s.tp == 1:
            return src
        return self.add(ops.allreduce(name, elements=rows * cols, dtype=s.act_dtype,
                                      ranks=s.tp, deps=(src,)))

    def build(self, name: str, meta: dict) -> KernelGraph:
        return KernelGraph(name, tuple(self._nodes), dict(meta))
