"""Running a sweep: each point in a child process that can die alone; one part per point.

What it does, in order (`run_sweep`):

1. load and validate the sweep file, expand and check every point (`simulator.app.sweep`);
2. refuse an output folder that already holds parts unless resuming (and a folder whose
   manifest another format wrote); remove temp files a killed run left behind; write the
   manifest `DIR/sweep.json` (spec and point list) atomically (temp file in the same folder,
   fsync, `os.replace`);
3. run the points that have no part yet (with `retry_errors`, also those whose part is not
   "ok") on the chosen backend: in-process (`workers=1` and no point timeout), a
   `PointPool` of spawned child processes, each running one point at a time, or Dask
   distributed (`dask="tcp://host:8786"`, or `dask="local:N"` for a `LocalCluster` of N
   worker processes on loopback);
4. as each point finishes, the driver writes its part `DIR/parts/<point_id>.parquet`
   atomically. Workers return the part table and never touch the parts, so a Dask cluster
   needs no shared file system, and a killed run loses only the points in flight.

Op, layer and step points share the on-disk op result cache `DIR/op-cache/`
(`workloads.op_result_cache`, `op_cache=False` / `--no-cache` for none): each worker reads
the op results other points saved (keyed by the op, the resolved config and the code
version) and saves those it simulates, one file per entry written atomically, so
concurrent workers and `--resume` share them. On Dask each worker uses that folder's path
on its own machine: shared where the file system is.

A point that raises is a part with `status = "error"` (see `simulator.app.points`). A point whose
child process dies (the out-of-memory killer's SIGKILL, a crash) is a part with status
"failed", the signal or exit code in `error`; a point still running after `point_timeout_s`
has its process killed and is a part with status "timeout". A fresh process takes a dead
one's place and the sweep goes on. The timeout counts from when the point reaches a started
worker, so a fresh worker's first point includes loading the simulator's compiled kernels.
On Dask, a point whose worker died too often (`KilledWorker`) is "failed"; a task that ends
otherwise without a result (cancelled, scheduler gone) gets no part and counts as lost:
resume runs it again.
SIGTERM (what a batch scheduler sends) and SIGINT (Ctrl-C) to the sweep kill its workers,
keep the parts written so far and raise `SweepInterrupted` (a `KeyboardInterrupt`); resume
continues. When the sweep's process is killed outright, its workers die with it (Linux:
the parent-death signal; elsewhere a thread in each worker watching the parent).
Point ids are exact, so resuming with an edited sweep file reuses the parts of the points it
still has; the manifest then lists the new points and their indices, which `load_sweep`
and the progress notes report (a part's own `index` column is the index when it ran).
Progress goes to a stream (stderr): one line redrawn in place on a terminal, else a line
about every 10 % of the points; failed, timed-out and lost points get a line each.
Left out: running two sweeps into one folder at once, fsync of the folder after a rename
(a killed process loses nothing; a power cut may lose the newest parts), point timeouts
on Dask (`--point-timeout` needs local workers) and in-process.
Units: `point_timeout_s` in seconds of wall time.
"""

from __future__ import annotations

import ctypes
import json
import logging
import math
import multiprocessing
import os
import re
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass, replace
from multiprocessing import connection
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq

from isa.errors import InputError
from simulator.app.points import Point, execute_point, failed_part
from simulator.app.sweep import SweepSpec, expand_points, load_sweep_spec
from workloads.op_result_cache import CACHE_SUBDIR

MANIFEST_NAME = "sweep.json"
PARTS_DIR = "parts"
MANIFEST_FORMAT = "ptxsim-sweep/1"
OP_CACHE_DIR = CACHE_SUBDIR

Finished = tuple[str, Any, str]
"""(point_id, part table or None when the point is lost, why it is lost)."""


@dataclass(frozen=True, slots=True)
class SweepOutcome:
    """What one `run_sweep` call did; `errors` counts the sweep's parts that are not "ok"
    (error, failed, timeout) now; `lost` the points that got no part in this call."""

    out_dir: Path
    name: str
    total: int
    ran: tuple[str, ...]
    skipped: int
    errors: int
    lost: tuple[str, ...]

    def summary(self) -> dict[str, Any]:
        return {"sweep": self.name, "out": str(self.out_dir), "points": self.total,
                "ran": len(self.ran), "skipped": self.skipped, "errors": self.errors,
                "lost": len(self.lost)}


