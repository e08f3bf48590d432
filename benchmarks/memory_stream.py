"""Speed of the memory models: CPU time per simulated request and achieved HBM bandwidth.

Run: `python -m benchmarks.memory_stream [REQUESTS_PER_SM] [MODEL ...]` (models: the names of
`simulator.runner.system.MEMORY_MODELS`, default all). Every SM of the h100_sxm preset streams
distinct 512-byte loads (16 sectors, 4 lines) issued at time 0 through the model's
`access()`, as the SMs' load/store units call it; prints CPU seconds, microseconds per request,
the simulated time, and the bandwidth reached against the HBM peak. Asserts nothing.
"""

from __future__ import annotations

import sys
import time

import numpy as np

import models
from simulator.runner.system import MEMORY_MODELS

REQUEST_SECTORS = 16
SECTOR_BYTES = 32


def stream(name: str, requests_per_sm: int) -> None:
    """Time one stream through memory model `name` and print its figures."""
    config = models.load_preset("h100_sxm")
    sms = config.sm.count
    warm = MEMORY_MODELS[name](config, sms, 0)  # compile the numba kernels outside the timing
    warm.access(0, "load", np.arange(REQUEST_SECTORS, dtype=np.int64), 0)
    memory = MEMORY_MODELS[name](config, sms, 0)
    requests = [(r % sms, np.arange(r * REQUEST_SECTORS, (r + 1) * REQUEST_SECTORS,
                                    dtype=np.int64)) for r in range(requests_per_sm * sms)]
    start = time.process_time()
    done_ps = max(memory.access(sm, "load", sectors, 0) for sm, sectors in requests)
    cpu = time.process_time() - start
    total_bytes = len(requests) * REQUEST_SECTORS * SECTOR_BYTES
    tbps = total_bytes / done_ps
    print(f"{name}: {len(requests)} requests in {cpu:.2f} s CPU: "
          f"{cpu / len(requests) * 1e6:.1f} us per request, {done_ps / 1e6:.2f} us simulated; "
          f"{tbps:.3f} TB/s of {config.hbm_peak_tbps:.3f} TB/s peak "
          f"({tbps / config.hbm_peak_tbps:.1%})")


def main(requests_per_sm: int = 100, *names: str) -> None:
    for name in names or tuple(MEMORY_MODELS):
        stream(name, requests_per_sm)


if __name__ == "__main__":
    main(*(int(a) if a.isdigit() else a for a in sys.argv[1:]))
