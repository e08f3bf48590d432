"""Trace synthesis: the events of CTAs that repeat the traced ones, without running them.

What it models
--------------
Elementwise and row-wise kernels (norms, quantization, residual adds, RoPE, SwiGLU) run
the same instructions in every CTA; only their addresses move with the CTA index. Sampled
fidelity (`simulator.runner.sampling`) traces several waves of such CTAs, and the functional run
of each is as costly as the first. Here the first CTAs are traced (`isa.run_kernel`;
`fidelity.trace_synthesis_first_ctas` of the config, a wave when that is fewer) and the rest
is made from them when they pass every check (`fidelity.trace_synthesis` on):

* every traced CTA has the same events per warp, and each event the same pc, active
  lanes, kind and detail as CTA 0's (so the same instruction stream);
* no event is of a kind whose timing needs per-launch bookkeeping (atomics, TMA copies,
  mbarrier phases) or carries data-timed details (`isa.event_detail`);
* sectors are affine in the CTA coordinates (x, y, z) up to a period P in x: the j-th
  sector of CTA (x, y, z) is s_j(x mod P) + (x div P) d_j^x + y d_j^y + z d_j^z, one stride
  per event and dimension, P the smallest of 1, 2, 4, ... 32 that fits every traced CTA (a
  period > 1: CTAs that share sectors, as 16-byte rows of scales do);
* with a wrap Q declared by the launch (`simulate_kernel(cta_wrap_x=Q)`, `KernelLaunch.wrap_x`:
  an operand indexed by x mod Q, as RoPE's cos/sin rows by row mod seqlen) and
  `fidelity.trace_synthesis_wrap` on, a sector place may start over every Q CTAs in x: its
  sector is the formula above at x mod Q. Which places wrap is read off CTA x = Q (traced,
  or traced alone): each of its places must equal either the plain formula or, wrapped,
  CTA 0's; the traced CTAs must then follow the formula, each place as flagged.

* a period Q in y (2, 4, ... 32; `CtaTemplate.period_y`): the j-th sector of CTA (x, y) is
  the formula above with y div Q in place of y, plus an offset o_j(y mod Q), one offset
  per event (a 4-byte store per row of CTAs, as the transposed FP8 quantization's scales,
  moves one sector every 8 rows). It is tried when the plain template misses CTA (0, 32)
  (or the grid's last row), traced alone: the rows 0 .. Q of column 0 (traced, or alone)
  give the offsets and the stride per Q rows, which must reproduce the traced CTAs and
  that row.

A synthesized CTA then has CTA 0's events and those sectors. Before any is used,
two CTAs of the synthesized range (its last and its middle) are traced for real and must
equal their synthesized events and sectors (`probe`); a grid whose addresses follow the
CTA index in another way (a 2-D grid with a row stride other than gx times the column
stride, a gather through an index array) fails there or in the checks and is traced in
full. Instruction counts are CTA 0's per CTA.

A 2-D grid whose last row (y = gy - 1) runs other events than the rows before it (a short
last chunk of columns: quantizing 1536 columns in CTAs of 8 strips of 128 leaves 4 strips
to the second CTA of each row; RoPE's last column chunk) has a template of its own for that
row (`CtaTemplate.tail`): the row's CTAs x = 0 .. P and 2P traced alone, their sectors
s'_j(x mod P) + (x div P) d'_j^x, the instruction counts of its first CTA. The rows before
it keep the template above; the probes then check both parts (the grid's last CTA lies in
the tail).

Left out: kernels with per-launch phase slots, atomics or data-timed events (traced in
full). Units: CTAs (linear index, x fastest), warps, 32-byte sectors.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from simulator.runner.trace import (
    KIND_CONST,
    KIND_LOAD,
    KIND_LOAD_CG,
    KIND_NONE,
    KIND_SHARED,
    KIND_STORE,
    sector_events,
)
from simulator.runner.trace_tiles import span_items

_ALLOWED_KINDS = np.array([KIND_NONE, KIND_LOAD, KIND_STORE, KIND_SHARED, KIND_CONST,
                           KIND_LOAD_CG], np.int8)


@dataclass(frozen=True)
class CtaTemplate:
    """CTA 0's events (warp order), the sectors of CTAs x = 0 .. P - 1 (`sectors0`, [P,
    sectors per CTA]), their strides per P CTAs in x and per unit of y and z, and the
    instruction counts of one CTA. A template of part of a grid starts at CTA `first_cta`
    (its CTAs are counted from there); `tail` is the template of the grid's last row when
    that row runs other events (module docstring), the template itself then covers the rows
    before it (its `grid` has one row fewer). `wrapped` flags the sector places that start
    over every `wrap_x` CTAs in x (None: none does)."""

    grid: tuple[int, int, int]
    per_warp: np.ndarray          # events per warp of one CTA
    pc: np.ndarray
    active: np.ndarray
    kind: np.ndarray
    detail: np.ndarray
    sector_offset: np.ndarray     # per event: its first sector's place in a CTA's (0: none)
    sectors0: np.ndarray
    strides: np.ndarray           # [3, sectors per CTA]
    warp_instructions: int
    thread_instructions: int
    first_cta: int = 0
    tail: CtaTemplate | None = None
    wrap_x: int = 0
    wrapped: np.ndarray | None = None     # [sectors per CTA] bool
    period_y: int = 1
    y_offsets: np.ndarray | None = None   # [period_y, sectors per CTA], row 0 zero

    def sectors(self, ctas: np.ndarray) -> np.ndarray:
        """Sectors of the CTAs with linear indices `ctas` (of the grid, all of this part),
        [CTAs, sectors per CTA]."""
        gx, gy, _ = self.grid
        period = self.sectors0.shape[0]
        ctas = ctas - self.first_cta
        x = ctas % gx
        y = ctas // gx % gy
        coords = np.stack([x // period, y // self.period_y, ctas // (gx * gy)], axis=1)
        out = self.sectors0[x % period] + coords @ self.strides
        if self.y_offsets is not None:
            out += self.y_offsets[y % self.period_y]
        if self.wrapped is not None:
            places = np.flatnonzero(self.wrapped)
            x = x % self.wrap_x
            coords[:, 0] = x // period
            out[:, places] = (self.sectors0[x % period][:, places]
                              + coords @ self.strides[:, places])
        return out

    def part(self, cta: int) -> CtaTemplate:
        """The template of linear CTA `cta`: the tail's from its first CTA on."""
        return self.tail if self.tail is not None and cta >= self.tail.first_cta else self


