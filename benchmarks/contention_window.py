"""What the contention measurement costs, and how far a shorter window moves its stretch
factors, on the pairs of the default run (one GPU of the DeepSeek-V3 EP32 prefill
deployment, `ptxsim run`).

    python -m benchmarks.contention_window [--windows 0 25 50 100] [--no-whole]
        [--pairs mb0/moe_sum:mb1/combine ...]

Runs the layer once (op cache off) and keeps the (compute launch, collective launch) pairs
its contention pass measured; with `--pairs` (compute node:collective node of the graph, as
the run's contention table names them) it builds those pairs' launches from the graph
instead (`representative_launch` of each node's op, as the run does) and runs no layer.
Then, per pair, measures them again:

* `whole`: each launch alone to its end and both together to the last one's end, the
  stretch taken as 1 + (time beside - time alone) / the shorter of the two beside (the
  measurement before windows; `--no-whole` skips it, it is the slow one);
* `window W`: `simulator.runner.contention.measure_pair` with
  `fidelity.contention_window_us = W` (0: until the first launch ends), each alone compared
  at the progress it made beside.

Prints per pair and method the compute and collective stretch factors and the CPU seconds
(`time.process_time`); the layer time of the run and the CPU seconds of its contention pass.
Units: CPU seconds, microseconds, factors.
"""

from __future__ import annotations

import argparse
import time

import models
import workloads.execute as execute
from simulator.runner.concurrent import simulate_concurrent
from simulator.runner.contention import PairEffect, _l2_misses, measure_pair
from simulator.runner.launch_time import front_end_us
from workloads.deployments import load_deployment


def whole(compute_launch, comm_launch, config) -> PairEffect:
    """Both launches to their ends, alone and together."""
    alone_c = simulate_concurrent([compute_launch], config).kernels[compute_launch.name]
    alone_m = simulate_concurrent([comm_launch], config).kernels[comm_launch.name]
    both = simulate_concurrent([compute_launch, comm_launch], config).kernels
    c, m = both[compute_launch.name], both[comm_launch.name]
    front = front_end_us(config)
    return PairEffect("", "", alone_c.kernel_time_us - front, c.kernel_time_us - front,
                      alone_m.kernel_time_us - front, m.kernel_time_us - front,
                      _l2_misses(alone_c), _l2_misses(c))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--windows", type=float, nargs="+", default=[0.0, 25.0, 50.0, 100.0])
    p.add_argument("--no-whole", action="store_true")
    p.add_argument("--run-window", type=float, default=0.0,
                   help="fidelity.contention_window_us of the layer run (default 0)")
    p.add_argument("--pairs", nargs="+", default=None, metavar="COMPUTE:COMM",
                   help="measure these node pairs only (no layer run)")
    a = p.parse_args(argv)

    deployment = load_deployment("deepseek-v3-prefill")
    graph = deployment.graph()
    config = models.load_preset(deployment.preset,
                                {"sm.comm_count": deployment.comm_sms,
                                 "fidelity.contention_window_us": a.run_window})
    if a.pairs:
        pairs = named_pairs(graph, config, a.pairs)
        return measure(pairs, a)
    pairs = []
    inner = execute.measure_pair

    def recording(compute_launch, comm_launch, cfg, compute_op="", comm_op="", **kw):
        begin = time.process_time()
        effect = inner(compute_launch, comm_launch, cfg, compute_op, comm_op, **kw)
        pairs.append((compute_op, comm_op, compute_launch, comm_launch, cfg,
                      time.process_time() - begin, effect))
        return effect

    execute.measure_pair = recording
    begin = time.process_time()
    res = execute.simulate_workload(graph, config=config, fidelity="sampled")
    total = time.process_time() - begin
    execute.measure_pair = inner
    spent = sum(p[5] for p in pairs)
    print(f"layer {res.time_us:.1f} us, {total:.1f} s CPU, of it {spent:.1f} s measuring "
          f"{len(pairs)} pairs (window {config.fidelity.contention_window_us} us)")
    return measure(pairs, a)


def named_pairs(graph, config, names: list[str]) -> list[tuple]:
    """(compute op, comm op, compute launch, comm launch, config, 0, None) of each
    "compute node:comm node", built as `workloads.execute` builds a pair's launches."""
    from simulator.runner.contention import representative_launch
    from workloads.ops import build_op

    config, meta = execute._comm_setup(config, graph, None, None)
    op_of = {node.name: op for node, op in zip(graph.nodes, execute._ops(graph, meta),
                                               strict=True)}
    pairs = []
    for name in names:
        c, m = (op_of[n] for n in name.split(":"))
        pairs.append((c.kind, m.kind,
                      representative_launch(build_op(c.kind, config, **c.kwargs)),
                      representative_launch(build_op(m.kind, config, **m.kwargs)),
                      config, 0.0, None))
    return pairs


def measure(pairs: list[tuple], a) -> int:
    """Each pair again by every method of `a` (module docstring), printed."""
    print(f"{'pair':<28} {'method':<10} {'compute x':>10} {'comm x':>8} {'overlap us':>11} "
          f"{'CPU s':>7}")
    for compute_op, comm_op, c, m, cfg, _, _ in pairs:
        label = f"{compute_op} + {comm_op}"
        rows = []
        if not a.no_whole:
            begin = time.process_time()
            rows.append(("whole", whole(c, m, cfg), time.process_time() - begin))
        for w in a.windows:
            begin = time.process_time()
            rows.append((f"window {w:g}", measure_pair(c, m, cfg, window_us=w),
                         time.process_time() - begin))
        for method, e, cpu in rows:
            print(f"{label:<28} {method:<10} {e.compute_stretch:>10.4f} {e.comm_stretch:>8.4f} "
                  f"{e.overlap_us:>11.1f} {cpu:>7.1f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
