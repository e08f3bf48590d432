"""Kernel-node factories: one per op kind, each with its closed-form flops and bytes_min.

Conventions:
* GEMM: Y[m, n] = X[m, k] . W[k, n], flops = 2 m n k per group. `layout` names the
  contiguous dimension of A then B: "kk" (both K-major, what FP8 WGMMA needs), "kn"
  (dgrad: dX = dY . W^T reads W along N), "mn" (wgrad: dW = X^T . dY). FP8 operands add
  their FP32 scales: one per 1 x block of A rows, one per block x block tile of B.
* Grouped GEMM: `groups` GEMMs sharing n and k whose rows add up to `m_total` (forward,
  dgrad), or sharing m and n whose reduction lengths add up to `k_total` (wgrad); `m`
  (or `k`) is the per-group average, rounded up, that a kernel tiles for.
* Attention (fused, FlashAttention-style): flops = 2 B H P (Dqk + Dv) where P is the
  number of (query, key) pairs: S_q S_k, or S_q S_k - S_q^2 / 2 when causal (half of
  S^2 for a square causal mask); backward = 2.5 x forward.
* Element-wise kernels count a transcendental as one flop; per-element counts are named
  constants below. bytes_min: inputs read once, outputs written once.
* Communication: `link_bytes` cross the links out of this rank (the same number come in,
  routing being balanced, or taken as symmetric when a routing table gives the sends);
  bytes_min is the local read of the send buffer plus the write of the receive buffer.

Left out: tile quantisation (padding to tile multiples), L2 reuse, softmax exp counts
inside fused attention, bias-add flops of GPT-3/BERT projections (fused epilogues).

Units: flops, bytes; shapes in elements.
"""

from __future__ import annotations

import math

from isa.errors import InputError
from workloads.graph import KernelNode

DTYPE_BYTES = {"e4m3": 1, "e5m2": 1, "bf16": 2, "f16": 2, "f32": 4}
DTYPE_ALIASES = {"fp8": "e4m3", "fp8_e4m3": "e4m3", "fp8_e5m2": "e5m2", "fp16": "f16",
                 "half": "f16", "fp32": "f32", "float32": "f32", "bfloat16": "bf16"}
SCALE_BYTES = 4  # FP32 scale per FP8 block
COMM_NOTE = ("communication: simulate_workload runs collectives as kernels on the comm "
             "SMs; an all-reduce across nodes falls back to link_bytes / link bandwidth")

RMSNORM_FLOPS_PER_ELEM = 4  # square, accumulate, scale, weight
LAYERNORM_FLOPS_PER_ELEM = 8  # mean, centre, square, accumulate, scale, weight, bias, (rsqrt)
SWIGLU_FLOPS_PER_OUT = 5  # exp, add, divide (sigmoid), x * sigmoid, * up
GELU_FLOPS_PER_ELEM = 8  # tanh form: cube, two fma, tanh, add, two mul
ROPE_FLOPS_PER_ELEM = 3  # each output: two mul and one add over a rotated pair
SOFTMAX_FLOPS_PER_ELEM = 5  # max, subtract, exp, accumulate, divide
QUANTIZE_FLOPS_PER_ELEM = 2  # abs-max, scale
GATING_FLOPS_PER_SCORE = 5  # sigmoid (3), bias add, top-k compare
BACKWARD_ELEMENTWISE_FACTOR = 2  # element-wise backward ~ twice the forward flops
ATTENTION_BACKWARD_FACTOR = 2.5


def dtype_name(dtype: str, where: str = "dtype") -> str:
    """Canonical (PTX) spelling of `dtype`; InputError naming `where` otherwise."""
    name = DTYPE_ALIASES.get(dtype, dtype)
    if name not in DTYPE_BYTES:
        known = sorted(set(DTYPE_BYTES) | set(DTYPE_ALIASES))
        raise InputError(f"{where}: unknown dtype {dtype!r} (expected one of {', '.join(known)})")
    return name


def nbytes(dtype: str) -> int:
    return DTYPE_BYTES[dtype_name(dtype)]


def _scale_bytes(rows: int, cols: int, dtype: str, block: int, *, tile: bool) -> int:
    """FP32 scales of an FP8 operand: per 1 x block row strip, or per block x block tile."""
    if nbytes(dtype) != 1:
        return 0
    row_blocks = math.ceil(rows / block) if tile else rows
    return row_blocks * math.ceil(cols / block) * SCALE_BYTES


def gemm(name: str, *, m: int, n: int, k: int, dtype: str, out_dtype: str, deps=(),
         layout: str = "kk", groups: int = 1, role: str = "forward", stream: str = "compute",
         block: int = 128, note: str = "") -> KernelNode:
    """`groups` equal GEMMs Y[m, n] = X[m, k] . W[k, n] (groups > 1: batched)."""
    a = m * k * nbytes(dtype) + _scale_bytes(m, k, dtype, block, tile=False)
    b = k * n * nbytes(dtype) + _scale_bytes(n, k, dtype, block, tile=True)
    c = m * n * nbytes(out_dtype)
    args = {"m": m, "n": n, "k": k, "dtype": dtype_name(dtype),
            "out_dtype": dtype_name(out_dtype), "groups": groups, "layout": layout}
    return KernelNode(name, "gemm", args, stream, tuple(deps), role,
                      flops=2 * groups * m * n * k, bytes_min=groups * (a + b + c), note=note)


