"""Kernel templates written in the ISA: Python generators that emit real PTX text.

`gemm_kernel` builds warp-specialized Hopper GEMMs (TMA producer, wgmma consumers,
mbarrier stage ring), incl. DeepSeek-V3's fine-grained FP8 scaling; `gemm_sm80.gemm_sm80_kernel`
the multistage Ampere GEMM (cp.async ring, ldmatrix, mma.sync); `targets` which template each
op runs on which ISA target.
"""

from workloads.kernels.templates.gemm import GemmKernel, gemm_kernel

__all__ = ["GemmKernel", "gemm_kernel"]
