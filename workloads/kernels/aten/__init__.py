"""ATen's kernels written again with their launch geometry (CUDA and committed PTX): the
element-wise, copy and layout kernels, timed by `workloads.ops.pointwise` and
`workloads.ops.layout`, and the fp16 softmax and LayerNorm forward kernels, timed by
`ptxsim op softmax|layernorm --dtype fp16` (`workloads.ops.torch_norms`)."""
