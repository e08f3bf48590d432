"""The `MemoryInterface` contract, checked against every memory model `build_system` can select.

Contract (`models.flat_memory`): `access(sm_id, kind, sectors, now_ps) -> done_ps` returns the
completion time of one warp request in whole ps, no earlier than the issue time, without
changing functional results; the model fires its hooks and keeps no counters. Each rule below
runs on every entry of `simulator.runner.system.MEMORY_MODELS` and compares with figures computed
from the preset (`FIGURES`): the latency a cold and a repeated load cost on an idle chip, the
level a repeated load hits, and the levels whose bytes the production tracers count.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pytest

import models
import simulator
from models.address_map import build_address_map
from models.cached_memory import CachedMemoryTracer
from models.hbm import hbm_fixed_latency_ps
from models.sm_tracer import MemoryTracer
from simulator.framework.engine import Clock, make_rng
from simulator.framework.hooks import Hooks
from simulator.framework.stats import StatSheet
from simulator.runner.system import MEMORY_MODELS
from workloads.kernels.case import load_ptx
from workloads.kernels.catalog import KERNELS

SECTOR = 32
LINE = 128
IDLE_PS = 10**9
"""Time between probes: far beyond any earlier completion, so each probe finds the chip idle."""
KINDS = ("load", "store", "atomic", "bulk_load", "load_cg")
CONFIG = models.load_preset("h100_sxm")
CLOCK = Clock(CONFIG.chip.clock_ghz)


@dataclass(frozen=True)
class Figures:
    """What the preset says a model does, for the contract's closed forms.

    `cold_load_ps`: the (lowest, highest) unloaded latency of a load of a line nobody touched;
    `repeat_load_ps`: the unloaded latency of the same SM loading that line again;
    `levels`: the tracer components (`memory.<level>.load`) that move a cold load's bytes,
    top down; `hit_level`: the one that serves the repeated load (None: no level moves bytes);
    `has_hbm`: whether HBM bandwidth bounds a stream.
    """

    cold_load_ps: tuple[int, int]
    repeat_load_ps: int
    levels: tuple[str, ...]
    hit_level: str | None
    has_hbm: bool


def _cycles_ps(cycles: int) -> int:
    return CLOCK.cycles_to_ps(cycles)


def _cached_cold_load_ps() -> tuple[int, int]:
    """Near SM, closed bank: L2 near + HBM channel share + tRCD; the far SM adds far - near;
    a bank holding another row adds tRP, a refresh window at most tRFC."""
    l2, hbm = CONFIG.l2, CONFIG.hbm
    near = (_cycles_ps(l2.near_hit_latency_cycles) + hbm_fixed_latency_ps(CONFIG, CLOCK)
            + round(hbm.row_activate_ns * 1000))
    far = near + _cycles_ps(l2.far_hit_latency_cycles - l2.near_hit_latency_cycles)
    return near, far + round((hbm.row_precharge_ns + hbm.refresh_ns) * 1000)


FIGURES = {
    "cached": Figures(_cached_cold_load_ps(), _cycles_ps(CONFIG.l1.hit_latency_cycles),
                      ("memory.l1.load", "memory.l2.load", "memory.hbm.load"),
                      "memory.l1.load", True),
    "flat": Figures((_cycles_ps(CONFIG.hbm.latency_cycles),) * 2,
                    _cycles_ps(CONFIG.l2.near_hit_latency_cycles),
                    ("memory.l2.load", "memory.hbm.load"), "memory.l2.load", True),
    "ideal": Figures((_cycles_ps(CONFIG.l1.hit_latency_cycles),) * 2,
                     _cycles_ps(CONFIG.l1.hit_latency_cycles), (), None, False),
}
NAMES = sorted(MEMORY_MODELS)
ROUNDING_PS = 2
"""Whole-ps rounding of the per-level latencies that a model adds up."""


def _memory(name: str):
    return MEMORY_MODELS[name](CONFIG, CONFIG.sm.count, 0)


def _line_sectors(address: int) -> np.ndarray:
    return np.arange(address // SECTOR, (address + LINE) // SECTOR, dtype=np.int64)


@functools.cache
def _independent_lines(count: int) -> tuple[int, ...]:
    """Line addresses with pairwise distinct L2 slices and HBM channels."""
    amap = build_address_map(CONFIG)
    candidates = np.arange(1, 100_000, dtype=np.int64) * LINE
    slices, channels = amap.l2_slice(candidates), amap.hbm_channel(candidates)
    picked, seen_slices, seen_channels = [], set(), set()
    for address, s, c in zip(candidates.tolist(), slices.tolist(), channels.tolist(),
                             strict=True):
        if s not in seen_slices and c not in seen_channels:
            picked.append(address)
            seen_slices.add(s)
            seen_channels.add(c)
            if len(picked) == count:
                return tuple(picked)
    raise AssertionError(f"fewer than {count} lines with distinct slices and channels")


def _traced(memory) -> tuple[StatSheet, CachedMemoryTracer]:
    """The tracers `simulate_kernel` attaches to the memory's hooks."""
    sheet = StatSheet()
    cache_tracer = CachedMemoryTracer(sheet)
    MemoryTracer(sheet).attach(memory.hooks)
    cache_tracer.attach(memory.hooks)
    return sheet, cache_tracer


