"""Kernel templates written in the ISA: Python generators that emit real PTX text.

`gemm_kernel` builds warp-specialized Hopper GEMMs (TMA producer, wgmma consumers,
mbarrier stage ring), incl. DeepSeek-V3's fine-grained FP8 scaling.
"""

from workloads.kernels.templates.gemm import GemmKernel, gemm_kernel

__all__ = ["GemmKernel", "gemm_kernel"]
