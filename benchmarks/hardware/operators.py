"""Reference operators through PyTorch: GEMMs (bf16, fp8), flash SDPA, norms, softmax.

* gemm.csv: `torch.matmul` on bf16 (M, K) x (K, N) and `torch._scaled_mm` on e4m3 A (M, K)
  row-major x B (K, N) column-major with per-tensor f32 scales and bf16 output, over M in
  `M_VALUES` and the (N, K) projections of LLaMA-3 8B / 70B and DeepSeek-V3 in
  `PROJECTIONS`. TFLOP/s = 2 M N K / time.
* sdpa.csv: `scaled_dot_product_attention` forward restricted to the flash backend,
  bf16 (batch, heads, seq, head_dim), causal and not; TFLOP/s = 4 B H S^2 D (halved when
  causal).
* norms.csv: RMSNorm (`F.rms_norm` with weight), LayerNorm (`F.layer_norm` with weight and
  bias) and softmax over the last dim, bf16 [rows, cols]; GB/s = (input + output bytes) /
  time.

Method: CUDA events around each call, warm-up 3, repeats sized to about 100 ms (5 to 30),
L2 flushed before every timed call (a 256 MiB buffer zeroed, outside the events);
median/min/max. Random normal inputs (never zeros).

    python benchmarks/hardware/operators.py --out DIR [--quick] [--only gemm sdpa norms]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from hw_common import (  # noqa: E402
    FLUSH_BYTES,
    ClockSampler,
    Table,
    environment,
    reps_for,
    summarize_ms,
    time_torch,
)

M_VALUES = (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
# (model, projection, N = out features, K = in features)
PROJECTIONS = (
    ("llama3-8b", "qkv", 6144, 4096), ("llama3-8b", "o", 4096, 4096),
    ("llama3-8b", "gate/up", 14336, 4096), ("llama3-8b", "down", 4096, 14336),
    ("llama3-70b", "qkv", 10240, 8192), ("llama3-70b", "o", 8192, 8192),
    ("llama3-70b", "gate/up", 28672, 8192), ("llama3-70b", "down", 8192, 28672),
    ("deepseek-v3", "q_a+kv_a", 2112, 7168), ("deepseek-v3", "q_b", 24576, 1536),
    ("deepseek-v3", "o", 7168, 16384), ("deepseek-v3", "dense gate/up", 18432, 7168),
    ("deepseek-v3", "dense down", 7168, 18432), ("deepseek-v3", "expert gate/up", 2048, 7168),
    ("deepseek-v3", "expert down", 7168, 2048),
)
SDPA_SEQS = (512, 1024, 2048, 4096, 8192, 16384)
SDPA_TOKENS = 16384     # batch = tokens // seq (at least 1)
SDPA_HEADS = 32
NORM_ROWS = (4096, 16384)
NORM_COLS = (4096, 5120, 7168, 8192, 16384)


def _timed(table, clocks, fn, flush, row: dict, flops: float = 0.0, nbytes: float = 0.0,
           quick: bool = False):
    import torch

    fn()
    torch.cuda.synchronize()
    probe = statistics.median(time_torch(fn, 1, 3))
    reps = 3 if quick else reps_for(probe, budget_ms=100.0, low=5, high=30)
    with clocks.window() as w:
        times = time_torch(fn, 3, reps, flush)
    s = summarize_ms(times)
    extra = {}
    if flops:
        extra["tflops"] = round(flops / (s["median_us"] * 1e-6) / 1e12, 1)
    if nbytes:
        extra["gbps"] = round(nbytes / (s["median_us"] * 1e-6) / 1e9, 1)
    table.add({**row, "reps": reps, "l2_flush": True, **s, **extra, **w.stats})


def gemms(out, env, clocks, flush, quick):
    import torch

    table = Table(out, "gemm", __doc__.split("Method:")[1].strip().split("\n\n")[0] +
                  " bf16: torch.matmul; fp8: torch._scaled_mm(A, B, scale_a, scale_b, "
                  "out_dtype=bfloat16), per-tensor scales.", env, clocks)
    ms = (64, 4096) if quick else M_VALUES
    shapes = PROJECTIONS[:2] if quick else PROJECTIONS
    for model, proj, n, k in shapes:
        for m in ms:
            for dtype in ("bf16", "fp8"):
                row = {"dtype": dtype, "m": m, "n": n, "k": k, "model": model,
                       "projection": proj}
                try:
                    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
                    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
                    if dtype == "bf16":
                        bt = b.t()
                        fn = lambda a=a, bt=bt: torch.matmul(a, bt)  # noqa: E731
                        row["op"] = "torch.matmul"
                    else:
                        a8 = (a * 0.5).to(torch.float8_e4m3fn)
                        b8 = (b * 0.5).to(torch.float8_e4m3fn).t()   # column-major (K, N)
                        sa = torch.tensor(2.0, device="cuda")
                        sb = torch.tensor(2.0, device="cuda")
                        fn = lambda a8=a8, b8=b8, sa=sa, sb=sb: torch._scaled_mm(  # noqa: E731
                            a8, b8, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
                        row["op"] = "torch._scaled_mm"
                    _timed(table, clocks, fn, flush, row, flops=2.0 * m * n * k, quick=quick)
                except Exception as exc:
                    table.fail(f"gemm {row}", exc)
                finally:
                    a = b = fn = None
                    torch.cuda.empty_cache()
    table.close()


def sdpa(out, env, clocks, flush, quick):
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    table = Table(out, "sdpa", "F.scaled_dot_product_attention forward under "
                  "sdpa_kernel(SDPBackend.FLASH_ATTENTION); " +
                  __doc__.split("Method:")[1].strip().split("\n\n")[0], env, clocks)
    seqs = (512, 2048) if quick else SDPA_SEQS
    for head_dim in (64, 128):
        for causal in (False, True):
            for seq in seqs:
                batch = max(1, SDPA_TOKENS // seq)
                row = {"batch": batch, "heads": SDPA_HEADS, "seq": seq, "head_dim": head_dim,
                       "causal": causal, "dtype": "bf16", "backend": "flash"}
                try:
                    q, k, v = (torch.randn(batch, SDPA_HEADS, seq, head_dim, device="cuda",
                                           dtype=torch.bfloat16) for _ in range(3))

                    def fn(q=q, k=k, v=v, causal=causal):
                        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

                    flops = 4.0 * batch * SDPA_HEADS * seq * seq * head_dim
                    _timed(table, clocks, fn, flush, row,
                           flops=flops / 2 if causal else flops, quick=quick)
                except Exception as exc:
                    table.fail(f"sdpa {row}", exc)
    table.close()


def norms(out, env, clocks, flush, quick):
    import torch
    import torch.nn.functional as F

    table = Table(out, "norms", __doc__.split("Method:")[1].strip().split("\n\n")[0],
                  env, clocks)
    shapes = [(r, c) for r in ((4096,) if quick else NORM_ROWS)
              for c in ((4096,) if quick else NORM_COLS)]
    shapes.append((512, 128256))   # vocabulary-wide softmax (LLaMA-3)
    for rows, cols in shapes:
        x = torch.randn(rows, cols, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(cols, device="cuda", dtype=torch.bfloat16)
        bias = torch.randn(cols, device="cuda", dtype=torch.bfloat16)
        ops = {"softmax": lambda x=x: torch.softmax(x, dim=-1)}
        if cols < 100000:
            ops["rmsnorm"] = lambda x=x, w=w: F.rms_norm(x, w.shape, w, 1e-6)
            ops["layernorm"] = lambda x=x, w=w, b=bias: F.layer_norm(x, w.shape, w, b, 1e-5)
        for name, fn in ops.items():
            row = {"op": name, "rows": rows, "cols": cols, "dtype": "bf16"}
            try:
                _timed(table, clocks, fn, flush, row, nbytes=2 * 2 * rows * cols, quick=quick)
            except Exception as exc:
                table.fail(f"norm {row}", exc)
    table.close()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("hw_out"))
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", nargs="*", default=["gemm", "sdpa", "norms"])
    args = ap.parse_args(argv)
    import torch

    args.out.mkdir(parents=True, exist_ok=True)
    env = environment()
    buf = torch.empty(FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    flush = buf.zero_
    stages = {"gemm": gemms, "sdpa": sdpa, "norms": norms}
    with ClockSampler() as clocks:
        for name in args.only:
            stages[name](args.out, env, clocks, flush, args.quick)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
