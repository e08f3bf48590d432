"""cuBLAS GEMMs of the calibration's shapes for ncu: which kernel (tile, cluster) runs and
how many bytes its L2 serves. Run under ncu (hardware only):

    ncu --clock-control none --section LaunchStats --metrics METRICS \
        --kernel-name regex:'nvjet|gemm|xmma|cutlass' --csv python3 gemm_ncu_l2.py

Each shape runs twice (the second launch sees a warm cuBLAS heuristic cache; ncu flushes the
caches before each profiled launch). bf16: torch.matmul; fp8: torch._scaled_mm with
per-tensor scales and bf16 output, as `workloads/reference/h100/gemm.csv`.
"""

import torch

SHAPES = [("bf16", 512, 4096, 4096), ("bf16", 2048, 4096, 4096), ("bf16", 128, 4096, 8192),
          ("bf16", 4096, 4096, 8192), ("fp8", 512, 4096, 4096), ("fp8", 2048, 4096, 4096),
          ("fp8", 4096, 4096, 8192)]


def main() -> None:
    torch.manual_seed(0)
    one = torch.tensor(1.0, device="cuda")
    for dtype, m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        if dtype == "fp8":
            a, b = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
        for _ in range(2):
            if dtype == "fp8":
                torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
            else:
                torch.matmul(a, b.t())
            torch.cuda.synchronize()
        print(f"shape {dtype} {m} {n} {k} done", flush=True)


if __name__ == "__main__":
    main()
