"""Zero-compression (ZCE) tensor format, sparsity sources and skip fractions, in numpy.

Format: a tensor is cut, in row-major order, into blocks of `block_elems` elements; each
block stores a bitmap (one bit per element, 1 = non-zero, `ceil(block_elems / 8)` bytes)
followed by its non-zero values packed in order. `compress` / `decompress` are exact
inverses (`decompress(compress(x)) == x` bit for bit, -0.0 counts as a zero and comes back
as +0.0); `ZceTensor.nbytes` is bitmap bytes plus packed value bytes. Where a block's values
start follows from the popcounts of the bitmaps before it, so no offsets are stored.

Sparsity sources (all take a seeded `numpy.random.Generator`, or are deterministic):
`uniform` (each element zero with probability `ratio`), `block_sparse` (whole
`block x block` tiles zero), `two_four` (2 of every 4 consecutive elements along the last
axis zero), `relu_activations` (ReLU of shifted normals: zero fraction set by the shift),
`magnitude_pruned` (the smallest-magnitude `ratio` of a given tensor set to zero).

Skip fractions of an MMA A [M, K] @ B [K, N] (`active_fraction`), the share of the dense
issue work that a zero-skipping engine still does, per MMA tile (m16n8kK by default):
* "element": products a[m, k] * b[k, n] with both operands non-zero;
* "group": (m, 4-wide K group, n) units with any non-zero product (the 2:4 group);
* "kblock": (tile, k-block of `kblock` K elements) units with any non-zero product.
`compression_cycles(nbytes, bytes_per_clk_per_sm, sms)` is the time the (de)compressor takes.

Where the format moves: GEMM operand loads (`codesign_ops`: TMA boxes of the compressed
bytes) and activation stores (`zce_store`: the SM's engine packs a GELU/SwiGLU output, or a
GEMM C with an activation epilogue, at `compression_cycles`' rate; L2/HBM see the format's
bytes). Left out: compressed load/store instructions in the ISA (both paths change the
bytes of stock instructions at the op level), metadata caches, sparse accumulators.
Units: elements, bytes, cycles.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from isa.errors import InputError

GRANULARITIES = ("element", "group", "kblock")
GROUP_K = 4


@dataclass(frozen=True)
class ZceTensor:
    """A tensor in the ZCE format (see the module docstring)."""

    shape: tuple[int, ...]
    dtype: np.dtype
    block_elems: int
    bitmaps: np.ndarray      # uint8 [blocks, ceil(block_elems / 8)]
    values: np.ndarray       # the non-zeros, in order, of `dtype`

    @property
    def nbytes(self) -> int:
        """Bytes the compressed tensor occupies: bitmaps plus packed values."""
        return int(self.bitmaps.nbytes + self.values.nbytes)

    @property
    def dense_nbytes(self) -> int:
        return int(np.prod(self.shape)) * self.dtype.itemsize

    @property
    def ratio(self) -> float:
        """Compressed over dense bytes."""
        return self.nbytes / max(self.dense_nbytes, 1)


def compress(x: np.ndarray, block_elems: int = 128) -> ZceTensor:
    """`x` in the ZCE format with blocks of `block_elems` elements."""
    if block_elems < 1:
        raise InputError(f"block_elems = {block_elems} (accepted: an integer >= 1)")
    x = np.ascontiguousarray(x)
    flat = x.reshape(-1)
    n_blocks = -(-flat.size // block_elems)
    mask = np.zeros(n_blocks * block_elems, dtype=bool)
    mask[:flat.size] = flat != 0
    bitmaps = np.packbits(mask.reshape(n_blocks, block_elems), axis=1, bitorder="little")
    return ZceTensor(x.shape, x.dtype, block_elems, bitmaps, flat[mask[:flat.size]].copy())


def decompress(z: ZceTensor) -> np.ndarray:
    """The dense tensor of `z`."""
    size = int(np.prod(z.shape))
    mask = np.unpackbits(z.bitmaps, axis=1, bitorder="little",
                         count=z.block_elems).reshape(-1)[:size].astype(bool)
    out = np.zeros(size, dtype=z.dtype)
    out[mask] = z.values
    return out.reshape(z.shape)


def compression_cycles(dense_bytes: int, bytes_per_clk_per_sm: float, sms: int) -> float:
    """Cycles to (de)compress `dense_bytes` with every SM's engine busy."""
    return dense_bytes / (bytes_per_clk_per_sm * sms)


# -- sparsity sources -----------------------------------------------------------------------

def _check_ratio(ratio: float) -> None:
    if not 0 <= ratio <= 1:
        raise InputError(f"ratio = {ratio} (accepted: a zero fraction in [0, 1])")