def _bytes_by_component(sheet: StatSheet, tracer: CachedMemoryTracer) -> dict[str, float]:
    tracer.flush()
    frame = sheet.to_frame("contract", "probe")
    rows = frame[frame["stat"] == "bytes"]
    return dict(zip(rows["component"], rows["value"], strict=True))


def _random_calls(seed: int, count: int = 400) -> list[tuple[int, str, np.ndarray, int]]:
    """Mixed kinds from random SMs, 1-8 distinct sectors each, issue times non-decreasing."""
    rng = make_rng(seed)
    calls, now = [], 0
    for _ in range(count):
        now += int(rng.integers(0, 2_000))
        sectors = np.unique(rng.integers(0, 1 << 16, int(rng.integers(1, 9)))).astype(np.int64)
        calls.append((int(rng.integers(0, CONFIG.sm.count)), KINDS[int(rng.integers(0, 5))],
                      sectors, now))
    return calls


def test_every_selectable_memory_model_has_contract_figures():
    """Each name `build_system` accepts has its preset figures here, so each is checked."""
    assert set(FIGURES) == set(MEMORY_MODELS)


@pytest.mark.parametrize("name", NAMES)
def test_build_system_assembles_a_memory_honouring_the_interface_by_name(name):
    """build_system(memory=name) holds an object with access() and its own Hooks."""
    memory = simulator.build_system(CONFIG, memory=name).memory
    assert callable(memory.access)
    assert isinstance(memory.hooks, Hooks)


@pytest.mark.parametrize("name", NAMES)
def test_every_access_completes_in_whole_ps_no_earlier_than_the_l1_hit_latency(name):
    """Loads, stores, atomics and bulk loads all finish >= issue + l1.hit_latency_cycles."""
    memory = _memory(name)
    floor_ps = _cycles_ps(CONFIG.l1.hit_latency_cycles) - ROUNDING_PS
    for sm, kind, sectors, now in _random_calls(seed=3):
        done = memory.access(sm, kind, sectors, now)
        assert isinstance(done, int | np.integer)
        assert done - now >= floor_ps, (kind, sectors.tolist(), now, done)


@pytest.mark.parametrize("name", NAMES)
def test_unloaded_cold_load_costs_the_preset_latency_of_the_level_that_holds_it(name):
    """A first load of a line on an idle chip costs the model's cold figure from the preset
    (cached: L2 + HBM share + row open, near to far; flat: hbm.latency; ideal: l1.hit)."""
    low, high = FIGURES[name].cold_load_ps
    memory = _memory(name)
    for i, address in enumerate(_independent_lines(8), start=1):
        now = i * IDLE_PS
        measured = memory.access(i, "load", _line_sectors(address), now) - now
        assert low - ROUNDING_PS <= measured <= high + ROUNDING_PS, (address, measured)


@pytest.mark.parametrize("name", NAMES)
def test_second_read_of_a_line_hits_at_the_models_hit_level_latency(name):
    """The same SM loading a line again on an idle chip costs the hit level's latency
    (cached: l1.hit, flat: l2.near_hit, ideal: l1.hit), never more than the cold load."""
    memory = _memory(name)
    sectors = _line_sectors(_independent_lines(1)[0])
    cold = memory.access(5, "load", sectors, IDLE_PS) - IDLE_PS
    repeat = memory.access(5, "load", sectors, 2 * IDLE_PS) - 2 * IDLE_PS
    assert abs(repeat - FIGURES[name].repeat_load_ps) <= ROUNDING_PS
    assert repeat <= cold


@pytest.mark.parametrize("name", NAMES)
def test_cold_loads_move_exactly_the_requested_bytes_at_every_level(name):
    """Loads of distinct untouched lines: each level the model has counts the requested bytes
    (cached: L1, L2, HBM; flat: L2, HBM), no other level moves any; the first level counts
    every requested sector."""
    memory = _memory(name)
    sheet, tracer = _traced(memory)
    lines = _independent_lines(16)
    for i, address in enumerate(lines):
        memory.access(i % 4, "load", _line_sectors(address), i * 1_000)
    requested_bytes = len(lines) * LINE
    moved = _bytes_by_component(sheet, tracer)
    levels = FIGURES[name].levels
    assert {c: moved.get(c, 0) for c in levels} == dict.fromkeys(levels, requested_bytes)
    assert all(value == 0 for c, value in moved.items() if c not in levels)
    first = levels[0] if levels else "memory.l2.load"  # ideal: counted where flat counts
    assert sheet.value(first, "sectors") == requested_bytes // SECTOR


