"""Import a PyTorch-profiler (Kineto) Chrome trace as a table of GPU kernels.

The trace is one JSON object with `traceEvents` (or a bare list of events). It is parsed
once and its events are walked once, sorted into five heaps: GPU activities (`cat`
"kernel", "gpu_memcpy", "gpu_memset"), launch calls (`cuda_runtime`, `cuda_driver`, which
carry the `correlation` id of the activity they launched), flow starts (`ph` "s", `cat`
"ac2g", whose `id` is the correlation, used where a launch call is missing), CPU ops
(`cat` "cpu_op") and user annotations (`cat` "user_annotation", e.g. "attn(F)").
A kernel's `cpu_op` is the innermost CPU op on the launching thread whose [ts, ts + dur]
holds the launch call's timestamp (Kineto nests them that way); its `input_shapes` are
that op's "Input Dims" when the profiler recorded shapes, else None; its `op_stack` is
every CPU op around the launch, outermost first, as a JSON list of objects with the op's
`name`, its `id` (Kineto's "External id") and, where the profiler recorded them, `dims`
("Input Dims"), `types` ("Input type"), `concrete` ("Concrete Inputs") and `strides`
("Input Strides"), carried as recorded (`workloads.traces.operators` reads them); its
`annotation` is the innermost user annotation around the launch, found the same way
(launches made outside any CPU op, as in DeepSeek's trace, still get one).

Columns (`KINETO_COLUMNS`): `name`, `kind` (kernel/memcpy/memset), `stream`, `start_us`,
`dur_us`, `grid` and `block` (3-tuples; (0, 0, 0) for memcpy/memset),
`registers_per_thread`, `shared_memory_bytes`, `bytes` (memcpy/memset payload, else 0),
`device`, `correlation`, `cpu_op`, `input_shapes`, `annotation`, `op_stack`. Times are trace
microseconds (Kineto's `ts`, absolute). Rows are sorted by (`device`, `start_us`,
`stream`). Nothing is dropped: an activity whose launch is not in the trace gets `cpu_op`
None.

Validation: the file must be UTF-8 JSON (a bad byte or a document nested deeper than the
JSON reader can follow is a `TraceFormatError` naming the place). Every event used must
be an object; its `ts` a finite JSON number, its `dur` (where read) a finite number
>= 0 (zero-length memsets occur in real traces), its `args` an object, its `name` a
string; integer fields (`stream`, `device`, `correlation`, `registers per thread`,
`shared memory`, `bytes`, grid and block sizes, a flow's `id`) integers, non-negative
except `stream`, `device` and the ids; `pid` and `tid` numbers or strings. Each problem is
a `TraceFormatError` naming the file, `traceEvents[i]` with its category and name, the
field, the value and what would be accepted. Events of other categories are
not read, so they are not checked.
"""

from __future__ import annotations

import bisect
import json
import math
import re
import sys
from pathlib import Path

import pandas as pd

from workloads.traces.errors import TraceFormatError

KINETO_COLUMNS = ("name", "kind", "stream", "start_us", "dur_us", "grid", "block",
                  "registers_per_thread", "shared_memory_bytes", "bytes", "device",
                  "correlation", "cpu_op", "input_shapes", "annotation", "op_stack")

ACTIVITY_KINDS = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
STACK_ARGS = {"External id": "id", "Input Dims": "dims", "Input type": "types",
              "Concrete Inputs": "concrete", "Input Strides": "strides"}
LAUNCH_CATEGORIES = ("cuda_runtime", "cuda_driver")


def read_kineto(path: str | Path, device: int | None = None) -> pd.DataFrame:
    """The GPU activities of the Kineto trace at `path` (of `device` only, when given)."""
    path = Path(path)
    events = _load_events(path)
    activities, launches, flows, ops, notes = _sort_events(events, path)
    owners = _launching_ops(launches, flows, ops)
    annotations = _launching_ops(launches, flows, notes)
    rows = [_activity_row(e, owners, annotations, _where(path, index, e))
            for index, e in activities]
    df = pd.DataFrame(rows, columns=list(KINETO_COLUMNS))
    if device is not None:
        df = df[df["device"] == device]
    return df.sort_values(["device", "start_us", "stream"], kind="stable").reset_index(drop=True)


