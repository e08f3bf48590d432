"""`cp.async` copies and `cp.async.bulk` stores of one warp are in flight together; the
waits (`cp.async.wait_*`, `cp.async.bulk.wait_group`) wait for the last of them
(`models.units`)."""

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


def bulk_stores_kernel(n: int) -> str:
    """One thread stores `n` 512-byte blocks of shared memory to global memory 4 KiB apart
    with `cp.async.bulk` (bulk_group), then waits for them."""
    stores = "\n".join(
        f"  cp.async.bulk.global.shared::cta.bulk_group [%rd{3 + k}], [%r1], 512;"
        for k in range(n))
    addresses = "\n".join(f"  add.s64 %rd{3 + k}, %rd1, {4096 * k};" for k in range(n))
    return HEADER.replace("sm_90", "sm_90a") + f""".visible .entry stores(.param .u64 out)
{{
  .shared .align 128 .b8 buf[512];
  .reg .b32 %r<4>;
  .reg .b64 %rd<{3 + n}>;
  ld.param.u64 %rd1, [out];
  cvta.to.global.u64 %rd1, %rd1;
  mov.u32 %r1, buf;
{addresses}
{stores}
  cp.async.bulk.commit_group;
  cp.async.bulk.wait_group 0;
  ret;
}}
"""


def store_cycles(n: int) -> int:
    out = np.ones(4096 * 8 // 4, np.uint32)
    res = simulate_kernel(bulk_stores_kernel(n), "stores", 1, 1, [out],
                          config=models.load_preset("h100_sxm"))
    assert out[0] == 0
    return res.cycles


def test_bulk_stores_overlap():
    """Eight bulk stores take well under eight times one store's completion: 412 and 626
    cycles when written, 412 and 3457 when each store waited for the one before it."""
    one, eight = store_cycles(1), store_cycles(8)
    assert eight < 2.5 * one, (one, eight)