def grouped_gemm(name: str, *, groups: int, n: int, dtype: str, out_dtype: str, deps=(),
                 m_total: int | None = None, k: int | None = None,
                 k_total: int | None = None, m: int | None = None, layout: str = "kk",
                 role: str = "forward", stream: str = "compute", block: int = 128,
                 note: str = "") -> KernelNode:
    """Ragged-M grouped GEMM (give m_total and k) or ragged-K (give k_total and m)."""
    if m_total is not None:
        k_total = k * groups
        m = math.ceil(m_total / groups)
        a = m_total * k * nbytes(dtype) + _scale_bytes(m_total, k, dtype, block, tile=False)
        b = groups * (k * n * nbytes(dtype) + _scale_bytes(n, k, dtype, block, tile=True))
        c = m_total * n * nbytes(out_dtype)
        flops = 2 * m_total * n * k
        ragged = "m"
    else:
        k = math.ceil(k_total / groups)
        a = m * k_total * nbytes(dtype) + _scale_bytes(m, k_total, dtype, block, tile=False)
        b = n * k_total * nbytes(dtype) + _scale_bytes(n, k_total, dtype, block, tile=False)
        c = groups * m * n * nbytes(out_dtype)
        flops = 2 * m * n * k_total
        m_total = m * groups
        ragged = "k"
    args = {"m": m, "n": n, "k": k, "dtype": dtype_name(dtype),
            "out_dtype": dtype_name(out_dtype), "groups": groups, "layout": layout,
            "ragged": ragged, "m_total": m_total, "k_total": k_total}
    return KernelNode(name, "grouped_gemm", args, stream, tuple(deps), role,
                      flops=flops, bytes_min=a + b + c, note=note)


def attention_pairs_x2(seqlen_q: int, seqlen_k: int, causal: bool) -> int:
    """Twice the number of (query, key) pairs scored, kept integral."""
    if causal:
        return 2 * seqlen_q * seqlen_k - seqlen_q * seqlen_q
    return 2 * seqlen_q * seqlen_k


def attention(name: str, *, batch: int, heads: int, kv_heads: int, seqlen_q: int,
              seqlen_k: int, headdim: int, causal: bool, dtype: str, headdim_v: int | None = None,
              deps=(), backward: bool = False, role: str = "forward") -> KernelNode:
    """Fused attention (forward, or backward at 2.5x the forward flops)."""
    dv = headdim if headdim_v is None else headdim_v
    fwd = batch * heads * attention_pairs_x2(seqlen_q, seqlen_k, causal) * (headdim + dv)
    e = nbytes(dtype)
    q, o = batch * seqlen_q * heads * headdim * e, batch * seqlen_q * heads * dv * e
    kv = batch * seqlen_k * kv_heads * (headdim + dv) * e
    traffic = q + kv + o
    if backward:  # read q, k, v, o, dO; write dQ, dK, dV
        traffic = 2 * (q + kv) + 2 * o
    args = {"batch": batch, "heads": heads, "kv_heads": kv_heads, "seqlen_q": seqlen_q,
            "seqlen_k": seqlen_k, "headdim": headdim, "headdim_v": dv, "causal": causal,
            "dtype": dtype_name(dtype), "backward": backward}
    flops = int(fwd * ATTENTION_BACKWARD_FACTOR) if backward else fwd
    return KernelNode(name, "attention", args, "compute", tuple(deps), role,
                      flops=flops, bytes_min=traffic)


def mla_decode(name: str, *, batch: int, heads: int, seqlen_q: int, kv_len: int,
               kv_lora_rank: int, rope_dim: int, dtype: str, deps=()) -> KernelNode:
    """Absorbed MLA decode: scores over the latent+rope cache, values from the latent."""
    dk = kv_lora_rank + rope_dim
    flops = 2 * batch * heads * seqlen_q * kv_len * (dk + kv_lora_rank)
    e = nbytes(dtype)
    traffic = batch * (kv_len * dk + heads * seqlen_q * (dk + kv_lora_rank)) * e
    args = {"batch": batch, "heads": heads, "seqlen_q": seqlen_q, "kv_len": kv_len,
            "kv_lora_rank": kv_lora_rank, "rope_dim": rope_dim, "dtype": dtype_name(dtype)}
    return KernelNode(name, "mla_decode", args, "compute", tuple(deps), "forward",
                      flops=flops, bytes_min=traffic)


