"""Running a sweep: points on a local process pool, in-process or on Dask; one part per point.

What it does, in order (`run_sweep`):

1. load and validate the sweep file, expand and check every point (`simulator.sweep`);
2. refuse an output folder that already holds parts unless resuming; remove temp files a
   killed run left behind; write the manifest `DIR/sweep.json` (spec and point list)
   atomically (temp file in the same folder, fsync, `os.replace`);
3. run the points that have no part yet (with `retry_errors`, also those recorded as
   errors) on the chosen backend: in-process (`workers=1`), a `ProcessPoolExecutor`
   (spawn context, `workers` processes) or Dask distributed (`dask="tcp://host:8786"`, or
   `dask="local:N"` for a `LocalCluster` of N worker processes on loopback);
4. as each point finishes, the driver writes its part `DIR/parts/<point_id>.parquet`
   atomically. Workers return the part table and never touch the folder, so a Dask cluster
   needs no shared file system, and a killed run loses only the points in flight.

A point that raises is a part with `status = "error"` (see `simulator.points`). A point
whose worker died (a crashed process, a Dask `KilledWorker`) gets no part and is counted as
lost: `--resume` runs it again. Point ids are exact, so resuming with an edited sweep file
reuses the parts of the points it still has (the manifest then lists the new points).
Progress goes to a stream (stderr): one line redrawn in place on a terminal, else a line
about every 10 % of the points.
Left out: running two sweeps into one folder at once, fsync of the folder after a rename
(a killed process loses nothing; a power cut may lose the newest parts), per-point timeouts.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import os
import re
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq

from isa.errors import InputError
from simulator.points import Point, execute_point
from simulator.sweep import SweepSpec, expand_points, load_sweep_spec

MANIFEST_NAME = "sweep.json"
PARTS_DIR = "parts"
MANIFEST_FORMAT = "ptxsim-sweep/1"

Finished = tuple[str, Any, str]
"""(point_id, part table or None, why no part: the worker failure text)."""


@dataclass(frozen=True, slots=True)
class SweepOutcome:
    """What one `run_sweep` call did; `errors` counts error parts of the whole sweep now."""

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
              progress: IO[str] | None = None) -> SweepOutcome:
    """Run every point of `sweep` that has no part in `out_dir/parts` yet (see module doc)."""
    _check_backend(workers, dask)
    spec = sweep if isinstance(sweep, SweepSpec) else load_sweep_spec(sweep)
    points = expand_points(spec)
    out = Path(out_dir)
    parts = out / PARTS_DIR
    existing = part_statuses(parts)
    if existing and not resume:
        raise InputError(f"{out} already holds {len(existing)} point parts; pass --resume to "
                         "continue that sweep, or choose another --out")
    parts.mkdir(parents=True, exist_ok=True)
    for stale in parts.glob(".*.tmp"):
        stale.unlink(missing_ok=True)
    write_manifest(out, spec, points)
    statuses = {p.point_id: existing[p.point_id] for p in points if p.point_id in existing}
    todo = [p for p in points if p.point_id not in statuses
            or (retry_errors and statuses[p.point_id] == "error")]
    rerun = {p.point_id for p in todo}
    old_errors = sum(1 for i, s in statuses.items() if s == "error" and i not in rerun)
    bar = SweepProgress(len(points), len(points) - len(todo), old_errors,
                        progress if progress is not None else sys.stderr)
    ran, lost = [], []
    for point_id, frame, failure in _backend(todo, workers, dask):
        if frame is None:
            lost.append(point_id)
            bar.note(f"point {point_id} lost: {failure}")
            continue
        write_part(parts, point_id, frame)
        ran.append(point_id)
        bar.advance(error=frame["status"].iloc[0] == "error")
    bar.close()
    return SweepOutcome(out, spec.name, len(points), tuple(ran), len(points) - len(todo),
                        bar.errors, tuple(lost))


def _check_backend(workers: int | None, dask: str | None) -> None:
    if dask is not None and workers is not None:
        raise InputError("choose either --workers or --dask, not both")
    if workers is not None and (not isinstance(workers, int) or workers < 1):
        raise InputError(f"--workers {workers}: want an integer >= 1")
    if dask is not None and dask.startswith("local:") and not re.fullmatch(r"local:[1-9]\d*",
                                                                            dask):
        raise InputError(f"--dask {dask}: want local:N with N >= 1, or tcp://host:port")


def _backend(todo: Sequence[Point], workers: int | None, dask: str | None) -> Iterator[Finished]:
    if not todo:
        return iter(())
    if dask is not None:
        return run_on_dask(todo, dask)
    n = default_workers() if workers is None else workers
    if n == 1 or len(todo) == 1:
        return ((p.point_id, execute_point(p.to_dict()), "") for p in todo)
    return run_on_process_pool(todo, min(n, len(todo)))


def run_on_process_pool(todo: Sequence[Point], workers: int) -> Iterator[Finished]:
    """Points on `workers` spawned processes, yielded as they finish."""
    context = multiprocessing.get_context("spawn")
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=context)
    try:
        futures = {pool.submit(execute_point, p.to_dict()): p.point_id for p in todo}
        for future in as_completed(futures):
            try:
                yield futures[future], future.result(), ""
            except Exception as exc:  # noqa: BLE001 - the worker died, not the point
                yield futures[future], None, f"{type(exc).__name__}: {exc}"
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def run_on_dask(todo: Sequence[Point], address: str) -> Iterator[Finished]:
    """Points as Dask tasks on the scheduler at `address` (or `local:N`), as they finish."""
    try:
        import distributed
    except ImportError:
        raise InputError("--dask needs the 'distributed' package: pip install "
                         "'distributed>=2024.1'") from None
    with _dask_client(distributed, address) as client:
        futures = {client.submit(execute_point, p.to_dict(), pure=False): p.point_id
                   for p in todo}
        for future in distributed.as_completed(futures):
            try:
                yield futures[future], future.result(), ""
            except Exception as exc:  # noqa: BLE001 - e.g. KilledWorker: the point is lost
                yield futures[future], None, f"{type(exc).__name__}: {exc}"


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
