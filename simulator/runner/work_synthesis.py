"""Work synthesis: the traces of a persistent kernel's CTAs from a few of them traced for real.

What it models
--------------
A persistent kernel (a GEMM that launches one CTA, or one 2-CTA cluster, per SM and walks
tiles t = c, c + P, c + 2P, ...) is one wave, so the wave sampler (`simulator.runner.sampling`)
times it in full, and its functional run traces every CTA: the GEMMs of a DeepSeek-V3 layer
spent most of their CPU there. Its CTAs run the same instructions whenever they do the
same *kind* of work (as many tiles, the same edge tiles), and their addresses are affine in
the coordinates of the tiles they walk (the m- and n-block of each round), not in the CTA
index (t % tiles_m wraps). The kernel's builder knows both and says so in a `CtaWork`
(`simulate_kernel(cta_work=...)`): per CTA a work class and a row of integer coordinates.

Per unit (a CTA, or a cluster's CTAs together, as their barriers are shared) of each class,
units are traced for real in one functional run (`isa.run_kernel(ctas=...)`): the class's
first, then those that raise the rank of the coordinate differences until it is the
class's (the evidence), and up to `fidelity.work_synthesis_probe_units` more (the last and
middle unit not yet chosen).
A class is synthesized when every traced unit has the same events per warp (pc, active
lanes, kind, detail) as its first, the same mbarrier phase structure (its slots numbered
in order of first use, `canonical_slots`), no atomics or data-timed details, and sectors

    S_u = S_first + (X_u - X_first) D

(X: the unit's coordinates; D per coordinate and sector place, solved by least squares on
the evidence over the distinct columns of sector differences, the shifts rounded) that
reproduce every traced unit exactly, probes included. The synthesized trace then holds
every unit of the grid, traced ones too, each with fresh slot ids; warp and thread
instruction counts are those of the events (a fused run counting its instructions), plus
the warps whose lanes a guard turned all off (they count an instruction but record no
event; `TraceRecorder.count_silent`), checked equal to the functional run's on the traced
units. When a check fails the kernel is traced in full.

Grouped (MoE) GEMMs are persistent too: their `CtaWork` comes from the schedule table (per
round the schedule row, its A, B and C rows, k0 and scale_b row; classes by valid rows,
k-tiles and boxes past a tensor's end, `templates.gemm.GemmKernel.cta_work`).

A GEMM's `CtaWork` also carries its `k_loop` (`simulator.runner.loop_synthesis.KLoop`, from
`templates.gemm.GemmKernel.k_loop`) when its tiles have enough k-tiles: the units are then
traced with every k-loop starting S k-tiles late and each unit is expanded to whole loops
before the checks above (`loop_synthesis.expand`); when the expansion fails a check the
units are traced again with whole loops.

Synthesis is tried when `fidelity.work_synthesis` is on and the units to trace are at most
`fidelity.work_synthesis_max_traced_fraction` of the grid's.

Measured (h800_sxm; `tests/test_work_synthesis.py` checks the traces and the sampled
results are those of tracing every CTA): q_a_proj 4096x1536x7168 FP8 traces 24 of 132
CTAs, 12.0 s CPU for the op against 14.1 s tracing every CTA (the replay is most of it).

Left out: kernels with atomics or data-timed events, clusters other than 1-D ones along x
(traced in full). Units: CTAs, warps, 32-byte sectors.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from isa.cluster import cluster_shape
from isa.launch import compile_kernel
from simulator.framework.policy_spec import FidelitySpec
from simulator.runner import loop_synthesis
from simulator.runner.trace import KIND_ATOMIC, KIND_NONE, sector_events
from simulator.runner.trace_tiles import span_items

_EVENT_FIELDS = ("pc", "active", "kind", "detail")


@dataclass(frozen=True)
class CtaWork:
    """What a kernel's builder says about its CTAs: `classes[c]` (CTAs of one class run the
    same instructions) and `coords[c]` (integers the CTA's addresses are affine in, within
    its class), one row per CTA in linear order."""
    classes: np.ndarray
    coords: np.ndarray
    k_loop: Any = None        # a `simulator.runner.loop_synthesis.KLoop`: trace the k-loops short

    @property
    def short_loops(self):
        """`k_loop` once bound to the launch's text (`KLoop.bound`), else None."""
        return self.k_loop if self.k_loop is not None and self.k_loop.ptx is not None else None

    def __post_init__(self) -> None:
        classes = np.asarray(self.classes, np.int64)
        coords = np.asarray(self.coords, np.int64)
        if classes.ndim != 1 or coords.ndim != 2 or coords.shape[0] != classes.size:
            raise ValueError(f"CtaWork: classes {classes.shape}, coords {coords.shape}; "
                             "accepted classes [CTAs] and coords [CTAs, features]")
        object.__setattr__(self, "classes", classes)
        object.__setattr__(self, "coords", coords)


