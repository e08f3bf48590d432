"""CPU and wall seconds of `simulate_workload` on a layer (default: the one-GPU DeepSeek-V3
MoE prefill of 4096 tokens on h800_sxm, sampled, as `ptxsim run --deployment single-gpu`;
`--deployment NAME` runs a deployment's graph on its preset with its communication SMs, as
`ptxsim run --deployment NAME --no-cache`), and of each distinct op.

    python benchmarks/workload_speed.py [--workload deepseek-v3 --phase prefill
        --tokens 4096 --ep 1 --model h800_sxm --fidelity sampled] [--per-op | --stages]
    python benchmarks/workload_speed.py --deployment deepseek-v3-prefill --stages

Prints the CPU seconds of the process (`time.process_time`: the goal's measure, as the
wall clock of a shared machine includes waiting for a core) and the wall seconds of the
whole simulation beside the goal (sampled <= 25 s on one core once compiled, the default
`ptxsim run`'s) and the simulated layer time (with `--stages` also the CPU seconds of each
stage of the run, `STAGES`, timed without a profiler, and the CPU seconds of every op timed
and every contention pair measured in that run, largest first); with `--per-op` instead the
CPU seconds and simulated time of every distinct op (each simulated once, as
`simulate_workload` does, whose cost is their sum), largest first, so the nodes that
dominate the run time are named, with how each was timed (in full, wave-sampled with the
waves simulated, or by op-level samples). The numba JIT of the memory model is warmed up
first (a tiny op) so it is not counted.
Units: CPU and wall seconds, simulated microseconds.
"""

from __future__ import annotations

import argparse
import time

GOAL_S = {"sampled": 25.0}
"""CPU seconds a layer's simulation may take on one core, once compiled, per fidelity."""


def _warm_up(config) -> None:
    from workloads.ops import build_op, simulate_op

    simulate_op(build_op("residual-add", config, rows=8, cols=64), config, "full")


def per_op(graph, config, fidelity: str) -> list[tuple[float, str, dict, float]]:
    """(CPU s, op kind, keywords, simulated us) per distinct op of `graph`, built as
    `simulate_workload` builds them (its communication SMs and nodes)."""
    from workloads.execute import _comm_setup
    from workloads.node_ops import LINK, node_op
    from workloads.ops import build_op, simulate_op

    config, meta = _comm_setup(config, graph, None, None)
    seen, rows = set(), []
    for node in graph.nodes:
        op = node_op(node, meta)
        if op.kind == LINK or op.key in seen:
            continue
        seen.add(op.key)
        start = time.process_time()
        res = simulate_op(build_op(op.kind, config, **op.kwargs), config, fidelity)
        rows.append((time.process_time() - start, op.kind, op.kwargs, res["time_us"],
                     timed_as(res)))
        print(f"  ... {rows[-1][0]:7.1f} s  {node.name}  ({rows[-1][4]})", flush=True)
    return sorted(rows, key=lambda r: -r[0])


def timed_as(res: dict) -> str:
    """How an op's launches were timed: "full" / "sampled" with the waves simulated (of a
    launch the wave sampler ran), or "op samples" (reduced launches of op-level sampling)."""
    kernels = res["kernel"] if isinstance(res["kernel"], list) else [res["kernel"]]
    parts = []
    for k in kernels:
        if "sampled_from" in k:
            parts.append(f"op samples x{k['sampled_from']}")
        else:
            parts.append(f"{k['fidelity']} {k['waves_simulated']:.1f} waves")
    return ", ".join(parts)