def elementwise(name: str, op: str, *, rows: int, cols: int, dtype: str, deps=(),
                out_cols: int | None = None, params: int = 0, inputs: int = 1,
                backward: bool = False, role: str = "forward", out_dtype: str | None = None,
                **extra) -> KernelNode:
    """Row-wise/element-wise kernel over `inputs` tensors [rows, cols] -> [rows, out_cols]."""
    out_cols = cols if out_cols is None else out_cols
    per = {"rmsnorm": RMSNORM_FLOPS_PER_ELEM * rows * cols,
           "layernorm": LAYERNORM_FLOPS_PER_ELEM * rows * cols,
           "swiglu": SWIGLU_FLOPS_PER_OUT * rows * out_cols,
           "gelu": GELU_FLOPS_PER_ELEM * rows * cols,
           "rope": ROPE_FLOPS_PER_ELEM * rows * cols,
           "softmax": SOFTMAX_FLOPS_PER_ELEM * rows * cols,
           "residual_add": (inputs - 1) * rows * cols}
    flops = per[op] * (BACKWARD_ELEMENTWISE_FACTOR if backward else 1)
    e, eo = nbytes(dtype), nbytes(out_dtype or dtype)
    traffic = inputs * rows * cols * e + rows * out_cols * eo + params * e
    if backward:  # also read the incoming gradient of the output
        traffic += rows * out_cols * eo
    args = {"rows": rows, "cols": cols, "out_cols": out_cols, "dtype": dtype_name(dtype),
            "inputs": inputs, "backward": backward, **extra}
    return KernelNode(name, op, args, "compute", tuple(deps), role,
                      flops=flops, bytes_min=traffic)


def quantize(name: str, *, rows: int, cols: int, dtype: str, out_dtype: str, deps=(),
             block: int = 128, transpose: bool = False, role: str = "forward") -> KernelNode:
    """Quantize [rows, cols] to FP8 with one scale per 1 x block strip; `transpose` also
    writes the column-wise (transposed) copy a wgrad GEMM reads K-major."""
    copies = 2 if transpose else 1
    out = rows * cols * nbytes(out_dtype) + _scale_bytes(rows, cols, out_dtype, block,
                                                         tile=False)
    traffic = rows * cols * nbytes(dtype) + copies * out
    args = {"rows": rows, "cols": cols, "dtype": dtype_name(dtype),
            "out_dtype": dtype_name(out_dtype), "block": block, "transpose": transpose}
    return KernelNode(name, "quantize", args, "compute", tuple(deps), role,
                      flops=QUANTIZE_FLOPS_PER_ELEM * rows * cols * copies, bytes_min=traffic)


def moe_gating(name: str, *, tokens: int, hidden: int, experts: int, topk: int, dtype: str,
               deps=(), backward: bool = False, role: str = "forward") -> KernelNode:
    """Router: scores = x . Wg (tokens x experts), sigmoid, bias, top-k selection."""
    flops = 2 * tokens * hidden * experts + GATING_FLOPS_PER_SCORE * tokens * experts
    e = nbytes(dtype)
    traffic = tokens * hidden * e + experts * hidden * e + tokens * topk * 8  # ids + weights
    if backward:
        flops, traffic = 2 * flops, traffic + tokens * hidden * e
    args = {"tokens": tokens, "hidden": hidden, "experts": experts, "topk": topk,
            "dtype": dtype_name(dtype), "backward": backward}
    return KernelNode(name, "moe_gating", args, "compute", tuple(deps), role,
                      flops=flops, bytes_min=traffic)


def alltoall(name: str, op: str, *, tokens: int, hidden: int, topk: int, ep: int, dtype: str,
             deps=(), block: int = 128, role: str = "forward",
             routing: tuple[int, ...] | None = None, holds_sms: bool = True) -> KernelNode:
    """MoE dispatch or combine across `ep` ranks: tokens x topk rows, balanced routing, or
    `routing[r]` tokens sent to rank r (this rank is 0) once each. `holds_sms=False`: an
    RDMA all-to-all that frees the SMs once its messages are issued (args `holds_sms`)."""
    row = hidden * nbytes(dtype) + _scale_bytes(1, hidden, dtype, block, tile=False)
    rows = tokens * topk
    link = rows * row * (ep - 1) // ep if routing is None else sum(routing[1:]) * row
    args = {"tokens": tokens, "hidden": hidden, "topk": topk, "ep": ep,
            "dtype": dtype_name(dtype), "row_bytes": row, "link_bytes": link}
    if routing is not None:
        args["routing"] = tuple(routing)
    if not holds_sms:
        args["holds_sms"] = False
    return KernelNode(name, op, args, "comm", tuple(deps), role, flops=0,
                      bytes_min=2 * rows * row, note=COMM_NOTE)


def allreduce(name: str, *, elements: int, dtype: str, ranks: int, deps=(),
              role: str = "forward") -> KernelNode:
    """Ring all-reduce over `ranks`: 2 (r-1)/r of the buffer crosses the links each way."""
    size = elements * nbytes(dtype)
    args = {"elements": elements, "dtype": dtype_name(dtype), "ranks": ranks,
            "link_bytes": 2 * (ranks - 1) * size // ranks}
    return KernelNode(name, "allreduce", args, "comm", tuple(deps), role,
                      flops=(ranks - 1) * elements // ranks, bytes_min=2 * size, note=COMM_NOTE)