def uniform(shape, ratio: float, rng: np.random.Generator,
            dtype=np.float32) -> np.ndarray:
    """Normal values with each element zero independently with probability `ratio`."""
    _check_ratio(ratio)
    values = rng.standard_normal(shape).astype(dtype)
    return np.where(rng.random(shape) < ratio, 0, values).astype(dtype)


def block_sparse(shape: tuple[int, int], ratio: float, block: int, rng: np.random.Generator,
                 dtype=np.float32) -> np.ndarray:
    """Normal values with whole `block x block` tiles zero with probability `ratio`."""
    _check_ratio(ratio)
    rows, cols = shape
    if rows % block or cols % block:
        raise InputError(f"shape {shape} is not a multiple of block = {block}")
    keep = rng.random((rows // block, cols // block)) >= ratio
    mask = np.kron(keep, np.ones((block, block), dtype=bool))
    return np.where(mask, rng.standard_normal(shape), 0).astype(dtype)


def two_four(shape, rng: np.random.Generator, dtype=np.float32) -> np.ndarray:
    """Normal values with 2 random zeros in every 4 consecutive elements of the last axis."""
    if shape[-1] % 4:
        raise InputError(f"shape {shape}: the last axis must be a multiple of 4 for 2:4")
    values = rng.standard_normal(shape).astype(dtype)
    groups = values.reshape(-1, 4)
    order = np.argsort(rng.random(groups.shape), axis=1)[:, :2]
    np.put_along_axis(groups, order, 0, axis=1)
    return values


def relu_activations(shape, ratio: float, rng: np.random.Generator,
                     dtype=np.float32) -> np.ndarray:
    """ReLU(z - t), z standard normal, t chosen so that a `ratio` of the values are zero."""
    _check_ratio(ratio)
    z = rng.standard_normal(shape)
    threshold = np.quantile(z, ratio) if 0 < ratio < 1 else (-np.inf if ratio == 0 else np.inf)
    return np.maximum(z - threshold, 0).astype(dtype) * (z > threshold)


def magnitude_pruned(weights: np.ndarray, ratio: float) -> np.ndarray:
    """`weights` with the `ratio` of smallest magnitudes set to zero (ties broken by order)."""
    _check_ratio(ratio)
    flat = weights.reshape(-1)
    n_zero = int(round(ratio * flat.size))
    out = flat.copy()
    out[np.argsort(np.abs(flat), kind="stable")[:n_zero]] = 0
    return out.reshape(weights.shape)


# -- skip fractions -------------------------------------------------------------------------

def _tiles(x: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """[R, C] -> [R / rows, C / cols, rows, cols] (R, C multiples of the tile)."""
    r, c = x.shape
    if r % rows or c % cols:
        raise InputError(f"matrix {x.shape} is not a multiple of the tile {rows} x {cols}")
    return x.reshape(r // rows, rows, c // cols, cols).swapaxes(1, 2)


def active_fraction(a: np.ndarray, b: np.ndarray, granularity: str, kblock: int = 16,
                    tile: tuple[int, int, int] = (16, 8, 16)) -> float:
    """Share of dense MMA work left when zeros are skipped at `granularity` (docstring)."""
    if granularity not in GRANULARITIES:
        raise InputError(f"granularity = {granularity!r} (accepted: "
                         f"{', '.join(GRANULARITIES)})")
    tm, tn, tk = tile
    unit = {"element": 1, "group": GROUP_K, "kblock": kblock}[granularity]
    if tk % unit:
        raise InputError(f"k-unit {unit} does not divide the tile's K = {tk}")
    nz_a = _tiles(a != 0, tm, tk)            # [Mt, Kt, tm, tk]
    nz_b = _tiles(b != 0, tk, tn)            # [Kt, Nt, tk, tn]
    if granularity == "element":
        products = (a != 0).sum(axis=0).astype(np.int64) @ (b != 0).sum(axis=1)
        return float(products) / (a.shape[0] * a.shape[1] * b.shape[1])
    groups = tk // unit
    if granularity == "group":
        ga = nz_a.reshape(*nz_a.shape[:3], groups, unit)      # [Mt, Kt, tm, g, u]
        gb = nz_b.reshape(*nz_b.shape[:2], groups, unit, tn)  # [Kt, Nt, g, u, tn]
        live = np.einsum("ikmgu,kjgun->ijkmgn", ga, gb)  # any product per (m, group, n)
        return float(np.count_nonzero(live)) / (a.shape[0] * (a.shape[1] // unit) * b.shape[1])
    col_live = nz_a.any(axis=2).reshape(*nz_a.shape[:2], groups, unit)   # [Mt, Kt, g, u]
    row_live = nz_b.any(axis=3).reshape(*nz_b.shape[:2], groups, unit)   # [Kt, Nt, g, u]
    live = np.einsum("ikgu,kjgu->ijkg", col_live, row_live) > 0
    return float(np.count_nonzero(live)) / live.size
