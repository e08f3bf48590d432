"""An opcode is one table row plus one semantics function."""

from __future__ import annotations

import numpy as np
import pytest

import isa
from isa.opcodes import OPCODES, OpSpec
from isa.semantics import SEMANTICS
from isa.semantics.common import dst, src

PTX = """.version 9.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 out)
{
  .reg .b32 %r<4>;
  .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  tripleadd.u32 %r2, %r1, 5;
  mul.wide.u32 %rd2, %r1, 4;
  add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r2;
  ret;
}
"""


def _tripleadd(m, ins, lanes):
    ty = ins.types[0]
    dst(m, ins, 3 * src(m, ins, 1, ty, lanes) + src(m, ins, 2, ty, lanes), ty, lanes)


def test_unknown_opcode_is_rejected_before_running():
    """Without a table row the opcode is an error naming itself."""
    with pytest.raises(isa.PtxError, match="unknown opcode 'tripleadd.u32'"):
        isa.compile_kernel(PTX, "k")


def test_one_table_row_and_one_semantics_function_add_an_opcode(monkeypatch):
    """Registering a row and its semantics makes the op parse, run and count as its unit."""
    monkeypatch.setitem(OPCODES, "tripleadd", OpSpec("tripleadd", (3, 3), "int", "alu"))
    monkeypatch.setitem(SEMANTICS, "tripleadd", _tripleadd)
    out = np.zeros(40, dtype=np.uint32)
    res = isa.run_kernel(PTX, "k", 1, 40, [out])
    assert (out == 3 * np.arange(40) + 5).all()
    assert res.by_opcode()["tripleadd.u32"] == 2   # two warps
