"""The L2 panel-footprint model behind sampled GEMM HBM bytes (byte weights where tile rounds
are cut); sampled vs full bytes on simulated launches: tests/test_gemm_sampling.py."""

from __future__ import annotations

import pytest

from workloads.ops.gemm_sampling import Footprint, panel_bytes, sample_points


def test_panel_bytes_reads_each_panel_once_when_the_cache_holds_them():
    """3 x 2 tiles, panels of 10 (A) and 100 (B) bytes: 3 A + 2 B panels once."""
    assert panel_bytes(6, 3, 10, 100, 1e9) == 3 * 10 + 2 * 100
    assert panel_bytes(4, 3, 10, 100, 1e9) == 3 * 10 + 2 * 100
    assert panel_bytes(2, 3, 10, 100, 1e9) == 2 * 10 + 100


def test_panel_bytes_rereads_what_the_cache_evicted():
    """A cache of one B panel and two A panels re-reads the A panels on the second column."""
    assert panel_bytes(6, 3, 10, 100, 120) == 6 * 10 + 2 * 100


def test_byte_weights_reproduce_the_footprint_model_exactly():
    """Simulated bytes that follow the model at each sample extrapolate to the model's
    bytes of the whole grid, while time keeps its bilinear weights."""
    tiles, ctas, k_tiles, stages = 42, 4, 40, 4
    footprint = Footprint(tiles_m=7, a_block_bytes=3.0, b_block_bytes=5.0, l2_bytes=2000.0)
    points, _ = sample_points(tiles, ctas, k_tiles, stages, True, footprint)
    plain, _ = sample_points(tiles, ctas, k_tiles, stages, True)
    assert [p.weight for p in points] == [p.weight for p in plain]

    def model(limit: int, kt: float) -> float:
        return panel_bytes(limit, 7, 3.0 * kt, 5.0 * kt, 2000.0) + 11.0

    got = sum(p.byte_weight * model(p.tile_limit, p.k_tiles or k_tiles) for p in points)
    assert got == pytest.approx(model(tiles, k_tiles), rel=1e-9)
    linear = sum(p.weight * model(p.tile_limit, p.k_tiles or k_tiles) for p in points)
    assert abs(linear / model(tiles, k_tiles) - 1) > 0.1, "the case must need byte weights"




def test_c_blocks_larger_than_the_cache_are_written_back_and_small_ones_stay():
    """A C that fits stays in the cache (no HBM bytes); 100 tiles of 10-byte C blocks
    through a 100-byte cache write back all but what the cache can hold."""
    assert panel_bytes(6, 3, 10, 100, 1e9, c_block=50) == 3 * 10 + 2 * 100
    reads = panel_bytes(100, 10, 1, 1, 1e9)
    moved = panel_bytes(100, 10, 1, 1, 100, c_block=10)
    assert moved == reads + 100 * 10 - 100
