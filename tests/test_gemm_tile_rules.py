"""GEMM tile rules of `workloads.ops.gemm`: rule "fill" weighs tiles by the preset's rates."""

from __future__ import annotations

import pytest

import models
from isa.errors import InputError
from workloads.ops.gemm import TILE_RULES, TileRates, choose_tiles, tile_rates

H100 = models.load_preset("h100_sxm")


def _shape(choice: dict) -> tuple[int, int, int]:
    return choice["m_tile"], choice["n_tile"], choice["consumers"]


def test_tile_rates_read_the_preset():
    """Tensor FMAs per clock of the dtype, the lesser of all L2 slices together and the
    crossbar's read return per SM cycle, one crossbar port."""
    rates = tile_rates(H100, "fp8")
    assert rates.fma_per_clk == H100.units.tensor.fp8_fma_per_clk_per_sm
    slices = H100.l2.slices * H100.l2.slice_bandwidth_bytes_per_clk
    assert rates.l2_bytes_per_clk == min(slices, H100.noc.read_return_gbps / H100.chip.clock_ghz)
    assert rates.port_bytes_per_clk == H100.noc.port_bandwidth_bytes_per_clk
    unlimited = models.load_preset("h100_sxm", {"noc.read_return_gbps": 0.0})
    assert tile_rates(unlimited, "fp8").l2_bytes_per_clk == slices


def test_fill_spreads_a_few_tiles_over_more_sms():
    """M = 128, N = 4096 on 132 SMs: 128x128 tiles busy 32 SMs; per k-tile 64x128 (64 SMs)
    costs max(256 tensor cycles, 24 KiB / min(90 B/clk port, 4284 B/clk L2 / 64)) = 367
    cycles, less than 64x64's 16 KiB / (4284 / 128) = 490 and 128x128's 512 tensor cycles."""
    rates = tile_rates(H100, "bf16")
    assert _shape(choose_tiles(128, 4096, 8192, "bf16", 132, "waves")) == (128, 128, 2)
    fill = choose_tiles(128, 4096, 8192, "bf16", 132, "fill", rates=rates)
    assert _shape(fill) == (64, 128, 1) and not fill["persistent"]


def test_fill_keeps_large_tiles_when_the_grid_is_full():
    """Many tiles: the larger tile reads fewer bytes per FLOP, as "waves" picks it."""
    rates = tile_rates(H100, "bf16")
    big = choose_tiles(4096, 4096, 8192, "bf16", 132, "fill", rates=rates)
    assert _shape(big) == _shape(choose_tiles(4096, 4096, 8192, "bf16", 132, "waves"))
    assert big["persistent"] and big["stages"] * (big["m_tile"] + big["n_tile"]) * 128 <= 232448


def test_fill_follows_the_rates():
    """With an L2 far slower than the tensor cores, bytes decide: (m_tile + n_tile) x 128 B
    per k-tile over L2 / busy SMs is least for the fewest, largest tiles (128x256: 16 SMs,
    384 x 128 x 16 / 1000 = 786 cycles; 64x64: 128 SMs, 2097)."""
    slow_l2 = TileRates(fma_per_clk=2048.0, l2_bytes_per_clk=1000.0, port_bytes_per_clk=64.0)
    assert _shape(choose_tiles(128, 4096, 8192, "bf16", 132, "fill",
                               rates=slow_l2)) == (128, 256, 2)


def test_fill_small_m_uses_64_row_tiles_and_rules_are_listed():
    rates = tile_rates(H100, "fp8")
    assert choose_tiles(16, 4096, 4096, "fp8", 132, "fill", rates=rates)["m_tile"] == 64
    assert "fill" in TILE_RULES
    with pytest.raises(InputError, match="accepted n128, n256, waves, fill"):
        choose_tiles(16, 4096, 4096, "fp8", 132, "biggest")


def test_last_wave_fills_one_wave_with_narrow_tiles():
    """M = 16, N = 4096 on 132 SMs: 64x32 tiles make 128 CTAs, one wave, the fullest last
    wave (64x40 makes 103); "waves" keeps 64x128 (32 CTAs)."""
    for scaling, dtype in (("none", "bf16"), ("deepseek", "fp8")):
        choice = choose_tiles(16, 4096, 4096, dtype, 132, "last_wave", scaling=scaling)
        assert _shape(choice) == (64, 32, 1) and not choice["persistent"]
    assert choose_tiles(16, 4096, 4096, "fp8", 132, "waves")["n_tile"] == 128
    assert [choose_tiles(16, n, 64, "bf16", 132, "last_wave")["n_tile"]
            for n in (5, 8, 20)] == [8, 8, 16]        # no wider than N rounded up to 8


def test_last_wave_keeps_to_the_scale_blocks_with_deepseek_scaling():
    """N = 7168: 64x56 tiles give 128 CTAs; with 128-column weight scales the template takes
    divisors or multiples of 128 only, so 64x64 (112 CTAs; 64x32 would need two waves)."""
    assert choose_tiles(16, 7168, 4096, "bf16", 132, "last_wave")["n_tile"] == 56
    assert choose_tiles(16, 7168, 4096, "fp8", 132, "last_wave",
                        scaling="deepseek")["n_tile"] == 64


def test_last_wave_takes_the_wide_tile_on_full_grids():
    """4096x4096: 128x256 tiles, 512 CTAs in 4 waves (116 in the last); 128x248 would need
    5; the same tile as "waves"."""
    big = choose_tiles(4096, 4096, 8192, "bf16", 132, "last_wave")
    assert _shape(big) == (128, 256, 2) and big["persistent"]
    assert "last_wave" in TILE_RULES


def test_last_wave_pairs_clusters_the_operand_more_tiles_share():
    """Rule "last_wave_pairs": last_wave's tiles in persistent 2-CTA clusters multicasting A
    when the tile grid has at least as many n-blocks as m-blocks (M = 128, N = 4096: 128x32
    tiles, one m-block), else B (4096 x 4096: 32 m-blocks of 128, 16 n-blocks of 256)."""
    narrow = choose_tiles(128, 4096, 4096, "bf16", 132, "last_wave_pairs")
    plain = choose_tiles(128, 4096, 4096, "bf16", 132, "last_wave")
    assert _shape(narrow) == _shape(plain) and plain["multicast"] is None
    assert narrow["multicast"] == "a" and narrow["persistent"] and not plain["persistent"]
    assert choose_tiles(4096, 4096, 4096, "bf16", 132, "last_wave_pairs")["multicast"] == "b"


def test_grouped_gemms_run_without_clusters():
    """The grouped template has no cluster variant: rule last_wave_pairs falls back."""
    from workloads.ops import build_op
    plan = build_op("gemm", H100, m=128, n=4096, k=512, dtype="fp8", scaling="deepseek",
                    groups=8, rule="last_wave_pairs", shape_only=True)
    assert "_mc" not in plan.launches[0].entry
    assert "_mca" in build_op("gemm", H100, m=128, n=4096, k=512, rule="last_wave_pairs",
                              shape_only=True).launches[0].entry
