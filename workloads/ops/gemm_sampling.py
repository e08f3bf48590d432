"""Op-level sampling of a persistent GEMM: a few reduced launches and the weights that
extrapolate their simulated times to the whole GEMM (`OpPlan.samples`).

Why: a persistent GEMM launches one CTA per compute SM, so its grid is a single wave and
the simulator's wave sampling (`simulator.runner.sampling`) cannot shorten it. Its structure is
regular instead: CTA c takes tiles c, c + P, c + 2P, ... (P CTAs), each tile runs Kt
k-tiles through the same stage ring.

Derivation. With T tiles, F = T // P full rounds and f = T % P tiles in a last, partial
round, let S(j, κ) be the simulated time of the same kernel limited to its first
j·P + f tiles (the template's `tile_limit`: j full rounds and the same partial round, so
the partial round's imbalance is simulated, not estimated) and to κ k-tiles per tile
(the K argument cut to κ·k_tile; tensor maps keep the full shape and strides, so the
addresses are those of the real operands). The model is

    time(j, κ) = a + b·j + c·κ + d·j·κ      (each round adds a steady round time, which
                                             is linear in the k-tiles once the ring is full)

so two round counts j_a < j_b and two depths κ1 < κ2 determine it, and the GEMM's
time(F, Kt) is the bilinear extrapolation

    time(F, Kt) = Σ_j Σ_κ w_j · v_κ · S(j, κ),   w_ja = (j_b - F)/(j_b - j_a),
                  w_jb = (F - j_a)/(j_b - j_a),  v_κ1 = (κ2 - Kt)/(κ2 - κ1), v_κ2 = 1 - v_κ1.

j ∈ {0, 1} when there is a partial round (S(0, κ) is the partial round alone), else {1,
2}; κ1 = 2·(stages + 1), κ2 = 8·(stages + 1) (`K_DEPTHS`: below about twice the ring the
producer's prefetch of the next tile still overlaps the previous tile's epilogue and a
k-tile costs less than in the steady state; on the whole chip a k-tile costs more the
deeper into K the CTAs are, as CTAs that share an operand panel drift apart and stop
hitting each other's lines in the L2, so the slope is measured out to 8 rings). Cycles are
extrapolated with the same weights (`simulate_op`). HBM bytes are not linear in the rounds
(operand panels read by an earlier round are L2 hits in a later one), so a plan that cuts
rounds gives its samples their own byte weights (`SamplePoint.byte_weight`,
`byte_weights`): the same linear extrapolation, in the footprint model's bytes instead of
in rounds. The model `panel_bytes` reads the operand panels (plus the C written beyond
the L2's capacity: a C larger than the L2 reaches HBM during the kernel) of the first tiles
in the kernel's order (m-block t % tiles_m, n-block t // tiles_m) through an LRU of the
L2's capacity holding whole panels; for each K depth κ the two round samples
(M_a, S_a), (M_b, S_b) are extrapolated to the whole grid's M_F along the line through
them, then the depths as above. Grouped GEMMs (panels per group) keep the time weights. A
dimension that is already small is not cut: rounds when F < j_b + 3 (or the kernel is not
persistent), k-tiles when Kt < 1.5·κ2; with neither cut the plan has no samples and runs
in full. Ragged-K grouped GEMMs cut every group to κ k-tiles and extrapolate to the mean
k-tiles per group.

A 2-CTA cluster kernel (`templates.gemm` `multicast`) walks pairs of tiles: its rounds are
the same P tiles per round (P/2 clusters, 2 tiles each), a `tile_limit` of L walks the first
ceil(L / 2) pairs, and the byte model reads the panels in the pairs' order (`tile_blocks`).

Left out: effects that are not linear in rounds or k-tiles (L2 reuse that grows with the
number of rounds resident, HBM refresh phase); `tests/test_gemm_sampling.py` measures the
error against full runs. Units: tiles, k-tiles, rounds.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, replace

K_DEPTHS = (2, 8)
"""κ1, κ2 in units of (stages + 1) k-tiles: past the ring's fill and the per-tile overlap
of the producer with the previous tile's epilogue, and far enough apart that the k-tile
slope includes the drift of a long K. Measured on h800_sxm (FP8 DeepSeek-scaled, 4-stage
tiles): 4096x7168x16384 (128 k-tiles) against full 736.7 us, (2, 4) read
693.6 (-5.9 %; with K exact and rounds cut 726.5, -1.4 %), (2, 8) 748.6 (+1.6 %), (4, 12)
746.7 (+1.4 %); 4096x4096x7168 and 4096x1536x7168 (56 k-tiles, cut by (2, 4), not by
(2, 8)) read -7.5 % and -6.4 % with (2, 4)."""
K_MIN_FACTOR = 1.5
"""K is cut only when the GEMM has at least 1.5 x κ2 k-tiles (else the cut saves little)."""
MIN_EXTRA_ROUNDS = 3
"""Rounds are cut only when the GEMM has at least j_b + 3 full rounds (else the cut saves
little and the extrapolation leans on the first rounds' start-up)."""


@dataclass(frozen=True)
class SamplePoint:
    """One reduced launch: `tile_limit` tiles (0: all), `k_tiles` per tile (0: all)."""
    tile_limit: int
    k_tiles: int
    weight: float
    byte_weight: float | None = None   # weight of its HBM bytes (None: `weight`)


@dataclass(frozen=True)
class Footprint:
    """What the byte model needs of a plain GEMM: m-blocks of the tile grid, bytes of one
    A m-block and one B n-block per k-tile, L2 capacity; for a 2-CTA cluster kernel the
    shared operand ("a" / "b") and the n-blocks, whose pairs of tiles set the order."""
    tiles_m: int
    a_block_bytes: float
    b_block_bytes: float
    l2_bytes: float
    multicast: str | None = None
    tiles_n: int = 0
    c_block_bytes: float = 0.0


def plain_footprint(tiles_m: int, choice: dict, elem_bytes: float, config,
                    tiles_n: int = 0, out_bytes: float = 0.0) -> Footprint:
    """The `Footprint` of a plain GEMM with tile `choice` (m_tile, n_tile, k_tile, and
    `multicast` for a cluster kernel of `tiles_n` n-blocks), operands of `elem_bytes` and
    C elements of `out_bytes` on `config`'s L2."""
    block = choice["k_tile"] * elem_bytes
    return Footprint(tiles_m, choice["m_tile"] * block, choice["n_tile"] * block,
                     config.l2.size_bytes, choice.get("multicast"), tiles_n,
                     choice["m_tile"] * choice["n_tile"] * out_bytes)


def tile_blocks(t: int, tiles_m: int, multicast: str | None = None,
                tiles_n: int = 0) -> tuple[int, int]:
    """(m-block, n-block) of the kernel's t-th tile: t % tiles_m, t // tiles_m; a cluster
    kernel walks pairs of tiles (`templates.gemm`), neighbours in N ("a") or M ("b")."""
    if not multicast:
        return t % tiles_m, t // tiles_m
    p, r = divmod(t, 2)
    if multicast == "a":
        return p % tiles_m, 2 * (p // tiles_m) + r
    pairs_m = -(-tiles_m // 2)
    return 2 * (p % pairs_m) + r, p // pairs_m


def panel_bytes(tiles: int, tiles_m: int, a_panel: float, b_panel: float,
                l2_bytes: float, multicast: str | None = None, tiles_n: int = 0,
                c_block: float = 0.0) -> float:
    """HBM bytes of reading the A and B panels of tiles 0 .. tiles-1 in the kernel's
    order (`tile_blocks`; a pair's tile outside C reads nothing) through an LRU cache of
    `l2_bytes` holding whole panels, plus the C blocks (`c_block` bytes per tile) written
    beyond what the cache holds: a C larger than the L2 reaches HBM during the kernel, one
    that fits stays (its samples' smaller C fits where the whole grid's may not, which the
    byte weights then carry)."""
    cache: OrderedDict = OrderedDict()
    held = read = 0.0
    written = 0
    for t in range(tiles):
        m, n = tile_blocks(t, tiles_m, multicast, tiles_n)
        if multicast and (m >= tiles_m or n >= tiles_n):
            continue
        written += 1
        for key, size in ((("a", m), a_panel), (("b", n), b_panel)):
            if key in cache:
                cache.move_to_end(key)
                continue
            read += size
            cache[key] = size
            held += size
            while held > l2_bytes and len(cache) > 1:
                held -= cache.popitem(last=False)[1]
    return read + max(0.0, written * c_block - l2_bytes)


def _line(at_a: float, at_b: float, target: float) -> tuple[float, float]:
    """Weights of the values at `at_a` and `at_b` whose sum is the line through them at
    `target` (linear extrapolation)."""
    return (at_b - target) / (at_b - at_a), (target - at_a) / (at_b - at_a)


def byte_weights(points: tuple[SamplePoint, ...], tiles: int, k_tiles: float,
                 footprint: Footprint) -> tuple[SamplePoint, ...]:
    """`points` with byte weights: per K depth, the line through the round samples'
    (model bytes, simulated bytes) at the whole grid's model bytes (module docstring)."""
    limits = sorted({p.tile_limit for p in points})
    if len(limits) != 2 or 0 in limits:
        return points
    out = []
    for depth in sorted({p.k_tiles for p in points}):
        kt = depth or k_tiles
        a, b = footprint.a_block_bytes * kt, footprint.b_block_bytes * kt
        model = {limit: panel_bytes(limit, footprint.tiles_m, a, b, footprint.l2_bytes,
                                    footprint.multicast, footprint.tiles_n,
                                    footprint.c_block_bytes)
                 for limit in (*limits, tiles)}
        pair = [p for p in points if p.k_tiles == depth]
        if model[limits[1]] == model[limits[0]]:
            out += [replace(p, byte_weight=p.weight) for p in pair]
            continue
        w = _line(model[limits[0]], model[limits[1]], model[tiles])
        depth_weight = sum(p.weight for p in pair)
        for p in pair:
            out.append(replace(p, byte_weight=depth_weight * w[limits.index(p.tile_limit)]))
    order = {(p.tile_limit, p.k_tiles): i for i, p in enumerate(points)}
    return tuple(sorted(out, key=lambda p: order[(p.tile_limit, p.k_tiles)]))


def sample_points(tiles: int, ctas: int, k_tiles: float, stages: int,
                  persistent: bool, footprint: Footprint | None = None
                  ) -> tuple[tuple[SamplePoint, ...], str]:
    """The reduced launches and weights of the module docstring, and a one-line note;
    with a `footprint` the points carry byte weights (`byte_weights`)."""
    full_rounds, partial = divmod(tiles, ctas)
    rounds: list[tuple[int, float]] = [(0, 1.0)]
    j = (0, 1) if partial else (1, 2)
    if persistent and full_rounds >= j[1] + MIN_EXTRA_ROUNDS:
        w = _line(j[0], j[1], full_rounds)
        rounds = [(j[0] * ctas + partial, w[0]), (j[1] * ctas + partial, w[1])]
    k1, k2 = K_DEPTHS[0] * (stages + 1), K_DEPTHS[1] * (stages + 1)
    depths: list[tuple[int, float]] = [(0, 1.0)]
    if k_tiles >= K_MIN_FACTOR * k2:
        v = _line(k1, k2, k_tiles)
        depths = [(k1, v[0]), (k2, v[1])]
    if len(rounds) == 1 and len(depths) == 1:
        return (), ""
    points = tuple(SamplePoint(limit, kt, w * v) for limit, w in rounds for kt, v in depths)
    if footprint is not None:
        points = byte_weights(points, tiles, k_tiles, footprint)
    parts = []
    if len(rounds) > 1:
        parts.append(f"rounds: {full_rounds} full of {ctas} tiles + {partial} from "
                     f"{j[0]} and {j[1]} simulated (tile limits {rounds[0][0]}, "
                     f"{rounds[1][0]})")
    if len(depths) > 1:
        parts.append(f"k-tiles: {k_tiles:g} from {k1} and {k2} simulated")
    note = ("bilinear extrapolation (workloads.ops.gemm_sampling) of " + "; ".join(parts)
            + f"; {len(points)} reduced launches")
    return points, note


def reduced_k(k: int, k_tile: int, k_tiles: int) -> int:
    """The K argument of a launch cut to `k_tiles` (0: not cut)."""
    return k if not k_tiles else min(k, k_tiles * k_tile)


def rounds_of(tiles: int, ctas: int) -> tuple[int, int]:
    """(full rounds, tiles of the partial round) of a persistent grid of `ctas` CTAs."""
    return tiles // max(ctas, 1), tiles % max(ctas, 1)


def mean_k_tiles(k_sizes, k_tile: int) -> float:
    """Mean k-tiles per group (ragged-K grouped GEMMs)."""
    return sum(math.ceil(kg / k_tile) for kg in k_sizes) / len(k_sizes)
