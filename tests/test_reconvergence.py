"""Min-PC scheduling reconverges where an IPDOM stack would, for nvcc's block layout."""

from __future__ import annotations

import glob
from pathlib import Path

import numpy as np
import pytest

import isa
from isa.cfg import reconvergence_report
from isa.parser import parse

KERNEL_DIR = Path(__file__).resolve().parent.parent / "workloads" / "kernels"

HEADER = ".version 9.0\n.target sm_90\n.address_size 64\n"

# if (lane & 1) v = 1; else v = 2;  then a full-warp shuffle at the join
DIVERGE_THEN_SHUFFLE = HEADER + """
.visible .entry k(.param .u64 out)
{
  .reg .pred %p<2>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  and.b32 %r2, %r1, 1;
  setp.eq.s32 %p1, %r2, 0;
  @%p1 bra EVEN;
  mov.u32 %r3, 1;
  bra.uni JOIN;
EVEN:
  mov.u32 %r3, 2;
JOIN:
  shfl.sync.bfly.b32 %r4, %r3, 1, 31, -1;
  add.s32 %r5, %r3, %r4;
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r5;
  ret;
}
"""

# the join block laid out *before* the else block: min-PC runs the join early
JOIN_BEFORE_ELSE = HEADER + """
.visible .entry k(.param .u64 out)
{
  .reg .pred %p<2>;
  .reg .b32 %r<4>;
  mov.u32 %r1, %tid.x;
  setp.eq.s32 %p1, %r1, 0;
  @%p1 bra ELSE;
  mov.u32 %r2, 1;
JOIN:
  ret;
ELSE:
  mov.u32 %r2, 2;
  bra.uni JOIN;
}
"""


def _entries():
    files = glob.glob(str(KERNEL_DIR / "*.ptx")) + glob.glob(str(KERNEL_DIR / "aten" / "*.ptx"))
    for f in sorted(files):
        module = parse(Path(f).read_text(), f)
        for name, fn in module.functions.items():
            if fn.is_entry:
                yield f, name


LATE_RECONVERGENCE = {
    *((build, entry) for build in ("torch_elementwise.ptx", "torch_elementwise.sm_80.ptx")
      for entry in ("pw_gen2_pow2_f_f", "pw_gen4_pow2_f_f")),
    *((build, "pw_gencast4_pow2_f_f")
      for build in ("torch_elementwise_cast.ptx", "torch_elementwise_cast.sm_80.ptx"))}
"""ATen's generic element-wise path with a pow functor (compile-time and run-time casts):
nvcc lays blocks of the divergent region after its IPDOM, so min-PC scheduling reconverges
later than an IPDOM stack would (same results; the divergent stretch is timed serialized),
in both the sm_90 and the sm_80 build. A known gap of the scheduler."""


def _marks(file: str, entry: str):
    if (Path(file).name, entry) in LATE_RECONVERGENCE:
        return pytest.param(file, entry, marks=pytest.mark.xfail(
            strict=True, reason="blocks after the IPDOM (LATE_RECONVERGENCE)"))
    return pytest.param(file, entry)


@pytest.mark.parametrize(("file", "entry"), [_marks(f, e) for f, e in _entries()],
                         ids=lambda v: Path(v).name if "/" in str(v) else v)
def test_nvcc_branches_reconverge_at_their_ipdom_under_min_pc(file, entry):
    """Every conditional branch nvcc emitted has its divergent region laid out before its IPDOM."""
    program = isa.compile_kernel(Path(file).read_text(), entry, file)
    bad = [c for c in reconvergence_report(program) if not c.ok]
    assert bad == []


def test_layout_with_join_before_divergent_block_is_reported():
    """A join block placed before the else block is flagged as not min-PC reconvergent."""
    program = isa.compile_kernel(JOIN_BEFORE_ELSE, "k")
    checks = reconvergence_report(program)
    assert len(checks) == 1 and not checks[0].ok


def test_lanes_split_by_a_branch_shuffle_together_at_the_join():
    """After an if/else on lane parity, a full-warp shuffle sees both halves converged."""
    out = np.zeros(64, dtype=np.uint32)
    isa.run_kernel(DIVERGE_THEN_SHUFFLE, "k", 1, 64, [out])
    assert (out == 3).all()