def default_workers() -> int:
    """The CPUs this process may use."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def run_sweep(sweep: str | Path | SweepSpec, out_dir: str | Path, *, workers: int | None = None,
              dask: str | None = None, resume: bool = False, retry_errors: bool = False,
              point_timeout_s: float | None = None, progress: IO[str] | None = None,
              execute: Callable[[Mapping[str, Any]], Any] = execute_point,
              points: Sequence[Point] | None = None, op_cache: bool = True) -> SweepOutcome:
    """Run every point of `sweep` that has no part in `out_dir/parts` yet (see module doc).

    `execute` is what a worker runs per point (a `Point.to_dict()` in, a part table out); it
    must be a module-level function, so spawned processes and Dask workers can import it.
    `points`, when given, are the points of the sweep to run and list in the manifest (some
    of `expand_points(sweep)`, as the tuner picks them); default: all of them. `op_cache`:
    whether points share the op result cache `out_dir/op-cache` (see module doc)."""
    _check_backend(workers, dask, point_timeout_s)
    spec = sweep if isinstance(sweep, SweepSpec) else load_sweep_spec(sweep)
    points = expand_points(spec) if points is None else tuple(points)
    out = Path(out_dir)
    parts = out / PARTS_DIR
    existing = part_statuses(parts)
    if existing and not resume:
        raise InputError(f"{out} already holds {len(existing)} point parts; pass --resume to "
                         "continue that sweep, or choose another --out")
    _check_resumable(out)
    parts.mkdir(parents=True, exist_ok=True)
    for stale in parts.glob(".*.tmp"):
        stale.unlink(missing_ok=True)
    write_manifest(out, spec, points)
    statuses = {p.point_id: existing[p.point_id] for p in points if p.point_id in existing}
    todo = [p for p in points if p.point_id not in statuses
            or (retry_errors and statuses[p.point_id] != "ok")]
    rerun = {p.point_id for p in todo}
    if op_cache:
        folder = str((out / OP_CACHE_DIR).resolve())
        todo = [replace(p, op_cache=folder) for p in todo]
    old_errors = sum(1 for i, s in statuses.items() if s != "ok" and i not in rerun)
    bar = SweepProgress(len(points), len(points) - len(todo), old_errors,
                        progress if progress is not None else sys.stderr)
    if len(existing) > len(statuses):
        bar.note(f"{len(existing) - len(statuses)} parts in {parts} belong to no point of this "
                 "sweep (kept, not read)")
    index = {p.point_id: p.index for p in points}
    ran, lost = [], []
    with _stop_on_signals(), closing(_backend(todo, workers, dask, point_timeout_s,
                                                execute)) as finished:
        for point_id, frame, failure in finished:
            if frame is None:
                lost.append(point_id)
                bar.note(f"point {index[point_id]} ({point_id}) lost: {failure}")
                continue
            write_part(parts, point_id, frame)
            ran.append(point_id)
            status = frame["status"].iloc[0]
            if status in ("failed", "timeout"):
                bar.note(f"point {index[point_id]} ({point_id}) {status}: "
                         f"{frame['error'].iloc[0]}")
            bar.advance(error=status != "ok")
    bar.close()
    return SweepOutcome(out, spec.name, len(points), tuple(ran), len(points) - len(todo),
                        bar.errors, tuple(lost))


def _check_backend(workers: int | None, dask: str | None, point_timeout_s: float | None) -> None:
    if dask is not None and workers is not None:
        raise InputError("choose either --workers or --dask, not both")
    if workers is not None and (not isinstance(workers, int) or workers < 1):
        raise InputError(f"--workers {workers}: want an integer >= 1")
    if dask is not None and dask.startswith("local:") and not re.fullmatch(r"local:[1-9]\d*",
                                                                            dask):
        raise InputError(f"--dask {dask}: want local:N with N >= 1, or tcp://host:port")
    if point_timeout_s is None:
        return
    if (isinstance(point_timeout_s, bool) or not isinstance(point_timeout_s, int | float)
            or not math.isfinite(point_timeout_s) or point_timeout_s <= 0):
        raise InputError(f"--point-timeout {point_timeout_s}: want a finite number of "
                         "seconds > 0")
    if dask is not None:
        raise InputError("--point-timeout works with local worker processes, not --dask "
                         "(drop one of them)")


def _check_resumable(out: Path) -> None:
    """Refuse a folder whose manifest this version cannot match parts against."""
    path = out / MANIFEST_NAME
    try:
        found = json.loads(path.read_text(encoding="utf-8")).get("format")
    except FileNotFoundError:
        return
    except (OSError, ValueError, AttributeError):
        found = None
    if found != MANIFEST_FORMAT:
        raise InputError(f"{path}: not a {MANIFEST_FORMAT} manifest (format {found!r}); its "
                         "parts cannot be matched to this sweep's points; choose another --out")


def _backend(todo: Sequence[Point], workers: int | None, dask: str | None,
             point_timeout_s: float | None, execute) -> Iterator[Finished]:
    if not todo:
        return
    if dask is not None:
        yield from run_on_dask(todo, dask, execute)
    elif workers == 1 and point_timeout_s is None:
        for point in todo:
            yield point.point_id, execute(point.to_dict()), ""
    else:
        n = default_workers() if workers is None else workers
        yield from PointPool(min(n, len(todo)), point_timeout_s, execute).run(todo)


class SweepInterrupted(KeyboardInterrupt):
    """The sweep was stopped by a signal (SIGTERM, SIGINT); finished parts are kept. Its
    `args` are `(signum,)`, so it can be raised again from them (SimPy does so when the
    signal arrives inside a process of an in-process point)."""

    def __init__(self, signum: int) -> None:
        self.signum = signum
        super().__init__(signum)

    def __str__(self) -> str:
        return f"stopped by {signal.Signals(self.signum).name}"


@contextmanager
def _stop_on_signals():
    """SIGTERM and SIGINT raise `SweepInterrupted` in the driver (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise SweepInterrupted(signum)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@dataclass(slots=True)
class _Worker:
    """A child process of the pool; `point` is the one it runs (None when idle)."""

    process: Any
    conn: Any
    ready: bool = False
    point: Point | None = None
    started: float = 0.0


class PointPool:
    """Points on up to `size` spawned processes, one point per process at a time.

    Contract: `run(todo)` yields one `Finished` per point, as each ends: the worker's part, a
    "failed" part when the worker died with it, a "timeout" part when it ran past
    `timeout_s` (its worker is killed), or no part (lost) when workers cannot start. A dead
    worker is replaced while points remain. No process outlives `run`: when it ends, raises
    or is closed, every worker is stopped (killed unless it ended normally)."""

    STARTUP_FAILURES = 3
    """Workers that may die before taking a point (per pool slot) before the rest is lost."""

    def __init__(self, size: int, timeout_s: float | None = None,
                 execute: Callable[[Mapping[str, Any]], Any] = execute_point) -> None:
        self.size, self.timeout_s, self.execute = size, timeout_s, execute
        self.context = multiprocessing.get_context("spawn")
        self.workers: list[_Worker] = []
        self.retired: list[_Worker] = []
        self.startup_failures = 0

    def run(self, todo: Sequence[Point]) -> Iterator[Finished]:
        queue = deque(todo)
        try:
            for _ in range(min(self.size, len(queue))):
                self._start_worker()
            while self.workers:
                yield from self._step(queue)
        except BaseException:
            self._halt(kill=True)
            raise
        self._halt(kill=False)

    def _start_worker(self) -> None:
        here, there = self.context.Pipe(duplex=True)
        process = self.context.Process(target=point_worker, args=(there, self.execute,
                                                                  os.getpid()),
                                       name="ptxsim-sweep-worker", daemon=True)
        process.start()
        there.close()
        self.workers.append(_Worker(process, here))

    def _step(self, queue: deque) -> Iterator[Finished]:
        """Wait for a message, a death or a deadline; act on each worker it concerns."""
        handles = [h for w in self.workers for h in (w.conn, w.process.sentinel)]
        ready = set(connection.wait(handles, timeout=self._time_left()))
        now = time.monotonic()
        for worker in list(self.workers):
            if worker.conn in ready or worker.process.sentinel in ready:
                yield from self._serve(worker, queue)
            elif worker.point is not None and self._overdue(worker, now):
                yield self._timed_out(worker)
                self._replace(worker, queue)

    def _time_left(self) -> float | None:
        busy = [w.started for w in self.workers if w.point is not None]
        if self.timeout_s is None or not busy:
            return None
        return max(0.0, min(busy) + self.timeout_s - time.monotonic())

    def _overdue(self, worker: _Worker, now: float) -> bool:
        return self.timeout_s is not None and now - worker.started >= self.timeout_s

    def _serve(self, worker: _Worker, queue: deque) -> Iterator[Finished]:
        """Read what `worker` sent (ready, a part); if it has died, record and replace it."""
        ended = False
        while worker.conn.poll():
            try:
                message = worker.conn.recv()
            except (EOFError, OSError):      # the worker's end closed: it has exited
                ended = True
                break
            if isinstance(message, str) and message == _READY:
                worker.ready = True
            elif worker.point is not None:
                yield worker.point.point_id, message, ""
                worker.point = None
            if worker.point is None:
                self._assign(worker, queue)
                if worker not in self.workers:
                    return
        if not ended and worker.process.is_alive():
            return
        worker.process.join(timeout=5)
        if worker.point is not None:
            yield worker.point.point_id, self._failed(worker), ""
        elif not worker.ready:
            self.startup_failures += 1
        self._replace(worker, queue)
        if self.startup_failures > self.STARTUP_FAILURES * self.size:
            reason = (f"sweep worker processes die before taking a point (last one "
                      f"{_exit_text(worker.process.exitcode)})")
            while queue:
                yield queue.popleft().point_id, None, reason

    def _assign(self, worker: _Worker, queue: deque) -> None:
        """Give an idle worker the next point, or retire it when none is left."""
        if not queue:
            self._retire(worker)
            return
        point = queue.popleft()
        try:
            worker.conn.send(point.to_dict())
        except OSError:                      # it died just now: the point waits for another
            queue.appendleft(point)
            return
        worker.point, worker.started = point, time.monotonic()

    def _retire(self, worker: _Worker) -> None:
        self.workers.remove(worker)
        self.retired.append(worker)
        try:
            worker.conn.send(None)
        except OSError:
            pass

    def _replace(self, worker: _Worker, queue: deque) -> None:
        """Drop a dead or killed worker; start another while points wait for one."""
        if worker.process.exitcode is None:
            worker.process.kill()
            worker.process.join()
        worker.conn.close()
        self.workers.remove(worker)
        waiting = len(queue) - sum(1 for w in self.workers if w.point is None)
        if waiting > 0 and self.startup_failures <= self.STARTUP_FAILURES * self.size:
            self._start_worker()

    def _failed(self, worker: _Worker) -> Any:
        return failed_part(worker.point.to_dict(), "failed",
                           f"worker process {worker.process.pid} "
                           f"{_exit_text(worker.process.exitcode)} while running the point",
                           time.monotonic() - worker.started, worker.process.pid)

    def _timed_out(self, worker: _Worker) -> Finished:
        worker.process.kill()
        worker.process.join()
        elapsed = time.monotonic() - worker.started
        part = failed_part(worker.point.to_dict(), "timeout",
                           f"no result within the point timeout of {self.timeout_s:g} s "
                           f"(ran {elapsed:.1f} s); worker process {worker.process.pid} was "
                           "killed", elapsed, worker.process.pid)
        return worker.point.point_id, part, ""

    def _halt(self, kill: bool) -> None:
        """Stop every process: ask idle ones to exit and wait briefly, or kill them all."""
        everyone = self.workers + self.retired
        for worker in everyone:
            if kill:
                worker.process.kill()
            elif worker in self.workers:
                try:
                    worker.conn.send(None)
                except OSError:
                    pass
        for worker in everyone:
            worker.process.join(timeout=None if kill else 5)
            if worker.process.exitcode is None:
                worker.process.kill()
                worker.process.join()
            worker.conn.close()
        self.workers, self.retired = [], []


def _exit_text(code: int | None) -> str:
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (the out-of-memory killer sends SIGKILL)" if -code == signal.SIGKILL else ""
        return f"was killed by {name}{hint}"
    return f"exited with code {code}"


_READY = "ready"


def point_worker(conn, execute: Callable[[Mapping[str, Any]], Any], parent_pid: int) -> None:
    """A pool process: say ready, then run each point received until told to stop (None)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)    # Ctrl-C reaches the driver, which decides
    _die_with_parent(parent_pid)
    conn.send(_READY)
    while True:
        try:
            point_data = conn.recv()
        except (EOFError, OSError):
            return
        if point_data is None:
            return
        conn.send(execute(point_data))


def _die_with_parent(parent_pid: int) -> None:
    """End this process when the driver dies, even by SIGKILL."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL)) == 0:
                if os.getppid() != parent_pid:     # the driver died before prctl took hold
                    os._exit(1)
                return
        except (OSError, AttributeError):
            pass
    threading.Thread(target=_watch_parent, args=(parent_pid,), daemon=True).start()


_PR_SET_PDEATHSIG = 1


def _watch_parent(parent_pid: int) -> None:
    while os.getppid() == parent_pid:
        time.sleep(0.5)
    os._exit(1)


def run_on_dask(todo: Sequence[Point], address: str,
                execute: Callable[[Mapping[str, Any]], Any] = execute_point
                ) -> Iterator[Finished]:
    """Points as Dask tasks on the scheduler at `address` (or `local:N`), as they finish."""
    try:
        import distributed
    except ImportError:
        raise InputError("--dask needs the 'distributed' package: pip install "
                         "'distributed>=2024.1'") from None
    with _dask_client(distributed, address) as client:
        started = time.monotonic()
        futures = {client.submit(execute, p.to_dict(), pure=False): p for p in todo}
        for future in distributed.as_completed(futures):
            point = futures[future]
            try:
                yield point.point_id, future.result(), ""
            except distributed.KilledWorker as exc:
                yield point.point_id, failed_part(
                    point.to_dict(), "failed", f"{type(exc).__name__}: {exc}",
                    time.monotonic() - started, None), ""
            except Exception as exc:  # noqa: BLE001 - e.g. cancelled: the point is lost
                yield point.point_id, None, f"{type(exc).__name__}: {exc}"


@contextmanager
def _dask_client(distributed, address: str):
    match = re.fullmatch(r"local:(\d+)", address)
    if match:
        with distributed.LocalCluster(n_workers=int(match[1]), threads_per_worker=1,
                                      processes=True, host="127.0.0.1",
                                      dashboard_address=None,
                                      silence_logs=logging.ERROR) as cluster:
            with distributed.Client(cluster) as client:
                yield client
        return
    try:
        client = distributed.Client(address, timeout="20s")
    except (OSError, TimeoutError, ValueError) as exc:
        raise InputError(f"--dask {address}: cannot reach the scheduler ({exc})") from None
    with client:
        yield client


def _atomic_write(path: Path, write) -> None:
    tmp = path.parent / f".{path.name}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_part(parts_dir: Path, point_id: str, frame) -> Path:
    """Write one point's part atomically; return its path."""
    table = pa.Table.from_pandas(frame, preserve_index=False)
    path = parts_dir / f"{point_id}.parquet"
    _atomic_write(path, lambda f: pq.write_table(table, f))
    return path


def write_manifest(out: Path, spec: SweepSpec, points: Sequence[Point]) -> Path:
    """Write `out/sweep.json`: the normalized spec, its source text and the point list."""
    data = {"format": MANIFEST_FORMAT, "spec": spec.to_dict(), "spec_text": spec.text,
            "axes": [a.key for a in spec.axes],
            "points": [{**p.to_dict(), "params": p.params()} for p in points]}
    text = json.dumps(data, indent=1) + "\n"
    path = out / MANIFEST_NAME
    _atomic_write(path, lambda f: f.write(text.encode()))
    return path


def part_statuses(parts_dir: Path) -> dict[str, str]:
    """point_id -> status of every readable part in `parts_dir` (unreadable ones are absent)."""
    found = {}
    for path in sorted(parts_dir.glob("*.parquet")):
        try:
            found[path.stem] = pq.read_table(path, columns=["status"]).column(0)[0].as_py()
        except (OSError, pa.ArrowException, IndexError):
            continue
    return found


class SweepProgress:
    """done/total, errors and ETA on one line: redrawn on a TTY, else every ~10 %."""

    WIDTH = 24

    def __init__(self, total: int, done: int, errors: int, stream: IO[str]) -> None:
        self.total, self.done, self.errors, self.stream = total, done, errors, stream
        self.start_done, self.started = done, time.monotonic()
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.tenth = self._tenth()
        self._show(force=True)

    def _tenth(self) -> int:
        return self.done * 10 // max(self.total, 1)

    def _line(self) -> str:
        filled = self.done * self.WIDTH // max(self.total, 1)
        ran = self.done - self.start_done
        if ran and self.done < self.total:
            left = (time.monotonic() - self.started) / ran * (self.total - self.done)
            eta = f"{int(left) // 60}:{int(left) % 60:02d}"
        else:
            eta = "--:--" if self.done < self.total else "0:00"
        return (f"sweep [{'#' * filled}{'.' * (self.WIDTH - filled)}] {self.done}/{self.total}"
                f" points  errors {self.errors}  eta {eta}")

    def _show(self, force: bool = False) -> None:
        if self.tty:
            self.stream.write("\r" + self._line() + "\x1b[K")
        elif force or self._tenth() > self.tenth or self.done == self.total:
            self.tenth = self._tenth()
            self.stream.write(self._line() + "\n")
        self.stream.flush()

    def advance(self, error: bool) -> None:
        """One more point finished (and written)."""
        self.done += 1
        self.errors += bool(error)
        self._show()

    def note(self, text: str) -> None:
        """A message on its own line (the bar is redrawn after it on a TTY)."""
        self.stream.write(("\r\x1b[K" if self.tty else "") + text + "\n")
        self._show(force=self.tty)

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
        elif self.done < self.total or self.tenth < 10:
            self.stream.write(self._line() + "\n")
        self.stream.flush()
