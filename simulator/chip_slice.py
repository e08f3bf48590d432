"""Chip slicing: the share of a uniform kernel's grid that a proportional slice of the chip
runs, timed instead of the whole grid on the whole chip (sampled fidelity).

What it models
--------------
Elementwise and row-wise kernels (norms, quantization, residual adds, RoPE, SwiGLU) run the
same instructions in every CTA with addresses that move with the CTA index
(`simulator.trace_synthesis` finds their template), so every SM carries the same load. The
memory system they share is built of identical units: L2 slices (each with its sets, ways and
bandwidth), HBM channels, one NoC port per SM. A slice of the chip with 1/f of each unit
(`sliced_config`: SMs, reserved communication SMs, L2 slices and capacity at the same sets
per slice, HBM channels per stack, L3 slices and capacity when enabled) runs ceil(n/f) of
the grid's n CTAs with the same per-unit loads, in the same waves (W/f CTAs each), so in
the time the whole chip runs the whole grid. `simulator.sampling` times all of the first
ceil(n/f) CTAs of such a kernel on the slice, from a cold system (f = the first of
`FACTORS` the preset divides by: 4 on h800_sxm), when the grid's last and middle CTAs
match the template and the CTAs share no data along a grid dimension (`proportional`); it
scales the counts to the grid by n / CTAs simulated, as for sampled waves, and `unslice`
puts the whole chip back into the SM count and the memory time series.

Measured (2026-11-27, the slice with its own row map, see below) against timing every CTA
on the whole chip (kernel time, HBM bytes; CPU seconds of the op):

    kernel (whole-chip waves), preset        f = 4             wave-sampled    full
    quantize 4096x7168 (13.6), h800_sxm      33.20 us 74.6 MB  31.85 us 72.2   33.48 us 74.3
        CPU s                                1.4               4.4             8.5
    residual add 2 x 4096x7168 (20.7)        61.91   161.2     62.33  153.7    61.93   161.1
    SwiGLU (vLLM) 4096x5504 (15.5), h100     96.46             95.44           93.05
        CPU s                                2.9               7.3             17.1

and, sliced below 8 waves (then not done; since 2026-11-28 from 2 waves,
`MIN_SLICE_WAVES`), f = 2 / f = 4 against full: RMSNorm 4096x7168 (6.2) +1.0 / +1.4 %,
SwiGLU 4096x2048 (3.9) +0.2 / +0.6 %, quantize 4096x2048 (3.9) -0.4 / +0.4 %, RMSNorm
(vLLM) 2048x4096 on h100_sxm (7.8) -0.8 / +1.9 %, SwiGLU (vLLM) 1024x5504 (3.9) +4.2 / +2.5
%, 2048x5504 (7.8) +3.0 / +3.3 %. vLLM's SwiGLU (a CTA
per token over two streams 11 KB apart) ran 3-4 % long on every slice with the slice's own
row map: a row holds 8 consecutive lines of a channel, which are 80 channels' lines apart on
the chip and 20 on a quarter, so the slice's row-buffer hits were not the chip's. A slice
therefore keeps the chip's row map (`hbm.row_map_channels` = the chip's channels; on the
whole chip 0, its own): a line's bank and row are those it has on the whole chip. With it
(f = 4, 2026-11-27): vLLM's SwiGLU 4096x5504 95.24 us (+2.4 %, wave-sampled +2.6 %), and
below 8 waves +1.5 % at 2048 tokens, +1.0 % at 1024, vLLM's RMSNorm at 2048 tokens +0.8 %,
RMSNorm 4096x7168 +1.9 %; quantize 4096x7168 33.22 us (-0.8 %), residual add 2 x 4096x7168
61.99 us (+0.1 %); the 9-input residual add 201.7 us (wave-sampled 202.1). So `SLICING` is
on. Wave-sampling the slice instead of timing all of it read -5.7 % and +3.6 %
(`MAX_SLICE_WAVES`). The default DeepSeek-V3 layer's ops (`benchmarks/workload_speed.py
--per-op`) took 82.9 s summed with slicing against 91.2 s without, in two runs side by
side: the quantize of 4096x7168 (3.6 -> 1.2 s) and both residual adds are sliced.
`tests/test_chip_slice.py` checks a sliced run against the whole chip.

Row slices (2026-11-28). A 2-D grid whose last row of CTAs runs other events (a short last
chunk of columns, `trace_synthesis.CtaTemplate.tail`), or whose first ceil(n/f) CTAs are not
proportional while a row slice is, is timed on a row slice (`row_slice`): the first
ceil(gx/f) CTAs of every row y, in the grid's order, so every row's share of the slice is
its share of the grid and the rows follow each other through the waves as on the whole chip
(the first ceil(n/f) CTAs would all lie in the first rows). A grid whose rows differ is
row-sliced at any number of waves (`simulator.sampling` would extrapolate its first waves,
all of the first row). Measured against timing every CTA on the whole chip (h800_sxm, f =
4; cycles; CPU seconds of the sampled op before -> now, five runs each taking turns):
RoPE 4096x8256 (17.2 waves, 5 column chunks, the last short, cos/sin rows read by every
chunk) -0.73 % (wave-sampled before: +8.9 %; 4.0 -> 1.7 s), quantize 4096x1536 (3.9
waves, the second CTA of a row 4 strips of 8) -2.8 % (timed in full before; 2.5 -> 0.6 s),
8192x1536 -2.2 %, 16384x1536 -0.1 %, 32768x1536 (31 waves) +0.3 % (wave-sampled before:
+18.1 %, its first 7 waves all of the first row).

Left out: kernels without a template (atomics, TMA copies, mbarrier phases, clusters,
CTAs of different work: GEMMs, attention), with CTAs unlike the first ones other than a
last row, or data shared along a dimension in both the first CTAs and a row slice, are
timed on the whole chip; the
address hashes spread lines over 1/f of the slices and channels, so L2 set conflicts and
which lines share a channel are those of the slice's units, not the chip's (rows are the
chip's); a grid of fewer than two whole-chip waves is not sliced (timed in full on the whole
chip, exactly).
Units: SMs, slices, channels, bytes.
"""

