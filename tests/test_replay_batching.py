"""Batched runs of plain unit instructions (`models.sm`): same counts, cycles within the
golden tolerance of the one-event-per-instruction replay (identical under `gto`, as the
module docstring argues), deterministic."""

import numpy as np
import pytest

import isa
import models
from isa.launch import dim3
from models.cta_dispatch import estimate_registers, occupancy
from models.sm import ACTION_RUN, DEFAULT_QUANTUM_CYCLES, KernelImage
from models.units import UNIT_INDEX, event_timings, instruction_timings
from simulator.simulate import KernelLaunch, Replay
from tests.test_sm_timing import fma_kernel
from workloads.ops import build_op

EXACT_STATS = ("issued", "busy_cycles")


def _replay(ptx, entry, grid, block, args, config, shared_bytes=0, timing_only=False,
            regs=None, batch_runs=True):
    """(KernelResult, KernelImage) of one full-fidelity replay, batched or not."""
    program = isa.compile_kernel(ptx, entry)
    launch = KernelLaunch(program, entry, dim3(grid, "grid"), dim3(block, "block"), list(args),
                          shared_bytes, timing_only)
    occ = occupancy(config, launch.block_threads, regs or estimate_registers(program),
                    program.shared_bytes + shared_bytes)
    replay = Replay(config, None, None, DEFAULT_QUANTUM_CYCLES, occ, "run", entry,
                    batch_runs=batch_runs)
    recorder = launch.recorder()
    functional = launch.run(recorder)
    result = replay.result(replay.run(launch, recorder, functional.warp_instructions,
                                      functional.thread_instructions))
    timings, n_regs = instruction_timings(program, config)
    trace, timings = event_timings(recorder.finish(), timings, program, config)
    return result, KernelImage(trace, timings, n_regs, batch_runs)


def _gemm(batch_runs):
    config = models.load_preset("h800_sxm", {"sm.count": 4})
    launch = build_op("gemm", config, m=512, n=512, k=1024, dtype="fp8",
                      scaling="deepseek").launches[0]
    return _replay(launch.ptx, launch.entry, launch.grid, launch.block, launch.args, config,
                   launch.shared_bytes, launch.timing_only, launch.regs_per_thread, batch_runs)


def _exact_rows(stats):
    rows = stats[stats["stat"].isin(EXACT_STATS) | (stats["component"] == "kernel")
                 & stats["stat"].isin(("warp_instructions", "thread_instructions"))]
    return rows.set_index(["component", "stat"])["value"].sort_index()


def _assert_same_counts_and_close_cycles(batched, plain):
    assert batched.instructions == plain.instructions
    exact = _exact_rows(batched.stats)
    assert len(exact) > 4
    assert exact.equals(_exact_rows(plain.stats))
    assert abs(batched.cycles - plain.cycles) <= 0.02 * plain.cycles


@pytest.fixture(scope="module")
def gemm_runs():
    return _gemm(True), _gemm(False)


def test_fp8_gemm_promotion_fmas_are_batched(gemm_runs):
    """The DeepSeek-scaled FP8 GEMM's FP32 promotion FMAs form long runs; unbatched has none."""
    (_, batched), (_, plain) = gemm_runs
    fp32_runs = [op[6][0] for op in batched.ops
                 if op[3] == ACTION_RUN and op[0] == UNIT_INDEX["fp32"]]
    assert batched.runs > 0 and max(fp32_runs) >= 32
    assert plain.runs == 0 and all(op[3] != ACTION_RUN for op in plain.ops)


def test_fp8_gemm_batched_keeps_counts_and_cycles_within_2_percent(gemm_runs):
    """Instruction, issue and busy counts exact; cycles within +-2 % of the unbatched replay
    (and, under gto, the same cycles and stall cycles)."""
    (batched, _), (plain, _) = gemm_runs
    _assert_same_counts_and_close_cycles(batched, plain)
    assert batched.cycles == plain.cycles
    assert batched.stats.equals(plain.stats)


def test_fp8_gemm_batched_replay_is_deterministic(gemm_runs):
    """Two batched replays give the same stats, bit for bit."""
    (batched, _), _ = gemm_runs
    again, _ = _gemm(True)
    assert again.cycles == batched.cycles
    assert again.stats.equals(batched.stats)


@pytest.mark.parametrize("chains", [1, 8])
def test_independent_fmas_batch_dependent_ones_do_not(chains):
    """Runs never hold an instruction that reads a register written earlier in the run: a
    single FMA chain gives no FP32 run, 8 interleaved chains give runs of at most 8; many
    warps per scheduler keep counts exact and cycles within 2 %."""
    config = models.load_preset("h100_sxm")
    out = np.zeros(2048, dtype=np.float32)
    ptx = fma_kernel(64, chains)
    batched, image = _replay(ptx, "chain", 2, 1024, [out], config)
    plain, _ = _replay(ptx, "chain", 2, 1024, [out], config, batch_runs=False)
    fp32_runs = [op[6][0] for op in image.ops
                 if op[3] == ACTION_RUN and op[0] == UNIT_INDEX["fp32"]]
    if chains == 1:
        assert fp32_runs == []
    else:
        assert fp32_runs and max(fp32_runs) == chains
    _assert_same_counts_and_close_cycles(batched, plain)