@pytest.mark.parametrize("name", NAMES)
def test_reading_the_lines_again_moves_bytes_only_at_the_hit_level(name):
    """A second pass of the same SMs over the same lines adds the requested bytes at the
    hit level and nothing below it (cached: L1; flat: L2; ideal: nowhere)."""
    memory = _memory(name)
    sheet, tracer = _traced(memory)
    lines = _independent_lines(16)
    for now in (0, IDLE_PS):
        for i, address in enumerate(lines):
            memory.access(i % 4, "load", _line_sectors(address), now + i * 1_000)
    moved = _bytes_by_component(sheet, tracer)
    requested_bytes = len(lines) * LINE
    expected = dict.fromkeys(FIGURES[name].levels, requested_bytes)
    if FIGURES[name].hit_level is not None:
        expected[FIGURES[name].hit_level] += requested_bytes
    assert {c: v for c, v in moved.items() if v} == expected


@pytest.mark.parametrize("name", NAMES)
def test_independent_requests_complete_at_the_same_times_in_any_call_order(name):
    """Loads issued at one instant by different SMs to lines of distinct L2 slices and HBM
    channels finish at the same times whatever order the calls come in."""
    lines = _independent_lines(16)
    rng = make_rng(17)
    results = []
    for order in (np.arange(len(lines)), *(rng.permutation(len(lines)) for _ in range(3))):
        memory = _memory(name)
        done = {int(i): memory.access(3 * int(i), "load", _line_sectors(lines[i]), IDLE_PS)
                for i in order}
        results.append(dict(sorted(done.items())))
    assert all(result == results[0] for result in results)


@pytest.mark.parametrize("name", NAMES)
def test_same_calls_give_the_same_times_with_or_without_tracers(name):
    """Two fresh memories fed the same calls return identical times, and attaching the
    production tracers to one of them changes none (observing never changes timing)."""
    calls = _random_calls(seed=8)
    quiet, other, traced = _memory(name), _memory(name), _memory(name)
    _traced(traced)
    times = [[memory.access(*call) for call in calls] for memory in (quiet, other, traced)]
    assert times[0] == times[1] == times[2]


@pytest.mark.parametrize("name", [n for n in NAMES if FIGURES[n].has_hbm])
def test_cold_stream_takes_at_least_its_bytes_over_the_hbm_peak(name):
    """8 MiB of distinct lines loaded at once by every SM finish no earlier than size over
    hbm.peak_bandwidth_gbps (less 0.5 %: pipes hold whole femtoseconds per byte)."""
    memory = _memory(name)
    size, chunk = 8 << 20, 16
    done = max(memory.access(r % CONFIG.sm.count, "load",
                             np.arange(r * chunk, (r + 1) * chunk, dtype=np.int64), 0)
               for r in range(size // (chunk * SECTOR)))
    floor_ps = size / (CONFIG.hbm.peak_bandwidth_gbps * 1e9) * 1e12
    print(f"{name}: stream of {size} B: floor {floor_ps:.0f} ps, measured {done} ps, "
          f"{done / floor_ps - 1:+.2%}")
    assert done >= floor_ps * 0.995


def test_ideal_memory_has_no_bandwidth_limit():
    """The same 8 MiB stream on the ideal memory finishes exactly l1.hit_latency after issue."""
    memory = _memory("ideal")
    done = max(memory.access(r % CONFIG.sm.count, "load",
                             np.arange(r * 16, (r + 1) * 16, dtype=np.int64), 0)
               for r in range((8 << 20) // (16 * SECTOR)))
    assert done == _cycles_ps(CONFIG.l1.hit_latency_cycles)


@functools.cache
def _saxpy(name: str) -> tuple[int, np.ndarray]:
    spec = KERNELS["saxpy"]
    case = spec.build(np.random.default_rng(0), **spec.variants[0])
    result = simulator.simulate_kernel(load_ptx(case.file), case.entry, case.grid, case.block,
                                       case.args, shared_bytes=case.shared_bytes, memory=name)
    (index,) = case.outputs
    return result.cycles, np.array(case.args[index])


@pytest.mark.parametrize("name", NAMES)
def test_kernel_outputs_do_not_depend_on_the_memory_model(name):
    """saxpy writes the same output array whichever memory times it."""
    assert np.array_equal(_saxpy(name)[1], _saxpy("cached")[1])


@pytest.mark.parametrize("name", [n for n in NAMES if n != "ideal"])
def test_ideal_memory_runs_a_memory_bound_kernel_fastest(name):
    """saxpy takes fewer cycles on the ideal memory than on any real model."""
    assert _saxpy("ideal")[0] < _saxpy(name)[0]
