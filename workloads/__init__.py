"""Workloads: model configs, layer-to-kernel graphs, ISA kernel templates and real CUDA kernels."""
