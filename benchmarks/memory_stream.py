"""Speed of the memory hierarchy: CPU time per simulated line and achieved HBM bandwidth.

Run: `python -m benchmarks.memory_stream [REQUESTS_PER_SM]`. Every SM of the h100_sxm preset
streams distinct 512-byte reads (4 lines) through L1, crossbar, L2 and HBM; prints CPU
seconds, microseconds per line, simulated events, and the bandwidth reached against the HBM
peak. Asserts nothing.
"""

from __future__ import annotations

import sys
import time

import models
from models.memory_system import build_memory_system
from simulator.engine import SimEnvironment
from simulator.ports import Port, ReadReq, line_addresses

REQUEST_BYTES = 512


def main(requests_per_sm: int = 100) -> None:
    config = models.load_preset("h100_sxm")
    env = SimEnvironment()
    memory = build_memory_system(env, config)
    sms = config.sm.count
    for sm in range(sms):
        memory.connect_sm(sm, Port(env, f"sm{sm}.inbox", requests_per_sm + 1))

    def stream(sm: int):
        for n in range(requests_per_sm):
            address = (n * sms + sm) * REQUEST_BYTES
            yield memory.l1s[sm].core_side.put(
                ReadReq(address, REQUEST_BYTES, line_addresses(address, REQUEST_BYTES, 128),
                        source=memory.sm_source(sm), req_id=n))

    for sm in range(sms):
        env.process(stream(sm))
    warm = SimEnvironment()  # compile the numba kernels outside the timed run
    build_memory_system(warm, config, sm_count=1).l1s[0].tags.lookup(line_addresses(0, 1, 128))
    start = time.process_time()
    env.run()
    cpu = time.process_time() - start
    lines = sms * requests_per_sm * REQUEST_BYTES // 128
    tbps = sms * requests_per_sm * REQUEST_BYTES / env.now
    print(f"{lines} lines in {cpu:.2f} s CPU: {cpu / lines * 1e6:.1f} us per line, "
          f"{env.now / 1e6:.2f} us simulated")
    print(f"achieved {tbps:.3f} TB/s of {config.hbm_peak_tbps:.3f} TB/s peak "
          f"({tbps / config.hbm_peak_tbps:.1%})")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
