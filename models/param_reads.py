"""Which kernel-parameter reads ptxas makes per-thread LDCs, and which uniform ULDCs.

What it models
--------------
On sm_90a ptxas turns a `ld.param` of a kernel parameter into a ULDC (a uniform register,
fixed latency, no scoreboard) unless the value must live in a per-thread register, where it
emits an LDC: a scoreboarded constant-cache read. Read off ptxas 13.0's SASS of
`workloads/kernels/aten/torch_elementwise.ptx` and `torch_layout.ptx`
(`ptxas -arch=sm_90a X.ptx -o X.cubin; nvdisasm -c X.cubin`), the parameter LDCs are of
three kinds, and `ldc_reads` marks the PTX reads that become them:

* pointer: a 64-bit parameter that (directly or through `cvta`/`mov`) is an operand of a
  64-bit add whose other operand is a `mul.wide` product: ptxas fuses the two into IMAD.WIDE,
  whose addend is a register pair (LDC.64), where a pointer added to a zero-extended offset
  stays a ULDC.64 (IADD3 with a uniform operand);
* if-converted: a read inside a short block that a conditional branch skips (a triangle:
  the branch's block falls into it, it falls into the branch's target). ptxas predicates such
  a block with the branch's per-thread predicate, and a predicated read cannot go to the
  uniform datapath (the vectorized kernels' tails, the generic kernels' last dimension);
* indexed: a read at a computed address (a parameter array indexed by a register, the cat
  kernels' per-input descriptors picked by `%ctaid.y`): an LDC `c[0x0][R+offset]`.

Left out: reads ptxas re-materialises (the generic kernels' dimension count, read once in
the PTX and again by an LDC before each element's chain) and everything that decides
register pressure; `.const` loads (already LDCs, `models.sm_memory`). Units: none (a
per-instruction flag).
"""

from __future__ import annotations

from isa.cfg import basic_blocks, block_spans
from isa.operands import DAddr, DReg, DSym

IF_CONVERTED_MAX_INSTRUCTIONS = 16
"""Longest block (instructions) counted as if-converted; ptxas's own limit is not published,
and the blocks in the two ATen files are 5 to 14 instructions."""

_POINTER_COPIES = frozenset({"cvta", "mov"})


def _reads_kernel_parameter(ins) -> bool:
    return ins.space == "param" and ins.opname in ("ld", "ldu")


def _reg_key(op):
    return (op.fid, op.index) if isinstance(op, DReg) else None


def _pointer_reads(program) -> set[int]:
    """pcs of 64-bit parameter reads whose value is added to a `mul.wide` product."""
    instrs = program.instrs
    origin: dict = {}        # register -> pc of the 64-bit parameter read it copies
    wide: set = set()        # registers written by mul.wide
    found: set[int] = set()
    for ins in instrs:
        ops = list(ins.ops)
        dst = _reg_key(ops[0]) if ops else None
        srcs = [_reg_key(o) for o in ops[1:]]
        if _reads_kernel_parameter(ins) and ins.types and ins.types[-1].bits == 64 and dst:
            origin[dst] = ins.pc
            continue
        if ins.opname in _POINTER_COPIES and srcs and srcs[0] in origin and dst:
            origin[dst] = origin[srcs[0]]
            continue
        if ins.opname == "mul" and "wide" in ins.flags and dst:
            wide.add(dst)
            continue
        if ins.opname == "add" and len(srcs) == 2:
            for a, b in (srcs, srcs[::-1]):
                if a in origin and b in wide:
                    found.add(origin[a])
    return found


def _if_converted_reads(program) -> set[int]:
    """pcs of parameter reads in short blocks a conditional branch skips."""
    instrs = program.instrs
    starts, succ = basic_blocks(program)
    found: set[int] = set()
    spans = block_spans(starts, len(instrs))
    for (_, stop), (body, body_stop) in zip(spans, spans[1:], strict=False):
        last = instrs[stop - 1]
        if last.spec.name != "bra" or last.guard is None:
            continue
        if body_stop - body > IF_CONVERTED_MAX_INSTRUCTIONS or succ.get(body) != [last.target]:
            continue
        found.update(p for p in range(body, body_stop) if _reads_kernel_parameter(instrs[p]))
    return found


def _indexed_reads(program) -> set[int]:
    """pcs of parameter reads whose address register is not a plain copy of a parameter's."""
    direct: set = set()      # registers holding a parameter's address as it is
    found: set[int] = set()
    for ins in program.instrs:
        ops = list(ins.ops)
        if ins.opname == "mov" and len(ops) == 2 and isinstance(ops[1], DSym) \
                and ops[1].space == "param":
            direct.add(_reg_key(ops[0]))
        elif _reads_kernel_parameter(ins) and isinstance(ops[1], DAddr) \
                and isinstance(ops[1].base, DReg) and _reg_key(ops[1].base) not in direct:
            found.add(ins.pc)
    return found


def ldc_reads(program) -> frozenset[int]:
    """pcs of the kernel-parameter reads ptxas makes per-thread LDCs (module docstring)."""
    return frozenset(_pointer_reads(program) | _if_converted_reads(program)
                     | _indexed_reads(program))
