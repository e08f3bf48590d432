"""Loop synthesis: a persistent GEMM unit's trace with its k-loops traced short.

What it models
--------------
Work synthesis (`simulator.runner.work_synthesis`) traces a few units (CTAs, or clusters) of a
persistent GEMM for real; their k-loops made most of that functional run (a DeepSeek-V3
layer's GEMMs walk 56 or 128 k-tiles per tile). A k-loop iteration's events repeat with
period P = stages (the stage it uses; the phase parity it waits for is not an event field,
and the phases it refers to are absolute slots, moved below); only its sectors move with
the k-tile, by the same amount each k-tile (TMA boxes shifted along K). So the kernel's
builder (`KLoop`) gives the same kernel with every k-loop starting at k-tile S instead of
0 (S a multiple of P, every tile keeping at least 2 x stages + 1 k-tiles; the same
instructions, only the start and the "first k-step" test read S), and the units are
traced with that; `expand` then rebuilds each unit's trace as if every loop had run
whole: per warp and loop instance (one per tile; iterations end at the loop's
back-branch, whose last, not taken, instance is silent)

    iterations 0 .. J-1 (J = stages: the first tile's pipeline fill, a tile's first
        k-step), their sectors moved back S k-tiles (-S x delta);
    S inserted iterations i = J .. J+S-1, each a copy of traced iteration
        e = J + (i - J) mod P, its sectors moved by (i - S - e) x delta;
    the traced iterations from J on unchanged (k-tiles S + J .., the tile's last,
        possibly partial, box included).

delta (per sector place of an iteration) is the difference of consecutive traced
iterations, required equal for every complete pair. Phase slots: an event whose
iteration moved by d iterations (d = S per loop instance before it, plus i - e in a
copy) refers to phase + d / stages of the barriers the loops use (the k-loop's full and
empty barriers; others, as the cluster barrier, keep their phase); slot ids are then
renumbered, each new slot counting as many contributions as the traced one it copies.
Silent warp-instructions (a guard turned every lane off: no event, one instruction) are
placed between events by the control flow (`silent_after`), checked equal per unit to the
functional run's count, and copied with their events. Any check that fails gives None and
the caller traces the loops whole.

`tests/test_loop_synthesis.py` checks the expanded traces equal those traced with whole
loops, event for event, sector for sector and slot for slot.

Left out: loops other than the ones the builder names; warps that refer to a loop
barrier outside a loop of their own (not expanded: None). Units: events, iterations,
k-tiles, 32-byte sectors.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from simulator.runner.trace_tiles import span_items


@dataclass(frozen=True)
class KLoop:
    """A persistent kernel's k-loops as its builder describes them: they start `skip`
    k-tiles late (a multiple of `stages`) when the kernel's text has its lines
    `rewrites` (line, line instead) replaced, `edits` lines in all; `labels` are the
    loops' head labels (their back-branches branch to them). `ptx` is a launch's own text
    so rewritten (`bound`: a launch's text may have been changed after its builder made
    it, as co-design inserts instructions)."""
    skip: int
    stages: int
    labels: tuple[str, ...]
    rewrites: tuple[tuple[str, str], ...]
    edits: int
    ptx: str | None = None

    period = property(lambda s: s.stages)     # iterations whose events repeat
    head = property(lambda s: s.stages)       # iterations kept before the inserted ones

    def bound(self, ptx) -> KLoop | None:
        """This loop with `ptx` (a launch's kernel text) rewritten; None when the text is
        not text or its rewrites do not change exactly `edits` lines."""
        if not isinstance(ptx, str):
            return None
        table = dict(self.rewrites)
        lines = ptx.split("\n")
        out = [table.get(line, line) for line in lines]
        if sum(a != b for a, b in zip(lines, out, strict=True)) != self.edits:
            return None
        return replace(self, ptx="\n".join(out))


@dataclass(frozen=True)
class ProgramFlow:
    """Per event pc (the program's, then its fused runs'): first pc, end pc (exclusive),
    branch target (-1: none); the loops' (head pc, back-branch pc); the entry pc."""
    first: np.ndarray
    end: np.ndarray
    target: np.ndarray
    loops: tuple[tuple[int, int], ...]
    entry_pc: int


def program_flow(program, fused_runs, labels) -> ProgramFlow:
    n = len(program.instrs)
    first = np.concatenate([np.arange(n), [f for f, _ in fused_runs]]).astype(np.int64)
    end = np.concatenate([np.arange(1, n + 1), [e for _, e in fused_runs]]).astype(np.int64)
    target = np.full(first.size, -1, np.int64)
    loops = []
    for ins in program.instrs:
        if ins.opname != "bra":
            continue
        target[ins.pc] = ins.target
        name = getattr(ins.ops[0], "name", None) if ins.ops else None
        if name in labels and ins.target < ins.pc:
            loops.append((int(ins.target), int(ins.pc)))
    return ProgramFlow(first, end, target, tuple(loops), int(program.entry_pc))


def silent_after(pcs: np.ndarray, flow: ProgramFlow) -> tuple[int, np.ndarray] | None:
    """(silent warp-instructions before a warp's first event, after each of its events):
    between two events the pcs from where the first left off (its end, or its branch
    target when taken) to the next one's first; of a branch's two ways the one leaving
    fewer. None when neither way reaches the next event."""
    if pcs.size == 0:
        return 0, np.zeros(0, np.int64)
    first, end, target = flow.first[pcs], flow.end[pcs], flow.target[pcs]
    nxt = first[1:]
    fall = nxt - end[:-1]
    jump = np.where(target[:-1] >= 0, nxt - target[:-1], -1)
    big = np.iinfo(np.int64).max
    best = np.minimum(np.where(fall >= 0, fall, big), np.where(jump >= 0, jump, big))
    before = int(first[0]) - flow.entry_pc
    if (best == big).any() or before < 0:
        return None
    return before, np.append(best, 0)


@dataclass
class _Pieces:
    """The expanded order of one unit's events: source event per output event, its
    iteration move d, the sector moves of its sectors."""
    src: list
    moved: list
    sector_add: list


def _loop_of(pcs: np.ndarray, flow: ProgramFlow):
    for head, branch in flow.loops:
        if (pcs == branch).any():
            return head, branch
    return None


def _warp(pcs, lo: int, hi: int, sec_off, sectors, loop: KLoop, flow: ProgramFlow,
          out: _Pieces, in_loop: list) -> bool:
    """Append warp events lo .. hi - 1 of a unit, expanded, to `out`; the event ranges
    inside complete loop iterations to `in_loop`. False when a check fails."""
    span = _loop_of(pcs[lo:hi], flow)
    if span is None:
        _emit(out, lo, hi, 0, sec_off, None)
        return True
    head, branch = span
    wp = pcs[lo:hi]
    first = flow.first[wp]
    inside = (first >= head) & (first <= branch)
    branches = np.flatnonzero(wp == branch)
    outside = np.cumsum(~inside)
    cut = np.flatnonzero(outside[branches[1:]] != outside[branches[:-1]]) + 1
    s, p, j = loop.skip, loop.period, loop.head
    pos, moved = lo, 0
    for inst in np.split(branches, cut):
        n = inst.size
        if n < j + p:
            return False
        before = np.flatnonzero(~inside[:inst[0]])
        starts = lo + np.concatenate(([before[-1] + 1 if before.size else 0], inst[:-1] + 1))
        ends = lo + inst + 1
        counts = sec_off[ends] - sec_off[starts]
        if (counts != counts[0]).any():
            return False
        c = int(counts[0])
        sec = sectors[sec_off[starts][:, None] + np.arange(c)]
        step = np.diff(sec, axis=0)
        if not (step == step[:1]).all():
            return False
        delta = step[0]
        in_loop.append((int(starts[0]), int(ends[-1])))
        _emit(out, pos, int(starts[0]), moved, sec_off, None)
        _emit(out, int(starts[0]), int(ends[j - 1]), moved, sec_off, np.tile(-s * delta, j))
        block = np.arange(starts[j], ends[j + p - 1])
        copies = s // p
        out.src.append(np.tile(block, copies))
        out.moved.append(np.repeat(moved + p * np.arange(copies), block.size))
        out.sector_add.append(np.outer(p * np.arange(copies) - s, np.tile(delta, p))
                              .reshape(-1))
        pos, moved = int(ends[j - 1]), moved + s
    _emit(out, pos, hi, moved, sec_off, None)
    return True


def _emit(out: _Pieces, lo: int, hi: int, moved: int, sec_off, sector_add) -> None:
    if hi <= lo:
        return
    out.src.append(np.arange(lo, hi))
    out.moved.append(np.full(hi - lo, moved, np.int64))
    out.sector_add.append(np.zeros(int(sec_off[hi] - sec_off[lo]), np.int64)
                          if sector_add is None else sector_add)


def expand(fields: dict, per_warp: np.ndarray, raw_slots: np.ndarray, slot_events,
           slot_barrier: tuple[np.ndarray, np.ndarray], sectors: np.ndarray,
           n_sectors: np.ndarray, silent_traced: int, loop: KLoop, flow: ProgramFlow):
    """One unit's events (fields in warp order, `per_warp` counts, raw slots with the
    trace's `slot_events` and each slot's (barrier key, phase), its sectors and sectors per
    event) traced with `loop` skipping, expanded (module docstring): (fields, per_warp,
    raw slots, slot table, sectors, silent warp-instructions); None when a check fails."""
    pcs = fields["pc"].astype(np.int64)
    bounds = np.concatenate(([0], np.cumsum(per_warp)))
    sec_off = np.concatenate(([0], np.cumsum(n_sectors)))
    silent = np.zeros(pcs.size, np.int64)
    silent_first = 0
    pieces, in_loop = _Pieces([], [], []), []
    for w in range(per_warp.size):
        lo, hi = int(bounds[w]), int(bounds[w + 1])
        made = silent_after(pcs[lo:hi], flow)
        if made is None:
            return None
        silent_first += made[0]
        silent[lo:hi] = made[1]
        if not _warp(pcs, lo, hi, sec_off, sectors, loop, flow, pieces, in_loop):
            return None
    if silent_first + int(silent.sum()) != silent_traced or not in_loop:
        return None
    src = np.concatenate(pieces.src) if pieces.src else np.zeros(0, np.int64)
    moved = np.concatenate(pieces.moved) if pieces.moved else np.zeros(0, np.int64)
    new_sectors = (sectors[span_items(sec_off[src], n_sectors[src])]
                   + (np.concatenate(pieces.sector_add) if pieces.sector_add else 0))
    slots = _moved_slots(raw_slots, src, moved, in_loop, slot_events, slot_barrier, loop)
    if slots is None:
        return None
    new_fields = {k: v[src] for k, v in fields.items()}
    new_per_warp = np.bincount(np.searchsorted(bounds, src, side="right") - 1,
                               minlength=per_warp.size).astype(np.int64)
    return (new_fields, new_per_warp, slots[0], slots[1], new_sectors,
            silent_first + int(silent[src].sum()))


def _moved_slots(raw: np.ndarray, src: np.ndarray, moved: np.ndarray, in_loop: list,
                 slot_events, slot_barrier, loop: KLoop):
    """(raw slot per output event, slot table) with the loops' barriers' phases moved by
    each event's iteration move / stages (module docstring); None when a move is not
    whole phases or two copies of a slot disagree on its contributions."""
    slot_events = np.asarray(slot_events, np.int64)
    key_of, phase_of = slot_barrier
    refs = raw[src].astype(np.int64)
    used = np.flatnonzero(refs != -1)
    out = np.full(src.size, -1, np.int64)
    if not used.size:
        return out, np.zeros(0, np.int64)
    v, d = refs[used], moved[used]
    members, owner, starts = _members(v, slot_events)
    inside = np.concatenate([raw[lo:hi] for lo, hi in in_loop]).astype(np.int64)
    loop_keys = np.unique(key_of[_members(inside[inside != -1], slot_events)[0]])
    key = key_of[members]
    shift = np.where(np.isin(key, loop_keys), d[owner], 0)
    if (shift % loop.stages).any():
        return None
    phase = phase_of[members] + shift // loop.stages
    span = int(phase.max()) + 1
    if int(key.max()) >= (1 << 62) // span:
        return None
    _, first, ids = np.unique(key * span + phase, return_index=True, return_inverse=True)
    ids = ids.reshape(-1)
    counts = slot_events[members]
    if not np.array_equal(counts, counts[first][ids]):
        return None
    codes = ids[starts]                      # a slot's code is its one member's id
    table = counts[first].tolist()
    groups: dict[tuple[int, ...], int] = {}
    ends = np.append(starts[1:], members.size)
    for g in np.flatnonzero(v < 0).tolist():
        ids_g = tuple(ids[starts[g]:ends[g]].tolist())
        at = groups.get(ids_g)
        if at is None:
            at = groups[ids_g] = len(table)
            table += [len(ids_g), *ids_g]
        codes[g] = -2 - at
    out[used] = codes
    return out, np.array(table, np.int64)


def _members(codes: np.ndarray, slot_events: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(slot ids, the code each comes from, where each code's start) of slot codes: a
    slot is itself, a group -2 - base the `slot_events[base]` slots after `base`."""
    base = np.where(codes >= 0, 0, -2 - codes)
    n = np.where(codes >= 0, 1, slot_events[base])
    starts = np.concatenate(([0], np.cumsum(n)[:-1])).astype(np.int64)
    at = span_items(np.where(codes >= 0, codes, base + 1), n)
    ids = np.where(np.repeat(codes >= 0, n), at, slot_events[at])
    return ids, np.repeat(np.arange(codes.size), n), starts