def _load_events(path: Path) -> list[dict]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot read: {exc.strerror} (expected a readable "
                               "Kineto Chrome trace file)") from None
    try:
        doc = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise TraceFormatError(f"{path}:{line}:{col}: byte 0x{data[exc.start]:02x} is not "
                               "UTF-8 text (expected a UTF-8 JSON Kineto trace)") from None
    except json.JSONDecodeError as exc:
        raise TraceFormatError(f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}"
                               " (expected a Kineto Chrome trace)") from None
    except RecursionError:
        depth, line, col = _deepest(data)
        raise TraceFormatError(f"{path}:{line}:{col}: JSON nested at least {depth} levels "
                               "deep here, too deep to read (expected a Kineto Chrome trace: "
                               "events a few levels deep)") from None
    except ValueError:   # an integer longer than Python converts (4300 digits)
        found = re.search(rb"\d{%d,}" % (sys.get_int_max_str_digits() + 1), data)
        start = found.start() if found else 0
        line = data.count(b"\n", 0, start) + 1
        col = start - (data.rfind(b"\n", 0, start) + 1) + 1
        raise TraceFormatError(f"{path}:{line}:{col}: a number too long to read (expected a "
                               "Kineto Chrome trace, numbers of a few digits)") from None
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        raise TraceFormatError(f"{path}: no 'traceEvents' list (expected a Kineto Chrome "
                               "trace: an object with 'traceEvents' or a list of events)")
    return events


_JSON_NESTING = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def _deepest(data: bytes, shown_depth: int = 512) -> tuple[int, int, int]:
    """(depth, line, column) where the JSON text first nests deeper than `shown_depth`,
    or its deepest point (strings skipped)."""
    depth, deepest, at = 0, 0, 0
    for m in _JSON_NESTING.finditer(data):
        ch = data[m.start()]
        if ch in b"[{":
            depth += 1
            if depth > deepest:
                deepest, at = depth, m.start()
                if depth > shown_depth:
                    break
        elif ch in b"]}":
            depth -= 1
    line = data.count(b"\n", 0, at) + 1
    return deepest, line, at - (data.rfind(b"\n", 0, at) + 1) + 1


def _sort_events(events: list, path: Path):
    """One pass: GPU activities (with their index), launches by correlation, flow starts,
    CPU ops, annotations; each event's fields checked as it is sorted (module doc)."""
    activities, launches, flows, ops, notes = [], {}, {}, {}, {}
    for index, e in enumerate(events):
        if not isinstance(e, dict):
            raise TraceFormatError(f"{path}: traceEvents[{index}] is {type(e).__name__}, "
                                   "expected an object")
        cat, ph = e.get("cat"), e.get("ph")
        if ph == "X" and cat in ACTIVITY_KINDS:
            _require(e, ("name", "ts", "dur", "args"), path, index)
            where = _where(path, index, e)
            _name(e, where)
            _time(e, "ts", where)
            _time(e, "dur", where, duration=True)
            _args(e, where)
            activities.append((index, e))
        elif ph == "X" and cat in LAUNCH_CATEGORIES:
            where = _where(path, index, e)
            corr = _args(e, where).get("correlation")
            if corr is not None:
                key = _integer(corr, where, "args.correlation")
                launches[key] = (*_thread(e, where), _time(e, "ts", where))
        elif ph == "s" and cat == "ac2g":
            where = _where(path, index, e)
            if e.get("id") is not None:
                flow_id = _integer(e["id"], where, "id")
                flows.setdefault(flow_id, (*_thread(e, where), _time(e, "ts", where)))
        elif ph == "X" and cat in ("cpu_op", "user_annotation"):
            where = _where(path, index, e)
            _name(e, where)
            _args(e, where)
            _time(e, "ts", where)
            if "dur" in e:
                _time(e, "dur", where, duration=True)
            (ops if cat == "cpu_op" else notes).setdefault(_thread(e, where), []).append(e)
    return activities, launches, flows, ops, notes


def _where(path: Path, index: int, event: dict) -> str:
    """`file: traceEvents[i] (cat 'name')`, naming an event in an error message."""
    name = event.get("name", "?")
    shown = name if isinstance(name, str) and len(name) <= 60 else \
        (name[:57] + "..." if isinstance(name, str) else "?")
    return f"{path}: traceEvents[{index}] ({event.get('cat')} {shown!r})"


def _bad(where: str, field: str, value, expected: str) -> TraceFormatError:
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return TraceFormatError(f"{where}: {field} is {shown} (expected {expected})")