from __future__ import annotations

import math

import numpy as np

from simulator.trace_synthesis import pieces

SLICING = True
"""Sampled fidelity times uniform kernels on a slice of the chip when True (module
docstring). On since the slice keeps the chip's row map (2026-11-27): vLLM's SwiGLU kernel
then reads 2.4 % long where the wave sampler reads it 2.6 % long (3.7 % with the slice's own
row map, why it was off), and the layer's kernels as close or closer."""
FACTORS = (4, 2)
"""Slice factors tried, largest first: the first that divides every unit count is used."""
MIN_SLICE_SMS = 16
"""A slice keeps at least this many compute SMs (f is lowered, or 1): a chip of few SMs
gains little and its slice's waves of few SMs vary more."""
MIN_SLICE_WAVES = 2.0
"""A grid is sliced from two whole-chip waves. Until 2026-11-28 only from
`simulator.sampling.MIN_WAVES` (8): below it the wave sampler times a grid in full on the
whole chip, exactly, and sliced grids of 2 to 8 waves read up to 4.2 % off with the
slice's own row map (vLLM SwiGLU 1024x5504, 3.9 waves, f = 2). With the chip's row map the
layer's grids of 1 to 8 waves read, sliced (f = 4) against full on h800_sxm (op time; CPU
s): RMSNorm 4096x7168 (6.2 waves) +1.95 % (7.4 -> 1.4 s), 4096x1536 (1.7) -0.92 % (1.7 ->
0.5), quantize 4096x2048 (3.9) -0.31 % (1.8 -> 0.5), 4096x512 (1.9) -0.63 % (0.9 -> 0.2),
SwiGLU 4096x2048 (3.9) +0.67 % (2.5 -> 0.6). Below two waves a slice read up to 3.5 % off
(vLLM's RoPE 1024 x 8192 on h100_sxm, 1.9 waves: 18.39 us sliced, 19.06 in full; at 2048
tokens, 3.9 waves, +1.2 %; at 4096, 7.8 waves, -0.4 %), so grids under two waves stay on the
whole chip."""
MAX_SLICE_WAVES = 7.5
"""A grid is sliced when it has `MIN_SLICE_WAVES` to f x 7.5 whole-chip waves. With at
most f x 7.5 waves the slice's CTAs are
all timed (7.5 waves of the slice at most, what a sampled replay of 4 waves and the 3.5 more
of an unsteady kernel cost on the whole chip); larger grids are wave-sampled on the whole
chip (`simulator.sampling`). Wave-sampling the slice instead read -5.7 % (2-input residual
add 4096x7168 on h800_sxm, f = 4, against the whole chip in full) and +3.6 % (quantize
4096x16384): the slice's waves of 33 SMs vary more than the chip's."""


