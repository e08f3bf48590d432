"""Integer ops on the ALU and the FMA pipe, as ptxas places them (`sm.int_pipe_model`)."""

from __future__ import annotations

from pathlib import Path

import pytest

import isa
import models
from models.units import UNIT_NAMES, instruction_timings

KERNELS = Path(__file__).resolve().parents[1] / "workloads" / "kernels"


def _units(program, model: str) -> dict[str, str]:
    """Instruction text (with its pc) -> unit name under `model`."""
    config = models.load_preset("h100_sxm", {"sm.int_pipe_model": model})
    timings, _ = instruction_timings(program, config)
    return {f"{ins.pc} {ins.opname}": UNIT_NAMES[t.unit]
            for ins, t in zip(program.instrs, timings, strict=True)}


def _collatz():
    return isa.compile_kernel((KERNELS / "collatz.ptx").read_text(), "collatz_steps")


def test_collatz_loop_splits_between_alu_and_fma_pipe_as_its_sass_does():
    """The loop (pcs 21-30): mad on the FMA pipe, and.pred folded (branch unit), the add
    after five ALU ops on the FMA pipe, the logic, shift, select and compares on the ALU.
    nvdisasm of nvcc 13's sm_90a code: LOP3, ISETP x3, SHF on the ALU; IMAD, IMAD.MOV,
    VIADD on the FMA pipe."""
    units = _units(_collatz(), "alu_fma")
    loop = {k: v for k, v in units.items() if 21 <= int(k.split()[0]) <= 29}
    assert loop == {"21 and": "int32", "22 setp": "int32", "23 mad": "fp32", "24 shr": "int32",
                    "25 selp": "int32", "26 setp": "int32", "27 add": "fp32",
                    "28 setp": "int32", "29 and": "branch"}


def test_special_register_moves_and_parameter_reads_keep_their_units():
    units = _units(_collatz(), "alu_fma")
    assert [units[f"{pc} mov"] for pc in (4, 5, 6)] == ["int32"] * 3
    assert units["0 ld"] == "branch"


def test_int32_unit_model_times_every_integer_op_on_the_int32_unit():
    units = _units(_collatz(), "int32_unit")
    assert {v for k, v in units.items() if 21 <= int(k.split()[0]) <= 29} == {"int32"}


@pytest.mark.parametrize("fmas, unit", [(6, "int32"), (0, "fp32")])
def test_an_fp32_heavy_block_sends_its_adds_to_the_alu(fmas, unit):
    """Balancing counts the block's FP32 work: after six FMAs (6 cycles) the FMA pipe is
    busier than the ALU after two logic ops (4 cycles), so the add goes to the ALU; without
    the FMAs it goes to the FMA pipe."""
    body = "\n".join(f"    fma.rn.f32 %f{i + 2}, %f{i + 1}, %f1, %f1;" for i in range(fmas))
    ptx = f"""
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 a)
{{
    .reg .f32 %f<8>;
    .reg .b32 %r<4>;
{body}
    and.b32 %r1, %r1, 7;
    xor.b32 %r2, %r1, 5;
    add.s32 %r3, %r2, 1;
    ret;
}}
"""
    units = _units(isa.compile_kernel(ptx, "k"), "alu_fma")
    assert units[f"{fmas + 2} add"] == unit


def test_a_bad_int_pipe_model_is_refused_with_the_accepted_values():
    with pytest.raises(Exception, match="alu_fma"):
        models.load_preset("h100_sxm", {"sm.int_pipe_model": "split"})
