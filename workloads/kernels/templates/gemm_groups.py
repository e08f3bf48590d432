"""Grouped GEMM for MoE (DeepGEMM's layouts): per-group sizes and the tile schedule table
that the grouped variant of `templates.gemm` walks.

What it models
--------------
G independent GEMMs C_g = A_g · B_gᵀ share one persistent launch; its CTAs take the tiles
of all groups round-robin (tile t: schedule row t % rows, n-block t // rows). The layouts:

* ``ragged="m", layout="contiguous"`` (DeepGEMM `m_grouped_gemm_..._contiguous`, MoE
  forward / dgrad): the groups' rows are concatenated in A [ΣM_g', K] and C [ΣM_g', N],
  each group's row count padded up to the m tile (M_g' = ceil(M_g / m_tile) · m_tile, the
  padding rows are not stored); B is [G · N, K] (expert g's weights are rows g·N ..).
* ``ragged="m", layout="masked"`` (DeepGEMM `..._masked`, decode): A [G · max_m, K] and C
  [G · max_m, N] hold max_m rows per group of which the first M_g are valid; only the
  tiles that hold valid rows are scheduled.
* ``ragged="k"`` (MoE wgrad, DeepGEMM `k_grouped_...`): A [M, ΣK_g] and B [N, ΣK_g] are
  concatenated along K, C is [G · M, N]; each group reduces over its own K_g (a multiple
  of the k tile, so no group's TMA box reads another group's columns).

Sizes: `m` is the rows per group (masked: max_m) and `k` the reduction length; a total
(`m_total` for contiguous rows, `valid_m` for masked valid rows, `k_total` for ragged K)
is split over the groups as evenly as whole units allow (rows for M, k tiles for K: the
first groups get one unit more), so the same inputs always give the same split.

The schedule row of an m-block is int32 [a row, B row, C row, valid rows, k0, k tiles,
scale_b block row, group]; the kernel reads it per tile (two 16-byte loads per warp).
Left out: DeepGEMM's on-device walk of `masked_m` / `grouped_layout` (a few integer
instructions per tile; here the table is built on the host) and its TMA multicast.
Units: rows, elements, tiles.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from isa.errors import InputError

LAYOUTS = ("contiguous", "masked")
RAGGED = ("m", "k")
SCHEDULE_COLUMNS = 8


def split_even(total: int, parts: int) -> list[int]:
    """`total` units over `parts` as evenly as possible, the first parts one larger."""
    base, extra = divmod(total, parts)
    return [base + (1 if g < extra else 0) for g in range(parts)]


@dataclass(frozen=True)
class GroupedShape:
    """Per-group sizes of a grouped GEMM and the operand shapes they imply."""
    groups: int
    layout: str
    ragged: str
    m: int                      # rows per group (masked: max rows per group)
    n: int
    k: int                      # reduction length (ragged k: nominal per group)
    m_sizes: tuple[int, ...]    # valid rows per group
    k_sizes: tuple[int, ...]    # reduction length per group
    m_tile: int = 128

    @property
    def a_shape(self) -> tuple[int, int]:
        return (self.a_rows, self.k_cols)

    @property
    def b_shape(self) -> tuple[int, int]:
        return (self.n if self.ragged == "k" else self.groups * self.n, self.k_cols)

    @property
    def c_shape(self) -> tuple[int, int]:
        return (self.c_rows, self.n)

    @property
    def k_cols(self) -> int:
        return sum(self.k_sizes) if self.ragged == "k" else self.k

    @property
    def a_rows(self) -> int:
        if self.ragged == "k":
            return self.m
        if self.layout == "masked":
            return self.groups * self.m
        return sum(self.padded_rows)

    @property
    def c_rows(self) -> int:
        return self.groups * self.m if self.ragged == "k" else self.a_rows

    @property
    def padded_rows(self) -> list[int]:
        return [self.m_tile * math.ceil(r / self.m_tile) for r in self.m_sizes]

    @property
    def flops(self) -> float:
        """Useful FLOPs: 2 · Σ_g M_g · N · K_g."""
        return 2.0 * self.n * sum(mg * kg for mg, kg in zip(self.m_sizes, self.k_sizes,
                                                           strict=True))

    def min_bytes(self, elem_bytes: int, out_bytes: int) -> float:
        """Valid rows of A, all of B, valid rows of C, each once."""
        b_rows = self.b_shape[0]
        a = sum(mg * kg for mg, kg in zip(self.m_sizes, self.k_sizes, strict=True)) \
            if self.ragged == "m" else self.m * self.k_cols
        c = sum(self.m_sizes) * self.n
        return float((a + b_rows * self.k_cols) * elem_bytes + c * out_bytes)

    def schedule(self, k_tile: int) -> np.ndarray:
        """int32 [rows, 8] schedule table (module docstring) for the kernel's m tile."""
        mt, rows = self.m_tile, []
        n_blocks = math.ceil(self.n / 128)
        k_offsets = np.concatenate(([0], np.cumsum(self.k_sizes)[:-1])).tolist()
        row_offsets = np.concatenate(([0], np.cumsum(self.padded_rows)[:-1])).tolist()
        for g in range(self.groups):
            if self.ragged == "k":
                a0, b0, c0, sb = 0, 0, g * self.m, 0
            else:
                a0 = g * self.m if self.layout == "masked" else row_offsets[g]
                b0, c0, sb = g * self.n, a0, g * n_blocks
            k0 = k_offsets[g] if self.ragged == "k" else 0
            ktiles = math.ceil(self.k_sizes[g] / k_tile)
            for j in range(math.ceil(self.m_sizes[g] / mt)):
                rows.append((a0 + j * mt, b0, c0 + j * mt, self.m_sizes[g] - j * mt, k0,
                             ktiles, sb, g))
        return np.array(rows, dtype=np.int32).reshape(-1, SCHEDULE_COLUMNS)


def grouped_shape(groups: int, layout: str, ragged: str, m: int, n: int, k: int, m_tile: int,
                  k_tile: int, m_total: int | None = None, valid_m: int | None = None,
                  k_total: int | None = None) -> GroupedShape:
    """Validated per-group sizes (module docstring); InputError names the bad flag."""
    if layout not in LAYOUTS:
        raise InputError(f"--layout {layout!r}: accepted {', '.join(LAYOUTS)}")
    if ragged not in RAGGED:
        raise InputError(f"ragged={ragged!r}: accepted {', '.join(RAGGED)}")
    m_sizes, k_sizes = [m] * groups, [k] * groups
    if ragged == "k":
        if layout != "contiguous":
            raise InputError(f"--layout {layout}: ragged='k' (wgrad) takes the contiguous "
                             "layout only")
        total = groups * k if k_total is None else k_total
        if total % k_tile or total < groups * k_tile:
            raise InputError(f"k_total {total}: accepted a multiple of the k tile "
                             f"({k_tile}) of at least groups x {k_tile}")
        k_sizes = [u * k_tile for u in split_even(total // k_tile, groups)]
    elif layout == "masked":
        total = groups * m if valid_m is None else valid_m
        if not 0 < total <= groups * m:
            raise InputError(f"valid_m {total}: accepted 1 .. groups x m = {groups * m} "
                             "(valid rows of all groups together)")
        m_sizes = split_even(total, groups)
    else:
        total = groups * m if m_total is None else m_total
        if total < 1:
            raise InputError(f"m_total {total}: accepted a positive row count")
        m_sizes = split_even(total, groups)
    return GroupedShape(groups, layout, ragged, m, n, k, tuple(m_sizes), tuple(k_sizes),
                        m_tile)
