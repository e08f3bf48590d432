"""Thread-block clusters in the functional model (`isa.cluster`, `isa.semantics.cluster`,
multicast TMA in `isa.semantics.hopper_tma`): geometry, distributed shared memory, the
cluster barrier, remote mbarrier arrives and multicast boxes, each against numpy."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import isa
import isa.cluster
from isa.tensor_map import make_tensor_map

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "hopper"
DSMEM = (FIXTURES / "cluster_dsmem.ptx").read_text()       # nvcc output of cluster_dsmem.cu
BARRIER = (FIXTURES / "cluster_barrier.ptx").read_text()
MULTICAST = (FIXTURES / "tma_multicast.ptx").read_text()


def expected_ids(grid, cluster, explicit=True) -> np.ndarray:
    """Per CTA (linear, x fastest) the 16 words `cluster_ids` writes."""
    rows = []
    for z in range(grid[2]):
        for y in range(grid[1]):
            for x in range(grid[0]):
                c = (x, y, z)
                local = [c[k] % cluster[k] for k in range(3)]
                rank = local[0] + cluster[0] * (local[1] + cluster[1] * local[2])
                rows.append([rank, int(np.prod(cluster)), *local, *cluster,
                             *(c[k] // cluster[k] for k in range(3)),
                             *(grid[k] // cluster[k] for k in range(3)), int(explicit), 7])
    return np.array(rows, dtype=np.uint32)


@pytest.mark.parametrize("grid, cluster", [((4, 2, 1), (2, 1, 1)), ((4, 2, 3), (1, 2, 1)),
                                           ((4, 4, 2), (2, 2, 2)), ((6, 1, 1), (3, 1, 1))])
def test_cluster_special_registers(grid, cluster):
    """%cluster_ctarank/_nctarank/_ctaid/_nctaid, %clusterid/%nclusterid and
    %is_explicit_cluster of every CTA, for clusters along x, y and all three dimensions."""
    n = int(np.prod(grid))
    out = np.zeros(16 * n, np.uint32)
    isa.run_kernel(DSMEM, "cluster_ids", grid, 32, [out], cluster=cluster)
    np.testing.assert_array_equal(out.reshape(n, 16), expected_ids(grid, cluster))


def test_launch_without_cluster_is_clusters_of_one():
    """Without a cluster shape each CTA is its own cluster, not an explicit one."""
    out = np.zeros(16 * 4, np.uint32)
    isa.run_kernel(DSMEM, "cluster_ids", (2, 2, 1), 32, [out])
    np.testing.assert_array_equal(out.reshape(4, 16),
                                  expected_ids((2, 2, 1), (1, 1, 1), explicit=False))


def test_dsmem_reads_the_partner_ctas_shared_memory():
    """nvcc's `cluster.map_shared_rank` (generic mapa.u64 + ld) between two cluster.sync()s
    reads the partner CTA's buffer: out = in[partner's element] * (partner rank + 1) + 2000."""
    inp = np.arange(1024, dtype=np.float32)
    out = np.zeros(1024, np.float32)
    isa.run_kernel(DSMEM, "dsmem_swap", (8, 1, 1), (128, 1, 1), [inp, out])
    g = np.arange(1024)
    cta, t = g // 128, g % 128
    partner = cta ^ 1
    want = inp[partner * 128 + t] * (partner % 2 + 1) + 2000
    np.testing.assert_array_equal(out, want.astype(np.float32))


def test_cluster_barrier_waits_for_the_other_cta():
    """Rank 1 reaches the barrier first (min-PC order) yet reads what rank 0 stored before
    arriving; getctarank of the mapped address is the partner's rank."""
    grid, ntid = 6, 64
    out = np.zeros(grid * 2 * ntid, np.uint32)
    isa.run_kernel(BARRIER, "cluster_barrier", grid, ntid, [out, 1])
    o = out.reshape(grid, 2, ntid)
    t = np.arange(ntid)
    for cta in range(grid):
        rank = cta % 2
        want = (1000 + t + 100 * (cta - 1)) if rank == 1 else np.zeros(ntid)
        np.testing.assert_array_equal(o[cta, 0], want)
        np.testing.assert_array_equal(o[cta, 1], np.full(ntid, rank ^ 1))


def test_cluster_ranges_run_whole_clusters_in_batches():
    """Batches and CTA ranges keep clusters whole: the same result with batches of one
    cluster, and a range that cuts a cluster is refused."""
    grid, ntid = 6, 64
    want = np.zeros(grid * 2 * ntid, np.uint32)
    isa.run_kernel(BARRIER, "cluster_barrier", grid, ntid, [want, 1])
    out = np.zeros_like(want)
    isa.run_kernel(BARRIER, "cluster_barrier", grid, ntid, [out, 1], max_batch_threads=64)
    np.testing.assert_array_equal(out, want)
    isa.run_kernel(BARRIER, "cluster_barrier", grid, ntid, [out, 1], cta_range=(2, 4))
    with pytest.raises(isa.LaunchError, match="cuts cluster"):
        isa.run_kernel(BARRIER, "cluster_barrier", grid, ntid, [out, 1], cta_range=(1, 4))


