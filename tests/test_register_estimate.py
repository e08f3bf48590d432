"""`models.cta_dispatch.estimate_registers`: liveness over the control-flow graph, checked
on a loop and against the allocations ncu reports for the catalogued kernels."""

from __future__ import annotations

import ast
from pathlib import Path

import pandas as pd

import isa
import models
from models.cta_dispatch import estimate_registers, occupancy
from workloads.kernels.case import load_ptx
from workloads.kernels.catalog import KERNELS

NCU = Path(__file__).resolve().parents[1] / "workloads/reference/h100/ncu_own_kernels.csv"
HEADER = ".version 8.0\n.target sm_90\n.address_size 64\n"


def loop_kernel(temps: int) -> str:
    """A loop whose body squares a value through `temps` fresh registers (each read once)
    and adds the last to an accumulator carried around the loop."""
    chain = "\n".join(f"  mul.f32 %f{k + 3}, %f{k + 2}, %f{k + 2};" for k in range(temps))
    return HEADER + f""".visible .entry loop(.param .u64 out, .param .u32 n)
{{
  .reg .pred %p<2>;
  .reg .f32 %f<{temps + 4}>;
  .reg .b32 %r<4>;
  .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [n];
  mov.f32 %f1, 0f00000000;
  mov.u32 %r2, 0;
LOOP:
  cvt.rn.f32.u32 %f2, %r2;
{chain}
  add.f32 %f1, %f1, %f{temps + 2};
  add.u32 %r2, %r2, 1;
  setp.lt.u32 %p1, %r2, %r1;
  @%p1 bra LOOP;
  st.global.f32 [%rd1], %f1;
  ret;
}}
"""


def test_loop_temporaries_do_not_stay_live():
    """Live at once: the pointer (2 slots), n, the counter, the accumulator and one
    temporary (each dies where the next is written), however many the body names."""
    for temps in (4, 32):
        program = isa.compile_kernel(loop_kernel(temps), "loop")
        assert estimate_registers(program) == 6
        assert program.regs_per_thread > 6


def test_guarded_write_keeps_the_old_value_live():
    """`@p mov r, ...` may leave r as it was, so r's earlier value stays live across it."""
    src = HEADER + """.visible .entry g(.param .u64 out, .param .u32 n)
{
  .reg .pred %p<2>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [out];
  ld.param.u32 %r1, [n];
  add.u32 %r2, %r1, 1;
  add.u32 %r3, %r1, 2;
  setp.gt.u32 %p1, %r1, 5;
  @%p1 mov.u32 %r2, %r3;
  add.u32 %r4, %r2, %r1;
  st.global.u32 [%rd1], %r4;
  ret;
}
"""
    program = isa.compile_kernel(src, "g")
    # at the guarded mov: rd1 (2), r1, r2 (old value), r3
    assert estimate_registers(program) == 5


def test_catalog_estimates_match_ncu_occupancy():
    """Against ncu's registers per thread for every catalogued launch on our H100: each
    estimate within 20 registers (the norm backward kernels read 50-52 against 32: with
    their loads hoisted, `isa.schedule`, more values are in flight than ptxas keeps), and
    at least three launches in four get ncu's CTAs per SM (62 of 78 when written; the
    loop-stretching estimate it replaced got 50, with `add_n_bf16` at 133 registers)."""
    cfg = models.load_preset("h100_sxm")
    ncu = pd.read_csv(NCU)
    same = 0
    for r in ncu.itertuples():
        spec = KERNELS[r.kernel]
        program = isa.compile_kernel(load_ptx(spec.file), spec.entry)
        block = ast.literal_eval(r.block)
        threads = block[0] * block[1] * block[2]
        est = estimate_registers(program)
        assert abs(est - r.registers_per_thread) <= 20, (r.kernel, est, r.registers_per_thread)
        ours = occupancy(cfg, threads, est, program.shared_bytes).ctas_per_sm
        theirs = occupancy(cfg, threads, int(r.registers_per_thread),
                           program.shared_bytes).ctas_per_sm
        same += ours == theirs
    assert same >= 0.75 * len(ncu)
