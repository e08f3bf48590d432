"""`cp.async` copies of one warp are in flight together; `cp.async.wait_*` waits for the
last of them (`models.units`)."""

from __future__ import annotations

import numpy as np

import models
from simulator import simulate_kernel

HEADER = ".version 8.0\n.target sm_90\n.address_size 64\n"


def copies_kernel(n: int) -> str:
    """One thread copies `n` 16-byte chunks, 4 KiB apart (distinct lines), into shared
    memory, waits for all and stores the first word."""
    copies = "\n".join(f"  cp.async.cg.shared.global [%r1+{16 * k}], [%rd1+{4096 * k}], 16;"
                       for k in range(n))
    return HEADER + f""".visible .entry copies(.param .u64 src, .param .u64 out)
{{
  .shared .align 16 .b8 buf[{16 * n}];
  .reg .b32 %r<4>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [src];
  ld.param.u64 %rd2, [out];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  mov.u32 %r1, buf;
{copies}
  cp.async.commit_group;
  cp.async.wait_all;
  ld.shared.u32 %r2, [%r1];
  st.global.u32 [%rd2], %r2;
  ret;
}}
"""


def cycles(n: int) -> int:
    src = np.arange(4096 * 8 // 4, dtype=np.uint32)
    out = np.zeros(1, np.uint32)
    res = simulate_kernel(copies_kernel(n), "copies", 1, 1, [src, out],
                          config=models.load_preset("h100_sxm"))
    assert out[0] == 0
    return res.cycles


def test_copies_overlap():
    """Eight copies to distinct lines take well under eight round trips: 908 and 1700
    cycles when written (the rest is the lines' HBM accesses), 908 and 5406 when each copy
    waited for the one before it."""
    one, eight = cycles(1), cycles(8)
    assert eight < 2.5 * one