def main(argv: list[str] | None = None) -> int:
    import models
    import simulator
    import workloads

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workload", default="deepseek-v3")
    p.add_argument("--phase", default="prefill")
    p.add_argument("--tokens", type=int, default=None)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--ep", type=int, default=1)
    p.add_argument("--model", default="h800_sxm")
    p.add_argument("--fidelity", default="sampled", choices=("sampled", "full"))
    p.add_argument("--deployment", default=None,
                   help="a deployment (workloads/deployments) instead of --workload ...: its "
                        "graph, preset and communication SMs")
    p.add_argument("--per-op", action="store_true", help="also time each distinct op")
    p.add_argument("--stages", action="store_true",
                   help="also print the CPU seconds of each stage (`STAGES`)")
    a = p.parse_args(argv)
    if a.deployment:
        from workloads.deployments import load_deployment

        deployment = load_deployment(a.deployment)
        a.model = deployment.preset
        config = models.load_preset(a.model, {"sm.comm_count": deployment.comm_sms})
        graph = deployment.graph()
    else:
        config = models.load_preset(a.model)
        graph = workloads.layer(a.workload, phase=a.phase, tokens=a.tokens, batch=a.batch,
                                ep=a.ep)
    _warm_up(config)
    if a.per_op:
        rows = per_op(graph, config, a.fidelity)
        cpu = sum(r[0] for r in rows)
        print(f"{graph.name} on {a.model}, {len(graph)} nodes, {len(rows)} distinct ops, "
              f"fidelity {a.fidelity}: {cpu:.1f} s CPU summed over the ops")
        for op_cpu, kind, kwargs, sim_us, how in rows:
            sizes = ", ".join(f"{k}={v}" for k, v in kwargs.items())
            print(f"  {op_cpu:7.1f} s  {kind:<14} {sim_us:10.1f} us  {sizes}  [{how}]",
                  flush=True)
        return 0
    stages = timed_stages() if a.stages else None
    calls = timed_calls() if a.stages else None
    start, cpu = time.perf_counter(), time.process_time()
    res = simulator.simulate_workload(graph, config=config, fidelity=a.fidelity)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    goal = GOAL_S.get(a.fidelity)
    print(f"{graph.name} on {a.model}, {len(graph)} nodes, fidelity {a.fidelity}: "
          f"{cpu:.1f} s CPU" + (f" (goal <= {goal:.0f} s)" if goal else "")
          + f", {wall:.1f} s wall"
          + f", simulated layer {res.time_us:.1f} us")
    for label, seconds in sorted((stages or {}).items(), key=lambda kv: -kv[1]):
        print(f"  {seconds:7.1f} s  {label}")
    if calls is not None:
        print(f"ops timed and pairs measured ({sum(s for s, _ in calls):.1f} s CPU):")
        for seconds, label in sorted(calls, key=lambda r: -r[0]):
            print(f"  {seconds:7.1f} s  {label}")
    return 0


STAGES = (
    ("models.sm_driver", "", "drive", "compiled SM loops and cached memory (drive)"),
    ("models.sm_driver", "SmDriver", "run", "replays stepped (drive, answers in Python)"),
    ("simulator.runner.simulate", "KernelLaunch", "run", "functional runs (tracing)"),
    ("simulator.runner.work_synthesis", "", "synthesize_trace", "work synthesis (its tracing too)"),
    ("simulator.runner.sampling", "SampledRun", "trace_to", "trace synthesis and probes"),
    ("simulator.runner.sampling", "SampledRun", "slice_factor", "chip-slice choice"),
    ("simulator.runner.simulate", "Replay", "image", "replay images"),
    ("simulator.runner.simulate", "Replay", "session", "replay sessions built"),
    ("simulator.runner.simulate", "Replay", "finish", "replays closed (stats, timelines)"),
    ("simulator.runner.contention", "", "prepare_launch",
     "contention pairs: launches traced (prepare_launch)"),
    ("simulator.runner.contention", "", "simulate_concurrent",
     "contention pairs: runs together and alone (simulate_concurrent)"),
)
"""(module, class or "", function, label) of the stages `--stages` times. They nest (drive
inside the replays, tracing inside work synthesis), so they do not add up."""


def timed_calls() -> list[tuple[float, str]]:
    """(CPU s, label) of each op `simulate_workload` times (`workloads.execute._time_op`) and
    each contention pair it measures (`workloads.execute.measure_pair`), filled as the
    simulation runs."""
    import workloads.execute as execute

    calls: list[tuple[float, str]] = []
    time_op, measure_pair = execute._time_op, execute.measure_pair

    def timed_op(plan, *args, **kwargs):
        begin = time.process_time()
        try:
            return time_op(plan, *args, **kwargs)
        finally:
            sizes = ", ".join(f"{k}={v}" for k, v in plan.sizes.items())
            calls.append((time.process_time() - begin, f"op {plan.kind} ({sizes})"))

    def timed_pair(compute_launch, comm_launch, config, compute_op="", comm_op="", **kwargs):
        begin = time.process_time()
        try:
            return measure_pair(compute_launch, comm_launch, config, compute_op, comm_op,
                                **kwargs)
        finally:
            calls.append((time.process_time() - begin,
                          f"pair {compute_op} ({compute_launch.name}) + {comm_op}"))

    execute._time_op, execute.measure_pair = timed_op, timed_pair
    return calls


def timed_stages() -> dict[str, float]:
    """Wrap each stage of `STAGES` with a `time.process_time` counter (a profiler's cost per
    Python call made the replays' Python bookkeeping look several times larger than it is);
    the dict fills as the simulation runs."""
    import functools
    import importlib

    spent: dict[str, float] = {}
    for module, cls, name, label in STAGES:
        owner = importlib.import_module(module)
        owner = getattr(owner, cls) if cls else owner
        inner = getattr(owner, name)

        def wrapped(*args, _inner=inner, _label=label, **kwargs):
            begin = time.process_time()
            try:
                return _inner(*args, **kwargs)
            finally:
                spent[_label] += time.process_time() - begin

        setattr(owner, name, functools.wraps(inner)(wrapped))
        spent[label] = 0.0
    return spent


if __name__ == "__main__":
    raise SystemExit(main())