@dataclass
class _Unit:
    """One unit's traced events: fields per event, events per warp, slots (canonical), its
    slot table, which table entries are slot ids, its sectors, its instruction counts."""
    per_warp: np.ndarray
    fields: dict
    slots: np.ndarray
    table: np.ndarray
    is_member: np.ndarray
    sectors: np.ndarray
    warp_instr: int
    thread_instr: int
    traced_warp_instr: int
    traced_thread_instr: int

    @cached_property
    def slot_sign(self) -> np.ndarray:
        """+1 for a slot id, -1 for a group code, 0 for none: a fresh base b moves the
        slots to `slots + b * slot_sign`."""
        return (self.slots >= 0).astype(np.int64) - (self.slots <= -2)

    @cached_property
    def sector_offset(self) -> np.ndarray:
        """Each event's first sector among the unit's (events without: where the next
        one's start)."""
        has = sector_events(self.fields["kind"], self.fields["detail"])
        counts = np.where(has, self.fields["detail"], 0).astype(np.int64)
        return np.cumsum(counts) - counts


def _units(work: CtaWork, cluster: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(first CTA, class, coordinates) per unit of `cluster` consecutive CTAs (a unit's
    class combines its CTAs', its coordinates are theirs side by side)."""
    n = work.classes.size
    if n % cluster:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros((0, 0), np.int64)
    classes = work.classes.reshape(-1, cluster)
    _, unit_class = np.unique(classes, axis=0, return_inverse=True)
    return (np.arange(0, n, cluster, dtype=np.int64), unit_class.reshape(-1),
            work.coords.reshape(n // cluster, -1))


def choose_units(unit_class: np.ndarray, coords: np.ndarray,
                 probe_units: int) -> dict[int, tuple[list, list]]:
    """Per class, (evidence units, up to `probe_units` probe units) as in the module
    docstring."""
    out = {}
    for cls in np.unique(unit_class).tolist():
        members = np.flatnonzero(unit_class == cls).tolist()
        first = members[0]
        diffs = coords[members] - coords[first]
        target = int(np.linalg.matrix_rank(diffs)) if diffs.size else 0
        chosen, rows = [first], []
        for u in members[1:]:
            if len(rows) == target:
                break
            trial = rows + [coords[u] - coords[first]]
            if np.linalg.matrix_rank(np.array(trial)) > len(rows):
                chosen.append(u)
                rows = trial
        taken = set(chosen)
        rest = [u for u in members if u not in taken]
        probes = []
        for u in (rest[-1:] + rest[len(rest) // 2:len(rest) // 2 + 1])[:probe_units]:
            if u not in probes:
                probes.append(u)
        out[cls] = (chosen, probes)
    return out


def canonical_slots(slots: np.ndarray, slot_events) -> tuple[np.ndarray, np.ndarray,
                                                              np.ndarray]:
    """A unit's phase slots numbered in order of first use: (slot per event, the unit's
    slot table as `WarpTrace.slot_events` lays it out, which entries of it are slot ids).
    A real slot's entry is its event count; a group (code -2 - base) is its member count
    followed by its members (`simulator.runner.trace_tiles`)."""
    local: dict[int, int] = {}
    groups: dict[int, int] = {}
    table: list[int] = []
    member: list[bool] = []

    def real(v: int) -> int:
        at = local.get(v)
        if at is None:
            at = local[v] = len(table)
            table.append(int(slot_events[v]))
            member.append(False)
        return at

    out = np.full(slots.size, -1, np.int64)
    used = np.flatnonzero(slots != -1)
    local_of = []
    for v in slots[used].tolist():
        if v >= 0:
            local_of.append(real(v))
            continue
        base = -2 - v
        at = groups.get(base)
        if at is None:
            n = int(slot_events[base])
            ids = [real(int(x)) for x in slot_events[base + 1:base + 1 + n]]
            at = groups[base] = len(table)
            table += [n, *ids]
            member += [False] + [True] * n
        local_of.append(-2 - at)
    out[used] = local_of
    return out, np.array(table, np.int64), np.array(member, np.bool_)


def unit_events(trace, first_cta: int, cluster: int, run_lengths: np.ndarray, silent: int,
                expansion=None) -> _Unit | None:
    """The `_Unit` of CTAs first_cta .. + cluster - 1 of a `WarpTrace` (`silent`: their
    warp-instructions without events), None when it has atomics or data-timed details.
    With `expansion` (`KLoop`, `ProgramFlow`, the recorder's slot barriers) the trace's
    k-loops ran short and the unit is `loop_synthesis.expand`ed (None when that fails);
    its traced counts stay those of the trace."""
    wpc = trace.warps_per_cta
    w0, w1 = first_cta * wpc, (first_cta + cluster) * wpc
    lo, hi = int(trace.warp_offsets[w0]), int(trace.warp_offsets[w1])
    fields = {"pc": trace.pc[lo:hi], "active": trace.active[lo:hi],
              "kind": trace.kind[lo:hi], "detail": trace.detail[lo:hi]}
    kind, detail = fields["kind"], fields["detail"]
    if (kind == KIND_ATOMIC).any() or detail[kind == KIND_NONE].any():
        return None
    has = sector_events(kind, detail)
    sectors = trace.sectors[span_items(trace.sector_start[lo:hi][has], detail[has])]
    raw = (trace.phase_slot[lo:hi] if trace.phase_slot is not None
           else np.full(hi - lo, -1, np.int32))
    slot_events = trace.slot_events if trace.slot_events is not None else np.zeros(0)
    per_warp = np.diff(trace.warp_offsets[w0:w1 + 1])
    traced = _counts(fields, run_lengths)
    traced_warp = traced[0] + silent
    if expansion is not None:
        loop, flow, barriers = expansion
        made = loop_synthesis.expand(fields, per_warp, raw, slot_events, barriers, sectors,
                                     np.where(has, detail, 0).astype(np.int64), silent,
                                     loop, flow)
        if made is None:
            return None
        fields, per_warp, raw, slot_events, sectors, silent = made
    slots, table, member = canonical_slots(raw, slot_events)
    warp, thread = _counts(fields, run_lengths)
    return _Unit(per_warp, fields, slots, table, member, sectors, warp + silent, thread,
                 traced_warp, traced[1])


def _counts(fields: dict, run_lengths: np.ndarray) -> tuple[int, int]:
    """(warp, thread) instructions of events `fields`."""
    lengths = run_lengths[fields["pc"]]
    return int(lengths.sum()), int((lengths * fields["active"].astype(np.int64)).sum())


def _same_events(a: _Unit, b: _Unit) -> bool:
    return (all(np.array_equal(getattr(a, k), getattr(b, k))
                for k in ("per_warp", "slots", "table"))
            and all(np.array_equal(a.fields[k], b.fields[k]) for k in _EVENT_FIELDS)
            and a.sectors.shape == b.sectors.shape)


def fit_sectors(units: list[_Unit], coords: np.ndarray, n_evidence: int
                ) -> tuple[np.ndarray, np.ndarray] | None:
    """D of the module docstring from the first `n_evidence` units, as (D of each distinct
    column of sector differences [features, columns], the column of each sector place):
    least squares, as the coordinates may be redundant (a cluster's CTAs' are), over the
    distinct columns only (a box's sectors move together). None unless `shifted` with it
    reproduces every unit's sectors exactly."""
    base = units[0].sectors
    dx = (coords - coords[0]).astype(np.float64)
    ds = np.array([u.sectors - base for u in units[:n_evidence]], np.int64
                  ).reshape(n_evidence, -1)
    columns, place = distinct_columns(ds)
    d = np.zeros((coords.shape[1], columns.shape[1]))
    if n_evidence > 1 and ds.size:
        d, *_ = np.linalg.lstsq(dx[1:n_evidence], columns[1:].astype(np.float64), rcond=None)
    fit = (d, place)
    if not all(np.array_equal(shifted(base, coords[i] - coords[0], fit), units[i].sectors)
               for i in range(len(units))):
        return None
    return fit


def distinct_columns(m: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`np.unique(m, axis=1, return_inverse=True)` of an int64 matrix, in some column
    order: the columns are told apart by a random linear hash (int64, wrapping) sorted as
    one key each, checked exactly (a collision falls back to `np.unique` by columns, whose
    byte-wise sort took ~3 s of a DeepSeek-V3 layer)."""
    if m.shape[0] == 0 or m.shape[1] == 0:
        return np.unique(m, axis=1, return_inverse=True)
    weights = np.random.default_rng(0).integers(1, 2**62, size=m.shape[0], dtype=np.int64)
    key = weights[0] * m[0]
    for w, row in zip(weights[1:].tolist(), m[1:], strict=True):
        key += w * row
    _, first, place = np.unique(key, return_index=True, return_inverse=True)
    columns = m[:, first]
    if not np.array_equal(columns[:, place], m):
        columns, place = np.unique(m, axis=1, return_inverse=True)
    return columns, place.reshape(-1)


def shifted(base: np.ndarray, dx: np.ndarray, fit: tuple[np.ndarray, np.ndarray]
            ) -> np.ndarray:
    """The sectors of units `dx` away (coordinates: one row, or [units, features]) from the
    one with sectors `base`, by `fit_sectors`'s fit."""
    d, place = fit
    return base + _moves(dx, d)[..., place]


def _moves(dx: np.ndarray, d: np.ndarray) -> np.ndarray:
    """The rounded shift of each distinct column of sector differences for coordinate
    differences `dx` (one row, or [units, features])."""
    return np.rint(dx.astype(np.float64) @ d).astype(np.int64)


def run_lengths(n_instrs: int, fused_runs) -> np.ndarray:
    """Instructions per event pc: 1 for a program pc, end - first for a fused run."""
    extra = [end - first for first, end in fused_runs]
    return np.concatenate([np.ones(n_instrs, np.int64), np.array(extra, np.int64)])


def cluster_units(launch) -> int:
    """CTAs per unit: the cluster size of a 1-D grid of 1-D clusters (1 without clusters),
    0 when the clusters are laid out otherwise (not synthesized)."""

    shape, _ = cluster_shape(launch.program, launch.grid)
    if shape == (1, 1, 1):
        return 1
    return shape[0] if shape[1:] == (1, 1) and launch.grid[1:] == (1, 1) else 0


def synthesize_trace(launch, recorder,
                     fidelity: FidelitySpec | None = None) -> tuple[int, int] | None:
    """Trace `launch`'s evidence and probe units into `recorder` (empty) and, when every
    check passes (module docstring), replace its contents with the whole grid's
    synthesized trace: (warp instructions, thread instructions) of the grid. None when
    synthesis is not tried or a check fails (the recorder then holds the traced units
    only: the caller starts a fresh one). When the units were traced with short k-loops
    (`CtaWork.k_loop`) and a check fails, they are traced again with whole ones.
    `fidelity` (the config's `[fidelity]`; None: its defaults) gives the probes per class
    and the largest share of the grid traced."""
    fidelity = fidelity or FidelitySpec()
    made = _synthesize(launch, recorder, fidelity)
    if made is None and launch.work is not None and launch.work.short_loops is not None:
        recorder.clear()
        made = _synthesize(dataclasses.replace(
            launch, work=dataclasses.replace(launch.work, k_loop=None)), recorder, fidelity)
    return made


def _synthesize(launch, recorder, fidelity: FidelitySpec) -> tuple[int, int] | None:
    work, cluster = launch.work, cluster_units(launch)
    if work is None or cluster == 0 or not recorder.empty:
        return None
    firsts, unit_class, coords = _units(work, cluster)
    if not firsts.size:
        return None
    plan = choose_units(unit_class, coords, fidelity.work_synthesis_probe_units)
    traced = sorted({u for chosen, probes in plan.values() for u in chosen + probes})
    if len(traced) > fidelity.work_synthesis_max_traced_fraction * firsts.size:
        return None
    ctas = (firsts[traced][:, None] + np.arange(cluster)).reshape(-1)
    loop = work.short_loops
    if loop is not None:          # the evidence's k-loops run short (`loop_synthesis`)
        launch = dataclasses.replace(launch, program=compile_kernel(loop.ptx, launch.entry))
    recorder.count_silent()
    functional = launch.run(recorder, ctas=ctas)
    trace = recorder.finish()
    lengths = run_lengths(len(launch.program.instrs), trace.fused_runs)
    expansion = None
    if loop is not None:
        expansion = (loop, loop_synthesis.program_flow(launch.program, trace.fused_runs,
                                                       loop.labels),
                     recorder.slot_barriers())
    units = {u: unit_events(trace, int(firsts[u]), cluster, lengths,
                            int(recorder.silent_per_cta[firsts[u]:firsts[u] + cluster].sum()),
                            expansion) for u in traced}
    if any(unit is None for unit in units.values()):
        return None
    if (sum(u.traced_thread_instr for u in units.values()) != functional.thread_instructions
            or sum(u.traced_warp_instr for u in units.values())
            != functional.warp_instructions):
        return None
    templates = {}
    for cls, (chosen, probes) in plan.items():
        group = [units[u] for u in chosen + probes]
        if not all(_same_events(group[0], other) for other in group[1:]):
            return None
        d = fit_sectors(group, coords[chosen + probes], len(chosen))
        if d is None:
            return None
        templates[cls] = (group[0], coords[chosen[0]], d)
    grouped, sectors, slot_events = _whole_grid(templates, unit_class, coords,
                                                cluster * trace.warps_per_cta)
    recorder.install(grouped, sectors, slot_events)
    counts = [templates[int(c)][0] for c in unit_class]
    return sum(t.warp_instr for t in counts), sum(t.thread_instr for t in counts)


def _whole_grid(templates: dict, unit_class: np.ndarray, coords: np.ndarray,
                warps_per_unit: int) -> tuple[dict, np.ndarray, np.ndarray]:
    """Grouped events (the recorder's layout), sectors and slot table of every unit, each
    from its class's template, its slots from a fresh base: arrays filled in place, the
    shifts of a class's units in one product."""
    units = [templates[int(c)][0] for c in unit_class]
    ev_at, sec_at, tab_at = (np.concatenate(([0], np.cumsum([size(u) for u in units])))
                             for size in (lambda u: u.fields["pc"].size,
                                          lambda u: u.sectors.size, lambda u: u.table.size))
    first = units[0].fields
    grouped = {key: np.empty(int(ev_at[-1]), first[key].dtype) for key in _EVENT_FIELDS}
    slot = np.empty(int(ev_at[-1]), np.int32)
    sstart = np.empty(int(ev_at[-1]), np.int64)
    sectors = np.empty(int(sec_at[-1]), np.int64)
    table = np.empty(int(tab_at[-1]), np.int64)
    for cls, (tpl, origin, (d, place)) in templates.items():
        members = np.flatnonzero(unit_class == cls)
        moved = _moves(coords[members] - origin, d)
        for row, u in enumerate(members.tolist()):
            np.add(tpl.sectors, moved[row][place], out=sectors[sec_at[u]:sec_at[u + 1]])
    for u, tpl in enumerate(units):
        lo, hi = ev_at[u], ev_at[u + 1]
        for key in _EVENT_FIELDS:
            grouped[key][lo:hi] = tpl.fields[key]
        np.add(tpl.slots, tab_at[u] * tpl.slot_sign, out=slot[lo:hi], casting="unsafe")
        np.add(tpl.sector_offset, sec_at[u], out=sstart[lo:hi])
        np.add(tpl.table, tab_at[u] * tpl.is_member, out=table[tab_at[u]:tab_at[u + 1]])
    grouped.update(slot=slot, sstart=sstart,
                   per_warp=np.concatenate([u.per_warp for u in units]).astype(np.int64),
                   first_warp=0, last_warp=unit_class.size * warps_per_unit - 1)
    return grouped, sectors, table