def pieces(tpl: CtaTemplate, ctas: np.ndarray) -> list[tuple[CtaTemplate, np.ndarray]]:
    """The ascending CTA indices `ctas` split by the template part that makes them (the
    rows before a tail, then the tail), in order."""
    if tpl.tail is None:
        return [(tpl, ctas)]
    cut = int(np.searchsorted(ctas, tpl.tail.first_cta))
    return [(part, piece) for part, piece in ((tpl, ctas[:cut]), (tpl.tail, ctas[cut:]))
            if piece.size]


PERIODS = (1, 2, 4, 8, 16, 32)
"""Periods in x tried, smallest first."""


def cta_events(trace, cta: int, n_instrs: int, fused_ids: dict) -> tuple[dict, np.ndarray]:
    """CTA `cta`'s events in a `WarpTrace` (`per_warp`, `pc`, `active`, `kind`, `detail`;
    the pcs of fused runs, which the trace's recorder numbered from `n_instrs` itself,
    renumbered as `fused_ids` ((first pc, end) -> event pc) does, -1 for a run it lacks)
    and its sectors in event order."""
    wpc = trace.warps_per_cta
    offsets = trace.warp_offsets
    lo, hi = int(offsets[cta * wpc]), int(offsets[(cta + 1) * wpc])
    pc = trace.pc[lo:hi].astype(np.int64)
    for i in np.flatnonzero(pc >= n_instrs).tolist():
        run = int(pc[i]) - n_instrs
        pc[i] = fused_ids.get(trace.fused_runs[run], -1) if run < len(trace.fused_runs) \
            else -1
    events = {"per_warp": np.diff(offsets[cta * wpc:(cta + 1) * wpc + 1]), "pc": pc,
              "active": trace.active[lo:hi], "kind": trace.kind[lo:hi],
              "detail": trace.detail[lo:hi]}
    has = sector_events(events["kind"], events["detail"])
    return events, trace.sectors[span_items(trace.sector_start[lo:hi][has],
                                            events["detail"][has])]


def _same_events(a: dict, b: dict) -> bool:
    return all(np.array_equal(a[k], b[k]) for k in ("per_warp", "pc", "active", "kind", "detail"))


