"""Hardware probes of `mma.sp` on a real Hopper GPU (CUDA sources beside this file) and the
reader of the layout probe's dump.

`mma_sp_layout_probe.cu` (`nvcc -arch=sm_90a -O2`, run as `probe OUT.bin`) runs each form
of `FORMS` on 64 warps of random operands (small integers, so every sum is exact; random
valid metadata nibbles in every lane, including those the selector does not read) and
writes the A, B and E words of every lane and the resulting D; `read_dump(path)` parses
it. `mma_sp_rate_probe.cu` measures the dense-equivalent throughput of `mma.sync` m16n8k16
against `mma.sp::ordered_metadata` m16n8k32 (f16 in, f32 accumulate; 8 independent chains
per warp, 4-16 warps per SM, one CTA per SM).

The dump of one H100 run (first 8 warps per form) is `tests/fixtures/mma_sp_h100.npz`,
which `tests/test_mma_sp.py` checks the interpreter against; it fixed the metadata layout
documented in `isa.semantics.tensor_mma_sp`. Measured on an H100 SXM (80 GB HBM3, clock
attribute 1980 MHz, 2026-11-22): mma.sync 1217 and mma.sp 1770 dense-equivalent
FMA/clk/SM at 16 warps/SM (1.45x; 1.39x at 4 warps/SM), in line with the 1.42x average
the L24 microbenchmarks report for mma.sp (notes/hopper-params.md). The Hopper presets time
mma.sp at this measured rate (`units.tensor.sparse_rate_multiplier` 1.4544); the datasheet's
2x is a what-if.
Units: 32-bit words, FMAs per clock per SM.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

FORMS = (("f16_k16_s0", "m16n8k16", "f16", 0), ("f16_k16_s2", "m16n8k16", "f16", 2),
         ("f16_k32_s0", "m16n8k32", "f16", 0), ("f16_k32_s1", "m16n8k32", "f16", 1),
         ("bf16_k16_s3", "m16n8k16", "bf16", 3), ("bf16_k32_s1", "m16n8k32", "bf16", 1),
         ("e4m3_k64_s0", "m16n8k64", "e4m3", 0))
"""(name, shape, A/B type, selector) of each probed form; D and C are f32."""


def read_dump(path: str | Path) -> dict[str, dict[str, np.ndarray]]:
    """Form name -> {"a": [W, 32, ra], "b": [W, 32, rb], "e": [W, 32], "d": [W, 32, 4]}."""
    raw = Path(path).read_bytes()
    out, pos = {}, 0
    while pos < len(raw):
        end = raw.index(b"\n", pos)
        name, ra, rb, n = raw[pos:end].decode().split()
        ra, rb, n = int(ra), int(rb), int(n)
        pos = end + 1
        parts = {}
        for key, count, dtype in (("a", n * ra, np.uint32), ("b", n * rb, np.uint32),
                                  ("e", n, np.uint32), ("d", 4 * n, np.float32)):
            parts[key] = np.frombuffer(raw, dtype, count, pos).reshape(n // 32, 32, -1)
            pos += 4 * count
        parts["e"] = parts["e"][:, :, 0]
        out[name] = parts
    return out
