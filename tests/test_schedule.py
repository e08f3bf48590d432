"""`isa.schedule.hoist_loads`: global loads move up inside their block past independent
register-only instructions, never past a dependency, another load or a barrier, and past a
store only when they read read-only data (`.nc`, with their address arithmetic); the program
computes the same results."""

from __future__ import annotations

import numpy as np

import isa
from workloads.kernels.case import load_ptx

HEADER = ".version 8.0\n.target sm_90\n.address_size 64\n"


def kernel(body: str) -> str:
    return HEADER + f""".visible .entry k(.param .u64 x, .param .u64 y)
{{
  .reg .pred %p<4>;
  .reg .b16 %rs<8>;
  .reg .f32 %f<16>;
  .reg .b32 %r<8>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [x];
  ld.param.u64 %rd2, [y];
  cvta.to.global.u64 %rd3, %rd1;
  cvta.to.global.u64 %rd4, %rd2;
  mov.f32 %f1, 0f00000000;
{body}
  st.global.f32 [%rd4], %f1;
  ret;
}}
"""


def texts(program) -> list[str]:
    return [f"{ins.opname}.{ins.space}" if ins.opname == "ld" else ins.opname
            for ins in program.instrs]


def test_loads_issue_ahead_of_their_uses():
    """ld; cvt; fma repeated: the loads come first, in their order, then the arithmetic."""
    body = "\n".join(f"  ld.global.nc.u16 %rs{k}, [%rd3+{2 * k}];\n"
                     f"  cvt.f32.bf16 %f{k + 2}, %rs{k};\n"
                     f"  fma.rn.f32 %f1, %f{k + 2}, %f{k + 2}, %f1;" for k in range(1, 5))
    program = isa.compile_kernel(kernel(body), "k")
    order = texts(program)
    first_cvt = order.index("cvt")
    loads = [i for i, t in enumerate(order) if t == "ld.global"]
    assert len(loads) == 4 and max(loads) < first_cvt
    offsets = [ins.ops[1].offset for ins in program.instrs if ins.opname == "ld"
               and ins.space == "global"]
    assert offsets == sorted(offsets)
    assert [ins.pc for ins in program.instrs] == list(range(len(program.instrs)))


def test_loads_stay_behind_dependencies_stores_and_barriers():
    body = """  add.s64 %rd5, %rd3, 64;
  ld.global.f32 %f2, [%rd5];
  st.global.f32 [%rd4+4], %f2;
  add.f32 %f1, %f1, %f2;
  ld.global.f32 %f3, [%rd3];
  bar.sync 0;
  mov.f32 %f4, %f1;
  ld.global.f32 %f1, [%rd3+8];
  add.f32 %f1, %f1, %f4;"""
    order = texts(isa.compile_kernel(kernel(body), "k"))
    i = order.index("add")
    assert order[i:i + 2] == ["add", "ld.global"]          # its address comes first
    loads = [k for k, t in enumerate(order) if t == "ld.global"]
    assert order.index("st") < loads[1]                      # not past the store
    bar = order.index("bar")
    assert order[bar + 1:bar + 3] == ["mov", "ld.global"]   # not past the barrier, nor
    # past the mov that reads the register it overwrites


def test_hoisted_catalog_kernel_computes_the_same():
    """rmsnorm_bf16 (a warp per row, loads interleaved with their uses in the PTX) still
    matches the numpy reference after hoisting."""
    from workloads.kernels.catalog import KERNELS

    spec = KERNELS["rmsnorm_bf16"]
    case = spec.build(np.random.default_rng(0), rows=8, cols=256, rows_per_block=4)
    program = isa.compile_kernel(load_ptx(spec.file), spec.entry)
    lds = [i for i, ins in enumerate(program.instrs) if ins.opname == "ld"
           and ins.space == "global"]
    assert any(b == a + 1 for a, b in zip(lds, lds[1:], strict=False))
    case.run()
    case.check()


def test_read_only_loads_pass_stores_with_their_address_arithmetic():
    """An unrolled grid-stride body (ld.nc; fma; st; add address; ld.nc; ...): the read-only
    loads and the adds that make their addresses issue ahead of the stores, as in the SASS;
    the same body with plain loads keeps every load behind the store before it."""
    for nc in (".nc", ""):
        body = f"""  ld.global{nc}.f32 %f2, [%rd3];
  fma.rn.f32 %f3, %f2, %f1, %f1;
  st.global.f32 [%rd4], %f3;
  add.s64 %rd5, %rd3, 1024;
  ld.global{nc}.f32 %f4, [%rd5];
  fma.rn.f32 %f5, %f4, %f1, %f1;
  st.global.f32 [%rd4+4], %f5;
  add.s64 %rd6, %rd5, 1024;
  ld.global{nc}.f32 %f6, [%rd6];
  fma.rn.f32 %f7, %f6, %f1, %f1;
  st.global.f32 [%rd4+8], %f7;"""
        order = texts(isa.compile_kernel(kernel(body), "k"))
        loads = [i for i, t in enumerate(order) if t == "ld.global"]
        stores = [i for i, t in enumerate(order) if t == "st"]
        assert len(loads) == 3 and len(stores) == 4
        if nc:
            assert max(loads) < min(stores)
        else:
            assert stores[0] < loads[1] and stores[1] < loads[2]
