"""Control-flow graph of a decoded program and the reconvergence check.

Min-PC scheduling (the interpreter's) reconverges a divergent warp at a branch's
immediate post-dominator (IPDOM) exactly when every block of the divergent region
lies before the IPDOM in layout order: lanes that reach the IPDOM early sit at a
higher pc and wait until the others arrive. `reconvergence_report` computes the
IPDOM of every conditional branch (iterative post-dominator sets with a virtual
exit, as GPGPU-Sim does) and lists the branches where the layout property fails,
so a user can tell whether min-PC and an IPDOM stack agree for a program.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class BranchCheck:
    pc: int
    text: str
    ipdom_pc: int          # first pc of the IPDOM block, -1 if only the exit post-dominates
    region_max_pc: int     # highest pc in the divergent region
    ok: bool               # region lies before the IPDOM in layout order


def block_spans(starts: list[int], n: int) -> list[tuple[int, int]]:
    """(first pc, end pc) of each block of `basic_blocks`' starts, in a program of `n` pcs."""
    return list(zip(starts, [*starts[1:], n], strict=True))


def basic_blocks(program) -> tuple[list[int], dict[int, list[int]]]:
    """Block start pcs (sorted) and successor block starts of each block."""
    instrs = program.instrs
    n = len(instrs)
    leaders = {0, program.entry_pc}
    for ins in instrs:
        if ins.spec.name == "bra":
            leaders.add(ins.target)
            leaders.add(ins.pc + 1)
        elif ins.spec.name in ("ret", "exit", "call"):
            leaders.add(ins.pc + 1)
    starts = sorted(p for p in leaders if p < n)
    succ: dict[int, list[int]] = {}
    for s, stop in block_spans(starts, n):
        end = stop - 1
        last = instrs[end]
        out: list[int] = []
        name = last.spec.name
        if name == "bra":
            out.append(last.target)
            if last.guard is not None and end + 1 < n:
                out.append(end + 1)
        elif name in ("ret", "exit"):
            pass
        elif end + 1 < n:
            out.append(end + 1)
        succ[s] = out
    return starts, succ


def post_dominators(starts: list[int], succ: dict[int, list[int]]) -> dict[int, set[int]]:
    exit_node = -1
    nodes = set(starts) | {exit_node}
    pdom = {b: set(nodes) for b in starts}
    pdom[exit_node] = {exit_node}
    changed = True
    while changed:
        changed = False
        for b in reversed(starts):
            outs = succ[b] or [exit_node]
            new = set.intersection(*(pdom[s] for s in outs)) | {b}
            if new != pdom[b]:
                pdom[b] = new
                changed = True
    return pdom


def reconvergence_report(program) -> list[BranchCheck]:
    starts, succ = basic_blocks(program)
    pdom = post_dominators(starts, succ)
    block_of = {}
    for i, s in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(program.instrs)
        for p in range(s, end):
            block_of[p] = s
    block_end = {s: (starts[i + 1] if i + 1 < len(starts) else len(program.instrs)) - 1
                 for i, s in enumerate(starts)}
    out = []
    for ins in program.instrs:
        if ins.spec.name != "bra" or ins.guard is None:
            continue
        b = block_of[ins.pc]
        strict = pdom[b] - {b}
        # immediate post-dominator: the strict post-dominator post-dominated by all others
        ipdom = next((c for c in strict if all(o in pdom[c] for o in strict)), -1)
        region, stack = set(), list(succ[b])
        while stack:
            x = stack.pop()
            if x == ipdom or x in region:
                continue
            region.add(x)
            stack.extend(succ[x])
        region_max = max((block_end[x] for x in region), default=ins.pc)
        ok = ipdom == -1 or all(x < ipdom for x in region)
        out.append(BranchCheck(ins.pc, ins.text, ipdom, region_max, ok))
    return out
