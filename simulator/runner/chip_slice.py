"""Chip slicing: the share of a uniform kernel's grid that a proportional slice of the chip
runs, timed instead of the whole grid on the whole chip (sampled fidelity).

What it models
--------------
Elementwise and row-wise kernels (norms, quantization, residual adds, RoPE, SwiGLU) run the
same instructions in every CTA with addresses that move with the CTA index
(`simulator.runner.trace_synthesis` finds their template), so every SM carries the same load. The
memory system they share is built of identical units: L2 slices (each with its sets, ways and
bandwidth), HBM channels, one NoC port per SM. A slice of the chip with 1/f of each unit
(`sliced_config`: SMs, reserved communication SMs, L2 slices and capacity at the same sets
per slice, HBM channels per stack, L3 slices and capacity when enabled, 1/f of the
crossbar's read return) runs ceil(n/f) of
the grid's n CTAs with the same per-unit loads, in the same waves (W/f CTAs each), so in
the time the whole chip runs the whole grid. `simulator.runner.sampling` times all of the first
ceil(n/f) CTAs of such a kernel on the slice, from a cold system (f = the first of
`fidelity.chip_slice_factors` the preset divides by: 4 on h800_sxm), when the grid's last
and middle CTAs match the template and the CTAs share no data along a grid dimension
(`proportional`); it scales the counts to the grid by n / CTAs simulated, as for sampled
waves, and `unslice` puts the whole chip back into the SM count and the memory time series.
The slice keeps the chip's HBM row map (`hbm.row_map_channels` = the chip's channels): a
line's bank and row are those it has on the whole chip (with the slice's own row map, a
row's 8 consecutive lines of a channel would lie 20 channels' lines apart instead of 80,
and vLLM's SwiGLU read 3-4 % long).

Which grids are sliced (`config.fidelity`, `simulator.framework.policy_spec.FidelitySpec`):
`chip_slicing` on, from `chip_slice_min_waves` (2) whole-chip waves to f x
`chip_slice_max_slice_waves` (16); larger grids are wave-sampled on the whole chip, smaller
ones timed in full on it.

Measured against timing every CTA on the whole chip (h800_sxm unless stated, f = 4; kernel
time; CPU seconds of the op sliced / wave-sampled or full):

    quantize 4096x7168 (13.6 waves)          -0.8 %   1.4 / 4.4 s (wave-sampled -4.9 %)
    residual add 2 x 4096x7168 (20.7)        +0.1 %
    vLLM SwiGLU 4096x5504 (15.5), h100_sxm   +2.4 %   (wave-sampled +2.6 %)
    RMSNorm 4096x7168 (6.2)                  +1.95 %  1.4 / 7.4 s
    quantize 4096x2048 (3.9)                 -0.31 %  0.5 / 1.8 s
    SwiGLU 4096x2048 (3.9)                   +0.67 %  0.6 / 2.5 s
    vLLM RoPE 1024x8192 (1.9), h100_sxm      -3.5 %   (why grids under two waves are not sliced)

Past 30 whole-chip waves (up to f x 16 since `chip_slice_max_slice_waves` is 16; wave-sampled
before), h800_sxm with 20 communication SMs:

    quantize 8192x7168 (57344 CTAs)          +0.18 %  2.0 / 3.6 s (wave-sampled -2.94 %)
    residual add 2 x 8192x7168 (32768)       +0.38 %  2.4 / 2.4 s (wave-sampled -2.16 %)
    residual add 9 x 8192x7168 (32768)       +0.36 %  6.4 / 6.4 s (wave-sampled +3.38 %)

Wave-sampling the slice instead of timing all of it read -5.7 % and +3.6 %: the slice's
waves of 33 SMs vary more than the chip's (why `chip_slice_max_slice_waves` bounds it).
`tests/test_chip_slice.py` checks a sliced run against the whole chip.

Row slices. A 2-D grid whose last row of CTAs runs other events (a short last chunk of
columns, `trace_synthesis.CtaTemplate.tail`), or whose first ceil(n/f) CTAs are not
proportional while a row slice is, is timed on a row slice (`row_slice`): the first
ceil(gx/f) CTAs of every row y, in the grid's order, so every row's share of the slice is
its share of the grid and the rows follow each other through the waves as on the whole chip
(the first ceil(n/f) CTAs would all lie in the first rows). A grid whose rows differ is
row-sliced at any number of waves (`simulator.runner.sampling` would extrapolate its first waves,
all of the first row). Against full (h800_sxm, f = 4): RoPE 4096x8256 (17.2 waves, 5
column chunks, the last short) -0.73 % (wave-sampled +8.9 %), quantize 4096x1536 (3.9
waves) -2.8 %, 8192x1536 -2.2 %, 16384x1536 -0.1 %, 32768x1536 (31 waves) +0.3 %
(wave-sampled +18.1 %, its first 7 waves all of the first row). A template whose table
places start over every Q CTAs in x (`CtaTemplate.wrapped`, a launch's declared wrap) is
row-sliced by the first ceil(Q/f) CTAs of every Q of each row (`row_slice`): RoPE 8192x8256
at 4096 positions (h800_sxm, 20 communication SMs) -0.10 %, HBM bytes +0.03 %.

Left out: kernels without a template (atomics, TMA copies, mbarrier phases, clusters,
CTAs of different work: GEMMs, attention), with CTAs unlike the first ones other than a
last row, or data shared along a dimension in both the first CTAs and a row slice, are
timed on the whole chip; the address hashes spread lines over 1/f of the slices and
channels, so L2 set conflicts and which lines share a channel are those of the slice's
units, not the chip's (rows are the chip's); a grid of fewer than
`chip_slice_min_waves` whole-chip waves is not sliced.
Units: SMs, slices, channels, bytes, waves.
"""

