"""`cp.async` copies and `cp.async.bulk` stores of one warp are in flight together; the
waits (`cp.async.wait_*`, `cp.async.bulk.wait_group`) wait for the last of them, and
`cp.async.bulk.wait_group.read` only until their sources were read (`models.units`)."""

from __future__ import annotations

import numpy as np

import models
from simulator import simulate_kernel

HEADER = ".version 8.0\n.target sm_90\n.address_size 64\n"


def _prologue(entry: str, buf_bytes: int) -> str:
    """Header and start of kernel `entry(src, out)`: a shared buffer `buf` of `buf_bytes`,
    %rd1 = src and %rd2 = out as global addresses, %r1 = buf."""
    return HEADER + f""".visible .entry {entry}(.param .u64 src, .param .u64 out)
{{
  .shared .align 16 .b8 buf[{buf_bytes}];
  .reg .b32 %r<4>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [src];
  ld.param.u64 %rd2, [out];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  mov.u32 %r1, buf;
"""


def copies_kernel(n: int) -> str:
    """One thread copies `n` 16-byte chunks, 4 KiB apart (distinct lines), into shared
    memory, waits for all and stores the first word."""
    copies = "\n".join(f"  cp.async.cg.shared.global [%r1+{16 * k}], [%rd1+{4096 * k}], 16;"
                       for k in range(n))
    return _prologue("copies", 16 * n) + f"""{copies}
  cp.async.commit_group;
  cp.async.wait_all;
  ld.shared.u32 %r2, [%r1];
  st.global.u32 [%rd2], %r2;
  ret;
}}
"""


def copy_cycles(ptx: str, entry: str, src: np.ndarray) -> int:
    """Cycles of one thread running `entry` of `ptx` on h100_sxm with (src, out); the kernel
    must have stored src[0] to out[0]."""
    out = np.zeros(1, np.uint32)
    res = simulate_kernel(ptx, entry, 1, 1, [src, out], config=models.load_preset("h100_sxm"))
    assert out[0] == src[0]
    return res.cycles