def slice_factor(config) -> int:
    """The largest f of `FACTORS` such that `config`'s SMs (all and reserved), L2 slices
    (keeping whole partitions), L2 capacity, HBM channels per stack (or stacks) and enabled
    L3 slices all divide by f, leaving `MIN_SLICE_SMS` compute SMs at least; 1 when none
    does."""
    sm, l2, hbm, l3 = config.sm, config.l2, config.hbm, config.l3
    for f in FACTORS:
        if (sm.count % f or sm.comm_count % f or sm.compute_count // f < MIN_SLICE_SMS
                or l2.slices % (f * l2.partitions) or l2.size_bytes % f):
            continue
        if hbm.channels_per_stack % f and hbm.stacks % f:
            continue
        if l3.enabled and (l3.slices % f or l3.size_bytes % f):
            continue
        return f
    return 1


def sliced_config(config, f: int):
    """`config` with 1/f of the SMs, L2 slices and capacity, HBM channels and L3 slices."""
    sm, l2, hbm, l3 = config.sm, config.l2, config.hbm, config.l3
    overrides = {"sm.count": sm.count // f, "sm.comm_count": sm.comm_count // f,
                 "l2.slices": l2.slices // f, "l2.size_bytes": l2.size_bytes // f,
                 "hbm.row_map_channels": hbm.row_channels}
    if hbm.channels_per_stack % f == 0:
        overrides["hbm.channels_per_stack"] = hbm.channels_per_stack // f
    else:
        overrides["hbm.stacks"] = hbm.stacks // f
    if l3.enabled:
        overrides.update({"l3.slices": l3.slices // f, "l3.size_bytes": l3.size_bytes // f})
    return config.with_overrides(overrides)


PROPORTION_TOLERANCE = 0.01
"""A template is sliced when the slice's CTAs touch at least (1 - 1 %) / f of the grid's
distinct sectors (`proportional`)."""


def proportional(tpl, n_ctas: int, f: int, ctas: np.ndarray | None = None) -> bool:
    """Whether the first ceil(n/f) CTAs of template `tpl` (`trace_synthesis.CtaTemplate`),
    or the CTAs `ctas` (a row slice), touch 1/f of the distinct sectors the grid's `n_ctas`
    touch (within `PROPORTION_TOLERANCE`). A sector place of the template that does not
    move along a grid dimension (a zero stride there, the same sector in every CTA of the
    period) is shared by the CTAs along it: a weight vector that every row reads, a cos/sin
    table that every column chunk reads. The slice reads all of it while doing 1/f of the
    work, so its L2 and HBM loads are not the chip's over f. Each place counts the distinct
    coordinates of the dimensions it moves along: over the grid, and over the slice's CTAs
    (x fastest); a template with a tail (its grid's last row) counts each part over its own
    rows."""
    if ctas is None:
        ctas = np.arange(sliced_ctas(n_ctas, f), dtype=np.int64)
    total = part = 0
    for piece_tpl, piece in pieces(tpl, ctas):
        piece_total, piece_part = _footprint(piece_tpl, piece - piece_tpl.first_cta)
        total += piece_total
        part += piece_part
    return part > 0 and total / part >= f * (1 - PROPORTION_TOLERANCE)


def _footprint(tpl, ctas: np.ndarray) -> tuple[int, int]:
    """(the part's distinct place coordinates over its grid, over `ctas`: its CTAs counted
    from its first, at least one) for `proportional`."""
    gx, gy, gz = tpl.grid
    moves = np.stack([(tpl.strides[0] != 0) | (tpl.sectors0 != tpl.sectors0[0]).any(axis=0),
                      tpl.strides[1] != 0, tpl.strides[2] != 0])
    coords = np.stack([ctas % gx, ctas // gx % gy, ctas // (gx * gy)])
    total = part = 0
    for pattern in {tuple(col) for col in moves.T.tolist()}:
        places = int((moves.T == pattern).all(axis=1).sum())
        dims = [d for d in range(3) if pattern[d]]
        total += places * math.prod((gx, gy, gz)[d] for d in dims)
        key = np.zeros(ctas.size, np.int64)
        for d in dims:
            key = key * (gx, gy, gz)[d] + coords[d]
        part += places * (np.unique(key).size if dims else 1)
    return total, part


def row_slice(grid, f: int) -> np.ndarray | None:
    """The CTAs a slice of 1/f of the chip times of a 2-D `grid` in row slices: the first
    ceil(gx / f) of every row (y), in the grid's order (x fastest), so each row's share
    of the slice is its share of the grid and the rows follow each other as on the whole
    chip; None for a grid of one row or of planes, or of fewer than f CTAs per row."""
    gx, gy, gz = grid
    if gy < 2 or gz != 1 or gx < f:
        return None
    cut = math.ceil(gx / f)
    return (np.arange(gy, dtype=np.int64)[:, None] * gx
            + np.arange(cut, dtype=np.int64)[None, :]).reshape(-1)


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
