"""Layer blocks that add kernel nodes to a graph: one module per block kind.

`ops` (node factories with closed-form flops/bytes), `builder` (layer shape and node
collection), `attention` (MHA/GQA), `mla` (DeepSeek multi-head latent attention), `mlp`
(SwiGLU/GELU), `moe` (router, all-to-all, grouped experts, shared expert), `norms`
(norms, residual adds, RoPE), `backward` (dgrad/wgrad derived from a forward graph).

Left out: timing; the ISA programs of the kernels.

Units: see `ops`.
"""
