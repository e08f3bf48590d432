"""Dense feed-forward block: SwiGLU (fused gate+up GEMM, SwiGLU, down GEMM) or GELU
(fc1, GELU, fc2), with the intermediate dimension split over `tp` ranks and an
all-reduce after the down projection when tp > 1.

Also builds the shared expert of a MoE layer (a SwiGLU MLP of the expert width).

Left out: bias adds (fused into GEMM epilogues).

Units: sizes in elements.
"""

from __future__ import annotations

from workloads.layers.builder import GraphBuilder
from workloads.models.config import ModelConfig


def add_mlp(b: GraphBuilder, model: ModelConfig, x: str, *, kind: str, intermediate: int,
            prefix: str = "mlp") -> str:
    """MLP `kind` ("swiglu" or "gelu") of width `intermediate` over `x`; returns output."""
    s, h, t = b.shape, model.hidden_size, b.shape.tokens
    width = intermediate // s.tp
    if kind == "swiglu":
        up = b.linear(f"{prefix}.gate_up_proj", x, rows=t, n=2 * width, k=h)
        act = b.elementwise(f"{prefix}.swiglu", "swiglu", (up,), rows=t, cols=2 * width,
                            out_cols=width)
    else:
        up = b.linear(f"{prefix}.fc1", x, rows=t, n=width, k=h)
        act = b.elementwise(f"{prefix}.gelu", "gelu", (up,), rows=t, cols=width)
    down = b.linear(f"{prefix}.down_proj", act, rows=t, n=h, k=width)
    return b.allreduce(f"{prefix}.allreduce", down, rows=t, cols=h)
