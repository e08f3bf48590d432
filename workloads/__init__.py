"""Workloads: model configs, layer-to-kernel graphs, ISA kernel templates and real CUDA kernels."""

import simulator.framework  # noqa: F401  (first: loads the simulator front door, see its docstring)
from workloads.graph import KernelGraph, KernelNode
from workloads.layer import layer
from workloads.models import MODELS

__all__ = ["MODELS", "KernelGraph", "KernelNode", "layer"]
