"""Semantics of every opcode, one function per opcode, registered by table name.

A semantics function has the signature `fn(m: Machine, ins: DInstr, lanes) -> None`:
it reads its sources for the executing `lanes`, computes with numpy, and writes its
destinations. Control-flow semantics also set `m.pc` for those lanes. Timing never
enters here.
"""

from isa.semantics import (  # noqa: F401,E402  (modules register themselves)
    cache_policy,
    cluster,
    control,
    convert,
    float_arith,
    hopper_mbarrier,
    hopper_tma,
    hopper_wgmma,
    int_arith,
    logic,
    memory,
    tensor,
    vpcu,
    warp,
    zce,
)
from isa.semantics.registry import SEMANTICS, semantics

__all__ = ["SEMANTICS", "semantics"]
