"""Microbenchmark kernels (`*.cu` with their committed nvcc PTX) for validating the timing model.

Each kernel isolates one part of the chip so that a difference of two simulated launches gives
one figure (see `workloads.microbench`, which runs them):

* `pointer_chase.cu` — `pointer_chase`: one thread follows a chain of absolute addresses (one
  dependent `ld.global.u64` per hop), after an optional warm-up stream by the whole CTA;
  `pointer_chase_cycle`: the same chase after the whole CTA loaded the chain's lines in
  chase order (a warm lap of a cyclic chase);
* `stream.cu` — `stream_copy`, `stream_read`, `stream_write`: coalesced 16-byte-per-thread
  streams for memory bandwidth;
* `shared_bandwidth.cu` — `shared_bandwidth`: volatile 32-bit shared loads at a word stride
  (1: conflict free, 32: a 32-way bank conflict);
* `compute_throughput.cu` — `fma_throughput` (FP32 FMA), `sfu_throughput` (`ex2.approx`),
  `pack_throughput` (`cvt.rn.bf16x2.f32`, F2FP), `int_mix_throughput` (IMAD and LOP3
  chains, half each);
* `mma_throughput.cu` — `mma_throughput`: `mma.sync.m16n8k16` bf16 with 8 accumulators;
* `l2_policy.cu` — `hot_stream_evict_first`, `hot_stream_plain`: laps of a hot-buffer read
  (`ld.global.cg`) and a stream read with or without an L2 evict_first cache policy
  (`tests/test_cache_policy.py`).

`KERNEL_FILES` maps each entry to its file; `load_ptx(entry)` reads the PTX.
`../regenerate_ptx.sh` rebuilds the PTX from the header command of each `.cu`.
"""

from __future__ import annotations

from pathlib import Path

KERNEL_DIR = Path(__file__).resolve().parent

KERNEL_FILES = {
    "pointer_chase": "pointer_chase.cu",
    "pointer_chase_cycle": "pointer_chase.cu",
    "stream_copy": "stream.cu",
    "stream_read": "stream.cu",
    "stream_write": "stream.cu",
    "shared_bandwidth": "shared_bandwidth.cu",
    "fma_throughput": "compute_throughput.cu",
    "sfu_throughput": "compute_throughput.cu",
    "pack_throughput": "compute_throughput.cu",
    "int_mix_throughput": "compute_throughput.cu",
    "mma_throughput": "mma_throughput.cu",
    "hot_stream_evict_first": "l2_policy.cu",
    "hot_stream_plain": "l2_policy.cu",
}


def load_ptx(entry: str) -> str:
    """The committed PTX holding kernel `entry` (a key of `KERNEL_FILES`)."""
    if entry not in KERNEL_FILES:
        raise KeyError(f"unknown microbenchmark kernel {entry!r}; known: {sorted(KERNEL_FILES)}")
    return (KERNEL_DIR / KERNEL_FILES[entry]).with_suffix(".ptx").read_text()
