"""Shared pieces of the hardware harness: versions, SM clock sampling, event timing, output.

Every table the harness writes is a CSV plus a sidecar `<name>.meta.json` that states the
GPU, driver, CUDA, PyTorch and CuPy versions, the clocks seen while the table was measured
(NVML samples every 10 ms), the date and the method. Needs an NVIDIA GPU; imported only by
the harness scripts, never by the simulator or its tests.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import statistics
import subprocess
import threading
import time
from pathlib import Path

FLUSH_BYTES = 256 << 20  # L2 flush: a 256 MiB buffer written before each timed launch (L2 50 MB)


def _run(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unavailable ({exc.__class__.__name__})"


def environment() -> dict:
    """GPU, driver, toolkit and framework versions as the harness sees them."""
    env = {"date_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
    query = "name,driver_version,clocks.max.sm,clocks.max.mem,power.limit,memory.total"
    env["nvidia_smi"] = _run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"])
    nvcc = _run(["nvcc", "--version"]).splitlines()
    env["nvcc"] = nvcc[-1] if nvcc else "unavailable"
    try:
        import cupy

        env["cupy"] = cupy.__version__
        env["cuda_runtime"] = cupy.cuda.runtime.runtimeGetVersion()
        env["cuda_driver_api"] = cupy.cuda.runtime.driverGetVersion()
        props = cupy.cuda.runtime.getDeviceProperties(0)
        env["gpu"] = props["name"].decode()
        env["sm_count"] = props["multiProcessorCount"]
        env["l2_bytes"] = props["l2CacheSize"]
    except ImportError:
        env["cupy"] = "not installed"
    try:
        import torch

        env["torch"] = torch.__version__
        env["torch_cuda"] = torch.version.cuda
        env["cudnn"] = torch.backends.cudnn.version()
    except ImportError:
        env["torch"] = "not installed"
    return env


class ClockSampler:
    """Samples the SM and memory clocks (MHz) through NVML on a thread while running.

    `window()` returns a context whose `.stats` after exit holds median/min/max of the SM
    clock and the median memory clock over the samples taken inside it (at least one:
    one is taken on entry and exit).
    """

    def __init__(self, period_s: float = 0.01):
        import pynvml

        self._nvml = pynvml
        pynvml.nvmlInit()
        self._handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        self._period_s = period_s
        self._samples: list[tuple[float, int, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.max_sm_mhz = pynvml.nvmlDeviceGetMaxClockInfo(self._handle, pynvml.NVML_CLOCK_SM)
        self.max_mem_mhz = pynvml.nvmlDeviceGetMaxClockInfo(self._handle, pynvml.NVML_CLOCK_MEM)

    def sample(self) -> tuple[float, int, int]:
        n = self._nvml
        s = (time.monotonic(), n.nvmlDeviceGetClockInfo(self._handle, n.NVML_CLOCK_SM),
             n.nvmlDeviceGetClockInfo(self._handle, n.NVML_CLOCK_MEM))
        self._samples.append(s)
        return s

    def _loop(self):
        while not self._stop.is_set():
            self.sample()
            time.sleep(self._period_s)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def window(self) -> _Window:
        return _Window(self)

    def stats_between(self, t0: float, t1: float) -> dict:
        inside = [s for s in list(self._samples) if t0 <= s[0] <= t1]
        sm = [s[1] for s in inside] or [0]
        mem = [s[2] for s in inside] or [0]
        return {"sm_clock_mhz_median": statistics.median(sm), "sm_clock_mhz_min": min(sm),
                "sm_clock_mhz_max": max(sm), "mem_clock_mhz_median": statistics.median(mem)}

    def all_stats(self) -> dict:
        return self.stats_between(0.0, float("inf"))


class _Window:
    def __init__(self, sampler: ClockSampler):
        self._sampler = sampler
        self.stats: dict = {}

    def __enter__(self):
        self._t0 = self._sampler.sample()[0]
        return self

    def __exit__(self, *exc):
        t1 = self._sampler.sample()[0]
        self.stats = self._sampler.stats_between(self._t0, t1)


SPIN_SOURCE = r"""
extern "C" __global__ void spin(long long cycles) {
    long long t0 = clock64();
    while (clock64() - t0 < cycles) { }
}
"""


def gpu_spin(cycles: int = 40_000):
    """A callable that launches one thread spinning `cycles` SM cycles (about 20 us): run
    before a timed launch, it lets the host queue the launch while the GPU is busy, so the
    events time the kernel and not the host's launch latency; it touches no memory."""
    import cupy
    import numpy as np

    kernel = cupy.RawKernel(SPIN_SOURCE, "spin")
    return lambda: kernel((1,), (1,), (np.int64(cycles),))