from __future__ import annotations

import math

import numpy as np

from simulator.runner.trace_synthesis import pieces


def slice_factor(config) -> int:
    """The first f of `config.fidelity.chip_slice_factors` such that `config`'s SMs (all
    and reserved), L2 slices (keeping whole partitions), L2 capacity, HBM channels per stack
    (or stacks) and enabled L3 slices all divide by f, leaving
    `fidelity.chip_slice_min_sms` compute SMs at least; 1 when none does or
    `fidelity.chip_slicing` is off."""
    sm, l2, hbm, l3, policy = config.sm, config.l2, config.hbm, config.l3, config.fidelity
    if not policy.chip_slicing:
        return 1
    for f in policy.chip_slice_factors:
        if (sm.count % f or sm.comm_count % f
                or sm.compute_count // f < policy.chip_slice_min_sms
                or l2.slices % (f * l2.partitions) or l2.size_bytes % f):
            continue
        if hbm.channels_per_stack % f and hbm.stacks % f:
            continue
        if l3.enabled and (l3.slices % f or l3.size_bytes % f):
            continue
        return f
    return 1


def sliced_config(config, f: int):
    """`config` with 1/f of the SMs, L2 slices and capacity, HBM channels, L3 slices and the
    crossbar's read return (`noc.read_return_gbps`, shared by all SMs)."""
    sm, l2, hbm, l3 = config.sm, config.l2, config.hbm, config.l3
    overrides = {"sm.count": sm.count // f, "sm.comm_count": sm.comm_count // f,
                 "l2.slices": l2.slices // f, "l2.size_bytes": l2.size_bytes // f,
                 "hbm.row_map_channels": hbm.row_channels}
    if config.noc.read_return_gbps > 0:
        overrides["noc.read_return_gbps"] = config.noc.read_return_gbps / f
    if hbm.channels_per_stack % f == 0:
        overrides["hbm.channels_per_stack"] = hbm.channels_per_stack // f
    else:
        overrides["hbm.stacks"] = hbm.stacks // f
    if l3.enabled:
        overrides.update({"l3.slices": l3.slices // f, "l3.size_bytes": l3.size_bytes // f})
    return config.with_overrides(overrides)


def proportional(tpl, n_ctas: int, f: int, ctas: np.ndarray | None = None, *,
                 tolerance: float) -> bool:
    """Whether the first ceil(n/f) CTAs of template `tpl` (`trace_synthesis.CtaTemplate`),
    or the CTAs `ctas` (a row slice), touch 1/f of the distinct sectors the grid's `n_ctas`
    touch, within the share `tolerance` (`fidelity.chip_slice_footprint_tolerance_fraction`).
    A sector place of the template that does not move along a grid dimension (a zero
    stride there, the same sector in every CTA of the period) is shared by the CTAs along
    it: a weight vector that every row reads, a cos/sin table that every column chunk
    reads. The slice reads all of it while doing 1/f of the work, so its L2 and HBM loads
    are not the chip's over f. Each place counts the distinct coordinates of the dimensions
    it moves along: over the grid, and over the slice's CTAs (x fastest); a template with a
    tail (its grid's last row) counts each part over its own rows. A place that starts over
    every Q CTAs in x (`CtaTemplate.wrapped`: a table row read at x mod Q) counts x mod Q,
    and such places that are the same sector in every CTA (one table row read by every warp
    of a CTA) count once."""
    if ctas is None:
        ctas = np.arange(sliced_ctas(n_ctas, f), dtype=np.int64)
    total = part = 0
    for piece_tpl, piece in pieces(tpl, ctas):
        piece_total, piece_part = _footprint(piece_tpl, piece - piece_tpl.first_cta)
        total += piece_total
        part += piece_part
    return part > 0 and total / part >= f * (1 - tolerance)


def _footprint(tpl, ctas: np.ndarray) -> tuple[int, int]:
    """(the part's distinct place coordinates over its grid, over `ctas`: its CTAs counted
    from its first, at least one) for `proportional`."""
    gx, gy, gz = tpl.grid
    in_y = tpl.strides[1] != 0
    if tpl.y_offsets is not None:
        in_y = in_y | (tpl.y_offsets != 0).any(axis=0)
    moves = np.stack([(tpl.strides[0] != 0) | (tpl.sectors0 != tpl.sectors0[0]).any(axis=0),
                      in_y, tpl.strides[2] != 0])
    coords = np.stack([ctas % gx, ctas // gx % gy, ctas // (gx * gy)])
    total = part = 0
    wrapped = (np.zeros(moves.shape[1], np.bool_) if tpl.wrapped is None
               else tpl.wrapped & moves[0])
    for pattern in {tuple(col) for col in moves[:, ~wrapped].T.tolist()}:
        places = int((moves[:, ~wrapped].T == pattern).all(axis=1).sum())
        dims = [d for d in range(3) if pattern[d]]
        total += places * math.prod((gx, gy, gz)[d] for d in dims)
        key = np.zeros(ctas.size, np.int64)
        for d in dims:
            key = key * (gx, gy, gz)[d] + coords[d]
        part += places * (np.unique(key).size if dims else 1)
    if wrapped.any():                      # one table: its distinct places, x mod Q
        table = np.unique(np.vstack([tpl.sectors0, tpl.strides])[:, wrapped], axis=1)
        dims = [d for d in (1, 2) if table[tpl.sectors0.shape[0] + d].any()]
        sizes = (min(gx, tpl.wrap_x), gy, gz)
        total += table.shape[1] * math.prod(sizes[d] for d in (0, *dims))
        key = coords[0] % tpl.wrap_x
        for d in dims:
            key = key * sizes[d] + coords[d]
        part += table.shape[1] * np.unique(key).size
    return total, part


def row_slice(grid, f: int, wrap_x: int = 0) -> np.ndarray | None:
    """The CTAs a slice of 1/f of the chip times of a 2-D `grid` in row slices: the first
    ceil(gx / f) of every row (y), in the grid's order (x fastest), so each row's share
    of the slice is its share of the grid and the rows follow each other as on the whole
    chip; None for a grid of one row or of planes, or of fewer than f CTAs per row. With a
    wrap Q < gx (`CtaTemplate.wrap_x`: a table read at x mod Q), the first ceil(Q / f) of
    every Q CTAs of a row instead, so the slice re-reads a 1/f share of the table as often
    as the grid re-reads all of it (the first ceil(gx / f) alone would read each table row
    once per row of the grid: RoPE 8192x8256 at 4096 positions +3.8 % against full)."""
    gx, gy, gz = grid
    if gy < 2 or gz != 1 or gx < f:
        return None
    if 0 < wrap_x < gx:
        x = np.arange(gx, dtype=np.int64)
        xs = x[x % wrap_x < math.ceil(wrap_x / f)]
    else:
        xs = np.arange(math.ceil(gx / f), dtype=np.int64)
    return (np.arange(gy, dtype=np.int64)[:, None] * gx + xs[None, :]).reshape(-1)


def sliced_ctas(n_ctas: int, f: int) -> int:
    """CTAs the slice runs for a grid of `n_ctas`."""
    return math.ceil(n_ctas / f)


def unslice(stats, timeline, f: int):
    """(stats, timeline) of a sliced run with the whole chip put back: the kernel's
    `sms_used` times f, the memory levels' bytes and bandwidth over time times f (counts
    are scaled to the grid by the caller, per CTA)."""
    stats = stats.copy()
    used = (stats["component"] == "kernel") & (stats["stat"] == "sms_used")
    stats.loc[used, "value"] = stats.loc[used, "value"].astype(float) * f
    if timeline is not None and len(timeline):
        timeline = timeline.copy()
        moved = (timeline["component"].str.startswith("memory.")
                 & timeline["stat"].isin(("bytes", "bandwidth_gbps")))
        timeline.loc[moved, "value"] = timeline.loc[moved, "value"].astype(float) * f
    return stats, timeline