def cycles(n: int) -> int:
    return copy_cycles(copies_kernel(n), "copies", np.arange(4096 * 8 // 4, dtype=np.uint32))


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


def groups_kernel(wait: str) -> str:
    """One thread commits two groups of one 16-byte copy each: the first from a line read
    before (an L2 hit after the warm-up load), the second from a cold line; then `wait`,
    then it reads the first copy's word."""
    return _prologue("groups", 32) + f"""  ld.global.cg.u32 %r3, [%rd1];
  add.u32 %r3, %r3, 0;
  cp.async.cg.shared.global [%r1], [%rd1], 16;
  cp.async.commit_group;
  cp.async.cg.shared.global [%r1+16], [%rd1+8192], 16;
  cp.async.commit_group;
  {wait}
  ld.shared.u32 %r2, [%r1];
  st.global.u32 [%rd2], %r2;
  ret;
}}
"""


def group_cycles(wait: str) -> int:
    return copy_cycles(groups_kernel(wait), "groups", np.arange(4096, dtype=np.uint32) + 7)


def test_wait_group_n_leaves_the_newest_groups_in_flight():
    """`cp.async.wait_group 1` waits for the first group only (an L2 hit), not for the
    second (an HBM miss): the read and store after it go ahead as with no wait at all (the
    kernel then ends with the second copy), 1178 cycles against 1473 for `wait_group 0`
    when written; `wait_all` waits like `wait_group 0`."""
    one, zero, every, none = (group_cycles(w) for w in (
        "cp.async.wait_group 1;", "cp.async.wait_group 0;", "cp.async.wait_all;", ""))
    assert zero == every
    assert one == none < zero


def ring_cycles(wait: str) -> int:
    """Ten one-copy groups committed back to back (more than `COPY_GROUPS`), then `wait`."""
    copies = "\n".join(f"  cp.async.cg.shared.global [%r1+{16 * k}], [%rd1+{4096 * k}], 16;\n"
                       "  cp.async.commit_group;" for k in range(10))
    ptx = copies_kernel(1).replace(
        "  cp.async.cg.shared.global [%r1+0], [%rd1+0], 16;\n  cp.async.commit_group;\n"
        "  cp.async.wait_all;", copies + "\n" + wait).replace(".b8 buf[16]", ".b8 buf[160]")
    return copy_cycles(ptx, "copies", np.arange(4096 * 10 // 4, dtype=np.uint32))


def test_more_groups_than_the_ring_merge_the_oldest():
    """With ten groups outstanding the two oldest share a ring slot: wait_group 9 waits for
    both (no less than no wait, no more than wait_group 0, which waits for all ten)."""
    nine, zero, none = (ring_cycles(w) for w in
                        ("cp.async.wait_group 9;", "cp.async.wait_group 0;", ""))
    assert none < nine <= zero


def reuse_kernel(wait: str) -> str:
    """One thread fills a 512-byte shared buffer with 1s, bulk-stores it to out[0:128],
    waits with `wait`, refills it with 2s and bulk-stores it to out[1024:1152] (4 KiB on),
    then waits for the source read (`wait_group.read 0`, as CUTLASS's epilogue does at
    exit)."""
    fill = "\n".join(f"  st.shared.u32 [%r1+{4 * i}], %r2;" for i in range(128))
    store = ("  fence.proxy.async.shared::cta;\n"
             "  cp.async.bulk.global.shared::cta.bulk_group [{dst}], [%r1], 512;\n"
             "  cp.async.bulk.commit_group;")
    return HEADER.replace("sm_90", "sm_90a") + f""".visible .entry reuse(.param .u64 out)
{{
  .shared .align 128 .b8 buf[512];
  .reg .b32 %r<4>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  cvta.to.global.u64 %rd1, %rd1;
  add.s64 %rd2, %rd1, 4096;
  mov.u32 %r1, buf;
  mov.u32 %r2, 1;
{fill}
{store.format(dst="%rd1")}
  {wait}
  mov.u32 %r2, 2;
{fill}
{store.format(dst="%rd2")}
  cp.async.bulk.wait_group.read 0;
  ret;
}}
"""


def reuse_cycles(wait: str, overrides: dict | None = None) -> tuple[int, np.ndarray]:
    out = np.zeros(4096 * 2 // 4, np.uint32)
    res = simulate_kernel(reuse_kernel(wait), "reuse", 1, 1, [out],
                          config=models.load_preset("h100_sxm", overrides))
    return res.cycles, out


SLOW_WRITES = {"l2.near_hit_latency_cycles": 2000, "l2.far_hit_latency_cycles": 2000,
               "hbm.latency_cycles": 3000}


def test_wait_group_read_releases_the_source_before_the_writes_complete():
    """`cp.async.bulk.wait_group.read 0` holds the thread until the TMA engine has read the
    source out of shared memory, not until its writes to global memory completed: reusing
    the buffer after it, the kernel ends sooner than after `wait_group 0` (1599 against 1932
    cycles on h100_sxm, 3179 against 5247 with 2000-cycle L2 hits when written: the gap
    grows with the writes' latency); the data written is the same."""
    expect = np.zeros(2048, np.uint32)
    expect[:128], expect[1024:1152] = 1, 2
    timed = {}
    for name, overrides in (("h100", None), ("slow", SLOW_WRITES)):
        for wait in ("read", "full"):
            ptx_wait = "cp.async.bulk.wait_group" + (".read" if wait == "read" else "") + " 0;"
            timed[name, wait], out = reuse_cycles(ptx_wait, overrides)
            assert np.array_equal(out, expect), (name, wait)
    read, full = timed["h100", "read"], timed["h100", "full"]
    slow_read, slow_full = timed["slow", "read"], timed["slow", "full"]
    assert read < full and slow_read < slow_full, timed
    assert slow_full - slow_read > full - read, timed