def summarize_ms(times_ms: list[float]) -> dict:
    """median/min/max of per-launch times, in microseconds."""
    return {"median_us": round(1e3 * statistics.median(times_ms), 3),
            "min_us": round(1e3 * min(times_ms), 3), "max_us": round(1e3 * max(times_ms), 3)}


def time_cupy(launch, warmup: int, reps: int, flush=None) -> list[float]:
    """Per-launch milliseconds from CUDA events around each of `reps` launches of `launch`
    (after `warmup` untimed ones); `flush()` (if given: an L2 flush or `gpu_spin`) runs
    before each, outside the events."""
    import cupy

    for _ in range(warmup):
        if flush:
            flush()
        launch()
    events = []
    for _ in range(reps):
        if flush:
            flush()
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        launch()
        end.record()
        events.append((start, end))
    events[-1][1].synchronize()
    return [cupy.cuda.get_elapsed_time(a, b) for a, b in events]


def time_torch(fn, warmup: int, reps: int, flush=None) -> list[float]:
    """As `time_cupy` for PyTorch work on the current stream (torch.cuda.Event)."""
    import torch

    for _ in range(warmup):
        if flush:
            flush()
        fn()
    events = []
    for _ in range(reps):
        if flush:
            flush()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        events.append((start, end))
    torch.cuda.synchronize()
    return [a.elapsed_time(b) for a, b in events]


def reps_for(estimate_ms: float, budget_ms: float = 60.0, low: int = 5, high: int = 50) -> int:
    """Repeats that fit `budget_ms` at `estimate_ms` per launch, within [low, high]."""
    return int(max(low, min(high, budget_ms / max(estimate_ms, 1e-3))))


class Table:
    """Rows appended one at a time and rewritten to `<out>/<name>.csv` after each, so a
    stage cut off by its time limit still leaves what it measured; `close()` writes the
    sidecar `<name>.meta.json`."""

    def __init__(self, out: Path, name: str, method: str, env: dict, sampler: ClockSampler):
        self.path = Path(out) / f"{name}.csv"
        self.meta_path = Path(out) / f"{name}.meta.json"
        self.method, self.env, self.sampler = method, env, sampler
        self.rows: list[dict] = []
        self.t0 = time.monotonic()
        self.failures: list[str] = []
        self._write_meta()

    def add(self, row: dict) -> None:
        self.rows.append(row)
        columns: list[str] = []
        for r in self.rows:
            columns += [c for c in r if c not in columns]
        with self.path.open("w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=columns, lineterminator="\n")
            writer.writeheader()
            writer.writerows(self.rows)
        print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)

    def fail(self, what: str, exc: BaseException) -> None:
        text = f"{what}: {exc.__class__.__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        self.failures.append(text[:300])
        print("FAILED", text, flush=True)
        self._write_meta()

    def _write_meta(self) -> None:
        meta = dict(self.env)
        meta["table"] = self.path.name
        meta["method"] = self.method
        meta["clocks_seen"] = self.sampler.stats_between(self.t0, float("inf"))
        meta["clocks_max"] = {"sm_mhz": self.sampler.max_sm_mhz,
                              "mem_mhz": self.sampler.max_mem_mhz}
        meta["failures"] = self.failures
        meta["rows"] = len(self.rows)
        self.meta_path.write_text(json.dumps(meta, indent=1) + "\n")

    def close(self) -> None:
        self._write_meta()
