"""What a long command tells the user while it works: a per-kernel progress bar on stderr.

`progress_bar(total, description, quiet)` is a context manager yielding a callback
`(index, total, name)` -- the signature of `simulate_workload(..., progress=)` -- called
before node `index` (0-based) of `total` starts; the bar shows the nodes done and the name
of the one in flight, and reaches `total` when the block ends without an error. The bar
(tqdm) is drawn on stderr only when stderr is a terminal and `quiet` is false; otherwise
the callback does nothing, so piped or logged output stays clean. `add_quiet_argument`
gives a command the `--quiet` flag that turns it off. Nothing is drawn at import.
Left out: nested bars, rates and time estimates (nodes differ too much in cost for either).
Units: nodes.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO

Progress = Callable[[int, int, str], None]
# done/total, elapsed time and the node in flight; no rate or estimate (see "Left out")
BAR_FORMAT = "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]"


def add_quiet_argument(parser: argparse.ArgumentParser) -> None:
    """`--quiet` / `-q`: no progress bar and no compile notice on stderr."""
    parser.add_argument("--quiet", "-q", action="store_true",
                        help="draw no progress bar and print no notices on stderr")


def shows_progress(quiet: bool, stream: IO[str] | None = None) -> bool:
    """True when a bar would be drawn: not quiet and the stream (stderr) is a terminal."""
    stream = sys.stderr if stream is None else stream
    return not quiet and bool(getattr(stream, "isatty", lambda: False)())


def _ignore(index: int, total: int, name: str) -> None:
    """The callback of a bar that is not drawn."""


@contextmanager
def progress_bar(total: int, description: str, quiet: bool = False,
                 stream: IO[str] | None = None) -> Iterator[Progress]:
    """A `(index, total, name)` callback drawing a bar of `total` steps on `stream`
    (default stderr) while the block runs; a no-op when `shows_progress` is false."""
    stream = sys.stderr if stream is None else stream
    if not shows_progress(quiet, stream):
        yield _ignore
        return
    from tqdm import tqdm

    bar = tqdm(total=total, desc=description, file=stream, leave=False, dynamic_ncols=True,
               bar_format=BAR_FORMAT)

    def update(index: int, steps: int, name: str) -> None:
        if steps != bar.total:
            bar.total = steps
        bar.n = index
        bar.set_postfix_str(name, refresh=False)
        bar.refresh()

    try:
        yield update
        bar.n = bar.total
        bar.refresh()
    finally:
        bar.close()
