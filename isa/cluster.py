"""Thread-block clusters (sm_90): a launch's cluster shape, the order its CTAs run in, and
the shared::cluster addresses of distributed shared memory.

Shape. The entry's `.reqnctapercluster X, Y, Z` (what nvcc emits for `__cluster_dims__`)
or the launch's `cluster=` argument (cudaLaunchKernelEx's cluster attribute) gives it;
with neither every CTA is a cluster of one and `%is_explicit_cluster` is false. The grid
must hold a whole number of clusters in each dimension, and a cluster at most
`MAX_CLUSTER_CTAS` CTAs (`.maxclusterrank` may lower that). A CTA's rank is
x + cx (y + cy z) of its `%cluster_ctaid` (CUDA: cluster.block_rank()).

Order. The functional model runs CTAs in batches (`isa.launch.cta_batches`); a cluster's
CTAs share a batch, consecutive in rank order, so that rank r of the cluster of batch CTA
c is batch CTA c - rank(c) + r (`Machine.cluster_first`). Clusters follow one another in
the order of their lowest linear CTA index.

Addresses. A shared::cluster address holds the byte offset in its CTA's shared memory in
bits 0 .. `RANK_SHIFT` - 1 and, above, the rank + 1 of the CTA that owns it; 0 there
is the executing CTA (every shared::cta address is also a shared::cluster one, as in
PTX). `mapa` makes them (generic ones inside the shared window), `getctarank` reads the
rank back. The hardware's encoding is opaque; a program can only obtain these addresses
from `mapa` and offset them, so any encoding that round-trips is faithful.
"""

from __future__ import annotations

import numpy as np

from isa.errors import LaunchError

RANK_SHIFT = 24
OFFSET_MASK = (1 << RANK_SHIFT) - 1
MAX_CLUSTER_CTAS = 16
"""H100: 8 CTAs per cluster portably, 16 with cudaFuncAttributeNonPortableClusterSizeAllowed
(CUDA C++ Programming Guide, "Thread Block Clusters")."""


def cluster_shape(program, grid: tuple[int, int, int],
                  cluster=None) -> tuple[tuple[int, int, int], bool]:
    """(cluster shape, explicit) of a launch of `program` on `grid`; raises `LaunchError`
    when the shape is malformed, disagrees with the entry's `.reqnctapercluster`, is too
    large or does not tile the grid."""

    req = program.directives.get(".reqnctapercluster")
    declared = tuple(req) + (1,) * (3 - len(req)) if req else None
    given = dim3(cluster, "cluster") if cluster is not None else None
    if declared and given and declared != given:
        raise LaunchError(f"kernel '{program.entry}' requires cluster {declared} "
                          f"(.reqnctapercluster), got cluster {given}")
    shape = given or declared or (1, 1, 1)
    explicit = bool(given or declared or ".explicitcluster" in program.directives)
    size = shape[0] * shape[1] * shape[2]
    limit = MAX_CLUSTER_CTAS
    maxrank = program.directives.get(".maxclusterrank")
    if maxrank:
        limit = min(limit, int(maxrank[0]))
    if size > limit:
        raise LaunchError(f"cluster {shape} has {size} CTAs; at most {limit} are allowed"
                          + (" (.maxclusterrank)" if maxrank else ""))
    for k in range(3):
        if grid[k] % shape[k]:
            raise LaunchError(f"grid {grid} is not a whole number of clusters {shape}: "
                              f"dimension {'xyz'[k]} {grid[k]} is not a multiple of "
                              f"{shape[k]}")
    return shape, explicit


def ranks(cta_ids: np.ndarray, shape: tuple[int, int, int]) -> np.ndarray:
    """The cluster rank of each CTA (`cta_ids` [n, 3])."""
    cx, cy, cz = shape
    ids = cta_ids.astype(np.int64)
    return ids[:, 0] % cx + cx * (ids[:, 1] % cy + cy * (ids[:, 2] % cz))


def cluster_order(grid: tuple[int, int, int], shape: tuple[int, int, int],
                  first: int = 0, stop: int | None = None) -> np.ndarray:
    """Linear indices of the CTAs `first` .. `stop` - 1 (linear, x fastest), cluster after
    cluster (in the order of their first CTA), each in rank order; raises `LaunchError`
    when the range cuts a cluster."""
    gx, gy, gz = grid
    total = gx * gy * gz
    stop = total if stop is None else stop
    cx, cy, cz = shape
    if shape == (1, 1, 1):
        return np.arange(first, stop, dtype=np.int64)
    nx, ny, nz = gx // cx, gy // cy, gz // cz
    # rank-major offsets inside a cluster and the base CTA of each cluster
    r = np.arange(cx * cy * cz, dtype=np.int64)
    dx, dy, dz = r % cx, (r // cx) % cy, r // (cx * cy)
    k = np.arange(nx * ny * nz, dtype=np.int64)
    bx, by, bz = (k % nx) * cx, ((k // nx) % ny) * cy, (k // (nx * ny)) * cz
    lin = ((bx[:, None] + dx) + gx * ((by[:, None] + dy) + gy * (bz[:, None] + dz)))
    inside = (lin >= first) & (lin < stop)
    cut = inside.any(axis=1) & ~inside.all(axis=1)
    if cut.any():
        c = int(np.flatnonzero(cut)[0])
        raise LaunchError(f"CTA range [{first}, {stop}) cuts cluster {c} (CTAs "
                          f"{sorted(lin[c].tolist())}); a range must hold whole clusters "
                          f"of {shape}")
    keep = inside.all(axis=1)
    lin = lin[keep]
    return lin[np.argsort(lin[:, 0], kind="stable")].reshape(-1)


def dim3(value, what: str) -> tuple[int, int, int]:
    """A grid, block or cluster shape as three ints >= 1 (missing trailing dims are 1);
    LaunchError naming `what` for anything else."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        t = (int(value),)
    else:
        try:
            if isinstance(value, (str, bytes)) or any(
                    isinstance(v, (bool, float, np.floating)) for v in value):
                raise TypeError
            t = tuple(int(v) for v in value)
        except (TypeError, ValueError):
            raise LaunchError(f"{what} must be an int or a tuple of 1-3 ints, got {value!r}") \
                from None
    if not 1 <= len(t) <= 3:
        raise LaunchError(f"{what} must have 1 to 3 dimensions, got {value!r}")
    t = t + (1,) * (3 - len(t))
    if any(v < 1 for v in t):
        raise LaunchError(f"{what} dimensions must be >= 1, got {t}")
    return t
