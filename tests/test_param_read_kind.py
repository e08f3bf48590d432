"""Kernel-parameter reads as ptxas compiles them: per-thread LDCs, or uniform ULDCs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import isa
import models
from models.param_reads import IF_CONVERTED_MAX_INSTRUCTIONS, ldc_reads
from models.units import instruction_timings

H100 = models.load_preset("h100_sxm")
ATEN = Path(__file__).resolve().parents[1] / "workloads" / "kernels" / "aten"

KERNEL = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 a, .param .u64 b, .param .u32 n, .param .f32 s)
{
    .reg .f32 %f<4>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<12>;
    .reg .pred %p<2>;
    ld.param.u64 %rd1, [a];
    ld.param.u64 %rd2, [b];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %tid.x;
    cvta.to.global.u64 %rd3, %rd1;
    mul.wide.s32 %rd4, %r2, 4;
    add.s64 %rd5, %rd3, %rd4;
    cvta.to.global.u64 %rd6, %rd2;
    cvt.u64.u32 %rd7, %r2;
    add.s64 %rd8, %rd6, %rd7;
    setp.ge.s32 %p1, %r2, %r1;
    @%p1 bra DONE;
    ld.param.f32 %f1, [s];
    ld.global.f32 %f2, [%rd5];
    mul.f32 %f3, %f2, %f1;
    st.global.f32 [%rd8], %f3;
DONE:
    ret;
}
"""


def _address(ins) -> str:
    """A parameter read's address as `[base+offset]` (base: the parameter or register)."""
    addr = ins.ops[1]
    return f"[{addr.base.name}+{addr.offset}]"


def _pcs(program, parameter: str) -> list[int]:
    return [ins.pc for ins in program.instrs
            if ins.space == "param" and _address(ins) == f"[{parameter}+0]"]


def test_pointer_added_to_a_wide_product_is_an_ldc_and_one_added_to_an_offset_is_not():
    """`a` meets a mul.wide product (IMAD.WIDE: a register addend, LDC.64); `b` a
    zero-extended offset (IADD3 with a uniform operand, ULDC.64); `n` a plain compare."""
    program = isa.compile_kernel(KERNEL, "k")
    ldc = ldc_reads(program)
    assert set(_pcs(program, "a")) <= ldc
    assert not set(_pcs(program, "b")) & ldc
    assert not set(_pcs(program, "n")) & ldc


def test_read_in_a_short_block_a_branch_skips_is_an_ldc():
    """The scale read inside the skipped 4-instruction block is predicated by ptxas: an LDC."""
    program = isa.compile_kernel(KERNEL, "k")
    assert set(_pcs(program, "s")) <= ldc_reads(program)


def test_read_in_a_block_longer_than_the_if_conversion_limit_stays_uniform():
    """The same skipped block padded past the limit is branched over, not predicated."""
    pad = "\n".join("    add.s32 %r3, %r3, 1;" for _ in range(IF_CONVERTED_MAX_INSTRUCTIONS))
    long_kernel = KERNEL.replace("    ld.param.f32 %f1, [s];", "    ld.param.f32 %f1, [s];\n" + pad)
    program = isa.compile_kernel(long_kernel, "k")
    assert not set(_pcs(program, "s")) & ldc_reads(program)


def test_ptxas_like_times_ldc_reads_at_the_constant_cache_latency_and_others_uniform():
    """'ptxas_like': LDC reads take `const_cache_hit_cycles`, the rest `param_read_cycles`;
    'uniform': every read `param_read_cycles`."""
    program = isa.compile_kernel(KERNEL, "k")
    sm = H100.sm
    for model in ("uniform", "ptxas_like"):
        config = dataclasses.replace(H100, sm=dataclasses.replace(sm, param_read_model=model))
        timings, _ = instruction_timings(program, config)
        ldc = ldc_reads(program) if model == "ptxas_like" else frozenset()
        for ins in program.instrs:
            if ins.space == "param":
                expected = sm.const_cache_hit_cycles if ins.pc in ldc else sm.param_read_cycles
                assert timings[ins.pc].latency_cycles == expected, ins.text


def test_aten_generic_kernels_read_the_last_dimension_through_ldcs():
    """pw_gen2_mul2_f_f: the offset calculator's sixth dimension (an if-converted block of 5
    parameter reads, as ptxas 13.0 predicates it) is LDC; the first five dimensions' reads
    (ULDCs in ptxas's SASS) are not."""
    ptx = (ATEN / "torch_elementwise.ptx").read_text()
    program = isa.compile_kernel(ptx, "pw_gen2_mul2_f_f")
    ldc = ldc_reads(program)
    chain = [ins.pc for ins in program.instrs
             if ins.space == "param" and _address(ins).startswith("[%rd4+")]
    last_dim = {ins.pc for ins in program.instrs if ins.space == "param" and any(
        _address(ins) == f"[%rd4+{off}]" for off in (48, 72, 24, 156, 160, 164))}
    assert last_dim and last_dim <= ldc
    assert not (set(chain) - last_dim) & ldc