def template(grouped: dict, sectors: np.ndarray, warps_per_cta: int, n_ctas: int,
             warp_instructions: int, thread_instructions: int, grid: tuple[int, int, int],
             real_cta, wrap_x: int = 0) -> CtaTemplate | None:
    """The template of CTAs 0 .. n_ctas - 1 (all of `grouped`, the recorder's events in
    warp order, and `sectors`, its sector array) on `grid`, or None when a check fails
    (module docstring). `real_cta(c)` traces CTA c alone and gives `cta_events` of it: the
    first CTA of the next row (and plane) of the grid when it was not traced, for the
    strides in y (and z), and CTA x = `wrap_x` (0: no wrap) when it was not traced."""
    if n_ctas < 2 or grouped["slot"] is not None or grouped["first_warp"] != 0:
        return None
    if warp_instructions % n_ctas or thread_instructions % n_ctas:
        return None
    per_warp = grouped["per_warp"][:n_ctas * warps_per_cta].reshape(n_ctas, warps_per_cta)
    if (per_warp != per_warp[0]).any() or grouped["per_warp"][n_ctas * warps_per_cta:].any():
        return None
    events = int(per_warp[0].sum())
    if events == 0 or grouped["pc"].size != n_ctas * events:
        return None
    row = {"per_warp": per_warp[0].copy()}
    for name in ("pc", "active", "kind", "detail"):
        table = grouped[name].reshape(n_ctas, events)
        if (table != table[0]).any():
            return None
        row[name] = table[0].copy()
    kind, detail = row["kind"], row["detail"]
    if not _events_allowed(kind, detail):
        return None
    has, counts, offset, event_of = _sector_places(kind, detail)
    starts = grouped["sstart"][:n_ctas * events].reshape(n_ctas, events)[:, has]
    table = sectors[span_items(starts.reshape(-1), np.tile(counts, n_ctas))].reshape(n_ctas, -1)
    tail_from = _tail_row(row, n_ctas, grid, real_cta)
    if tail_from is None:
        return None
    main = (grid[0], grid[1] - 1, 1) if tail_from else grid
    others = _basis_rows(table, row, n_ctas, main, real_cta)
    if others is None:
        return None
    gx = grid[0]
    for period in PERIODS:
        if period > 1 and (gx < 2 * period or n_ctas < 2 * period):
            break
        strides = np.zeros((3, table.shape[1]), np.int64)
        if gx > period:
            strides[0] = table[period] - table[0]
        for dim in (1, 2):
            if others[dim] is not None:
                strides[dim] = others[dim] - table[0]
        if not _one_stride_per_event(strides, offset[has], event_of):
            continue
        tpl = CtaTemplate(main, row["per_warp"], row["pc"], row["active"], kind, detail,
                          offset, table[:min(period, gx)].copy(), strides,
                          warp_instructions // n_ctas, thread_instructions // n_ctas)
        if 0 < wrap_x < gx:
            at = table[wrap_x] if wrap_x < n_ctas else _alike(real_cta(wrap_x), row)
            tpl = None if at is None else _wrapping(tpl, at, wrap_x)
            if tpl is None:
                continue
        if (tpl.sectors(np.arange(n_ctas, dtype=np.int64)) == table).all():
            if not tail_from:
                if tpl.wrapped is None and others[1] is not None and \
                        not _holds_at_row(tpl, row, n_ctas, real_cta):
                    return _y_period(tpl, table, row, n_ctas, offset[has], event_of,
                                     real_cta) or tpl
                return tpl
            tail = _tail_template(tpl, tail_from, real_cta)
            return None if tail is None else replace(tpl, tail=tail)
        if not tail_from and tpl.wrapped is None and others[1] is not None:
            with_y = _y_period(tpl, table, row, n_ctas, offset[has], event_of, real_cta)
            if with_y is not None:
                return with_y
    return None


PERIODS_Y = (2, 4, 8, 16, 32)
"""Periods in y tried, smallest first (`_y_period`)."""


def _holds_at_row(tpl: CtaTemplate, row: dict, n_ctas: int, real_cta) -> bool:
    """Whether CTA (0, y) of the first row past the traced ones that a period of `PERIODS_Y`
    could hide (y = 32, or the grid's last row) is what `tpl` makes of it (True when it was
    traced, runs other events or cannot be traced: the probes decide then)."""
    gx, gy, _ = tpl.grid
    y = min(PERIODS_Y[-1], gy - 1)
    if y * gx < n_ctas:
        return True
    found = _alike(real_cta(y * gx), row)
    return found is None or bool((tpl.sectors(np.array([y * gx], np.int64))[0] == found).all())


def _y_period(tpl: CtaTemplate, table: np.ndarray, row: dict, n_ctas: int,
              first_places: np.ndarray, event_of: np.ndarray, real_cta) -> CtaTemplate | None:
    """`tpl` with a period Q in y (module docstring): the sectors of CTA (0, y) for y = 0 ..
    Q (from `table` where traced, else traced alone) give each place's offset at y mod Q and
    its stride per Q rows; every place of an event must move together (one offset and one
    stride per event), and the template must reproduce `table` and the row `_holds_at_row`
    checks. None when no Q fits."""
    gx, gy, _ = tpl.grid
    rows: dict[int, np.ndarray] = {}

    def row_at(y: int) -> np.ndarray | None:
        if y not in rows:
            at = table[y * gx] if y * gx < n_ctas else _alike(real_cta(y * gx), row)
            if at is None or at.shape != table[0].shape:
                return None
            rows[y] = at
        return rows[y]

    ctas = np.arange(n_ctas, dtype=np.int64)
    for period in PERIODS_Y:
        if period >= gy:
            break
        found = [row_at(y) for y in range(period + 1)]
        if any(r is None for r in found):
            return None
        offsets = np.stack([r - found[0] for r in found[:period]])
        strides = tpl.strides.copy()
        strides[1] = found[period] - found[0]
        if not _one_stride_per_event(strides, first_places, event_of) or (
                offsets != offsets[:, first_places][:, event_of]).any():
            continue
        out = replace(tpl, strides=strides, period_y=period, y_offsets=offsets)
        if (out.sectors(ctas) == table).all() and _holds_at_row(out, row, n_ctas, real_cta):
            return out
    return None


def _alike(found, row: dict) -> np.ndarray | None:
    """The sectors of a CTA traced alone (`cta_events` and counts) when it runs `row`'s
    events, else None."""
    return found[1] if found is not None and _same_events(found[0], row) else None


def _wrapping(tpl: CtaTemplate, at: np.ndarray, wrap_x: int) -> CtaTemplate | None:
    """`tpl` with the places that start over at x = `wrap_x` flagged (`wrapped`, None when
    none does), from `at`, the sectors of its CTA x = `wrap_x` of its first row; None when a
    place of `at` is neither the plain formula's sector nor, wrapped, CTA x = 0's."""
    plain = replace(tpl, wrapped=None).sectors(np.array([tpl.first_cta + wrap_x]))[0]
    restart = tpl.sectors0[0]
    if at.shape != plain.shape:
        return None
    wrapped = (at != plain) & (at == restart)
    if ((at != plain) & ~wrapped).any():
        return None
    return replace(tpl, wrap_x=wrap_x, wrapped=wrapped) if wrapped.any() else tpl


def _events_allowed(kind: np.ndarray, detail: np.ndarray) -> bool:
    """Whether a CTA's events are all of kinds a template can make, none data-timed."""
    return bool(np.isin(kind, _ALLOWED_KINDS).all()) and not detail[kind == KIND_NONE].any()


def _one_stride_per_event(strides: np.ndarray, first_places: np.ndarray,
                          event_of: np.ndarray) -> bool:
    """Whether every sector of an event moves by its event's first sector's strides."""
    return not (strides != strides[:, first_places][:, event_of]).any()


def _sector_places(kind: np.ndarray, detail: np.ndarray) -> tuple:
    """Of a CTA's events: which carry sectors, their sector counts, each event's first
    sector's place in the CTA's sectors (0: none) and the event of each sector place."""
    has = sector_events(kind, detail)
    counts = detail[has].astype(np.int64)
    offset = np.zeros(kind.size, np.int64)
    offset[has] = np.cumsum(counts) - counts
    return has, counts, offset, np.repeat(np.arange(counts.size), counts)


def _tail_row(row: dict, n_ctas: int, grid, real_cta) -> int | None:
    """The linear index of the grid's last row (y = gy - 1 of a 2-D grid) when its first CTA
    runs other events than `row` (a short last chunk of columns); 0 when it runs the same
    ones, the grid has one row or planes, or the row's CTAs are among the `n_ctas` traced
    (the table's checks decide); None when that CTA cannot be traced."""
    gx, gy, gz = grid
    last = gx * (gy - 1)
    if gz != 1 or gy < 2 or last < n_ctas:
        return 0
    found = real_cta(last)
    if found is None:
        return None
    return 0 if _same_events(found[0], row) else last


def _tail_template(main: CtaTemplate, first: int, real_cta) -> CtaTemplate | None:
    """The template of the grid's last row, from its CTA `first` on: CTAs x = 0 .. P and 2P
    of the row (P: the period of `main`) traced alone, their sectors affine in x as the rows
    before (and, when `main` wraps, its CTA x = Q alone, for the places that wrap); None when
    they differ from each other, carry a fused run the evidence lacks or another check fails
    (module docstring)."""
    gx = main.grid[0]
    period = main.sectors0.shape[0]
    xs = np.array([x for x in (*range(period), period, 2 * period) if x < gx], np.int64)
    found = [real_cta(first + int(x)) for x in xs]
    if any(f is None or len(f) < 3 for f in found):
        return None
    events = found[0][0]
    kind, detail = events["kind"], events["detail"]
    if (events["pc"] < 0).any() or not _events_allowed(kind, detail) or not all(
            _same_events(f[0], events) and f[1].shape == found[0][1].shape
            and f[2] == found[0][2] for f in found[1:]):
        return None
    table = np.stack([f[1] for f in found])
    has, _, offset, event_of = _sector_places(kind, detail)
    strides = np.zeros((3, table.shape[1]), np.int64)
    if gx > period:
        strides[0] = table[period] - table[0]
    if not _one_stride_per_event(strides, offset[has], event_of):
        return None
    warp, thread = found[0][2]
    tail = CtaTemplate((gx, 1, 1), events["per_warp"], events["pc"], events["active"], kind,
                       detail, offset, table[:min(period, gx)].copy(), strides, warp, thread,
                       first_cta=first)
    if main.wrapped is not None:
        at = _alike(real_cta(first + main.wrap_x), events)
        tail = None if at is None else _wrapping(tail, at, main.wrap_x)
    return tail if tail is not None and (tail.sectors(first + xs) == table).all() else None


def _basis_rows(table: np.ndarray, row: dict, n_ctas: int, grid, real_cta) -> list | None:
    """Sectors of the first CTA of row y = 1 and of plane z = 1 (None where the grid has
    one), from `table` when traced, else traced alone by `real_cta`; None when one of
    them has other events than `row`."""
    gx, gy, gz = grid
    out: list = [None, None, None]
    for dim, (size, basis) in ((1, (gy, gx)), (2, (gz, gx * gy))):
        if size == 1:
            continue
        if basis < n_ctas:
            out[dim] = table[basis]
            continue
        found = real_cta(basis)
        if found is None or not _same_events(found[0], row):
            return None
        out[dim] = found[1]
    return out


def synthesize(tpl: CtaTemplate, first: int, stop: int, n_warps: int,
               sector_base: int, ctas: np.ndarray | None = None) -> tuple[dict, np.ndarray]:
    """(grouped events of CTAs first .. stop - 1 in the recorder's layout, their sectors),
    the sectors placed from `sector_base` of the recorder's sector array; with `ctas` the
    places first .. stop - 1 hold those CTAs of the grid (a chip slice's selection,
    `simulator.runner.chip_slice.row_slice`), all of one template part (`pieces`). The event
    fields are [CTA, event] arrays (the template's row broadcast: no copy), which
    `TraceRecorder.append_grouped` lays out one row after the other."""
    n = stop - first
    wpc = tpl.per_warp.size
    per_warp = np.zeros(n_warps, np.int64)
    per_warp[first * wpc:stop * wpc] = np.tile(tpl.per_warp, n)
    if ctas is None:
        ctas = np.arange(first, stop, dtype=np.int64)
    sectors = tpl.sectors(ctas).reshape(-1)
    has = sector_events(tpl.kind, tpl.detail)
    sstart = np.zeros((n, tpl.pc.size), np.int64)
    sstart[:, has] = (sector_base + np.arange(n, dtype=np.int64)[:, None]
                      * tpl.sectors0.shape[1] + tpl.sector_offset[has][None, :])
    rows = {key: np.broadcast_to(getattr(tpl, key), (n, tpl.pc.size))
            for key in ("pc", "active", "kind", "detail")}
    grouped = {"first_warp": first * wpc, "last_warp": stop * wpc - 1, "per_warp": per_warp,
               **rows, "sstart": sstart, "slot": None}
    return grouped, sectors


def probe_matches(tpl: CtaTemplate, cta: int, found: tuple[dict, np.ndarray] | None) -> bool:
    """Whether CTA `cta`'s real events (`cta_events`) equal its synthesized ones."""
    if found is None:
        return False
    events, sectors = found[0], found[1]
    tpl = tpl.part(cta)
    row = {"per_warp": tpl.per_warp, "pc": tpl.pc, "active": tpl.active, "kind": tpl.kind,
           "detail": tpl.detail}
    expected = tpl.sectors(np.array([cta], np.int64))[0]
    return _same_events(events, row) and sectors.shape == expected.shape and \
        bool((sectors == expected).all())