def _time(event: dict, field: str, where: str, duration: bool = False) -> float:
    """A finite time in microseconds (`dur` also >= 0)."""
    value = event.get(field)
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and \
        math.isfinite(value) and (not duration or value >= 0)
    if not ok:
        raise _bad(where, field, value, "a finite number of microseconds"
                   + (" >= 0" if duration else ""))
    return float(value)


def _integer(value, where: str, field: str, minimum: int | None = None) -> int:
    """An integer field: a JSON integer (or an integral float, or a decimal string)."""
    number = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and value.strip().lstrip("-").isdigit() and len(value) < 30:
        number = int(value)
    if number is None or (minimum is not None and number < minimum):
        raise _bad(where, field, value, "an integer" if minimum is None
                   else f"an integer >= {minimum}")
    return number


def _key(value, where: str, field: str):
    """A process or thread id: a JSON number or string (or absent)."""
    if value is None or isinstance(value, (int, str)) or \
            (isinstance(value, float) and math.isfinite(value)):
        return value
    raise _bad(where, field, value, "a number or a string")


def _thread(event: dict, where: str) -> tuple:
    return _key(event.get("pid"), where, "pid"), _key(event.get("tid"), where, "tid")


def _name(event: dict, where: str) -> str:
    name = event.get("name")
    if not isinstance(name, str):
        raise _bad(where, "name", name, "a string")
    return name


def _args(event: dict, where: str) -> dict:
    args = event.get("args", {})
    if not isinstance(args, dict):
        raise _bad(where, "args", args, "an object")
    return args


def _require(event: dict, keys: tuple, path: Path, index: int) -> None:
    missing = [k for k in keys if k not in event]
    if missing:
        raise TraceFormatError(f"{path}: traceEvents[{index}] ({event.get('cat')} "
                               f"{event.get('name', '?')!r}) lacks {missing} (expected "
                               "name, ts, dur and args on every GPU activity)")


def _launching_ops(launches: dict, flows: dict, ops: dict) -> dict:
    """correlation -> the CPU ops (events) enclosing its launch call, outermost first
    (empty where none does)."""
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
    """Sweep calls (sorted by ts) against nested ops: a stack holds the ops still open;
    each call gets the stack as it stands (outermost first)."""
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
        owners[corr] = tuple(op for op in stack if _end(op) >= ts)
    return owners


def _end(op: dict) -> float:
    return op["ts"] + op.get("dur", 0)


def _dim3(value, where: str, field: str) -> tuple[int, int, int]:
    if value is None:
        return (0, 0, 0)
    if not isinstance(value, list) or not 1 <= len(value) <= 3:
        raise _bad(where, field, value, "a list of 1 to 3 integers >= 0")
    values = tuple(_integer(v, where, field, minimum=0) for v in value)
    return values + (1,) * (3 - len(values))


def _activity_row(e: dict, owners: dict, annotations: dict, where: str) -> tuple:
    args = e["args"]
    corr = args.get("correlation", args.get("External id"))
    corr = None if corr is None else _integer(corr, where, "args.correlation")
    stack, notes = owners.get(corr, ()), annotations.get(corr, ())
    op, note = (stack[-1] if stack else None), (notes[-1] if notes else None)
    shapes = op.get("args", {}).get("Input Dims") if op else None

    def count(field: str, default, minimum: int | None = 0) -> int:
        return _integer(args.get(field, default), where, f"args.{field}", minimum)

    return (e["name"], ACTIVITY_KINDS[e["cat"]], count("stream", e.get("tid", -1), -1),
            float(e["ts"]), float(e["dur"]), _dim3(args.get("grid"), where, "args.grid"),
            _dim3(args.get("block"), where, "args.block"), count("registers per thread", 0),
            count("shared memory", 0), count("bytes", 0),
            count("device", e.get("pid", -1), -1), -1 if corr is None else corr,
            op["name"] if op else None,
            None if shapes is None else json.dumps(shapes), note["name"] if note else None,
            json.dumps([_stack_entry(o) for o in stack]) if stack else None)


def _stack_entry(op: dict) -> dict:
    """One CPU op of a launch's `op_stack`: its name and the recorded arguments."""
    args = op.get("args", {})
    return {"name": op["name"], **{key: args[field] for field, key in STACK_ARGS.items()
                                   if field in args}}
