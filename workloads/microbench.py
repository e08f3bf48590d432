"""Microbenchmarks run on the simulator, and the validation table built from them.

What it measures
----------------
Every figure is a *difference of two simulated launches* that differ only in the amount of
work, so launch ramp-up, the first cold misses, the epilogue stores and the drain cancel
(the functional interpreter's `%clock` is a step count, so nothing is timed inside a kernel):

* latency (cycles) = (cycles(h2) - cycles(h1)) / (h2 - h1) for pointer chases of h1 and h2
  hops by one thread (`pointer_chase`, one dependent `ld.global.u64` per hop, no address
  arithmetic). The chain decides the level:
  - L1: 128 lines at a 128-byte stride (16 KiB), visited cyclically; both runs make at least
    one full lap first, so the extra hops are all repeats of resident lines;
  - L2 near: the CTA first streams over a 1 MiB footprint, then the chase visits distinct
    random lines of its first half (out of any L1 of <= 512 KiB by then, still in L2); the
    published near figure is measured below ~21 MB;
  - L2 far: every line of a footprint of 3/4 of the L2 (37.5 MiB = 39.3 MB on a 50 MiB L2,
    the middle of the 28-51 MB range the published far figure comes from) in one random
    cyclic order, as the published chase cycles over its whole footprint. The kernel
    (`pointer_chase_cycle`) first has the CTA load every line in that order (a warm lap:
    each line's last use before the chase follows the chase order), so both chase lengths
    run on the steady state of the cyclic chase. Such a footprint cannot stay near: the SM's
    partition would need room for its near-homed lines and copies of the far-homed ones
    (1.5x its half of the L2), so they thrash and a hop costs the far latency (far-homed
    lines, held by the other half) or an HBM read (near-homed lines evicted from their
    home); the figure is their average. The warm lap's reads of the 4-byte order array (1/32
    of the footprint) pass through the L2 too;
  - HBM: distinct random lines of a 64 MiB region that nothing touched before (first touch).
* bandwidth (GB/s) = (bytes(2w) - bytes(w)) / (time(2w) - time(w)) for streaming launches of
  w and 2w waves (w = 2; a wave = CTAs resident at once on all compute SMs: 1056 CTAs of
  256 threads, 4.125 MiB per direction, on an H100), one 16-byte element per thread. Copy
  counts read + written bytes; read (a count-if over all-ones data that never fires its
  atomic) the bytes read; write the bytes written. Published stream figures use buffers far
  larger than the L2, so written lines leave a write-back L2 while the stream runs; our
  streams are a few MiB, so they run with the L2 cut to `STREAM_L2_SETS_PER_SLICE` sets per
  slice (1.56 MiB on an H100; nothing else changes) to be in that regime.
* throughput per SM per clock = (ops(n2) - ops(n1)) / ((cycles(n2) - cycles(n1)) * SMs used),
  iteration counts n1 < n2 with n1 already past the start-up transient, 2 CTAs of 8 warps.

`validation_table(preset)` runs them all (about 30 s for an H100) and compares each figure with
its published value (`EXPECTED`, each citing a row of hopper_params.csv or the CUDA
programming guide). Left out: TLB effects, clock boosting, power limits. Units: SM cycles,
GB/s (1e9 B/s), results per clock per SM, bytes per clock per SM.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import ml_dtypes
import numpy as np
import pandas as pd

import isa
import models
from models.cta_dispatch import estimate_registers, occupancy
from simulator.runner.simulate import simulate_kernel
from simulator.runner.system import build_system
from workloads.kernels.microbench import load_ptx

LINE_BYTES = 128
WORD_BYTES = 8
MIB = 1 << 20
CHASE_BLOCK = 1024
STREAM_BLOCK = 256
STREAM_WAVES = 2
STREAM_L2_SETS_PER_SLICE = 8
UNIT_GRID, UNIT_BLOCK = 2, 256
CHAINS, FMA_UNROLL, SFU_UNROLL, SHARED_UNROLL, PACK_UNROLL, INT_UNROLL = 8, 32, 8, 16, 16, 16
MMA_FMAS = 16 * 8 * 16


@dataclass(frozen=True, slots=True)
class ChasePlan:
    """One pointer-chase latency measurement: the footprint and how the chain walks it."""

    footprint_bytes: int
    hops: tuple[int, int]
    warm: str
    """"none": nothing touched the footprint; "stream": the CTA streamed it in address order
    and the chase visits distinct random lines of its first half; "lap": the chase visits
    every line in one random cyclic order and the CTA loaded them all in that order first."""
    cyclic_lines: int = 0
    """> 0 (warm "none" only): visit lines 0..cyclic_lines-1 in order, cyclically."""


@dataclass(frozen=True, slots=True)
class Differential:
    """Two simulated launches: work (hops, bytes, ops) and cycles/time of each."""

    work: tuple[float, float]
    cycles: tuple[int, int]
    time_us: tuple[float, float]
    sms_used: int

    @property
    def cycles_per_work(self) -> float:
        return (self.cycles[1] - self.cycles[0]) / (self.work[1] - self.work[0])

    @property
    def work_per_us(self) -> float:
        return (self.work[1] - self.work[0]) / (self.time_us[1] - self.time_us[0])

    @property
    def work_per_cycle_per_sm(self) -> float:
        return (self.work[1] - self.work[0]) / ((self.cycles[1] - self.cycles[0]) * self.sms_used)


def _sms_used(result) -> int:
    stats = result.stats
    row = stats[(stats.component == "kernel") & (stats.stat == "sms_used")]
    return int(row.value.iloc[0])


def _simulate(config, entry: str, grid, block, args: list, memory=None):
    extra = {} if memory is None else {"memory": memory}
    return simulate_kernel(load_ptx(entry), entry, grid, block, args, config=config,
                                     **extra)


def _differential(config, entry, grid, block, make_args, counts, work_of,
                  memory=None) -> Differential:
    """Simulate `entry` at the two `counts`; `make_args(count)` and `work_of(count)`."""
    results = [_simulate(config, entry, grid(c) if callable(grid) else grid, block,
                         make_args(c), memory) for c in counts]
    return Differential(tuple(float(work_of(c)) for c in counts),
                        tuple(r.cycles for r in results), tuple(r.time_us for r in results),
                        _sms_used(results[1]))


# -- pointer chase ---------------------------------------------------------------------------

def chase_plans(config) -> dict[str, ChasePlan]:
    """The four latency measurements for `config` (footprints as in the module docstring)."""
    far_bytes = config.l2.size_bytes * 3 // 4 // LINE_BYTES * LINE_BYTES
    return {
        "l1": ChasePlan(128 * LINE_BYTES, (512, 2048), warm="none", cyclic_lines=128),
        "l2_near": ChasePlan(1 * MIB, (512, 2048), warm="stream"),
        "l2_far": ChasePlan(far_bytes, (512, 2048), warm="lap"),
        "hbm": ChasePlan(64 * MIB, (256, 1024), warm="none"),
    }


def chase_base_address(n_words: int, block: int = CHASE_BLOCK) -> int:
    """Device address the interpreter gives a chain of `n_words` (asks the kernel itself)."""
    chain = np.zeros(n_words, np.uint64)
    out = np.zeros(2 + block, np.uint64)
    isa.run_kernel(load_ptx("pointer_chase"), "pointer_chase", 1, block, [chain, 0, 0, out])
    return int(out[1])


def build_chain(base: int, n_words: int, visit_words: np.ndarray) -> np.ndarray:
    """Chain array (absolute addresses) visiting `visit_words` in order, cyclically.

    `visit_words[0]` must be 0: the kernel starts at element 0.
    """
    visit = np.asarray(visit_words, dtype=np.uint64)
    if visit.size == 0 or visit[0] != 0:
        raise ValueError("visit_words must start at word 0 (the chase starts at chain[0])")
    chain = np.zeros(n_words, np.uint64)
    chain[visit] = np.uint64(base) + np.uint64(WORD_BYTES) * np.roll(visit, -1)
    return chain


def chase_visit_words(plan: ChasePlan, rng: np.random.Generator) -> np.ndarray:
    """Word indices the chase visits (one word per line, line-aligned)."""
    words_per_line = LINE_BYTES // WORD_BYTES
    if plan.cyclic_lines:
        return np.arange(plan.cyclic_lines, dtype=np.int64) * words_per_line
    lines = plan.footprint_bytes // LINE_BYTES
    if plan.warm == "lap":
        return np.concatenate(([0], 1 + rng.permutation(lines - 1))) * words_per_line
    pool = lines // 2 if plan.warm == "stream" else lines
    count = max(plan.hops) + 1
    if count > pool:
        raise ValueError(f"{count} distinct lines requested from a pool of {pool}")
    picked = 1 + rng.choice(pool - 1, size=count - 1, replace=False)
    return np.concatenate(([0], picked)).astype(np.int64) * words_per_line


def chase_latency(config, plan: ChasePlan, seed: int = 0, memory=None) -> Differential:
    """Simulated cycles per hop of `plan` on `config` (work = hops)."""
    if plan.warm not in ("none", "stream", "lap"):
        raise ValueError(f"ChasePlan.warm {plan.warm!r}: expected 'none', 'stream' or 'lap'")
    n_words = plan.footprint_bytes // WORD_BYTES
    block = 1 if plan.warm == "none" else CHASE_BLOCK
    base = chase_base_address(n_words, block)
    visit = chase_visit_words(plan, np.random.default_rng(seed))
    chain = build_chain(base, n_words, visit)
    if plan.warm == "lap":
        order = visit.astype(np.uint32)
        return _differential(
            config, "pointer_chase_cycle", 1, block,
            lambda hops: [chain, order, order.size, hops, np.zeros(2 + block, np.uint64)],
            plan.hops, lambda hops: hops, memory)
    warm_pairs = n_words // 2 if plan.warm == "stream" else 0
    return _differential(
        config, "pointer_chase", 1, block,
        lambda hops: [chain, warm_pairs, hops, np.zeros(2 + block, np.uint64)],
        plan.hops, lambda hops: hops, memory)


# -- streams ---------------------------------------------------------------------------------

STREAM_BYTES_PER_ELEMENT = {"stream_copy": 32, "stream_read": 16, "stream_write": 16}


def wave_ctas(config, entry: str, block: int) -> int:
    """CTAs of `entry` resident at once on all compute SMs of `config` (one wave)."""
    program = isa.compile_kernel(load_ptx(entry), entry)
    occ = occupancy(config, block, estimate_registers(program), program.shared_bytes)
    return occ.ctas_per_sm * (config.sm.count - config.sm.comm_count)


def _stream_args(entry: str, n: int) -> list:
    if entry == "stream_copy":
        return [np.ones((n, 4), np.float32), np.zeros((n, 4), np.float32), n]
    if entry == "stream_read":
        return [np.ones((n, 4), np.float32), np.float32(0.0), np.zeros(1, np.uint32), n]
    return [np.zeros((n, 4), np.float32), np.float32(1.0), n]


def stream_config(preset: str, overrides: dict | None = None):
    """`preset` with its L2 cut to `STREAM_L2_SETS_PER_SLICE` sets per slice (see above)."""
    l2 = models.load_preset(preset, overrides).l2
    size = STREAM_L2_SETS_PER_SLICE * l2.slices * l2.line_bytes * l2.associativity
    return models.load_preset(preset, {**(overrides or {}), "l2.size_bytes": size})


def stream_bandwidth(config, entry: str, waves: int = STREAM_WAVES,
                     memory=None) -> Differential:
    """Launches of `waves` and 2 x `waves` waves of `entry` (work = bytes moved)."""
    wave = wave_ctas(config, entry, STREAM_BLOCK)
    per_element = STREAM_BYTES_PER_ELEMENT[entry]
    return _differential(
        config, entry, lambda w: w * wave, STREAM_BLOCK,
        lambda w: _stream_args(entry, w * wave * STREAM_BLOCK), (waves, 2 * waves),
        lambda w: w * wave * STREAM_BLOCK * per_element, memory)


# -- per-SM throughput -----------------------------------------------------------------------

def _threads() -> int:
    return UNIT_GRID * UNIT_BLOCK


def _chain_throughput(config, entry: str, unroll: int, ns: tuple[int, int],
                      memory=None) -> Differential:
    """A `compute_throughput.cu` kernel (CHAINS chains a thread, `unroll` steps of each an
    iteration) at iteration counts `ns`; work = the steps."""
    return _differential(
        config, entry, UNIT_GRID, UNIT_BLOCK,
        lambda n: [np.zeros(_threads() * CHAINS, np.float32), n], ns,
        lambda n: _threads() * CHAINS * unroll * n, memory)


def fma_throughput(config, memory=None) -> Differential:
    """FP32 FMA results per clock per SM (work = FMAs)."""
    return _chain_throughput(config, "fma_throughput", FMA_UNROLL, (8, 24), memory)


def sfu_throughput(config, memory=None) -> Differential:
    """ex2.approx results per clock per SM (work = ex2 results)."""
    return _chain_throughput(config, "sfu_throughput", SFU_UNROLL, (4, 12), memory)


def pack_throughput(config, memory=None) -> Differential:
    """`cvt.rn.bf16x2.f32` (F2FP.BF16.F32.PACK_AB) per clock per SM (work = conversions);
    no published rate: the device harness measures it (`benchmarks/hardware/microbench.py`)."""
    return _chain_throughput(config, "pack_throughput", PACK_UNROLL, (2, 6), memory)


def int_mix_throughput(config, memory=None) -> Differential:
    """Integer results per clock per SM of interleaved `mad.lo.u32` (IMAD, the FMA pipe) and
    `lop3.b32` (LOP3, the ALU) chains, half each (work = both); twice one pipe's rate when
    the two pipes are apart (`sm.int_pipe_model` "alu_fma"). No published figure: the
    device harness measures it (`benchmarks/hardware/microbench.py`)."""
    return _chain_throughput(config, "int_mix_throughput", INT_UNROLL, (2, 6), memory)


def mma_throughput(config, memory=None) -> Differential:
    """mma.sync m16n8k16 bf16 FMAs per clock per SM (work = FMAs)."""
    a = np.ones((16, 16), ml_dtypes.bfloat16)
    bt = np.ones((8, 16), ml_dtypes.bfloat16)
    warps = _threads() // 32
    return _differential(
        config, "mma_throughput", UNIT_GRID, UNIT_BLOCK,
        lambda n: [a, bt, np.zeros(warps * CHAINS * 128, np.float32), n], (32, 96),
        lambda n: warps * CHAINS * MMA_FMAS * n, memory)


def shared_bandwidth(config, stride_words: int, memory=None) -> Differential:
    """Shared-memory bytes loaded per clock per SM at `stride_words` (work = bytes)."""
    counts = (32, 96) if stride_words == 1 else (8, 24)
    warps = _threads() // 32
    return _differential(
        config, "shared_bandwidth", UNIT_GRID, UNIT_BLOCK,
        lambda n: [np.zeros(_threads(), np.uint32), stride_words, n], counts,
        lambda n: warps * SHARED_UNROLL * n * 32 * 4, memory)


# -- published values and the table -----------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Expected:
    """A published figure (a range where the source gives one) and where it comes from."""

    metric: str
    low: float
    high: float
    unit: str
    source: str

    @property
    def value(self) -> float:
        """The figure compared against: the midpoint of the published range."""
        return (self.low + self.high) / 2


CSV = "hopper_params.csv"
_GIB_PER_GB = 2**30 / 1e9
_HOPPER = {
    "l1_latency": Expected(
        "L1 hit latency (16 KiB chase)", 32.0, 32.5, "cycles",
        f'{CSV} H800_PCIe "L1 hit latency (random p-chase, 2-215 KB)" = 32.0-32.5 '
        "(GH100 SM: cycles carry over to the SXM parts)"),
    "l2_near_latency": Expected(
        "L2 hit latency, near (1 MiB footprint)", 264.5, 264.5, "cycles",
        f'{CSV} H800_PCIe "L2 near-partition hit latency (0.35-21.6 MB)" = 264.5'),
    "l2_far_latency": Expected(
        "L2 hit latency, far (3/4-L2 cyclic chase)", 463.0, 499.0, "cycles",
        f'{CSV} H800_PCIe "L2 far-partition hit latency (28-51 MB)" = 463-499'),
    "hbm_latency": Expected(
        "HBM latency (first touch)", 648.0, 657.0, "cycles",
        f'{CSV} H800_PCIe "HBM latency (190 MB-2.7 GB)" = 648-657'),
    "hbm_copy_bandwidth": Expected(
        "HBM copy bandwidth (read + write)", 0.85 * 3350, 0.93 * 3350, "GB/s",
        f'85-93 % of {CSV} H100_SXM "HBM bandwidth (spec)" = 3.35 TB/s (achieved band; '
        f'cf. H800_SXM "Achieved HBM bandwidth, memory-bound MLA decode (FlashMLA)" = 3000)'),
    "hbm_read_bandwidth": Expected(
        "HBM read bandwidth", 2561 * _GIB_PER_GB, 2561 * _GIB_PER_GB, "GB/s",
        f'{CSV} H100_SXM "HBM read / write bandwidth (tool report)" = 2561 GiB/s '
        "(LOW-CONFIDENCE source; no tolerance)"),
    "hbm_write_bandwidth": Expected(
        "HBM write bandwidth", 2806 * _GIB_PER_GB, 2806 * _GIB_PER_GB, "GB/s",
        f'{CSV} H100_SXM "HBM read / write bandwidth (tool report)" = 2806 GiB/s '
        "(LOW-CONFIDENCE source; no tolerance)"),
    "fp32_fma_rate": Expected(
        "FP32 FMA rate", 128, 128, "results/clk/SM",
        f'{CSV} H100_SXM "FP32 add/mul/fma results per clk per SM" = 128 (CUDA guide table)'),
    "sfu_ex2_rate": Expected(
        "SFU ex2.approx rate", 16, 16, "results/clk/SM",
        f'{CSV} H100_SXM "SFU rcp/rsqrt/log2/exp2/sin/cos results per clk per SM" = 16 '
        "(ESTIMATE there: CC 8.0 cell, CC 9.0 cell not read)"),
    "mma_bf16_rate": Expected(
        "mma.sync m16n8k16 bf16 rate", 2048, 2048, "FMA/clk/SM",
        f'{CSV} H100_SXM "Dense tensor MACs per clk per SM (FP16/BF16)" = 2048'),
    "shared_bandwidth": Expected(
        "shared-memory bandwidth, stride 1", 128, 128, "B/clk/SM",
        f'{CSV} H100_SXM "Shared-memory bandwidth (peak, 32 banks x 4 B)" = 128'),
    "shared_conflict_slowdown": Expected(
        "shared-memory slowdown, stride 32 words", 32, 32, "x",
        f'derived: {CSV} H100_SXM "Shared memory banks" = 32 x 4 B; 32 lanes on one bank '
        "are 32 wavefronts (CUDA guide, shared memory banks)"),
}
_A100_RRZE = f'{CSV} A100_80GB "RRZE p-chase @1410 MHz: L1 / L2 near / L2 far / HBM"'
_A100 = {
    "l1_latency": Expected("L1 hit latency (16 KiB chase)", 33.0, 33.0, "cycles",
                           f"{_A100_RRZE} = 33.0"),
    "l2_near_latency": Expected("L2 hit latency, near (1 MiB footprint)", 205.5, 205.5,
                                "cycles", f"{_A100_RRZE} = 205.5"),
    "l2_far_latency": Expected("L2 hit latency, far (3/4-L2 cyclic chase)", 391.0, 412.0,
                               "cycles", f"{_A100_RRZE} = 391-412"),
    "hbm_latency": Expected("HBM latency (first touch)", 550.0, 552.0, "cycles",
                            f"{_A100_RRZE} = 550-552"),
    "hbm_copy_bandwidth": Expected(
        "HBM copy bandwidth (read + write)", 0.85 * 1555, 0.93 * 1555, "GB/s",
        f'85-93 % of {CSV} A100_SXM "HBM bandwidth (spec, 40GB / 80GB)" = 1555 GB/s '
        "(the preset's 40 GB part)"),
    "fp32_fma_rate": Expected(
        "FP32 FMA rate", 64, 64, "results/clk/SM",
        f'{CSV} A100_SXM "FP32 add/mul/fma results per clk per SM" = 64 (CUDA guide table)'),
    "sfu_ex2_rate": Expected(
        "SFU ex2.approx rate", 16, 16, "results/clk/SM",
        f'{CSV} A100_SXM "SFU rcp/rsqrt/log2/exp2/sin/cos results per clk per SM" = 16'),
    "mma_bf16_rate": Expected(
        "mma.sync m16n8k16 bf16 rate", 1024, 1024, "FMA/clk/SM",
        f'{CSV} A100_SXM "Dense tensor MACs per clk per SM (FP16/BF16)" = 1024'),
    "shared_bandwidth": Expected(
        "shared-memory bandwidth, stride 1", 128, 128, "B/clk/SM",
        f'{CSV} A100_SXM "Shared-memory bandwidth measured (L24/L25)" = 128.0'),
    "shared_conflict_slowdown": Expected(
        "shared-memory slowdown, stride 32 words", 32, 32, "x",
        f'derived: {CSV} A100_SXM "Shared memory banks" = 32 x 4 B; 32 lanes on one bank '
        "are 32 wavefronts (CUDA guide, shared memory banks)"),
}
EXPECTED: dict[str, dict[str, Expected]] = {
    "h100_sxm": _HOPPER, "h800_sxm": _HOPPER, "a100_sxm": _A100,
}
"""Published value of every validation row, per preset (H800 SXM: the same GH100 figures)."""

TABLE_COLUMNS = ["metric", "expected", "simulated", "deviation_pct", "unit", "source"]


def _measurements(preset: str, overrides: dict | None, memory) -> dict[str, object]:
    """Row key -> function of nothing giving the simulated figure on `preset`."""
    config = models.load_preset(preset, overrides)
    plans = chase_plans(config)

    def latency(level: str) -> float:
        return chase_latency(config, plans[level], memory=memory).cycles_per_work

    def stream_gbps(entry: str) -> float:
        stream = stream_config(preset, overrides)
        return stream_bandwidth(stream, entry, memory=memory).work_per_us * 1e-3

    @functools.cache
    def per_sm(measure, *args) -> float:
        return measure(config, *args, memory=memory).work_per_cycle_per_sm

    return {
        "l1_latency": lambda: latency("l1"),
        "l2_near_latency": lambda: latency("l2_near"),
        "l2_far_latency": lambda: latency("l2_far"),
        "hbm_latency": lambda: latency("hbm"),
        "hbm_copy_bandwidth": lambda: stream_gbps("stream_copy"),
        "hbm_read_bandwidth": lambda: stream_gbps("stream_read"),
        "hbm_write_bandwidth": lambda: stream_gbps("stream_write"),
        "fp32_fma_rate": lambda: per_sm(fma_throughput),
        "sfu_ex2_rate": lambda: per_sm(sfu_throughput),
        "mma_bf16_rate": lambda: per_sm(mma_throughput),
        "shared_bandwidth": lambda: per_sm(shared_bandwidth, 1),
        "shared_conflict_slowdown":
            lambda: per_sm(shared_bandwidth, 1) / per_sm(shared_bandwidth, 32),
    }


def memory_model_name(config, memory=None) -> str:
    """Class name of the memory system `simulator.simulate_kernel` builds for `config`
    (`memory` as passed to it; None: its default)."""
    args = () if memory is None else (memory,)
    return type(build_system(config, *args).memory).__name__


def validation_table(preset: str = "h100_sxm", rows: list[str] | None = None,
                     overrides: dict | None = None, memory=None) -> pd.DataFrame:
    """Simulated microbenchmark figures of `preset` against their published values.

    Indexed by row key (`EXPECTED[preset]` keys, or the given subset `rows`); columns
    `TABLE_COLUMNS`. deviation_pct = 100 * (simulated / expected - 1), expected being the
    midpoint of a published range. `memory` goes to `simulator.simulate_kernel` (None: its
    default memory model).
    """
    if preset not in EXPECTED:
        raise KeyError(f"no published values for preset {preset!r}; known: {sorted(EXPECTED)}")
    expected = EXPECTED[preset]
    keys = list(expected) if rows is None else rows
    measure = _measurements(preset, overrides, memory)
    records = []
    for key in keys:
        ref = expected[key]
        simulated = float(measure[key]())
        records.append((ref.metric, ref.value, simulated, 100 * (simulated / ref.value - 1),
                        ref.unit, ref.source))
    return pd.DataFrame.from_records(records, columns=TABLE_COLUMNS,
                                     index=pd.Index(keys, name="row"))
