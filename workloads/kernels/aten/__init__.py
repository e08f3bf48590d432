"""ATen's element-wise, copy and layout kernels written again with their launch geometry
(CUDA and committed PTX), timed by `workloads.ops.pointwise` and `workloads.ops.layout`."""
