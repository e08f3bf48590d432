"""The runner: assembles a system from `models`, runs kernels on it, and carries out the
fidelity plan (sampling, chip and row slices, trace/work/loop synthesis, replay, contention).

It imports `isa`, `models` and `simulator.framework`, never `workloads` or the app layer.
"""

from simulator.runner.simulate import KernelResult, simulate_kernel
from simulator.runner.system import System, build_system
from simulator.runner.trace import TraceRecorder, WarpTrace

__all__ = ["KernelResult", "System", "TraceRecorder", "WarpTrace", "build_system",
           "simulate_kernel"]