def test_clusters_along_y_share_a_batch():
    """A (1, 2, 1) cluster pairs CTAs a grid row apart: a range of whole rows pairs, one of
    half a row cuts every cluster it touches."""
    out = np.zeros(16 * 12, np.uint32)
    order = isa.cluster.cluster_order((3, 4, 1), (1, 2, 1), 0, 6)
    np.testing.assert_array_equal(order, [0, 3, 1, 4, 2, 5])
    isa.run_kernel(DSMEM, "cluster_ids", (3, 4, 1), 32, [out], cluster=(1, 2, 1),
                   cta_range=(0, 6), max_batch_threads=64)
    with pytest.raises(isa.LaunchError, match="cuts cluster 0"):
        isa.run_kernel(DSMEM, "cluster_ids", (3, 4, 1), 32, [out], cluster=(1, 2, 1),
                       cta_range=(0, 3))


@pytest.mark.parametrize("timing_only", [False, True])
def test_multicast_box_lands_in_every_cta_of_the_mask(timing_only):
    """Rank 0's multicast box reaches both CTAs (each completes its own mbarrier), and rank
    1's remote arrive completes rank 0's second mbarrier."""
    clusters, box = 3, (16, 64)
    a = np.arange(clusters * 16 * 64, dtype=np.uint16).reshape(clusters * 16, 64)
    tm = make_tensor_map(a, box, swizzle=128, arg=1)
    dump = np.zeros(clusters * 2 * 2048, np.uint8)
    seen = np.zeros(clusters * 2, np.uint32)
    args = [tm, a, dump, seen, 16, 2048, 0b11]
    isa.run_kernel(MULTICAST, "tma_multicast", clusters * 2, 64, args, timing_only=timing_only)
    if timing_only:
        return      # nothing is copied back in timing mode; it must finish, not deadlock
    np.testing.assert_array_equal(seen, np.tile([1, 0], clusters))
    tiles = dump.reshape(clusters * 2, 2048)
    for cta in range(clusters * 2):
        rows = a[(cta // 2) * 16:(cta // 2 + 1) * 16]
        raw = np.ascontiguousarray(rows).view(np.uint8).reshape(16, 8, 16)
        r = np.arange(16)[:, None]
        c = np.arange(8)[None, :]
        swz = np.empty_like(raw)
        swz[r, c ^ (r % 8)] = raw
        np.testing.assert_array_equal(tiles[cta], swz.reshape(-1))


@pytest.mark.parametrize("mask, words", [
    (1, "deadlock"),                          # rank 1's mbarrier never gets its bytes
    (5, "ctaMask 0x0005 .* cluster of 2"),    # rank 2 is outside the cluster
])
def test_bad_multicast_masks_are_clear_errors(mask, words):
    """A mask of rank 0 alone leaves rank 1 waiting (a clear deadlock); a rank outside the
    cluster faults, naming the mask."""
    a = np.zeros((32, 64), np.uint16)
    tm = make_tensor_map(a, (16, 64), swizzle=128, arg=1)
    args = [tm, a, np.zeros(2 * 2048, np.uint8), np.zeros(2, np.uint32), 16, 2048, mask]
    with pytest.raises(isa.PtxError, match=words):
        isa.run_kernel(MULTICAST, "tma_multicast", 2, 64, args)


def test_mapa_rank_outside_the_cluster_faults():
    """mapa to rank 2 or 3 of a 2-CTA cluster is a fault naming the rank."""
    out = np.zeros(2 * 2 * 32, np.uint32)
    with pytest.raises(isa.PtxError, match="rank [23] outside a cluster of 2") as e:
        isa.run_kernel(BARRIER, "cluster_barrier", 2, 32, [out, 3])
    assert "mapa" in str(e.value)


def test_cluster_wait_without_arrive_faults():
    bad = BARRIER.replace("SYNC:\n    barrier.cluster.arrive;\n", "SYNC:\n")
    with pytest.raises(isa.PtxError, match="wait without a barrier.cluster.arrive"):
        isa.run_kernel(bad, "cluster_barrier", 2, 32, [np.zeros(128, np.uint32), 1])


@pytest.mark.parametrize("grid, cluster, words", [
    ((3, 1, 1), None, "dimension x 3 is not a multiple of 2"),
    ((4, 1, 1), (4, 1, 1), r"requires cluster \(2, 1, 1\)"),
])
def test_bad_cluster_launches_are_clear_errors(grid, cluster, words):
    with pytest.raises(isa.LaunchError, match=words):
        isa.run_kernel(DSMEM, "dsmem_swap", grid, 128,
                       [np.zeros(512, np.float32), np.zeros(512, np.float32)], cluster=cluster)


def test_cluster_size_limits():
    """At most 16 CTAs per cluster; `.maxclusterrank` lowers the limit."""
    out = np.zeros(16 * 32, np.uint32)
    with pytest.raises(isa.LaunchError, match="32 CTAs; at most 16"):
        isa.run_kernel(DSMEM, "cluster_ids", 32, 32, [out], cluster=32)
    capped = DSMEM.replace(".visible .entry cluster_ids(\n\t.param .u64 cluster_ids_param_0\n)",
                           ".visible .entry cluster_ids(\n\t.param .u64 cluster_ids_param_0\n)"
                           "\n.maxclusterrank 4")
    assert capped != DSMEM
    with pytest.raises(isa.LaunchError, match=r"at most 4 are allowed \(.maxclusterrank\)"):
        isa.run_kernel(capped, "cluster_ids", 8, 32, [out], cluster=8)
