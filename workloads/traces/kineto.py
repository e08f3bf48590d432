"""Import a PyTorch-profiler (Kineto) Chrome trace as a table of GPU kernels.

The trace is one JSON object with `traceEvents` (or a bare list of events). It is parsed
once and its events are walked once, sorted into five heaps: GPU activities (`cat`
"kernel", "gpu_memcpy", "gpu_memset"), launch calls (`cuda_runtime`, `cuda_driver`, which
carry the `correlation` id of the activity they launched), flow starts (`ph` "s", `cat`
"ac2g", whose `id` is the correlation, used where a launch call is missing), CPU ops
(`cat` "cpu_op") and user annotations (`cat` "user_annotation", e.g. "attn(F)").
A kernel's `cpu_op` is the innermost CPU op on the launching thread whose [ts, ts + dur]
holds the launch call's timestamp (Kineto nests them that way); its `input_shapes` are
that op's "Input Dims" when the profiler recorded shapes, else None; its `annotation` is
the innermost user annotation around the launch, found the same way (launches made
outside any CPU op, as in DeepSeek's trace, still get one).

Columns (`KINETO_COLUMNS`): `name`, `kind` (kernel/memcpy/memset), `stream`, `start_us`,
`dur_us`, `grid` and `block` (3-tuples; (0, 0, 0) for memcpy/memset),
`registers_per_thread`, `shared_memory_bytes`, `bytes` (memcpy/memset payload, else 0),
`device`, `correlation`, `cpu_op`, `input_shapes`, `annotation`. Times are trace
microseconds (Kineto's `ts`, absolute). Rows are sorted by (`device`, `start_us`,
`stream`). Nothing is dropped: an activity whose launch is not in the trace gets `cpu_op`
None.
"""

from __future__ import annotations

import bisect
import json
from pathlib import Path

import pandas as pd

from workloads.traces.errors import TraceFormatError

KINETO_COLUMNS = ("name", "kind", "stream", "start_us", "dur_us", "grid", "block",
                  "registers_per_thread", "shared_memory_bytes", "bytes", "device",
                  "correlation", "cpu_op", "input_shapes", "annotation")

ACTIVITY_KINDS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
LAUNCH_CATEGORIES = ("cuda_runtime", "cuda_driver")


def read_kineto(path: str | Path, device: int | None = None) -> pd.DataFrame:
    """The GPU activities of the Kineto trace at `path` (of `device` only, when given)."""
    path = Path(path)
    events = _load_events(path)
    activities, launches, flows, ops, notes = _sort_events(events, path)
    owners = _launching_ops(launches, flows, ops)
    annotations = _launching_ops(launches, flows, notes)
    rows = [_activity_row(e, owners, annotations) for e in activities]
    df = pd.DataFrame(rows, columns=list(KINETO_COLUMNS))
    if device is not None:
        df = df[df["device"] == device]
    return df.sort_values(["device", "start_us", "stream"], kind="stable").reset_index(drop=True)


def _load_events(path: Path) -> list[dict]:
    try:
        with path.open("rb") as fh:
            doc = json.load(fh)
    except json.JSONDecodeError as exc:
        raise TraceFormatError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}"
                               " (expected a Kineto Chrome trace)") from None
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise TraceFormatError(f"{path}: no 'traceEvents' list (expected a Kineto Chrome "
                               "trace: an object with 'traceEvents' or a list of events)")
    return events


def _sort_events(events: list, path: Path):
    """One pass: GPU activities, launches by correlation, flow starts, CPU ops, annotations."""
    activities, launches, flows, ops, notes = [], {}, {}, {}, {}
    for index, e in enumerate(events):
        if not isinstance(e, dict):
            raise TraceFormatError(f"{path}: traceEvents[{index}] is {type(e).__name__}, "
                                   "expected an object")
        cat, ph = e.get("cat"), e.get("ph")
        if ph == "X" and cat in ACTIVITY_KINDS:
            _require(e, ("name", "ts", "dur", "args"), path, index)
            activities.append(e)
        elif ph == "X" and cat in LAUNCH_CATEGORIES:
            corr = e.get("args", {}).get("correlation")
            if corr is not None:
                launches[corr] = (e["pid"], e["tid"], e["ts"])
        elif ph == "s" and cat == "ac2g":
            flows.setdefault(e.get("id"), (e.get("pid"), e.get("tid"), e.get("ts")))
        elif ph == "X" and cat == "cpu_op":
            ops.setdefault((e.get("pid"), e.get("tid")), []).append(e)
        elif ph == "X" and cat == "user_annotation":
            notes.setdefault((e.get("pid"), e.get("tid")), []).append(e)
    return activities, launches, flows, ops, notes


def _require(event: dict, keys: tuple, path: Path, index: int) -> None:
    missing = [k for k in keys if k not in event]
    if missing:
        raise TraceFormatError(f"{path}: traceEvents[{index}] ({event.get('cat')} "
                               f"{event.get('name', '?')!r}) lacks {missing} (expected "
                               "name, ts, dur and args on every GPU activity)")


def _launching_ops(launches: dict, flows: dict, ops: dict) -> dict:
    """correlation -> innermost CPU op (event) enclosing its launch call, or None."""
    sites = dict(flows)
    sites.update(launches)
    by_thread: dict = {}
    for corr, (pid, tid, ts) in sites.items():
        by_thread.setdefault((pid, tid), []).append((ts, corr))
    owners = {}
    for thread, calls in by_thread.items():
        owners.update(_innermost(sorted(calls), ops.get(thread, [])))
    return owners


def _innermost(calls: list[tuple], thread_ops: list[dict]) -> dict:
    """Sweep calls (sorted by ts) against nested ops: a stack holds the ops still open."""
    ordered = sorted(thread_ops, key=lambda o: (o["ts"], -o.get("dur", 0)))
    starts = [o["ts"] for o in ordered]
    owners, stack, taken = {}, [], 0
    for ts, corr in calls:
        upto = bisect.bisect_right(starts, ts)
        for op in ordered[taken:upto]:
            while stack and _end(stack[-1]) < op["ts"]:
                stack.pop()
            stack.append(op)
        taken = max(taken, upto)
        while stack and _end(stack[-1]) < ts:
            stack.pop()
        owners[corr] = stack[-1] if stack else None
    return owners


def _end(op: dict) -> float:
    return op["ts"] + op.get("dur", 0)


def _dim3(value) -> tuple[int, int, int]:
    if value is None:
        return (0, 0, 0)
    values = tuple(int(v) for v in value)
    return values + (1,) * (3 - len(values))


def _activity_row(e: dict, owners: dict, annotations: dict) -> tuple:
    args = e["args"]
    corr = args.get("correlation", args.get("External id"))
    op, note = owners.get(corr), annotations.get(corr)
    shapes = op.get("args", {}).get("Input Dims") if op else None
    return (e["name"], ACTIVITY_KINDS[e["cat"]], int(args.get("stream", e.get("tid", -1))),
            float(e["ts"]), float(e["dur"]), _dim3(args.get("grid")), _dim3(args.get("block")),
            int(args.get("registers per thread", 0)), int(args.get("shared memory", 0)),
            int(args.get("bytes", 0)), int(args.get("device", e.get("pid", -1))),
            -1 if corr is None else int(corr), op["name"] if op else None,
            None if shapes is None else json.dumps(shapes), note["name"] if note else None)
