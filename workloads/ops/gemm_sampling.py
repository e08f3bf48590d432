"""Op-level sampling of a persistent GEMM: a few reduced launches and the weights that
extrapolate their simulated times to the whole GEMM (`OpPlan.samples`).

Why: a persistent GEMM launches one CTA per compute SM, so its grid is a single wave and
the simulator's wave sampling (`simulator.sampling`) cannot shorten it. Its structure is
regular instead: CTA c takes tiles c, c + P, c + 2P, ... (P CTAs), each tile runs Kt
k-tiles through the same stage ring.

Derivation. With T tiles, F = T // P full rounds and f = T % P tiles in a last, partial
round, let S(j, κ) be the simulated time of the same kernel limited to its first
j·P + f tiles (the template's `tile_limit`: j full rounds and the same partial round, so
the partial round's imbalance is simulated, not estimated) and to κ k-tiles per tile
(the K argument cut to κ·k_tile; tensor maps keep the full shape and strides, so the
addresses are those of the real operands). The model is

    time(j, κ) = a + b·j + c·κ + d·j·κ      (rounds add a steady per-round time, which
                                             is linear in the k-tiles once the ring is full)

so two round counts j ∈ {1, 2} and two depths κ ∈ {κ1, κ2} determine it, and the
GEMM's time(F, Kt) is the bilinear extrapolation

    time(F, Kt) = Σ_j Σ_κ w_j · v_κ · S(j, κ),   w_1 = 2 - F, w_2 = F - 1,
                                                v_κ1 = 1 - x, v_κ2 = x, x = (Kt - κ1)/(κ2 - κ1).

Cycles and simulated HBM bytes are extrapolated with the same weights (`simulate_op`).
κ1 = stages + 1 (the ring full and one k-tile beyond), κ2 = 2·κ1. A dimension that is
already small is not cut: rounds when F <= 2 (or the kernel is not persistent), k-tiles
when Kt <= κ2; with neither cut the plan has no samples and runs in full. Ragged-K grouped
GEMMs (per-group K) cut every group to κ k-tiles and extrapolate to the mean k-tiles per
group.

Left out: effects that are not linear in rounds or k-tiles (L2 reuse that grows with the
number of rounds resident, HBM refresh phase); `tests/test_gemm_sampling.py` measures the
error against full runs. Units: tiles, k-tiles, rounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class SamplePoint:
    """One reduced launch: `tile_limit` tiles (0: all), `k_tiles` per tile (0: all)."""
    tile_limit: int
    k_tiles: int
    weight: float


def sample_points(tiles: int, ctas: int, k_tiles: float, stages: int,
                  persistent: bool) -> tuple[tuple[SamplePoint, ...], str]:
    """The reduced launches and weights of the module docstring, and a one-line note."""
    full_rounds, partial = divmod(tiles, ctas)
    rounds: list[tuple[int, float]] = [(0, 1.0)]
    if persistent and full_rounds > 2:
        rounds = [(ctas + partial, 2.0 - full_rounds), (2 * ctas + partial, full_rounds - 1.0)]
    k1 = stages + 1
    k2 = 2 * k1
    depths: list[tuple[int, float]] = [(0, 1.0)]
    if k_tiles > k2:
        x = (k_tiles - k1) / (k2 - k1)
        depths = [(k1, 1.0 - x), (k2, x)]
    if len(rounds) == 1 and len(depths) == 1:
        return (), ""
    points = tuple(SamplePoint(limit, kt, w * v) for limit, w in rounds for kt, v in depths)
    parts = []
    if len(rounds) > 1:
        parts.append(f"rounds: {full_rounds} full of {ctas} tiles + {partial} from "
                     f"1 and 2 simulated (tile limits {rounds[0][0]}, {rounds[1][0]})")
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
