"""A fence at GPU scope (`membar.gl`, `fence.sc.gpu`) holds its warp until the warp's stores
in flight completed, then `sm.gpu_fence_cycles` more; CTA-scope fences do not (`models.units`,
`models.sm_core`)."""

from __future__ import annotations

import numpy as np
import pytest

import models
from simulator import simulate_kernel

HEADER = ".version 8.0\n.target sm_90\n.address_size 64\n"


def _kernel(fence: str, stores: int) -> str:
    """One thread stores `stores` words to distinct lines, runs `fence`, then counts itself
    on a flag with an atomic add (the in-kernel combine's handshake)."""
    body = "\n".join(f"  st.global.u32 [%rd1+{256 * k}], %r1;" for k in range(stores))
    return HEADER + f""".visible .entry k(.param .u64 out, .param .u64 flag)
{{
  .reg .b32 %r<4>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  ld.param.u64 %rd2, [flag];
  cvta.to.global.u64 %rd1, %rd1;
  cvta.to.global.u64 %rd2, %rd2;
  mov.u32 %r1, 7;
{body}
  {fence}
  atom.global.add.u32 %r2, [%rd2], 1;
  ret;
}}
"""


def _cycles(fence: str, stores: int = 4, overrides: dict | None = None) -> int:
    out = np.zeros(64 * max(stores, 1), np.uint32)
    flag = np.zeros(1, np.uint32)
    config = models.load_preset("h100_sxm", overrides)
    res = simulate_kernel(_kernel(fence, stores), "k", 1, 1, [out, flag], config=config)
    assert flag[0] == 1 and all(out[64 * k] == 7 for k in range(stores))
    return res.cycles


@pytest.mark.parametrize("fence", ["membar.gl;", "fence.sc.gpu;", "fence.acq_rel.gpu;",
                                   "membar.sys;"])
def test_gpu_fence_waits_for_the_stores_then_its_own_cycles(fence):
    """Without a fence the atomic issues behind the stores; with one it waits for the
    stores' completion (an L2 round trip, hundreds of cycles) plus the 671 fence cycles."""
    none = _cycles("")
    fenced = _cycles(fence)
    assert fenced - none > 671 + 200
    zero = _cycles(fence, overrides={"sm.gpu_fence_cycles": 0})
    assert fenced - zero == 671
    assert zero - none > 200


@pytest.mark.parametrize("fence", ["membar.cta;", "fence.sc.cta;", "fence.acq_rel.cluster;"])
def test_narrower_fences_do_not_wait(fence):
    assert _cycles(fence) - _cycles("") <= 2


def test_a_fence_with_nothing_in_flight_costs_its_own_cycles():
    none = _cycles("", stores=0)
    assert _cycles("membar.gl;", stores=0) - none == pytest.approx(671, abs=8)
